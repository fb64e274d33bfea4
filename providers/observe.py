"""The placement provider's view of the live clusters (observed capacity; docs/observe.md).

With an `observe` input (`{"kubeconfigs": {cluster: path}, "contexts": {cluster: name},
"timeoutSeconds": 5, "unreachableGraceSeconds": 300, "unreadyGraceSeconds": 900}`), check()
reads every cluster that has a kubeconfig (concurrently, each bounded by timeoutSeconds), places
against what is free there (modelplane.reconcile_pass, the same pass as `plan --observe`), and
adds two outputs next to `placement`: `capacity` (per cluster: observed or declared, and why)
and `health` (clusters unreachable or unready, since when). Both are functions of the objects
read and of the previous state, never of timestamps or resourceVersions, so an unchanged fleet
previews no change.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from modelplane.api.fleet import Fleet
    from modelplane.observe.health import FailoverSettings
    from modelplane.reconcile_pass import Observation

from collections.abc import Mapping
from dataclasses import dataclass

from pulumi.dynamic import CheckFailure

from modelplane.json_types import JsonMapping, JsonObject
from modelplane.observe import CAPACITY_KEY, DEFAULT_READ_TIMEOUT_S, HEALTH_KEY

OBSERVE_KEY = "observe"
OUTPUT_KEYS = (CAPACITY_KEY, HEALTH_KEY)


@dataclass(frozen=True)
class ObserveSettings:
    """The `observe` input, checked."""

    kubeconfigs: dict[str, str]
    contexts: dict[str, str]
    timeout: float
    failover: FailoverSettings


def observe_settings(block: JsonMapping) -> ObserveSettings | CheckFailure:
    """The `observe` input's settings, or the check failure naming what is wrong with them."""
    # Deferred, like compute_placement's: importing the provider module stays cheap
    # (tests/pulumi/test_placement_provider.py).
    from modelplane.durations import MAX_READ_TIMEOUT_S, seconds
    from modelplane.observe.health import FailoverSettings
    from modelplane.redact import outside_text

    try:
        settings = FailoverSettings.from_json(block)
        timeout = seconds(block.get("timeoutSeconds", DEFAULT_READ_TIMEOUT_S), "observe.timeoutSeconds",
                          maximum=MAX_READ_TIMEOUT_S)
        kubeconfigs = {str(c): str(p) for c, p in (block.get("kubeconfigs") or {}).items()}
        contexts = {str(c): str(n) for c, n in (block.get("contexts") or {}).items()}
    except (TypeError, ValueError, AttributeError) as exc:
        return CheckFailure(OBSERVE_KEY, f"invalid observe settings: {outside_text(exc)}")
    return ObserveSettings(kubeconfigs, contexts, timeout, settings)


def observation(olds: JsonMapping, settings: ObserveSettings) -> Observation:
    """Read the clusters (concurrently, each bounded by the settings' timeout), with the
    health carried from the state: what modelplane.reconcile_pass observes."""
    from modelplane.observe.health import health_from_json
    from modelplane.observe.read import read_clusters
    from modelplane.reconcile_pass import Observation

    try:
        health = health_from_json(olds.get(HEALTH_KEY))
    except (TypeError, ValueError, AttributeError):
        health = {}                              # an unreadable record only restarts the grace periods
    readings = read_clusters(settings.kubeconfigs, settings.timeout, settings.contexts)
    return Observation(readings, health, settings.failover)


def observed_outputs(fleet: Fleet, olds: JsonMapping, block: JsonMapping, accounting: str,
                     counts: Mapping[str, Mapping[str, int]] | None, now: float
                     ) -> tuple[JsonObject, list[CheckFailure]]:
    """(placement, capacity and health outputs; failures) for one check(): the props translated
    for one pass of modelplane.reconcile_pass."""
    from modelplane import reconcile_pass
    from modelplane.observe.health import health_to_json
    from modelplane.scheduler import PlacementFormatError

    settings = observe_settings(block)
    if isinstance(settings, CheckFailure):
        return {}, [settings]
    try:
        result = reconcile_pass.run(fleet, olds.get("placement") or None, now=now, accounting=accounting,
                                    counts=counts, observation=observation(olds, settings))
    except PlacementFormatError as exc:
        return {}, [unreadable_placement(exc)]
    except Exception as exc:  # noqa: BLE001 - never a traceback in a preview: a failure naming what broke
        return {}, [unexpected(OBSERVE_KEY, "observing the clusters", exc)]
    assert result.capacity is not None, "an observed pass has its capacity"
    return {"placement": result.placement, CAPACITY_KEY: result.capacity.to_json(),
            HEALTH_KEY: health_to_json(result.health or {})}, []


def unreadable_placement(exc: Exception) -> CheckFailure:
    """Placing from scratch would move healthy replicas: a previous placement that cannot be
    read is a failure."""
    return CheckFailure("placement", f"the previous placement in state is unreadable ({exc}); "
                        "fix or remove it before placing again")


def unexpected(key: str, what: str, exc: Exception) -> CheckFailure:
    """A failure naming what broke, never a traceback in a preview."""
    from modelplane.redact import outside_text

    return CheckFailure(key, f"{what} failed unexpectedly ({type(exc).__name__}: {outside_text(exc)}); this is a "
                        "bug, please report it")
