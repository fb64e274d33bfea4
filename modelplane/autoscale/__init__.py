"""Fleet autoscaling: replicas of a ModelDeployment follow its engines' live load.

* `decide` (decision.py): HPA's algorithm as a pure function of the readings, the
  current count, the history (plain JSON) and the time.
* `readings.py`: what the decision reads, and the `MetricsSource` protocol behind which the
  metrics file, the scraped engines and a Prometheus sit.
* `engines.py` / `exposition.py`: the engines' own Prometheus series and a bounded parser
  of their text format.
* `scaled_placement.py`: the decided counts placed by the fleet scheduler's public API, a
  refused scale-up reported as `ScalingLimited`.

* `loop.py` / `state.py`: one pass of the loop (read, decide, place, drain what leaves) and
  what it keeps between passes (the placement resource's `autoscaling` state);
* `scraped.py` / `prometheus.py`: readings from the engines' /metrics read through each
  cluster's API server (modelplane.autoscale.pod_metrics) or from a Prometheus.

docs/autoscaling.md describes all of it.
"""

from .conditions import SCALING_LIMITED
from .decision import Decision, MetricStatus, decide
from .history import History, HistoryFormatError
from .readings import FileMetricsSource, MetricReading, MetricsSource, Reading, Unreadable

__all__ = [
    "SCALING_LIMITED", "Decision", "FileMetricsSource", "History", "HistoryFormatError", "MetricReading",
    "MetricStatus", "MetricsSource", "Reading", "Unreadable", "decide",
]
