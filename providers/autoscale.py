"""The placement provider's side of autoscaling (docs/autoscaling.md, "Where the decision lives").

With an `autoscale` input (a fleet that has a ReplicaAutoscaler; components/autoscale.py makes
it from stack config `modelplane:autoscale`):

    {"metricsFile": "/abs/metrics.json"            # or: the engines' own /metrics ...
     "prometheus": {"eu-west": {"service": "monitoring/prometheus:9090"}},   # ... or a Prometheus
     "timeoutSeconds": 5, "ttftWindowSeconds": 2, "prometheusWindow": "2m",
     "drainSeconds": 120, "drainGraceSeconds": 600}

check() runs one pass of the loop (modelplane.reconcile_pass; this module only translates the
props and maps errors to check failures): it reads the metrics (the file; else, for every
cluster with a kubeconfig in the `observe` input, each Ready serving pod's /metrics through the
API server's pod proxy, or the cluster's Prometheus), decides
every autoscaler from the count and history kept in this resource's state, places the decided
counts (with observed capacity and failover when the clusters are observed), and adds one output
next to `placement`: `autoscaling`, the state the next check reads (modelplane.autoscale.state).
A replica a scale-in removed stays in `autoscaling.draining`, its objects applied and out of
the routes, until it has been out for `drainSeconds` and its engines report nothing in flight
(or `drainGraceSeconds` passed; a replica whose state cannot be read this time waits; with a
metrics file nothing in flight can be known, so `drainSeconds` alone:
modelplane.autoscale.drain); the `up` after that deletes it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from modelplane.api.fleet import Fleet

import re
from collections.abc import Mapping

from pulumi.dynamic import CheckFailure

from modelplane.json_types import JsonMapping, JsonObject

AUTOSCALE_KEY = "autoscale"          # the input
AUTOSCALING_KEY = "autoscaling"      # the output: the loop's state
AUTOSCALE_KEYS = ("metricsFile", "prometheus", "timeoutSeconds", "ttftWindowSeconds", "prometheusWindow",
                  "drainSeconds", "drainGraceSeconds")
MAX_TTFT_WINDOW_S = 60.0
DEFAULT_TTFT_WINDOW_S = 2.0
DEFAULT_DRAIN_GRACE_S = 600.0
_PROM_WINDOW = re.compile(r"[1-9][0-9]{0,5}(s|m|h)")


def check_block(block: JsonMapping) -> JsonObject:
    """The `autoscale` input, each value checked (ValueError naming the key)."""
    from modelplane.autoscale.loop import DEFAULT_DRAIN_SECONDS, MAX_DRAIN_SECONDS
    from modelplane.autoscale.pod_metrics import Prometheus
    from modelplane.durations import MAX_READ_TIMEOUT_S, seconds
    from modelplane.observe import DEFAULT_READ_TIMEOUT_S

    if not isinstance(block, Mapping) or set(block) - set(AUTOSCALE_KEYS):
        raise ValueError(f"expected a block of {', '.join(AUTOSCALE_KEYS)}")
    file = block.get("metricsFile")
    if file is not None and (not isinstance(file, str) or not file):
        raise ValueError("metricsFile: expected a path")
    proms = block.get("prometheus") or {}
    if not isinstance(proms, Mapping):
        raise ValueError("prometheus: expected {cluster: {service: namespace/name:port} or {url: ...}}")
    prometheus = {}
    for cluster, target in proms.items():
        if not isinstance(target, Mapping) or set(target) - {"service", "url"}:
            raise ValueError(f"prometheus.{cluster}: expected {{service: namespace/name:port}} or {{url: ...}}")
        try:
            prometheus[str(cluster)] = Prometheus(service=target.get("service"), url=target.get("url"))
        except ValueError as exc:
            raise ValueError(f"prometheus.{cluster}: {exc}") from None
    window = str(block.get("prometheusWindow", "2m"))
    if not _PROM_WINDOW.fullmatch(window):
        raise ValueError("prometheusWindow: expected a Prometheus duration such as 2m, 90s or 1h")
    drain = seconds(block.get("drainSeconds", DEFAULT_DRAIN_SECONDS), "autoscale.drainSeconds",
                    maximum=MAX_DRAIN_SECONDS, allow_zero=True)
    return {
        "metricsFile": file, "prometheus": prometheus, "prometheusWindow": window,
        "timeout": seconds(block.get("timeoutSeconds", DEFAULT_READ_TIMEOUT_S), "autoscale.timeoutSeconds",
                           maximum=MAX_READ_TIMEOUT_S),
        "ttftWindow": seconds(block.get("ttftWindowSeconds", DEFAULT_TTFT_WINDOW_S), "autoscale.ttftWindowSeconds",
                              maximum=MAX_TTFT_WINDOW_S, allow_zero=True),
        "drain": drain,
        "drainGrace": max(drain, seconds(block.get("drainGraceSeconds", DEFAULT_DRAIN_GRACE_S),
                                         "autoscale.drainGraceSeconds", maximum=MAX_DRAIN_SECONDS, allow_zero=True)),
    }


def autoscaled_outputs(fleet: Fleet, olds: JsonMapping, block: JsonMapping,
                       observe: JsonMapping | None, accounting: str,
                       counts: Mapping[str, Mapping[str, int]] | None, now: float
                       ) -> tuple[JsonObject, list[CheckFailure]]:
    """(placement, autoscaling and, when observed, capacity and health outputs; failures):
    the props translated for one pass of modelplane.reconcile_pass, its errors as failures."""
    # Deferred, like compute_placement's: importing the provider module stays cheap.
    from modelplane import reconcile_pass
    from modelplane.autoscale.state import ScalingState, StateFormatError
    from modelplane.observe import CAPACITY_KEY, HEALTH_KEY
    from modelplane.observe.health import health_to_json
    from modelplane.redact import outside_text
    from modelplane.scheduler import FleetPlacement, PlacementFormatError
    from providers.observe import observation, observe_settings, unexpected, unreadable_placement

    try:
        settings = check_block(block)
    except (TypeError, ValueError) as exc:
        return {}, [CheckFailure(AUTOSCALE_KEY, f"invalid autoscale settings: {outside_text(exc)}")]
    try:
        state = ScalingState.from_json(olds.get(AUTOSCALING_KEY))
    except StateFormatError as exc:
        # Starting over would delete the replicas still draining at once: refuse instead.
        return {}, [CheckFailure(AUTOSCALING_KEY, f"the autoscaling state is unreadable ({exc}); fix or remove it "
                                 "before scaling again")]
    previous = olds.get("placement") or None
    try:
        before = FleetPlacement.from_json(previous) if previous else None
    except PlacementFormatError as exc:
        return {}, [unreadable_placement(exc)]
    observed = observe_settings(observe) if observe else None
    if isinstance(observed, CheckFailure):
        return {}, [observed]
    try:
        scaling = reconcile_pass.stack_scaling(fleet, settings, state, before,
                                               observed.kubeconfigs if observed is not None else None,
                                               observed.contexts if observed is not None else {}, now)
    except ValueError as exc:
        return {}, [CheckFailure(AUTOSCALE_KEY, outside_text(exc, limit=400))]
    try:
        seen = observation(olds, observed) if observed is not None else None
        result = reconcile_pass.run(fleet, previous, now=now, accounting=accounting, counts=counts,
                                    observation=seen, scaling=scaling)
    except PlacementFormatError as exc:
        return {}, [unreadable_placement(exc)]
    except Exception as exc:  # noqa: BLE001 - never a traceback in a preview: a failure naming what broke
        return {}, [unexpected(AUTOSCALE_KEY, "autoscaling", exc)]
    extra: JsonObject = {}
    if result.capacity is not None:
        extra = {CAPACITY_KEY: result.capacity.to_json(), HEALTH_KEY: health_to_json(result.health or {})}
    assert result.state is not None, "a pass with a Scaling keeps a state"
    return {"placement": result.placement, AUTOSCALING_KEY: result.state.to_json(), **extra}, []
