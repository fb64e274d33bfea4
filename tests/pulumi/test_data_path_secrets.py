"""The secured data path in the Pulumi program (mocks): which Secrets each gateway gets,
that they are Pulumi secrets, and that no caller key or private key is a plain input."""
import hashlib
import json

import yaml

from .harness import resolve, run_program

KEY = "sk-gateway-canary-0123456789abcdef"
CONFIG = {"manifests": "examples/secure", "gatewayApiKeys": {"research": KEY, "demo": KEY + "-2"}}


def test_kind_stack_gives_every_gateway_its_secrets_as_pulumi_secrets_and_the_cluster_only_hashes():
    run = run_program("kind", config=CONFIG, secret_keys=["modelplane:gatewayApiKeys"])
    secrets = {r.name: r for r in run.of_type("kubernetes:core/v1:Secret")}
    assert {"eu-west-gateway-hop", "us-east-gateway-hop", "modelplane-gateway-hop", "modelplane-gateway-callers",
            "modelplane-gateway-tls-self-signed"} <= set(secrets)
    for secret in secrets.values():
        assert run.secret_inputs(secret) >= {"stringData"}, secret.name
    callers = secrets["modelplane-gateway-callers"]
    assert callers.inputs["stringData"] == {"research": "sha256:" + hashlib.sha256(KEY.encode()).hexdigest(),
                                            "demo": "sha256:" + hashlib.sha256((KEY + "-2").encode()).hexdigest()}
    assert callers.inputs["metadata"]["labels"]["modelplane.ai/gateway-callers"] == "default"
    assert set(secrets["eu-west-gateway-hop"].inputs["stringData"]) == {"ca.crt", "tls.crt", "tls.key"}
    certs = run.of_type("pulumi-python:dynamic/modelplane:GatewayCertificate")
    assert len(run.of_type("pulumi-python:dynamic/modelplane:HopCA")) == 1 and len(certs) == 4
    for cert in certs:
        if cert.inputs["usage"] != "self-signed":
            assert run.secret_inputs(cert) >= {"caKey"}, cert.name
    plain = json.dumps([r.inputs for r in run.resources if r.typ != "kubernetes:core/v1:Secret"
                        and not r.typ.endswith("GatewayCertificate")], default=str)
    assert KEY not in plain and "mock private key" not in plain
    assert KEY not in json.dumps(resolve(run.outputs), default=str)
    assert resolve(run.outputs["gatewayUrl"]) == "https://localhost:8080"
    routes = yaml.safe_load(run.named("modelplane-gateway-routes").inputs["data"]["routes.yaml"])
    assert routes["http"]["middlewares"]["auth-ml-team-research"]["plugin"]["modelplane-callerauth"]["allowed"] == [
        "research"]
    assert any("self-signed" in w for w in run.warnings())


def test_render_stack_makes_no_certificate_and_lists_the_secrets_to_create():
    run = run_program("render", config={"manifests": "examples/secure"})
    assert not run.of_type("kubernetes:core/v1:Secret")
    assert not run.of_type("pulumi-python:dynamic/modelplane:HopCA")
    notice = next(w for w in run.warnings() if "never written" in w)
    for name in ("modelplane-gateway-hop", "eu-west-gateway-hop", "modelplane-gateway-callers",
                 "modelplane-gateway-tls-self-signed"):
        assert f"Secret modelplane-system/{name}" in notice
