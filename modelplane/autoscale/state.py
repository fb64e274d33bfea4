"""What the autoscaling loop remembers between its passes, as plain JSON: the placement
resource's `autoscaling` state key (providers/placement.py), and the local demo's memory.

    {"autoscalers": {"ml-team/chat": {"replicas": 3, "history": {...History.to_json()...},
                                      "lastScale": {"at": 1796160220.2, "from": 1, "to": 3,
                                                    "reason": "ScaledUp", "message": "..."}}},
     "draining": [{"namespace": "ml-team", "deployment": "chat", "since": 1796160400.0,
                   "replica": {...a placed replica, as the placement writes it...}}]}

* `replicas` is the autoscaler's last decision: the next decision's `current` (HPA reads the
  target's spec.replicas, which its last decision wrote), so `pulumi up` keeps the count
  between runs; `history` is HPA's memory (recommendations and scale events);
  `lastScale` says when the count last changed and why (HPA's lastScaleTime and event). It
  changes only when the count does, so the message it keeps does not churn the state.
* `draining`: replicas a scale-in removed from the placement that still run: out of every
  route, their objects kept until they have drained (modelplane.autoscale.loop).

Read back from state, anything malformed is a StateFormatError naming the JSON path, never
a traceback; sizes are bounded (at most MAX_AUTOSCALERS autoscalers, MAX_DRAINING replicas
draining, MAX_MESSAGE characters a message).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace

from modelplane.api.model_deployment import MAX_REPLICAS
from modelplane.json_types import JsonObject, JsonValue
from modelplane.redact import outside_text
from modelplane.scheduler import FleetPlacement, PlacedReplica, PlacementFormatError

from .history import History, HistoryFormatError

Key = tuple[str, str]          # (namespace, deployment)
MAX_AUTOSCALERS = 10_000
MAX_DRAINING = 10_000
MAX_MESSAGE = 1_000
# 9999-12-31: a time past it is a mistake (or an attack), not a clock.
MAX_EPOCH_S = 253_402_300_799.0


class StateFormatError(ValueError):
    """Stored autoscaling state that is not what `ScalingState.to_json` writes."""


@dataclass(frozen=True)
class ScaleRecord:
    """The last time an autoscaler changed its target's count, and why."""

    at: float
    from_: int
    to: int
    reason: str
    message: str

    def to_json(self) -> JsonObject:
        return {"at": self.at, "from": self.from_, "to": self.to, "reason": self.reason, "message": self.message}


@dataclass(frozen=True)
class Held:
    """Why the last decision could not act on the metrics (HPA's ScalingActive=False, or a
    scale-down skipped for a missing metric): a count that holds says so, it is not silent."""

    reason: str
    message: str

    def to_json(self) -> JsonObject:
        return {"reason": self.reason, "message": self.message}


@dataclass(frozen=True)
class AutoscalerState:
    replicas: int                          # the last decision: the next one's `current`
    history: History = field(default_factory=History)
    last_scale: ScaleRecord | None = None
    held: Held | None = None               # the last decision held for want of metrics

    def to_json(self) -> JsonObject:
        out: JsonObject = {"replicas": self.replicas, "history": self.history.to_json()}
        if self.last_scale is not None:
            out["lastScale"] = self.last_scale.to_json()
        if self.held is not None:
            out["held"] = self.held.to_json()
        return out


@dataclass(frozen=True)
class Draining:
    """A replica out of the routes since `since`, whose objects stay until it has drained."""

    namespace: str
    deployment: str
    replica: PlacedReplica
    since: float

    @property
    def key(self) -> tuple[str, str]:
        """(namespace, replica name): its endpoint's key (modelplane.routing.Endpoint.key)."""
        return (self.namespace, self.replica.name)

    def to_json(self) -> JsonObject:
        return {"namespace": self.namespace, "deployment": self.deployment, "since": self.since,
                "replica": self.replica.to_json()}


@dataclass(frozen=True)
class ScalingState:
    autoscalers: Mapping[Key, AutoscalerState] = field(default_factory=dict)
    draining: tuple[Draining, ...] = ()

    def __post_init__(self) -> None:
        # One order, so a state read back equals the one written.
        object.__setattr__(self, "draining", tuple(sorted(self.draining, key=lambda d: (d.key, d.since))))

    def to_json(self) -> JsonObject:
        return {"autoscalers": {f"{ns}/{name}": s.to_json() for (ns, name), s in sorted(self.autoscalers.items())},
                "draining": [d.to_json() for d in self.draining]}

    def clamped(self, now: float) -> ScalingState:
        """Every time stamped after `now` stamped `now` (History.clamped; a replica draining
        "since" the future would never drain, a last scale from the future would hide the next)."""
        scalers = {k: replace(s, history=s.history.clamped(now),
                              last_scale=replace(s.last_scale, at=min(s.last_scale.at, now))
                              if s.last_scale is not None else None) for k, s in self.autoscalers.items()}
        return ScalingState(scalers, tuple(replace(d, since=min(d.since, now)) for d in self.draining))

    def with_draining(self, placement: FleetPlacement) -> FleetPlacement:
        """`placement` plus the replicas still draining, whose objects (engines) must keep
        running: what is applied, where `placement` is what is routed."""
        return with_leaving(placement, self.draining)

    @classmethod
    def from_json(cls, data: JsonValue) -> ScalingState:
        if data is None:
            return cls()
        if not isinstance(data, dict) or set(data) - {"autoscalers", "draining"}:
            raise StateFormatError("$: expected an object with autoscalers and draining")
        scalers = data.get("autoscalers", {})
        if not isinstance(scalers, dict) or len(scalers) > MAX_AUTOSCALERS:
            raise StateFormatError(f"$.autoscalers: expected an object of at most {MAX_AUTOSCALERS} autoscalers")
        autoscalers = {_key(k, f"$.autoscalers[{_quote(k)}]"): _autoscaler(v, f"$.autoscalers[{_quote(k)}]")
                       for k, v in scalers.items()}
        items = data.get("draining", [])
        if not isinstance(items, list) or len(items) > MAX_DRAINING:
            raise StateFormatError(f"$.draining: expected a list of at most {MAX_DRAINING} replicas")
        return cls(autoscalers, tuple(_draining(d, f"$.draining[{i}]") for i, d in enumerate(items)))


def with_leaving(placement: FleetPlacement, leaving: Sequence[Draining]) -> FleetPlacement:
    """`placement` with the `leaving` replicas added to their deployments (the one rule for
    what runs while replicas drain: the Pulumi stacks' plan and the local loop)."""
    if not leaving:
        return placement
    extra: dict[Key, list[PlacedReplica]] = {}
    for d in leaving:
        extra.setdefault((d.namespace, d.deployment), []).append(d.replica)
    doc = placement.to_json()
    for dep in doc["deployments"]:
        dep["replicas"] = [*dep["replicas"], *(r.to_json() for r in extra.get((dep["namespace"], dep["name"]), []))]
    return FleetPlacement.from_json(doc)


def _quote(text: object) -> str:
    return repr(outside_text(text, limit=80))


def _key(text: object, where: str) -> Key:
    if not isinstance(text, str) or text.count("/") != 1 or not all(text.split("/")):
        raise StateFormatError(f"{where}: expected \"<namespace>/<deployment>\"")
    ns, name = text.split("/")
    return ns, name


def _time(value: object, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) \
            or not 0 <= value <= MAX_EPOCH_S:
        raise StateFormatError(f"{where}: expected a time in epoch seconds, 0..{MAX_EPOCH_S:.0f}")
    return float(value)


def _count(value: object, where: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= MAX_REPLICAS:
        raise StateFormatError(f"{where}: expected a whole number 0..{MAX_REPLICAS}")
    return value


def _autoscaler(data: JsonValue, where: str) -> AutoscalerState:
    if not isinstance(data, dict) or not {"replicas", "history"} <= set(data) <= {"replicas", "history", "lastScale",
                                                                                 "held"}:
        raise StateFormatError(f"{where}: expected {{\"replicas\", \"history\"[, \"lastScale\"][, \"held\"]}}")
    try:
        history = History.from_json(data["history"])
    except HistoryFormatError as exc:
        raise StateFormatError(f"{where}.history{str(exc)[1:]}") from None
    last = data.get("lastScale")
    record = None
    if last is not None:
        lw = f"{where}.lastScale"
        if not isinstance(last, dict) or set(last) != {"at", "from", "to", "reason", "message"}:
            raise StateFormatError(f"{lw}: expected {{at, from, to, reason, message}}")
        if not isinstance(last["reason"], str) or not isinstance(last["message"], str):
            raise StateFormatError(f"{lw}: reason and message are strings")
        record = ScaleRecord(_time(last["at"], f"{lw}.at"), _count(last["from"], f"{lw}.from"),
                             _count(last["to"], f"{lw}.to"), outside_text(last["reason"], limit=80),
                             outside_text(last["message"], limit=MAX_MESSAGE))
    held = data.get("held")
    if held is not None:
        if not isinstance(held, dict) or set(held) != {"reason", "message"} \
                or not all(isinstance(v, str) for v in held.values()):
            raise StateFormatError(f"{where}.held: expected {{reason, message}}, both strings")
        held = Held(outside_text(held["reason"], limit=80), outside_text(held["message"], limit=MAX_MESSAGE))
    return AutoscalerState(_count(data["replicas"], f"{where}.replicas"), history, record, held)


def _draining(data: JsonValue, where: str) -> Draining:
    if not isinstance(data, dict) or set(data) != {"namespace", "deployment", "since", "replica"}:
        raise StateFormatError(f"{where}: expected {{namespace, deployment, since, replica}}")
    ns, dep = data["namespace"], data["deployment"]
    if not (isinstance(ns, str) and isinstance(dep, str) and ns and dep):
        raise StateFormatError(f"{where}: namespace and deployment are names")
    try:
        placed = FleetPlacement.from_json({"deployments": [{"namespace": ns, "name": dep, "desired": 1,
                                                            "replicas": [data["replica"]]}]})
    except PlacementFormatError as exc:
        raise StateFormatError(f"{where}.replica: {str(exc).replace('$.deployments[0].replicas[0]', '$')}") from None
    return Draining(ns, dep, placed.deployments[0].replicas[0], _time(data["since"], f"{where}.since"))


__all__ = ["AutoscalerState", "Draining", "Held", "ScaleRecord", "ScalingState", "StateFormatError", "with_leaving"]
