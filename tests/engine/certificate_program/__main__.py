"""A tiny Pulumi program with only the data path's certificate resources
(providers/certificates.py), for tests/engine/test_certificate_state.py."""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))

import pulumi  # noqa: E402

from providers.certificates import GatewayCertificate, HopCA  # noqa: E402

ca = HopCA("hop-ca", "modelplane hop CA")
server = GatewayCertificate("east", common_name="east.gateway.modelplane.internal", usage="server",
                            names=["east.gateway.modelplane.internal"], ca=(ca.cert, ca.key))
client = GatewayCertificate("control", common_name="control-plane", usage="client", ca=(ca.cert, ca.key))
pulumi.export("caCert", ca.cert)
pulumi.export("serverCert", server.cert)
pulumi.export("serverKey", server.key)   # a secret output: exported encrypted
