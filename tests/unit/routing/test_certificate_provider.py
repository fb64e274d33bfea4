"""providers/certificates.py: what the dynamic resources make and when they are replaced."""
from cryptography import x509

from modelplane.gateway import pki
from providers.certificates import SECRET_OUTPUTS, GatewayCertificateProvider, HopCAProvider


def test_the_ca_and_a_certificate_it_signs_are_made_once_and_replaced_when_their_names_change():
    ca = HopCAProvider().create({"commonName": "modelplane hop CA"})
    assert "PRIVATE KEY" in ca.outs["key"] and ca.id.startswith("ca-") and "KEY" not in ca.id
    props = {"commonName": "east.gateway.modelplane.internal", "usage": "server",
             "names": ["east.gateway.modelplane.internal", "gw.east.example"],
             "caCert": ca.outs["cert"], "caKey": ca.outs["key"]}
    cert = GatewayCertificateProvider().create(props)
    issued = x509.load_pem_x509_certificate(cert.outs["cert"].encode())
    issued.verify_directly_issued_by(x509.load_pem_x509_certificate(ca.outs["cert"].encode()))
    assert pki.sans_of(cert.outs["cert"]) == props["names"]
    assert "caKey" not in cert.outs, "the CA's key is an input (secret), never echoed as an output"
    provider = GatewayCertificateProvider()
    # diff() compares the stored outputs with the new inputs: an unchanged certificate stays
    assert not provider.diff(cert.id, cert.outs, props).changes
    same = cert.outs
    diff = provider.diff(cert.id, same, {**props, "names": ["other"]})
    assert diff.changes and diff.replaces == ["names"]
    assert SECRET_OUTPUTS == ["key"]


def test_a_self_signed_edge_certificate_needs_no_ca():
    made = GatewayCertificateProvider().create({"commonName": "localhost", "usage": "self-signed",
                                                "names": ["localhost", "127.0.0.1"], "caCert": "", "caKey": ""})
    assert "self-signed" in pki.subject_of(made.outs["cert"]) and pki.sans_of(made.outs["cert"]) == [
        "localhost", "127.0.0.1"]
