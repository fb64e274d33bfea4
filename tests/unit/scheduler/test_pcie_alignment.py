"""GPU and DRANET EFA claims aligned by PCIe root (render/claims.py) are only placed on instance
types whose roots can hold them (modelplane.clouds.pcie, from aws/karpenter-provider-aws
pkg/providers/drametadata/zz_generated_{gpu,efa}_metadata.go), refused elsewhere by the device-fit
plugin with a reason naming the type, per cluster."""

from __future__ import annotations

import pytest

from modelplane.api import load_manifest_text
from modelplane.clouds.aws import EFA_INTERFACES
from modelplane.clouds.pcie import PCIE_TOPOLOGY, alignment_problem, efa_alignment
from modelplane.render.claims import device_requests
from modelplane.scheduler import ResolvedRequest, place_fleet
from modelplane.scheduler.policy_types import NOT_FEASIBLE
from modelplane.scheduler.reasons import NEVER, NO_POOL_FITS
from modelplane.vocabulary import DRANET_DRIVER, NVIDIA_DRIVER

from .helpers import of


def dra_efa_class(name: str, instance: str, gpus: int, efas: int) -> str:
    return f"""
apiVersion: modelplane.ai/v1alpha1
kind: InferenceClass
metadata: {{name: {name}}}
spec:
  provisioning: {{provider: EKS, eks: {{instanceType: {instance}, accelerator: {{type: nvidia-l40s, count: {gpus}}}}}}}
  devices:
  - {{name: gpu, driver: gpu.nvidia.com, deviceClassName: gpu.nvidia.com, count: {gpus}}}
  - {{name: efa, driver: dra.net, deviceClassName: efa.networking.k8s.aws, count: {efas}}}
"""


def cluster(name: str, klass: str) -> str:
    return f"""
apiVersion: modelplane.ai/v1alpha1
kind: InferenceCluster
metadata: {{name: {name}}}
spec:
  cluster: {{source: EKS, eks: {{region: us-east-1}}}}
  nodePools:
  - {{name: gpu, className: {klass}, nodeCount: 4, zones: [us-east-1a], fabric: {{type: EFA}}}}
"""


def deployment(gpus: int, efas: int, replicas: int = 2) -> str:
    image = "template: {spec: {containers: [{name: engine, image: vllm/vllm-openai:v0.26.0}]}}"
    requests = (f"[{{name: gpu, count: {gpus}, selectors: [{{cel: 'device.driver == \"gpu.nvidia.com\"'}}]}}, "
                f"{{name: efa, count: {efas}, selectors: [{{cel: 'device.driver == \"dra.net\"'}}]}}]")
    return f"""
apiVersion: modelplane.ai/v1alpha1
kind: ModelDeployment
metadata: {{name: m, namespace: ml-team}}
spec:
  replicas: {replicas}
  template:
    spec:
      engines:
      - name: main
        members:
        - role: Standalone
          nodeSelector: {{devices: {requests}}}
          {image}
"""


def test_a_claim_aligning_gpus_with_efas_is_placed_only_where_the_instance_type_shares_roots() -> None:
    """kube-scheduler's allocator refuses a `matchAttribute` constraint whose devices carry
    different values (staging/src/k8s.io/dynamic-resource-allocation/structured/.../allocator.go,
    matchAttributeConstraint.add), and on g6e.48xlarge no GPU shares a root with an EFA
    (karpenter drametadata: GPUs under 9d..cb, EFAs under 84 and a5): the pods would stay Pending.
    So the plan refuses the g6e cluster with that reason and places both replicas on p5en, whose
    four roots each hold two GPUs and four EFAs."""
    fleet = load_manifest_text("---".join([
        dra_efa_class("p5en", "p5en.48xlarge", 8, 16), dra_efa_class("g6e", "g6e.48xlarge", 8, 4),
        cluster("eks-p5en", "p5en"), cluster("eks-g6e", "g6e"), deployment(8, 4, replicas=2)]))
    placed = of(place_fleet(fleet), "m", "ml-team")
    assert sorted(r.cluster for r in placed.replicas) == ["eks-p5en", "eks-p5en"]
    wanting = load_manifest_text("---".join([
        dra_efa_class("g6e", "g6e.48xlarge", 8, 4), cluster("eks-g6e", "g6e"), deployment(8, 4, replicas=1)]))
    refused = of(place_fleet(wanting), "m", "ml-team")
    assert not refused.replicas
    why = refused.unplaced[0].reasons["eks-g6e"]
    # No size of the pool holds the claim: device-fit's refusal is of kind never.
    assert (why.code, why.plugin, why.kind) == (NO_POOL_FITS, "device-fit", NEVER)
    feasibility = refused.unplaced[0].feasibility
    assert feasibility is not None and feasibility.verdict == NOT_FEASIBLE
    assert "request 'gpu' cannot be aligned with request 'efa' on class g6e" in why.message
    assert "g6e.48xlarge no GPU shares a PCIe root with an EFA" in why.message
    assert "Fix: claim the EFAs through the EFA device plugin" in why.message


def test_an_unsourced_instance_type_is_never_assumed_to_align() -> None:
    """The topology of a type missing from modelplane.clouds.pcie is unknown: refused (as an EFA
    count that is not sourced is, modelplane.clouds.aws), never guessed from the device counts."""
    fleet = load_manifest_text("---".join([
        dra_efa_class("x", "p9.fictional", 8, 8), cluster("eks-x", "x"), deployment(8, 8, replicas=1)]))
    placed = of(place_fleet(fleet), "m", "ml-team")
    assert not placed.replicas
    why = placed.unplaced[0].reasons["eks-x"]
    assert (why.code, why.kind) == (NO_POOL_FITS, NEVER)
    assert "PCIe topology of instance type 'p9.fictional' is not sourced" in why.message


def test_the_pcie_table_counts_the_efas_the_device_plugin_table_counts() -> None:
    """One home: EFA_INTERFACES (aws/karpenter-provider-aws zz_generated_efa_metadata.go `Count`)
    is counted from the topology table, whose GPUs match the GPU metadata's counts
    (zz_generated_gpu_metadata.go: 8 on every 48xlarge/24xlarge p type, 4 on g6e.12xlarge)."""
    assert {t: len(topo.efas) for t, topo in PCIE_TOPOLOGY.items()} == EFA_INTERFACES
    assert {t: len(PCIE_TOPOLOGY[t].gpus) for t in ("p5.48xlarge", "p5en.48xlarge", "p4d.24xlarge",
                                                    "g6e.12xlarge", "g6e.48xlarge", "p6-b300.48xlarge")} == {
        "p5.48xlarge": 8, "p5en.48xlarge": 8, "p4d.24xlarge": 8, "g6e.12xlarge": 4, "g6e.48xlarge": 8,
        "p6-b300.48xlarge": 8}


@pytest.mark.parametrize("instance", sorted(PCIE_TOPOLOGY))
def test_aligned_claims_pack_on_a_node_as_the_ledger_counts_them(instance: str) -> None:
    """The ledger packs pods on a node by device counts; a node of the type must hold as many
    aligned claims by root, or alignment_problem refuses the shape (p5en: 1 GPU + 3 EFAs fits
    five times by count, four times by root). For every claim shape on every type."""
    topo = PCIE_TOPOLOGY[instance]
    for gpus in range(1, len(topo.gpus) + 1):
        for efas in range(1, len(topo.efas) + 1):
            alignment = efa_alignment([gpus], [efas])
            if alignment is None or alignment_problem(instance, alignment) is not None:
                continue
            by_root = topo.groups(alignment.gpus, alignment.efas) // alignment.groups
            assert by_root >= min(len(topo.gpus) // gpus, len(topo.efas) // efas) >= 1, (gpus, efas)


def test_the_renderer_aligns_exactly_the_groups_the_scheduler_checked() -> None:
    """render/claims.py and the scheduler's check share modelplane.clouds.pcie.efa_alignment: the
    claim the renderer writes for 8 GPUs and 4 EFAs is the 4 groups of 2 + 1 the check held."""
    requests = [ResolvedRequest("gpu", "gpu.nvidia.com", 8, ()),
                ResolvedRequest("efa", "efa.networking.k8s.aws", 4, ())]
    devices = device_requests(requests, {"gpu.nvidia.com": NVIDIA_DRIVER, "efa.networking.k8s.aws": DRANET_DRIVER})
    alignment = efa_alignment([8], [4])
    assert alignment is not None and len(devices["constraints"]) == alignment.groups == 4
    assert {r["exactly"]["count"] for r in devices["requests"] if r["name"].startswith("gpu")} == {alignment.gpus}
    assert {r["exactly"]["count"] for r in devices["requests"] if r["name"].startswith("efa")} == {alignment.efas}
