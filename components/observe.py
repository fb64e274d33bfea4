"""The program's side of observed capacity (docs/observe.md): stack config and args -> the placement
resource's `observe` input; the `observation` output (logged at preview); the `verification`
output after `up`."""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence

import pulumi

from components.args import ClusterAccess, ObserveArgs
from components.outputs import joined
from modelplane.api import Fleet
from modelplane.durations import MAX_GRACE_S, MAX_READ_TIMEOUT_S, MAX_WAIT_S, seconds
from modelplane.json_types import JsonMapping, JsonObject, JsonValue
from modelplane.observe import CAPACITY_KEY, DEFAULT_READ_TIMEOUT_S, HEALTH_KEY
from modelplane.observe.capacity import FleetCapacity
from modelplane.observe.health import FailoverSettings, health_from_json
from modelplane.observe.observation_report import format_capacity, format_verification
from modelplane.observe.read import read_clusters
from modelplane.observe.verify import verify
from modelplane.scheduler import FleetPlacement
from providers.placement import normalize_numbers
from sim import SimError, SimFleet

VERIFY_POLL_S = 2.0

OBSERVE_KEYS = {"timeoutSeconds": "timeout", "unreachableGraceSeconds": "unreachable_grace",
                "unreadyGraceSeconds": "unready_grace", "verifyWaitSeconds": "verify_wait"}


def observe_args(value: JsonValue) -> ObserveArgs | None:
    """`modelplane:observe` config: absent or true -> the defaults, false -> off, or a block of
    timeoutSeconds / unreachableGraceSeconds / unreadyGraceSeconds."""
    if value is None or value is True:
        return ObserveArgs()
    if value is False:
        return None
    if not isinstance(value, Mapping) or set(value) - set(OBSERVE_KEYS):
        raise ValueError(f"modelplane:observe must be true, false or a block of {', '.join(OBSERVE_KEYS)}")
    # Each a finite number of seconds within its bound (modelplane.durations): NaN would mean
    # "never evacuated", inf a verification that never ends.
    bounds = {"timeoutSeconds": (MAX_READ_TIMEOUT_S, False), "unreachableGraceSeconds": (MAX_GRACE_S, True),
              "unreadyGraceSeconds": (MAX_GRACE_S, True), "verifyWaitSeconds": (MAX_WAIT_S, True)}
    given = {field: seconds(value[key], f"modelplane:observe.{key}", maximum=bounds[key][0], allow_zero=bounds[key][1])
             for key, field in OBSERVE_KEYS.items() if value.get(key) is not None}
    return ObserveArgs(**given)


def observe_input(kubeconfigs: Mapping[str, str], timeout: float, settings: FailoverSettings) -> JsonObject:
    """The placement resource's `observe` input (providers/observe.py reads it)."""
    return {"kubeconfigs": dict(sorted(kubeconfigs.items())), "timeoutSeconds": timeout, **settings.to_json()}


def _sim_kubeconfigs(access: Mapping[str, ClusterAccess]) -> dict[str, str]:
    """The kubeconfig the sim wrote for each cluster of the sim stack (docs/sim.md)."""
    dirs = {a.sim.state_dir for a in access.values() if a.sim is not None}
    found: dict[str, str] = {}
    for directory in sorted(dirs):
        try:
            found.update({row.name: str(row.kubeconfig) for row in SimFleet(directory).status()})
        except SimError:
            continue            # the sim stack says why its clusters cannot be reached
    return found


def placement_observe(observe: ObserveArgs | None, access: Mapping[str, ClusterAccess]) -> JsonObject | None:
    """The `observe` input: every cluster reached by a kubeconfig path, or through its simulated
    twin (a kubeconfig given only as a secret's contents is not read at preview: that cluster
    keeps its declared sizes)."""
    simulated = _sim_kubeconfigs(access)
    paths = {name: a.kubeconfig_path for name, a in access.items() if a.kubeconfig_path}
    paths.update({name: simulated[name] for name, a in access.items() if a.sim is not None and name in simulated})
    if observe is None or not paths:
        return None
    block = observe_input(paths, observe.timeout, FailoverSettings(observe.unreachable_grace, observe.unready_grace))
    contexts = {name: a.context for name, a in access.items() if a.kubeconfig_path and a.context}
    if contexts:
        block["contexts"] = dict(sorted(contexts.items()))
    return block


def observation(capacity: pulumi.Output[JsonObject], health: pulumi.Output[JsonObject]) -> pulumi.Output[JsonObject]:
    """The `observation` output (capacity and health as check() read them); logged at preview
    and up next to the placement table."""
    def report(values: list[JsonObject]) -> JsonObject:
        cap, hea = values
        if cap:
            pulumi.log.info(format_capacity(FleetCapacity.from_json(cap), health_from_json(hea)))
        return {CAPACITY_KEY: cap or {}, HEALTH_KEY: hea or {}}
    return joined(capacity, health).apply(report)


def verification(fleet: Fleet, placement: pulumi.Output[JsonObject], block: JsonMapping | None,
                 wait: float, created: Sequence[pulumi.Output[JsonValue]]) -> pulumi.Output[JsonObject] | None:
    """The `verification` output: once every placed replica's objects are applied (`created`
    resolves), read the clusters until every replica verifies or `wait` seconds passed; a
    mismatch is a warning in `pulumi up`'s output, naming each replica and the cluster's reason.
    Nothing is read during a preview."""
    if block is None:
        return None
    kubeconfigs = dict(block.get("kubeconfigs") or {})
    contexts = dict(block.get("contexts") or {})
    timeout = float(block.get("timeoutSeconds") or DEFAULT_READ_TIMEOUT_S)

    def run(values: list[JsonValue]) -> JsonObject:
        if pulumi.runtime.is_dry_run():
            return {"ok": None, "summary": "verified after `up`"}
        placed = FleetPlacement.from_json(normalize_numbers(values[0]))
        deadline = time.monotonic() + wait
        while True:
            report = verify(fleet, placed, read_clusters(kubeconfigs, timeout, contexts))
            if report.ok or time.monotonic() >= deadline:
                break
            time.sleep(VERIFY_POLL_S)
        if not report.ok:
            pulumi.log.warn("verification: the clusters do not run what the fleet placed "
                            "(python -m modelplane verify says the same):\n" + format_verification(report))
        return {**report.to_json(), "summary": report.summary()}

    # the ids (small) joined as usual; the placement as it is (components.outputs)
    return joined(placement, pulumi.Output.all(*created)).apply(run)
