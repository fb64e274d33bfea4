"""Contract tests: the gateways' LoadBalancer Services on EKS (issue 27 item 3), named after the
rule, the upstream source in each docstring."""

from __future__ import annotations

from pathlib import Path

import pytest

from modelplane.api import load_manifest_text
from modelplane.clouds.aws import NLB_IDLE_TIMEOUT_DEFAULT_S, NLB_IDLE_TIMEOUT_MAX_S, nlb_idle_timeout_seconds
from modelplane.plan import plan_control, plan_foundation
from modelplane.plan.build import ControlPlane

ROOT = Path(__file__).resolve().parents[3]
AWS = (ROOT / "examples" / "aws" / "fleet.yaml").read_text()
PREFIX = "service.beta.kubernetes.io/aws-load-balancer-"
SERVICE = """
---
apiVersion: modelplane.ai/v1alpha1
kind: ModelService
metadata: {name: long, namespace: ml-team}
spec:
  endpoints: [{name: all, selector: {matchLabels: {modelplane.ai/deployment: x}}}]
  timeouts: {request: %s}
"""


def _service(objects) -> dict:
    [svc] = [o for o in objects if o["kind"] == "Service"]
    return svc


def _annotations(text: str = AWS) -> dict[str, dict[str, str]]:
    """Gateway name -> its Service's AWS load balancer annotations, for every gateway of the fleet."""
    fleet = load_manifest_text(text, source="examples/aws/fleet.yaml")
    out = {f"{c}-gateway": _service(plan_foundation(fleet, c).gateway)["metadata"].get("annotations", {})
           for c in fleet.clusters}
    out["control"] = _service(plan_control(fleet, ControlPlane()).gateway)["metadata"].get("annotations", {})
    return out


def test_eks_gateways_are_network_load_balancers_not_classic_ones() -> None:
    """kubernetes/cloud-provider-aws docs/service_controller.md: a LoadBalancer Service without
    `aws-load-balancer-type: nlb` gets a Classic ELB, whose idle timeout
    (`aws-load-balancer-connection-idle-timeout`, "ELB" only) defaults to 60 s: a non-streaming
    completion over a minute was cut and answered 502. Every EKS gateway asks for an NLB, and says
    its scheme both ways: `aws-load-balancer-internal` (this controller) and
    `aws-load-balancer-scheme` (kubernetes-sigs/aws-load-balancer-controller
    guide/service/annotations, whose default is internal, should it take the Service over)."""
    for name, ann in _annotations().items():
        assert ann[PREFIX + "type"] == "nlb", name
        assert PREFIX + "connection-idle-timeout" not in ann, name
        internal = ann[PREFIX + "internal"] == "true"
        assert ann[PREFIX + "scheme"] == ("internal" if internal else "internet-facing"), name


def test_a_workload_gateway_is_internal_where_the_control_plane_shares_its_vpc() -> None:
    """Each EKS cluster gets its own VPC (components/sources/eks.py): an internal NLB is reachable
    from that VPC only. examples/aws runs the control plane on aws-us-east, so aws-us-east's
    workload gateway is internal, and (cloud-provider-aws docs/service_controller.md, "working with
    hairpin connection on internal NLB") keeps no client IP, the control plane dialling it from the
    NLB's own instance targets; aws-us-west's is reached from another region, over the internet with
    mutual TLS on the hop, and the control-plane gateway serves callers on the internet."""
    ann = _annotations()
    assert ann["aws-us-east-gateway"][PREFIX + "internal"] == "true"
    assert ann["aws-us-east-gateway"][PREFIX + "target-group-attributes"] == "preserve_client_ip.enabled=false"
    for name in ("aws-us-west-gateway", "control"):
        assert ann[name][PREFIX + "internal"] == "false" and PREFIX + "target-group-attributes" not in ann[name]


@pytest.mark.parametrize("request_timeout, idle", [
    ("300s", NLB_IDLE_TIMEOUT_DEFAULT_S), ("15m", 900), ("1h30m", 5400), ("1000h", NLB_IDLE_TIMEOUT_MAX_S)])
def test_the_nlb_idle_timeout_fits_the_longest_request_a_service_declares(request_timeout: str, idle: int) -> None:
    """"Update the TCP idle timeout for your Network Load Balancer listener" (Elastic Load
    Balancing): `tcp.idle_timeout.seconds`, 60-6000 s, default 350 s, counted while no packet
    flows. The AWS Load Balancer Controller sets it from
    `aws-load-balancer-listener-attributes.TCP-<port>`; the in-tree controller keeps 350 s, which
    the TCP keepalives Traefik sends reset (traefik pkg/server/service/transport.go: 30 s on dialled
    connections; Go's ListenConfig default, 15 s, on accepted ones; AWS blog "Implementing
    long-running TCP Connections within VPC networking"). The timeout covers the longest
    `spec.timeouts.request` of the fleet's ModelServices, on every port the Service listens on."""
    text = AWS + SERVICE % request_timeout
    assert nlb_idle_timeout_seconds(load_manifest_text(text)) == idle
    for name, ann in _annotations(text).items():
        listeners = {k: v for k, v in ann.items() if k.startswith(PREFIX + "listener-attributes.TCP-")}
        assert listeners and set(listeners.values()) == {f"tcp.idle_timeout.seconds={idle}"}, name
    fleet = load_manifest_text(text)
    control = _service(plan_control(fleet, ControlPlane()).gateway)
    ports = {int(k.rsplit("-", 1)[1]) for k in control["metadata"]["annotations"] if "listener-attributes" in k}
    assert ports == {p["port"] for p in control["spec"]["ports"]}


def test_gateways_off_eks_carry_no_aws_annotations() -> None:
    """The annotations are the AWS cloud provider's; Kind gateways are NodePorts, and GKE's
    LoadBalancer Services are passthrough Network Load Balancers already."""
    for example in ("gcp", "kind"):
        fleet = load_manifest_text((ROOT / "examples" / example / ("fleet.yaml" if example == "gcp" else
                                                                     "platform.yaml")).read_text())
        for cluster in fleet.clusters:
            assert "annotations" not in _service(plan_foundation(fleet, cluster).gateway)["metadata"]
