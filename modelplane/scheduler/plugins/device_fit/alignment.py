"""device-fit's PCIe rule: a member's GPU and DRANET EFA requests are claimed in groups
constrained to one PCIe root (render/claims.py, modelplane.clouds.pcie.efa_alignment), so a
pool whose instance type cannot hold those groups on one node is refused, as the cluster's
allocator would refuse the claim (the pods would stay Pending). The refusal depends on the class
alone, never on capacity: no size of the pool answers it, so the engine's `NoPoolFits` that it
leads to is of kind `never`.

The matcher (scheduler/matching.py) says which devices a member's requests match; this module
is the plugin's own rule on top of that answer, also read by the `pcie-alignment` check.
"""

from __future__ import annotations

from dataclasses import dataclass

from modelplane.clouds.pcie import aligning_types, alignment_problem, efa_alignment
from modelplane.scheduler.matching import MemberMatch, NoMatch
from modelplane.scheduler.shape import ClassView
from modelplane.vocabulary import DRANET_DRIVER


@dataclass(frozen=True)
class Misaligned:
    """A member whose GPU request `gpus` and EFA request `efas` one node of `class_name`'s
    instance type cannot hold aligned, and why (modelplane.clouds.pcie.alignment_problem)."""

    gpus: str
    efas: str
    class_name: str
    problem: str

    def __str__(self) -> str:
        return f"cannot be aligned with request {self.efas!r} on class {self.class_name}: {self.problem}"


def misalignment(match: MemberMatch, cls: ClassView) -> Misaligned | None:
    """Why one node of the class's instance type cannot hold the member's aligned claim, or
    None (nothing to align, or it fits)."""
    if DRANET_DRIVER not in match.drivers:
        return None
    pairs = list(zip(match.resolved, match.drivers, strict=True))
    efa = [q for q, driver in pairs if driver == DRANET_DRIVER]
    gpus = [q for q, driver in pairs if driver != DRANET_DRIVER]
    alignment = efa_alignment([q.count for q in gpus], [q.count for q in efa])
    if alignment is None:
        return None
    problem = alignment_problem(cls.instance_type, alignment)
    if problem is None:
        return None
    return Misaligned(gpus[0].name, efa[0].name, cls.name, problem)


def alignment_refusal(match: MemberMatch, cls: ClassView) -> NoMatch | None:
    """The matcher's kind of answer for a misaligned member: a NoMatch naming the request, why
    and the fix; None when the roots hold it."""
    misaligned = misalignment(match, cls)
    if misaligned is None:
        return None
    return NoMatch(misaligned.gpus, f"{misaligned}. Fix: {alignment_fix()}")


def alignment_fix() -> str:
    """What to change when the roots cannot hold the claim (the refusal's and `explain`'s words)."""
    return ("claim the EFAs through the EFA device plugin (a class without the dra.net device), "
            f"or use an instance type whose GPUs share roots with EFAs ({', '.join(aligning_types())})")


def aligned(match: MemberMatch | NoMatch, cls: ClassView) -> MemberMatch | NoMatch:
    """The matcher's answer with the PCIe rule applied: a match the roots cannot hold is a
    NoMatch saying why."""
    if isinstance(match, MemberMatch):
        return alignment_refusal(match, cls) or match
    return match
