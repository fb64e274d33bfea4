"""A gang claiming its GPUs and its DRANET EFAs in aligned pairs (render/claims.py: one request
per GPU with its share of EFAs, under `matchAttribute: resource.kubernetes.io/pcieRoot`) is
allocated by a real kube-scheduler's DRA allocator on the sim, whose nodes publish the PCIe
root on both kinds of device as the NVIDIA DRA driver and DRANET do (modelplane.nodes.pcie_roots)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from modelplane.api import load_manifests
from modelplane.plan import plan_fleet
from modelplane.scheduler import place_fleet
from modelplane.vocabulary import ATTRIBUTE_PCIE_ROOT
from sim import KubeClient, SimFleet
from tests.sim.stack import wait_for
from tests.unit.render.cloudfleet import EFA_REQUEST, GPU_REQUEST, dra_efa_class, gang_requesting

pytestmark = [pytest.mark.sim]

CLUSTER = """
apiVersion: modelplane.ai/v1alpha1
kind: InferenceCluster
metadata: {name: eks-efa}
spec:
  cluster: {source: EKS, eks: {region: us-east-1}}
  nodePools:
  - {name: p5en, className: p5en, nodeCount: 2, zones: [us-east-1a], fabric: {type: EFA}}
"""


def _fleet(directory: Path) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    text = "---".join([dra_efa_class(), CLUSTER, gang_requesting(f"{GPU_REQUEST}, {EFA_REQUEST}")])
    (directory / "fleet.yaml").write_text(text)
    return directory


def _allocated(kube: KubeClient, want: int) -> list[dict[str, Any]] | None:
    """The allocated claims once there are `want` of them (wait_for polls it)."""
    claims = [c for c in kube.items("/apis/resource.k8s.io/v1/namespaces/ml-team/resourceclaims")
              if (c.get("status") or {}).get("allocation")]
    return claims if len(claims) >= want else None


@pytest.mark.timeout(600)
def test_a_gangs_gpus_and_dranet_efas_are_allocated_in_pairs_under_one_pcie_root(
        start_fleet: Callable[..., tuple[SimFleet, dict[str, Path]]], tmp_path: Path) -> None:
    """kube-scheduler v1.36's allocator honours `matchAttribute`, and a device without the
    attribute cannot satisfy it ("Constraint not satisfied, attribute not set":
    `matchAttributeConstraint.add` in kubernetes staging/src/k8s.io/dynamic-resource-allocation/
    structured/.../allocator.go), so the pods stayed Pending while the sim published no PCIe
    root. Each allocated GPU shares its root with exactly the EFAs its request is paired with."""
    manifests = _fleet(tmp_path / "fleet")
    fleet = load_manifests(manifests)
    objects = plan_fleet(fleet, place_fleet(fleet)).clusters["eks-efa"].objects()
    templates = [o for o in objects if o["kind"] == "ResourceClaimTemplate"]
    assert templates and all(t["spec"]["spec"]["devices"].get("constraints") for t in templates)
    _, kubeconfigs = start_fleet(manifests)
    with KubeClient.from_kubeconfig(kubeconfigs["eks-efa"]) as kube:
        for obj in objects:
            kube.create(obj, exist_ok=True)
        claims = wait_for("both pods' claims allocated", lambda: _allocated(kube, 2), timeout=120, interval=1)
        slices = kube.items("/apis/resource.k8s.io/v1/resourceslices")
    assert len(claims) == 2, [c["metadata"]["name"] for c in claims]
    root = {(s["spec"]["pool"]["name"], d["name"]): d["attributes"][ATTRIBUTE_PCIE_ROOT]["string"]
            for s in slices for d in s["spec"]["devices"]}
    for claim in claims:
        results = claim["status"]["allocation"]["devices"]["results"]
        by_request: dict[str, set[str]] = {}
        for r in results:
            by_request.setdefault(r["request"], set()).add(root[(r["pool"], r["device"])])
        for constraint in claim["spec"]["devices"]["constraints"]:
            gpu, efa = constraint["requests"]
            assert len(by_request[gpu]) == 1 and by_request[gpu] == by_request[efa], (constraint, by_request)
        assert len({next(iter(v)) for k, v in by_request.items() if k.startswith("gpu")}) == 8
