"""References by label or name that the loader cannot refuse on their own, each checked against
what the fleet declares, with the nearest match named (modelplane.suggest):

* a ModelService entry whose selector matches no ModelDeployment and no ModelEndpoint of its
  namespace takes no traffic, silently: the other entries share what it should have had
  (`chat-canry` for `chat-canary` sent 100% to stable);
* a FleetBudget whose scope (namespaces, deploymentSelector) selects no deployment limits
  nothing;
* observed pool sizes (`--observed`, the stacks' `observed` config) naming a cluster or pool
  the fleet does not have are never read.

Which of them is an error and which a finding is the caller's: `lint` and the policy pack
report the first two (modelplane.checks.references), `plan` and `lint` refuse the third.
Pure, and cheap to import (no CEL): `plan` calls it on every run.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from modelplane.api import Fleet, ModelService
from modelplane.api.common import KindObject
from modelplane.api.placement_policy import FleetBudget
from modelplane.suggest import did_you_mean, nearest
from modelplane.vocabulary import LABEL_CLUSTER, LABEL_DEPLOYMENT, LABEL_REPLICA_INDEX


@dataclass(frozen=True)
class Unresolved:
    """A reference that resolves to nothing: the referring object, the field and why."""

    obj: KindObject
    field: str
    message: str


def _pairs(selector: Mapping[str, str]) -> str:
    return ", ".join(f"{k}={v}" for k, v in sorted(selector.items())) or "(empty)"


class _Targets:
    """What a ModelService of one namespace can route to: every replica of every ModelDeployment
    (its template labels plus the labels the program stamps: deployment, cluster, replica index)
    and every hand-written ModelEndpoint (its own labels)."""

    def __init__(self, fleet: Fleet, namespace: str) -> None:
        self.clusters = list(fleet.clusters)
        self.deployments = {name: dict(d.spec.template.metadata.labels)
                            for (ns, name), d in fleet.deployments.items() if ns == namespace}
        self.endpoints = {name: dict(e.metadata.labels)
                          for (ns, name), e in fleet.endpoints.items() if ns == namespace}

    def _deployment_has(self, name: str, labels: Mapping[str, str], key: str, value: str) -> bool:
        if key == LABEL_DEPLOYMENT:
            return value == name
        if key == LABEL_CLUSTER:
            return value in self.clusters
        if key == LABEL_REPLICA_INDEX:
            return value.isdigit() and (value == "0" or not value.startswith("0"))
        return labels.get(key) == value

    def matching(self, selector: Mapping[str, str]) -> list[str]:
        """The deployments and endpoints here the selector matches, by name."""
        pairs = list(selector.items())
        named = selector.get(LABEL_DEPLOYMENT)
        # Most entries select by deployment name: one lookup, not a scan of the namespace.
        deployments = ({named: self.deployments[named]} if named in self.deployments else {}) if named is not None \
            else self.deployments
        return ([n for n, labels in deployments.items()
                 if all(self._deployment_has(n, labels, k, v) for k, v in pairs)]
                + [n for n, labels in self.endpoints.items() if all(labels.get(k) == v for k, v in pairs)])

    def matches(self, selector: Mapping[str, str]) -> bool:
        return bool(self.matching(selector))

    def values(self, key: str) -> list[str]:
        """Every value of `key` a target here carries (for the nearest match)."""
        if key == LABEL_DEPLOYMENT:
            out = list(self.deployments)
        elif key == LABEL_CLUSTER:
            out = list(self.clusters) if self.deployments else []
        else:
            out = [labels[key] for labels in self.deployments.values() if key in labels]
        return out + [labels[key] for labels in self.endpoints.values() if key in labels]

    def keys(self) -> set[str]:
        out = {LABEL_DEPLOYMENT, LABEL_CLUSTER, LABEL_REPLICA_INDEX} if self.deployments else set()
        for labels in [*self.deployments.values(), *self.endpoints.values()]:
            out.update(labels)
        return out


def _why_unmatched(selector: Mapping[str, str], targets: _Targets) -> tuple[str, str | None]:
    """The pair no target carries and the nearest value (or key) one does carry; or, when every
    pair is carried by some target, that no single one carries them all."""
    for key, value in sorted(selector.items()):
        if targets.matches({key: value}):
            continue
        values = targets.values(key)
        if values:
            return (f"no target has {key}={value} (values here: {', '.join(sorted(set(values))[:8])})",
                    nearest(value, values))
        return f"no target has the label {key}", nearest(key, targets.keys())
    return "each label is carried by some target, but no single one carries them all", None


def service_selectors(fleet: Fleet) -> list[Unresolved]:
    """Every ModelService entry that selects nothing in its namespace."""
    out: list[Unresolved] = []
    by_namespace: dict[str, _Targets] = {}
    for (namespace, _), service in sorted(fleet.services.items()):
        targets = by_namespace.get(namespace) or by_namespace.setdefault(namespace, _Targets(fleet, namespace))
        for i, entry in enumerate(service.spec.endpoints):
            selector = entry.selector.match_labels
            if targets.matches(selector):
                continue
            out.append(Unresolved(service, f"spec.endpoints[{i}].selector.matchLabels",
                                  _service_message(fleet, service, i, selector, targets)))
    return out


def _service_message(fleet: Fleet, service: ModelService, i: int, selector: Mapping[str, str],
                     targets: _Targets) -> str:
    entries = service.spec.endpoints
    entry = entries[i]
    name = f"entry {entry.name!r}" if entry.name else f"entry #{i}"
    others = [e for j, e in enumerate(entries) if j != i and e.priority == entry.priority]
    if others:
        share = (f"the other entries of its priority take its weight {entry.weight} of "
                 f"{sum(e.weight for e in others) + entry.weight}")
    elif len(entries) > 1:
        share = f"priority {entry.priority} has nothing to route to, so its traffic goes to another priority"
    else:
        share = "the service has nothing to route to"
    elsewhere = [f"{ns}/{n}" for ns in sorted({k[0] for k in [*fleet.deployments, *fleet.endpoints]})
                 if ns != service.metadata.namespace for n in _Targets(fleet, ns).matching(selector)]
    moved = (f" ({', '.join(elsewhere)} would match, but a ModelService routes only within its own namespace)"
             if elsewhere else "")
    why, near = _why_unmatched(selector, targets)
    guess = f" Did you mean {near!r}?" if near else ""
    return (f"{name} selects {_pairs(selector)}, which matches no ModelDeployment and no ModelEndpoint in namespace "
            f"{service.metadata.namespace}: {why}{moved}.{guess} It takes no traffic and {share}, silently. Fix: "
            "correct the selector, or define what it should route to")


def budget_scopes(fleet: Fleet) -> list[Unresolved]:
    """Every FleetBudget namespace with no deployment, and every budget whose scope as a whole
    selects no deployment."""
    out: list[Unresolved] = []
    namespaces = sorted({ns for ns, _ in fleet.deployments})
    for _, budget in sorted(fleet.budgets.items()):
        spec = budget.spec
        for i, ns in enumerate(spec.namespaces):
            if ns not in namespaces:
                out.append(Unresolved(budget, f"spec.namespaces[{i}]",
                                      f"no ModelDeployment is in namespace {ns!r} (namespaces with deployments: "
                                      f"{', '.join(namespaces) or 'none'}){did_you_mean(ns, namespaces)}; "
                                      "the budget counts nothing there. Fix the name, or remove it"))
        in_scope = not spec.namespaces or any(ns in namespaces for ns in spec.namespaces)
        if spec.deployment_selector is not None and in_scope and not _selects_any(fleet, budget):
            out.append(Unresolved(budget, "spec.deploymentSelector.matchLabels", _budget_message(fleet, budget)))
    return out


def _selects_any(fleet: Fleet, budget: FleetBudget) -> bool:
    return any(budget.selects(ns, dict(d.metadata.labels)) for (ns, _), d in fleet.deployments.items())


def _budget_message(fleet: Fleet, budget: FleetBudget) -> str:
    selector = budget.spec.deployment_selector.match_labels if budget.spec.deployment_selector else {}
    namespaces = budget.spec.namespaces
    scope = [d for (ns, _), d in fleet.deployments.items() if not namespaces or ns in namespaces]
    hint = ""
    for key, value in sorted(selector.items()):
        values = [d.metadata.labels[key] for d in scope if key in d.metadata.labels]
        if value not in values:
            hint = (f": none has {key}={value}{did_you_mean(value, values)}" if values
                    else f": none has the label {key}"
                         f"{did_you_mean(key, {k for d in scope for k in d.metadata.labels})}")
            break
    return (f"deploymentSelector {_pairs(selector)} selects no ModelDeployment in the budget's scope{hint}; the "
            "budget limits nothing. Fix the selector (it matches metadata.labels of the ModelDeployment)")


def observed_problems(observed: Mapping[str, Iterable[str]], fleet: Fleet) -> list[str]:
    """Every cluster and pool of observed sizes the fleet does not declare: the scheduler would
    never read them, and the declared size stands where an observation was meant."""
    out: list[str] = []
    for cluster in observed:
        ic = fleet.clusters.get(cluster)
        if ic is None:
            out.append(f"cluster {cluster!r} is not an InferenceCluster of the fleet (known: "
                       f"{', '.join(sorted(fleet.clusters)) or 'none'}){did_you_mean(cluster, fleet.clusters)}")
            continue
        pools = [p.name for p in ic.spec.node_pools]
        for pool in observed[cluster]:
            if pool not in pools:
                out.append(f"{cluster}.{pool}: cluster {cluster} has no node pool {pool!r} (its pools: "
                           f"{', '.join(pools) or 'none'}){did_you_mean(pool, pools)}")
    return out


def reference_warnings(fleet: Fleet) -> list[str]:
    """The unresolved references of the fleet as one line each, `Kind ns/name (source) field:
    message`: what `plan`, `render` and `demo` print on stderr (`lint` reports them as
    findings)."""
    out = []
    for ref in [*service_selectors(fleet), *budget_scopes(fleet)]:
        obj = ref.obj
        name = f"{obj.metadata.namespace}/{obj.metadata.name}" if obj.NAMESPACED else obj.metadata.name
        out.append(f"{obj.kind} {name} ({fleet.source_of(obj)}) {ref.field}: {ref.message}")
    return out
