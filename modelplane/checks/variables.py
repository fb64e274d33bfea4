"""engine-variables: every `$(VAR)` an engine's command, args or env use must expand on the
cluster it is placed on.

Kubernetes leaves a reference to an undefined variable as literal text, expands an env value
only from entries declared before it, and Grove appends its GROVE_* variables after the
container's env (modelplane.render.variables, which states each rule with its source). So
`--master-addr $(MODELPLANE_LEADER_ADDRESS)` on a cluster that defines no leader, or
`--load-format $(X)` with X unset, reaches the engine as garbage and argparse exits. The
check renders each placed replica as `up` would apply it and reads the containers back.
"""

from __future__ import annotations

from collections.abc import Iterable

from modelplane.api import Engine, ModelDeployment
from modelplane.render import RenderError, render_replica
from modelplane.render.variables import Unresolved, pod_templates, template_unresolved
from modelplane.vocabulary import LABEL_ENGINE

from .context import CheckContext
from .findings import MANDATORY, Finding
from .registry import register

POLICY = "engine-variables"


def _field(engine_index: int, member_index: int, engine: Engine, problem: Unresolved) -> str:
    """The manifest field a problem comes from: the user's own entry when it is one."""
    base = f"spec.template.spec.engines[{engine_index}].members[{member_index}].template.spec.containers[0]"
    user = engine.members[member_index].template.spec.engine
    key, _, rest = problem.field.partition("[")
    index = int(rest.split("]", 1)[0]) if rest else -1
    if key in ("command", "args"):
        own = (user.command if key == "command" else user.args) or []
        return f"{base}.{key}[{index}]" if 0 <= index < len(own) else f"{base}.{key}"
    names = [e.name for e in user.env]
    var = problem.field.split("(", 1)[-1].rstrip(")")
    return f"{base}.env[{names.index(var)}]" if var in names else f"{base}.env"


@register(POLICY, MANDATORY, "Every $(VAR) an engine's command, args or env use must be defined for its "
          "container (and, in env, defined before the entry), with a value", needs_placement=True)
def check(ctx: CheckContext) -> Iterable[Finding]:
    if ctx.placement is None:
        return
    seen: set[tuple[str, str, str]] = set()
    for placed in ctx.placement.deployments:
        dep: ModelDeployment | None = ctx.fleet.deployments.get((placed.namespace, placed.name))
        if dep is None:
            continue
        engines = {e.name: (i, e) for i, e in enumerate(dep.spec.template.spec.engines)}
        for replica in placed.replicas:
            try:
                objects = render_replica(ctx.fleet, dep, replica, replica.cluster)
            except RenderError:
                continue        # what cannot be rendered, the plan reports itself
            for obj in objects:
                found = engines.get(obj["metadata"].get("labels", {}).get(LABEL_ENGINE, ""))
                if found is None:
                    continue    # the program's own workloads (the SGLang router)
                e, engine = found
                roles = [m.role for m in engine.members]
                for template in pod_templates(obj):
                    if template.role not in roles:
                        continue
                    m = roles.index(template.role)
                    for problem in template_unresolved(template):
                        if problem.container != "engine":
                            continue
                        field = _field(e, m, engine, problem)
                        key = (ctx.ref(dep), field, problem.name)
                        if key in seen:
                            continue
                        seen.add(key)
                        yield Finding(
                            POLICY, MANDATORY, ctx.ref(dep), field,
                            f"engine {engine.name!r} ({template.role}) on InferenceCluster/{replica.cluster}: "
                            f"$({problem.name}) {problem.reason}. Fix: define {problem.name} in the container's "
                            "env before the entry that uses it (or use one the program defines: "
                            "docs/rendering.md, \"Engine environment\"), or drop the reference.")
