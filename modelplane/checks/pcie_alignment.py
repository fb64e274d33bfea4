"""pcie-alignment: a member claiming GPUs and DRANET EFAs gets them in groups constrained to one
PCIe root (render/claims.py), which only instance types whose GPUs share roots with EFAs can
hold (modelplane.clouds.pcie, from aws/karpenter-provider-aws's scraped DRA metadata). On
g6e/g6/gr6 no GPU shares a root with an EFA: the pods would stay Pending, so the scheduler
refuses such pools (the device-fit plugin's rule,
modelplane.scheduler.plugins.device_fit.alignment). This check says so at
`lint`, per deployment member and class, with the same rule, and says whether another pool of the
fleet can host the member."""

from __future__ import annotations

from collections.abc import Iterable

from modelplane.clouds.aws import declares_dra_efa
from modelplane.scheduler.matching import Matcher, MemberMatch
from modelplane.scheduler.plugins.device_fit.alignment import alignment_refusal
from modelplane.scheduler.shape import compile_classes, compile_deployment

from .context import CheckContext
from .findings import MANDATORY, Finding
from .registry import register

POLICY = "pcie-alignment"


@register(POLICY, MANDATORY, "GPUs and DRANET EFAs aligned by PCIe root need an instance type whose GPUs "
          "share roots with EFAs")
def check(ctx: CheckContext) -> Iterable[Finding]:
    fleet = ctx.fleet
    classes = compile_classes(fleet)
    pooled = sorted({p.class_name for c in fleet.clusters.values() for p in c.spec.node_pools
                     if p.class_name in classes})
    if not any(declares_dra_efa(fleet.classes.get(name)) for name in pooled):
        return
    matcher = Matcher()
    for key, dep in sorted(fleet.deployments.items()):
        shape = compile_deployment(fleet, key, dep)
        if shape.invalid:
            continue
        for e, engine in enumerate(shape.engines):
            for member in engine.members:
                if not member.requests:
                    continue
                matched = {name: matcher.match(member, classes[name]) for name in pooled}
                refusals = {name: why for name, answer in matched.items() if isinstance(answer, MemberMatch)
                            and (why := alignment_refusal(answer, classes[name])) is not None}
                hosted = any(isinstance(answer, MemberMatch) and answer.claims and name not in refusals
                             for name, answer in matched.items())
                for name, refusal in refusals.items():
                    which = ("other pools of the fleet can host it" if hosted
                             else "no other pool of the fleet can host it, so no replica is placed")
                    yield Finding(POLICY, MANDATORY, ctx.ref(dep),
                                  f"spec.template.spec.engines[{e}].members[{member.index}].nodeSelector.devices",
                                  f"pools of class {name} refuse engine {engine.name!r} ({which}): {refusal}.")
