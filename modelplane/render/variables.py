"""Kubernetes' `$(VAR)` expansion, applied to rendered containers together with what the
workload controllers add to them: which references resolve, and to what.

The rules, as the sources state them:

* `$(NAME)` becomes NAME's value when NAME is defined and stays literally `$(NAME)` otherwise;
  `$$` escapes the operator (kubernetes/kubernetes third_party/forked/golang/expansion/expand.go,
  `Expand`, `MappingFuncFor`).
* An env entry's value expands against the entries declared *before* it (and the service
  variables); command and args expand against the whole environment (kubernetes/kubernetes
  pkg/kubelet/kubelet_pods.go `makeEnvironmentVariables`; pkg/kubelet/container/helpers.go
  `ExpandContainerCommandAndArgs`).
* LeaderWorkerSet prepends `LWS_LEADER_ADDRESS`, `LWS_GROUP_SIZE`, `LWS_WORKER_INDEX` to every
  container (kubernetes-sigs/lws pkg/utils/pod/pod_utils.go `AddLWSVariables`,
  `addEnvVarsIfNotExists`, v0.7.0, v0.9.0 and v0.10.0), so our entries may refer to them.
* Grove *appends* its variables after the container's own env: the scaling group's
  `GROVE_PCSG_NAME`, `GROVE_PCSG_TEMPLATE_NUM_PODS`, `GROVE_PCSG_INDEX` when the PodClique is
  created, then `GROVE_PCS_NAME`, `GROVE_PCS_INDEX`, `GROVE_PCLQ_NAME`,
  `GROVE_HEADLESS_SERVICE`, `GROVE_PCLQ_POD_INDEX` when the pod is (ai-dynamo/grove
  v0.1.0-alpha.11 operator/internal/controller/common/component/utils/pod.go
  `AddEnvVarsToContainers`, podcliquescalinggroup/components/podclique/podclique.go,
  podclique/components/pod/pod.go `addEnvironmentVariables`). So no env value can refer to
  them; command and args can.

Only references spelled like environment variables (`[A-Z_][A-Z0-9_]*`) are checked: in a
`sh -c` script `$(hostname)` is the shell's command substitution, which Kubernetes leaves
alone because no variable of that name exists.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from modelplane.json_types import JsonMapping
from modelplane.vocabulary import Manifest

from .names import GROVE_LEADER_CLIQUE

CHECKED_NAME = re.compile(r"[A-Z_][A-Z0-9_]*")
# Service links (enableServiceLinks defaults to true): `<SVC>_SERVICE_HOST`, `<SVC>_PORT_443_TCP`…
# exist for every Service of the namespace, so they cannot be called undefined from here.
SERVICE_LINK = re.compile(
    r"[A-Z0-9_]+_(SERVICE_HOST|SERVICE_PORT(_[A-Z0-9_]+)?|PORT(_\d+_(TCP|UDP|SCTP)(_(PROTO|PORT|ADDR))?)?)")

LWS_PREPENDED = ("LWS_LEADER_ADDRESS", "LWS_GROUP_SIZE", "LWS_WORKER_INDEX")
GROVE_SCALING_GROUP_APPENDED = ("GROVE_PCSG_NAME", "GROVE_PCSG_TEMPLATE_NUM_PODS", "GROVE_PCSG_INDEX")
GROVE_POD_APPENDED = ("GROVE_PCS_NAME", "GROVE_PCS_INDEX", "GROVE_PCLQ_NAME", "GROVE_HEADLESS_SERVICE",
                      "GROVE_PCLQ_POD_INDEX")


def references(text: str) -> list[str]:
    """The names `text` refers to with `$(NAME)`, in order, as Kubernetes reads them: `$$`
    escapes, an unclosed `$(` is literal text."""
    found: list[str] = []
    i = 0
    while i < len(text) - 1:
        if text[i] != "$":
            i += 1
            continue
        nxt = text[i + 1]
        if nxt == "$":
            i += 2
            continue
        if nxt == "(":
            close = text.find(")", i + 2)
            if close < 0:
                break
            found.append(text[i + 2:close])
            i = close + 1
            continue
        i += 1
    return found


def checked(name: str) -> bool:
    return bool(CHECKED_NAME.fullmatch(name)) and not SERVICE_LINK.fullmatch(name)


@dataclass(frozen=True)
class Unresolved:
    """One reference that does not expand to a usable value."""

    container: str
    field: str        # "env[3] (MODELPLANE_X)", "args[0]", "command[2]"
    name: str         # the variable referred to
    reason: str

    def __str__(self) -> str:
        return f"container {self.container} {self.field}: $({self.name}) {self.reason}"


@dataclass(frozen=True)
class Injected:
    """Variables a controller adds to every container of a pod template, before or after its env."""

    before: tuple[str, ...] = ()
    after: tuple[str, ...] = ()
    by: str = ""


NOT_DEFINED = "is not defined for this container, so Kubernetes leaves it as literal text"
DEFINED_LATER = ("is defined only after this entry{by}; an env value expands from earlier entries only "
                 "(it stays literal text), command and args from the whole environment")
EMPTY = "expands to an empty string, so the flag before it is left without its value"


def container_unresolved(container: JsonMapping, injected: Injected = Injected()) -> list[Unresolved]:
    """Every `$(VAR)` of one container that Kubernetes would leave literal or expand to nothing."""
    name = str(container.get("name", "?"))
    env: list[tuple[str, bool]] = [(v, True) for v in injected.before]   # (name, has a non-empty value)
    problems: list[Unresolved] = []
    own = list(container.get("env") or [])
    later = {str(e.get("name")) for e in own} | set(injected.after)
    for i, entry in enumerate(own):
        var = str(entry.get("name"))
        defined = {n for n, _ in env}
        for ref in references(str(entry.get("value") or "")):
            if not checked(ref) or ref in defined:
                continue
            if ref in later:
                by = f" ({injected.by} appends it after the container's env)" if ref in injected.after else ""
                problems.append(Unresolved(name, f"env[{i}] ({var})", ref, DEFINED_LATER.format(by=by)))
            else:
                problems.append(Unresolved(name, f"env[{i}] ({var})", ref, NOT_DEFINED))
        nonempty = "valueFrom" in entry or bool(entry.get("value"))
        env = [(n, ne) for n, ne in env if n != var] + [(var, nonempty)]
    env += [(v, True) for v in injected.after if v not in {n for n, _ in env}]
    values = dict(env)
    for key in ("command", "args"):
        for k, arg in enumerate(container.get(key) or []):
            for ref in references(str(arg)):
                if not checked(ref):
                    continue
                if ref not in values:
                    problems.append(Unresolved(name, f"{key}[{k}]", ref, NOT_DEFINED))
                elif not values[ref]:
                    problems.append(Unresolved(name, f"{key}[{k}]", ref, EMPTY))
    return problems


@dataclass(frozen=True)
class PodTemplateRef:
    where: str                # "spec.template.spec", "spec.leaderWorkerTemplate.workerTemplate.spec", ...
    spec: JsonMapping   # the pod spec
    injected: Injected
    role: str = "Standalone"  # the member it runs: Standalone, Leader or Worker


def pod_templates(obj: Manifest) -> Iterator[PodTemplateRef]:
    """The pod specs of a rendered workload, with what its controller adds to their containers."""
    kind = obj.get("kind")
    spec = obj.get("spec") or {}
    if kind in ("Deployment", "Job", "StatefulSet", "DaemonSet"):
        yield PodTemplateRef("spec.template.spec", spec["template"]["spec"], Injected())
    elif kind == "LeaderWorkerSet":
        lws = Injected(before=LWS_PREPENDED, by="LeaderWorkerSet")
        tpl = spec["leaderWorkerTemplate"]
        for key, role in (("leaderTemplate", "Leader"), ("workerTemplate", "Worker")):
            if key in tpl:
                yield PodTemplateRef(f"spec.leaderWorkerTemplate.{key}.spec", tpl[key]["spec"], lws, role)
    elif kind == "PodCliqueSet":
        template = spec["template"]
        grouped = {n for g in template.get("podCliqueScalingGroups") or [] for n in g.get("cliqueNames") or []}
        for i, clique in enumerate(template.get("cliques") or []):
            after = (GROVE_SCALING_GROUP_APPENDED if clique["name"] in grouped else ()) + GROVE_POD_APPENDED
            role = "Leader" if clique["name"] == GROVE_LEADER_CLIQUE else "Worker"
            yield PodTemplateRef(f"spec.template.cliques[{i}].spec.podSpec", clique["spec"]["podSpec"],
                                 Injected(after=after, by="Grove"), role)


def template_unresolved(ref: PodTemplateRef) -> list[Unresolved]:
    """Every problem of the containers and init containers of one pod template."""
    containers: Sequence[JsonMapping] = [*(ref.spec.get("initContainers") or []),
                                               *(ref.spec.get("containers") or [])]
    return [p for container in containers for p in container_unresolved(container, ref.injected)]


def workload_unresolved(obj: Manifest) -> list[tuple[str, Unresolved]]:
    """(pod template path, problem) for every container and init container of a workload."""
    return [(ref.where, p) for ref in pod_templates(obj) for p in template_unresolved(ref)]
