"""Which PCIe root each GPU and each EFA of an EC2 instance type sits under, and whether a claim
that pairs them by root (render/claims.py) can be allocated on one node of the type.

Source: aws/karpenter-provider-aws pkg/providers/drametadata/zz_generated_gpu_metadata.go
(`GPUMetadataByInstanceType`, the NVIDIA DRA driver's devices as scraped from each type) and
zz_generated_efa_metadata.go (`EFAMetadataByInstanceType`, DRANET's), attribute
`resource.kubernetes.io/pcieRoot` of every device, in the order the files list them. The table
holds every GPU type that carries EFA (modelplane.clouds.aws.EFA_INTERFACES is derived from it).
The topologies differ by generation (karpenter's own DRA e2e suite, test/suites/dra: "every
g4dn/g5 puts multiple GPUs behind one root, every g6/g6e gives each GPU its own"):

* p4d/p4de, p5/p5e, p5en, p6-b200, p6-b300: every GPU shares its root with EFAs;
* g4dn, g5, p3dn: everything behind one root, pci0000:00 (except g4dn.metal);
* g6, g6e, gr6, g4dn.metal: no GPU shares a root with an EFA, so a claim constraining a GPU and
  an EFA to one root can never be allocated there (kube-scheduler's allocator: "Constraint not
  satisfied", pods Pending).

Pure data and arithmetic, no I/O.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from math import gcd


def _roots(*spec: tuple[str, int]) -> tuple[str, ...]:
    """`pci0000:<bus>` repeated, in order: ("44", 4), ("55", 4) -> 44, 44, 44, 44, 55, ..."""
    return tuple(f"pci0000:{bus}" for bus, times in spec for _ in range(times))


@dataclass(frozen=True)
class PcieTopology:
    """The PCIe root of each GPU and of each EFA of one node, in the drivers' device order."""

    gpus: tuple[str, ...]
    efas: tuple[str, ...]

    def groups(self, gpus: int, efas: int) -> int:
        """How many disjoint groups of `gpus` GPUs and `efas` EFAs, each group under one root,
        one node holds (roots are independent; within a root groups just divide)."""
        if gpus <= 0 or efas <= 0:
            return 0
        g, e = Counter(self.gpus), Counter(self.efas)
        return sum(min(g[root] // gpus, e[root] // efas) for root in g)

    @property
    def shared_roots(self) -> int:
        return len(set(self.gpus) & set(self.efas))


# Keyed by instance type; see the module docstring for the source of every value.
PCIE_TOPOLOGY: dict[str, PcieTopology] = {
    "p6-b300.48xlarge": PcieTopology(
        _roots(("4b", 1), ("5a", 1), ("69", 1), ("78", 1), ("87", 1), ("96", 1), ("a5", 1), ("b4", 1)),
        _roots(("4b", 2), ("5a", 2), ("69", 2), ("78", 2), ("87", 2), ("96", 2), ("a5", 2), ("b4", 2))),
    "p6-b200.48xlarge": PcieTopology(_roots(("44", 2), ("55", 2), ("66", 2), ("79", 2)),
                                     _roots(("44", 2), ("55", 2), ("66", 2), ("79", 2))),
    "p5.48xlarge": PcieTopology(
        _roots(("44", 1), ("55", 1), ("66", 1), ("77", 1), ("88", 1), ("99", 1), ("aa", 1), ("bb", 1)),
        _roots(("44", 4), ("55", 4), ("66", 4), ("77", 4), ("88", 4), ("99", 4), ("aa", 4), ("bb", 4))),
    "p5.4xlarge": PcieTopology(_roots(("24", 1)), _roots(("24", 1))),
    "p5e.48xlarge": PcieTopology(
        _roots(("44", 1), ("55", 1), ("66", 1), ("77", 1), ("88", 1), ("99", 1), ("aa", 1), ("bb", 1)),
        _roots(("66", 4), ("77", 4), ("44", 4), ("55", 4), ("aa", 4), ("bb", 4), ("88", 4), ("99", 4))),
    "p5en.48xlarge": PcieTopology(_roots(("44", 2), ("5d", 2), ("76", 2), ("8f", 2)),
                                  _roots(("44", 4), ("5d", 4), ("76", 4), ("8f", 4))),
    "p4d.24xlarge": PcieTopology(_roots(("10", 2), ("20", 2), ("90", 2), ("a0", 2)),
                                 _roots(("10", 1), ("20", 1), ("90", 1), ("a0", 1))),
    "p4de.24xlarge": PcieTopology(_roots(("10", 2), ("20", 2), ("90", 2), ("a0", 2)),
                                  _roots(("10", 1), ("20", 1), ("90", 1), ("a0", 1))),
    "p3dn.24xlarge": PcieTopology(_roots(("00", 8)), _roots(("00", 1))),
    "g6e.48xlarge": PcieTopology(
        _roots(("9d", 1), ("9f", 1), ("a1", 1), ("a3", 1), ("c5", 1), ("c7", 1), ("c9", 1), ("cb", 1)),
        _roots(("84", 2), ("a5", 2))),
    "g6e.24xlarge": PcieTopology(_roots(("62", 1), ("64", 1), ("66", 1), ("68", 1)), _roots(("44", 2))),
    "g6e.16xlarge": PcieTopology(_roots(("4c", 1)), _roots(("34", 1))),
    "g6e.12xlarge": PcieTopology(_roots(("37", 1), ("39", 1), ("3b", 1), ("3d", 1)), _roots(("24", 1))),
    "g6e.8xlarge": PcieTopology(_roots(("35", 1)), _roots(("24", 1))),
    "g6.48xlarge": PcieTopology(
        _roots(("9e", 1), ("a0", 1), ("a2", 1), ("a4", 1), ("ad", 1), ("af", 1), ("b1", 1), ("b3", 1)),
        _roots(("84", 1))),
    "g6.24xlarge": PcieTopology(_roots(("5e", 1), ("60", 1), ("62", 1), ("64", 1)), _roots(("44", 1))),
    "g6.16xlarge": PcieTopology(_roots(("4c", 1)), _roots(("34", 1))),
    "g6.12xlarge": PcieTopology(_roots(("37", 1), ("39", 1), ("3b", 1), ("3d", 1)), _roots(("24", 1))),
    "g6.8xlarge": PcieTopology(_roots(("35", 1)), _roots(("24", 1))),
    "g5.48xlarge": PcieTopology(_roots(("00", 8)), _roots(("00", 1))),
    "g5.24xlarge": PcieTopology(_roots(("00", 4)), _roots(("00", 1))),
    "g5.16xlarge": PcieTopology(_roots(("00", 1)), _roots(("00", 1))),
    "g5.12xlarge": PcieTopology(_roots(("00", 4)), _roots(("00", 1))),
    "g5.8xlarge": PcieTopology(_roots(("00", 1)), _roots(("00", 1))),
    "g4dn.metal": PcieTopology(_roots(("17", 2), ("34", 2), ("e6", 2), ("f3", 2)), _roots(("c2", 1))),
    "g4dn.16xlarge": PcieTopology(_roots(("00", 1)), _roots(("00", 1))),
    "g4dn.12xlarge": PcieTopology(_roots(("00", 4)), _roots(("00", 1))),
    "g4dn.8xlarge": PcieTopology(_roots(("00", 1)), _roots(("00", 1))),
    "gr6.8xlarge": PcieTopology(_roots(("35", 1)), _roots(("24", 1))),
}


@dataclass(frozen=True)
class Alignment:
    """A claim's GPUs and EFAs as `groups` groups of `gpus` GPUs and `efas` EFAs, every group
    constrained to one PCIe root (`matchAttribute: resource.kubernetes.io/pcieRoot`)."""

    groups: int
    gpus: int
    efas: int


def efa_alignment(gpus: list[int], efas: list[int]) -> Alignment | None:
    """How a claim with these GPU and DRANET EFA request counts is aligned: one GPU request and
    one EFA request become gcd(GPUs, EFAs) groups, when one count divides the other (a DRA
    `matchAttribute` constraint binds every device of the requests it lists to one value, so one
    constraint over all of them could never be met on a node with several roots). None: the
    claim is not aligned (several requests of a kind, or counts that do not divide)."""
    if len(gpus) != 1 or len(efas) != 1 or gpus[0] <= 0 or efas[0] <= 0:
        return None
    groups = gcd(gpus[0], efas[0])
    if groups not in (gpus[0], efas[0]):
        return None
    return Alignment(groups, gpus[0] // groups, efas[0] // groups)


def alignment_problem(instance_type: str | None, alignment: Alignment) -> str | None:
    """Why one node of `instance_type` cannot hold `alignment`, or None when it can. An unknown
    type (not in PCIE_TOPOLOGY, or none named) is a problem: the alignment is never guessed."""
    shape = (f"{alignment.groups} group(s) of {alignment.gpus} GPU(s) and {alignment.efas} EFA(s), "
             "each group under one PCIe root")
    if not instance_type:
        return (f"its GPUs and DRANET EFAs are claimed as {shape}, but the class names no instance type "
                "(provisioning.eks.instanceType), so whether its GPUs share a root with its EFAs is unknown")
    topology = PCIE_TOPOLOGY.get(instance_type)
    if topology is None:
        return (f"its GPUs and DRANET EFAs are claimed as {shape}, but the PCIe topology of instance type "
                f"{instance_type!r} is not sourced (modelplane.clouds.pcie lists {', '.join(PCIE_TOPOLOGY)})")
    held = topology.groups(alignment.gpus, alignment.efas)
    roots = (f"GPU roots {', '.join(sorted(set(topology.gpus)))}; EFA roots "
             f"{', '.join(sorted(set(topology.efas)))}")
    if held < alignment.groups:
        where = ("no GPU shares a PCIe root with an EFA" if not topology.shared_roots
                 else f"its roots hold only {held} such group(s)")
        return (f"its GPUs and DRANET EFAs are claimed as {shape}, but on instance type {instance_type} {where} "
                f"({roots}): the claim can never be allocated")
    # The scheduler packs pods on a node by device counts; the roots must hold as many claims.
    by_count = min(len(topology.gpus) // (alignment.groups * alignment.gpus),
                   len(topology.efas) // (alignment.groups * alignment.efas))
    if held // alignment.groups < by_count:
        return (f"its GPUs and DRANET EFAs are claimed as {shape}: {by_count} such claims fit one "
                f"{instance_type} node by device count but only {held // alignment.groups} by PCIe root "
                f"({roots}); claim EFAs in a number every root divides")
    return None


def aligning_types() -> list[str]:
    """For messages: the instance types whose every GPU shares a root with an EFA."""
    return [t for t, topo in PCIE_TOPOLOGY.items() if set(topo.gpus) <= set(topo.efas)]
