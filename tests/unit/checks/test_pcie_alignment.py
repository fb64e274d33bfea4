"""pcie-alignment: lint says which DRA EFA classes cannot hold the PCIe-aligned claim a member
gets (modelplane.clouds.pcie; aws/karpenter-provider-aws pkg/providers/drametadata)."""

from __future__ import annotations

from tests.unit.scheduler.test_pcie_alignment import cluster, deployment, dra_efa_class

from .fleets import findings


def test_lint_refuses_an_efa_alignment_the_instance_type_cannot_hold() -> None:
    """g6e.48xlarge: no GPU shares a root with an EFA (zz_generated_gpu_metadata.go GPUs under
    pci0000:9d..cb, zz_generated_efa_metadata.go EFAs under 84 and a5). Alone in the fleet the
    member can be placed nowhere; next to a p5en pool that can hold it, the g6e pools are still
refused, and the message says the member has somewhere else to go."""
    g6e = [dra_efa_class("g6e", "g6e.48xlarge", 8, 4), cluster("eks-g6e", "g6e"), deployment(8, 4)]
    [alone] = findings(g6e, "pcie-alignment")
    assert alone.level == "mandatory"
    assert alone.field == "spec.template.spec.engines[0].members[0].nodeSelector.devices"
    assert "pools of class g6e refuse engine 'main' (no other pool of the fleet can host it" in alone.message
    assert "g6e.48xlarge no GPU shares a PCIe root with an EFA" in alone.message
    mixed = [*g6e, dra_efa_class("p5en", "p5en.48xlarge", 8, 16), cluster("eks-p5en", "p5en")]
    [beside] = findings(mixed, "pcie-alignment")
    assert beside.level == "mandatory" and "other pools of the fleet can host it" in beside.message
    assert findings([dra_efa_class("p5en", "p5en.48xlarge", 8, 16), cluster("eks-p5en", "p5en"),
                     deployment(8, 16)], "pcie-alignment") == []
