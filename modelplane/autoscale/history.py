"""The autoscaler's memory between decisions, as plain JSON (it lives in the placement
resource's state): HPA's per-autoscaler `recommendations` (for the stabilization windows)
and its `scaleUpEvents` / `scaleDownEvents` (for the step policies), which HPA keeps in the
controller's memory (pkg/controller/podautoscaler/horizontal.go).

Bounded: entries older than every window and period are dropped on each decision, and
at most MAX_ENTRIES of each list are kept (the newest); an entry stamped in the future counts
as stamped now (`clamped`). Read back from state, anything
malformed is a HistoryFormatError naming the JSON path, never a traceback.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Protocol, TypeVar

from modelplane.api.model_deployment import MAX_REPLICAS
from modelplane.json_types import JsonObject, JsonValue

# A decision every second over HPA's longest window (3600 s) stays within it.
MAX_ENTRIES = 4096


class HistoryFormatError(ValueError):
    """Stored autoscaler history that is not what `History.to_json` writes."""


@dataclass(frozen=True)
class Recommendation:
    at: float        # unix seconds
    replicas: int    # the unstabilized recommendation made then


@dataclass(frozen=True)
class ScaleEvent:
    at: float
    change: int      # replicas added (scale-up list) or removed (scale-down list), > 0


@dataclass(frozen=True)
class History:
    recommendations: tuple[Recommendation, ...] = ()
    scale_up: tuple[ScaleEvent, ...] = ()
    scale_down: tuple[ScaleEvent, ...] = ()

    @classmethod
    def seeded(cls, current: int, now: float) -> History:
        """HPA's first sight of an autoscaler (recordInitialRecommendation): the current
        count is the first recommendation, so the first scale-down waits a whole window."""
        return cls(recommendations=(Recommendation(now, current),))

    def clamped(self, now: float) -> History:
        """Every entry stamped after `now` stamped `now` (a clock set back, or a hand-edited
        state): a recommendation from the future would hold the scale-down window until it
        passed, an hour or a year later."""
        if all(r.at <= now for r in self.recommendations) and all(e.at <= now for e in (*self.scale_up,
                                                                                       *self.scale_down)):
            return self
        return History(tuple(Recommendation(min(r.at, now), r.replicas) for r in self.recommendations),
                       tuple(ScaleEvent(min(e.at, now), e.change) for e in self.scale_up),
                       tuple(ScaleEvent(min(e.at, now), e.change) for e in self.scale_down))

    def to_json(self) -> JsonObject:
        return {
            "recommendations": [{"at": r.at, "replicas": r.replicas} for r in self.recommendations],
            "scaleUp": [{"at": e.at, "change": e.change} for e in self.scale_up],
            "scaleDown": [{"at": e.at, "change": e.change} for e in self.scale_down],
        }

    @classmethod
    def from_json(cls, data: JsonValue) -> History:
        if not isinstance(data, dict):
            raise HistoryFormatError("$: expected an object with recommendations, scaleUp, scaleDown")
        unknown = sorted(set(data) - {"recommendations", "scaleUp", "scaleDown"})
        if unknown:
            raise HistoryFormatError(f"$: unknown key {unknown[0]!r}; expected recommendations, scaleUp, scaleDown")
        recs = tuple(Recommendation(at, n) for at, n in _entries(data, "recommendations", "replicas", 0))
        ups = tuple(ScaleEvent(at, n) for at, n in _entries(data, "scaleUp", "change", 1))
        downs = tuple(ScaleEvent(at, n) for at, n in _entries(data, "scaleDown", "change", 1))
        return cls(recs, ups, downs)


def _entries(data: JsonObject, key: str, field: str, least: int) -> list[tuple[float, int]]:
    items = data.get(key, [])
    if not isinstance(items, list):
        raise HistoryFormatError(f"$.{key}: expected a list")
    if len(items) > MAX_ENTRIES:
        raise HistoryFormatError(f"$.{key}: {len(items)} entries; at most {MAX_ENTRIES} are kept")
    out = []
    for i, item in enumerate(items):
        where = f"$.{key}[{i}]"
        if not isinstance(item, dict) or set(item) != {"at", field}:
            raise HistoryFormatError(f"{where}: expected {{\"at\": seconds, \"{field}\": n}}")
        at, n = item["at"], item[field]
        if isinstance(at, bool) or not isinstance(at, (int, float)) or not math.isfinite(at) or at < 0:
            raise HistoryFormatError(f"{where}.at: expected a finite time in seconds >= 0")
        if isinstance(n, bool) or not isinstance(n, int) or not least <= n <= MAX_REPLICAS:
            raise HistoryFormatError(f"{where}.{field}: expected a whole number {least}..{MAX_REPLICAS}")
        out.append((float(at), n))
    return out


class _Timed(Protocol):
    @property
    def at(self) -> float: ...


Timed = TypeVar("Timed", bound=_Timed)


def kept(entries: tuple[Timed, ...], since: float) -> tuple[Timed, ...]:
    """The entries recorded at or after `since`, at most MAX_ENTRIES (the newest)."""
    recent = tuple(e for e in entries if e.at >= since)
    return recent[-MAX_ENTRIES:]


__all__ = ["MAX_ENTRIES", "History", "HistoryFormatError", "Recommendation", "ScaleEvent", "kept"]
