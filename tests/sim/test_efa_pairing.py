"""A member claiming its GPUs and its DRANET EFAs aligned by PCIe root (render/claims.py: one
request per GPU group with its share of EFAs, under `matchAttribute:
resource.kubernetes.io/pcieRoot`) is allocated by a real kube-scheduler's DRA allocator on an
instance type whose GPUs share roots with EFAs, and stays Pending on one whose do not, which the
fleet scheduler refuses first. The sim's nodes publish each type's real roots
(modelplane.node_objects.pcie_roots, modelplane.clouds.pcie)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from modelplane.api import load_manifests
from modelplane.plan import plan_fleet
from modelplane.scheduler import place_fleet
from modelplane.scheduler.reasons import NEVER, NO_POOL_FITS
from modelplane.vocabulary import ATTRIBUTE_PCIE_ROOT
from sim import KubeClient, SimFleet
from tests.sim.stack import wait_for
from tests.unit.render.cloudfleet import EFA_REQUEST, GPU_REQUEST, dra_efa_class, gang_requesting

pytestmark = [pytest.mark.sim]

G6E_CLASS = """
apiVersion: modelplane.ai/v1alpha1
kind: InferenceClass
metadata: {name: g6e}
spec:
  provisioning: {provider: EKS, eks: {instanceType: g6e.48xlarge, accelerator: {type: nvidia-l40s, count: 8}}}
  devices:
  - {name: gpu, driver: gpu.nvidia.com, deviceClassName: gpu.nvidia.com, count: 8,
     attributes: {productName: {string: NVIDIA L40S}}, capacity: {memory: {value: 46068Mi}}}
  - {name: efa, driver: dra.net, deviceClassName: efa.networking.k8s.aws, count: 4}
"""

CLUSTER = """
apiVersion: modelplane.ai/v1alpha1
kind: InferenceCluster
metadata: {name: eks-efa}
spec:
  cluster: {source: EKS, eks: {region: us-east-1}}
  nodePools:
  - {name: p5en, className: p5en, nodeCount: 2, zones: [us-east-1a], fabric: {type: EFA}}
  - {name: g6e, className: g6e, nodeCount: 1, zones: [us-east-1a], fabric: {type: EFA}}
"""

# 8 L40S and the node's 4 EFAs: 4 groups of 2 GPUs + 1 EFA, which no g6e.48xlarge root holds.
L40S = """
apiVersion: modelplane.ai/v1alpha1
kind: ModelDeployment
metadata: {name: l40s, namespace: ml-team}
spec:
  replicas: 1
  template:
    spec:
      engines:
      - name: main
        members:
        - role: Standalone
          nodeSelector:
            devices:
            - name: gpu
              count: 8
              selectors: [{cel: 'device.attributes["gpu.nvidia.com"].productName == "NVIDIA L40S"'}]
            - {name: efa, count: 4, selectors: [{cel: 'device.driver == "dra.net"'}]}
          template: {spec: {containers: [{name: engine, image: vllm/vllm-openai:v0.26.0}]}}
"""


def _fleet(directory: Path) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    text = "---".join([dra_efa_class(), G6E_CLASS, CLUSTER, gang_requesting(f"{GPU_REQUEST}, {EFA_REQUEST}"), L40S])
    (directory / "fleet.yaml").write_text(text)
    return directory


def _claims(kube: KubeClient) -> list[dict[str, Any]]:
    return kube.items("/apis/resource.k8s.io/v1/namespaces/ml-team/resourceclaims")


def _settled(kube: KubeClient) -> tuple[list[dict[str, Any]], dict[str, Any]] | None:
    """The gang's two allocated claims and the l40s pod once the scheduler gave up on it."""
    allocated = [c for c in _claims(kube) if (c.get("status") or {}).get("allocation")]
    pods = [p for p in kube.items("/api/v1/namespaces/ml-team/pods")
            if p["metadata"].get("labels", {}).get("modelplane.ai/engine") == "main"
            and p["metadata"]["name"].startswith("l40s")]
    unschedulable = [p for p in pods for c in (p.get("status") or {}).get("conditions") or []
                     if (c.get("type"), c.get("status"), c.get("reason")) == ("PodScheduled", "False", "Unschedulable")]
    return (allocated, unschedulable[0]) if len(allocated) >= 2 and unschedulable else None


@pytest.mark.timeout(600)
def test_gpus_and_efas_aligned_by_pcie_root_allocate_where_the_type_shares_roots_and_wait_where_it_does_not(
        start_fleet: Callable[..., tuple[SimFleet, dict[str, Path]]], tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """kube-scheduler v1.36's allocator honours `matchAttribute`: every device of the listed
    requests must carry the attribute with one value (`matchAttributeConstraint.add` in kubernetes
    staging/src/k8s.io/dynamic-resource-allocation/structured/.../allocator.go). On p5en each of
    four roots holds two GPUs and four EFAs (aws/karpenter-provider-aws pkg/providers/drametadata),
    so the gang's claims allocate, each GPU sharing its root with exactly the EFAs it is paired
    with. On g6e.48xlarge no GPU shares a root with an EFA: the plan refuses the l40s deployment
    with that reason; placed there anyway (the refusal switched off), its pod stays Pending as
    Unschedulable while the p5en pods on the same cluster are allocated."""
    manifests = _fleet(tmp_path / "fleet")
    fleet = load_manifests(manifests)
    refused = place_fleet(fleet).find("ml-team", "l40s")
    assert refused is not None and not refused.replicas
    why = refused.unplaced[0].reasons["eks-efa"]
    assert (why.code, why.kind) == (NO_POOL_FITS, NEVER)
    assert "g6e.48xlarge no GPU shares a PCIe root with an EFA" in why.message
    # What the cluster would do without the plan's refusal: the same renderers, the claim it draws.
    monkeypatch.setattr("modelplane.scheduler.plugins.device_fit.alignment.alignment_refusal", lambda *_: None)
    placement = place_fleet(fleet)
    forced = placement.find("ml-team", "l40s")
    assert forced is not None and [r.engines["main"].pool for r in forced.replicas] == ["g6e"]
    objects = plan_fleet(fleet, placement).clusters["eks-efa"].objects()
    monkeypatch.undo()
    templates = [o for o in objects if o["kind"] == "ResourceClaimTemplate"]
    assert len(templates) == 3 and all(t["spec"]["spec"]["devices"].get("constraints") for t in templates)
    _, kubeconfigs = start_fleet(manifests)
    with KubeClient.from_kubeconfig(kubeconfigs["eks-efa"]) as kube:
        for obj in objects:
            kube.create(obj, exist_ok=True)
        try:
            allocated, pending = wait_for("the gang's claims allocated and the l40s pod unschedulable",
                                          lambda: _settled(kube), timeout=180, interval=1)
        except AssertionError as exc:
            claims = {c["metadata"]["name"]: bool((c.get("status") or {}).get("allocation")) for c in _claims(kube)}
            raise AssertionError(f"{exc}; claims allocated: {claims}") from None
        slices = kube.items("/apis/resource.k8s.io/v1/resourceslices")
    root = {(s["spec"]["pool"]["name"], d["name"]): d["attributes"][ATTRIBUTE_PCIE_ROOT]["string"]
            for s in slices for d in s["spec"]["devices"]}
    gang = [c for c in allocated if not c["metadata"]["name"].startswith("l40s")]
    assert len(gang) == 2 and len(allocated) == 2, [c["metadata"]["name"] for c in allocated]
    for claim in gang:
        results = claim["status"]["allocation"]["devices"]["results"]
        by_request: dict[str, set[str]] = {}
        for r in results:
            by_request.setdefault(r["request"], set()).add(root[(r["pool"], r["device"])])
        for constraint in claim["spec"]["devices"]["constraints"]:
            gpu, efa = constraint["requests"]
            assert len(by_request[gpu]) == 1 and by_request[gpu] == by_request[efa], (constraint, by_request)
        assert len([r for r in results if r["request"].startswith("gpu")]) == 8
        assert len({next(iter(v)) for k, v in by_request.items() if k.startswith("gpu")}) == 4
    message = next(c["message"] for c in pending["status"]["conditions"] if c["type"] == "PodScheduled")
    assert "claim" in message, message
