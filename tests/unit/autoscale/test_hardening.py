"""The fourth hardening round's autoscaling items (issue 30), each test named after its item:
one pod's metrics never fail the fleet (its replica is missing, with the reason), the parse is
linear and bounded in time, a draining replica whose state is unknown is not released, and a
history stamped in the future does not freeze scale-down."""

from __future__ import annotations

import contextlib
import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from modelplane.api import load_manifest_text
from modelplane.api.replica_autoscaler import METRIC_VALUE_MAX, TIME_TO_FIRST_TOKEN
from modelplane.autoscale import FileMetricsSource, MetricReading, Unreadable, decide
from modelplane.autoscale import conditions as c
from modelplane.autoscale.drain import Activity, drain_activity, drain_finished
from modelplane.autoscale.engines import SERIES_NAMES, PodMetrics, ReplicaMetrics, replica_readings
from modelplane.autoscale.exposition import ExpositionError, parse, select_families
from modelplane.autoscale.history import History, Recommendation
from modelplane.autoscale.loop import decide_all, scale_fleet
from modelplane.autoscale.pod_metrics import ClusterMetrics, PodScrape
from modelplane.autoscale.scraped import from_pods
from modelplane.autoscale.state import AutoscalerState, Draining, ScalingState
from modelplane.limits import MAX_METRICS_FAMILY_SAMPLES, MAX_METRICS_SAMPLES
from modelplane.observe.objects import ReplicaKey
from modelplane.observe.read import Unreachable
from modelplane.scheduler import FleetPlacement, place_fleet
from tests.hostile.metrics import HOSTILE_BODIES, TTFT, WAITING, honest, untyped_flood, wanted_flood
from tests.manifests import cluster, deployment, gpu_class, metric, pool, replica_autoscaler, to_yaml

from .helpers import NOW, history, queue, scaler

NS = "ml"


def fleet(replicas: int = 2, *metrics: dict):
    return load_manifest_text(to_yaml([
        gpu_class("g1", 1), cluster("east", pool("gpu", "g1", 4)),
        deployment("chat", replicas, namespace=NS),
        replica_autoscaler("chat", "chat", 8, *(metrics or (metric("QueueDepth", 1),
                                                            metric("TimeToFirstToken", 2.0, percentile=90))),
                           namespace=NS)]))


def pod_of(body: bytes) -> PodMetrics:
    try:
        return PodMetrics(parse(body, SERIES_NAMES))
    except ExpositionError as exc:
        return PodMetrics(error=str(exc))


def readings_of(*bodies: bytes):
    f = fleet(len(bodies))
    return replica_readings(f.autoscalers[(NS, "chat")], "vllm",
                            [ReplicaMetrics(True, [pod_of(b)]) for b in bodies], NOW)


# ---------------------------------------------------------------- item 1

@pytest.mark.parametrize("name", ["ttft-le-minus-one", "ttft-le-minus-inf", "ttft-only-minus-inf", "ttft-overflowing",
                                  "ttft-9e19-seconds", "ttft-nan-count"])
def test_30_1_a_hostile_ttft_histogram_is_that_replicas_missing_metric_not_a_failure(name: str) -> None:
    """le="-1" / "-Inf", bounds whose percentiles overflow when summed, or 9e19 s: the replica's
    TTFT is missing (HPA's missing pod: it holds a scale-down), the honest replica reports,
    nothing raises; its gauges still count."""
    got = readings_of(honest(3, 2, 0.5), HOSTILE_BODIES[name], HOSTILE_BODIES[name])
    ttft = got[TIME_TO_FIRST_TOKEN]
    assert isinstance(ttft, MetricReading), ttft
    assert (ttft.reporting, ttft.missing) == (1, 2) and ttft.total == pytest.approx(0.45)   # p90 within 0..0.5 s
    assert ttft.note and "time_to_first_token" in ttft.note
    queue_depth = got["QueueDepth"]
    assert isinstance(queue_depth, MetricReading) and queue_depth.reporting == 3 and queue_depth.total == 9


def test_30_1_histogram_values_are_bounded_like_gauges() -> None:
    """9e19 s of TTFT used to ask for maxReplicas: a percentile above METRIC_VALUE_MAX is refused
    as a gauge above it is, so the decision holds on the honest replica's value."""
    f = fleet(2, metric("TimeToFirstToken", 2.0, percentile=90))
    autoscaler = f.autoscalers[(NS, "chat")]
    got = readings_of(honest(0, 0, 0.5), HOSTILE_BODIES["ttft-9e19-seconds"])
    note = got[TIME_TO_FIRST_TOKEN].note
    assert note and f"above the {METRIC_VALUE_MAX[TIME_TO_FIRST_TOKEN]:g}" in note, note
    assert got[TIME_TO_FIRST_TOKEN].missing == 1
    d = decide(autoscaler, 2, got, History.seeded(2, NOW - 1000), NOW)
    assert d.desired == 2, d.message                  # 9e19 s read as a value asked for all 8


def test_30_1_a_source_whose_reading_cannot_be_built_holds_only_its_own_autoscaler() -> None:
    """Whatever a source raises ValueError for (a reading out of its bounds) is that
    autoscaler's unreadable metric, with the reason; the other autoscalers of the fleet decide."""
    f = load_manifest_text(to_yaml([
        gpu_class("g1", 1), cluster("east", pool("gpu", "g1", 8)),
        deployment("chat", 2, namespace=NS), deployment("code", 2, namespace=NS),
        replica_autoscaler("chat", "chat", 6, metric("QueueDepth", 1), namespace=NS),
        replica_autoscaler("code", "code", 6, metric("QueueDepth", 1), namespace=NS)]))

    class Broken:
        def read(self, autoscaler, current, now):
            if autoscaler.target_key == (NS, "chat"):
                return {"QueueDepth": MetricReading(math.inf, 1)}     # what __post_init__ refuses
            return {"QueueDepth": MetricReading(6.0 * current, current, observed_at=now)}

    decisions = decide_all(f, Broken(), ScalingState(), None, NOW)
    chat, code = decisions[(NS, "chat")], decisions[(NS, "code")]
    assert chat.desired == 2 and chat.reason == c.FAILED_GET_METRICS and "no usable reading" in chat.message
    assert code.desired == 6                                          # 6 waiting per replica, target 1


# ---------------------------------------------------------------- item 2

def test_30_2_only_the_engines_families_are_parsed_from_an_untyped_flood() -> None:
    """50,000 untyped samples of other names: skipped before the parser (select_families finds
    the engines' names in C), so the flood costs a scan; the gauges it carries still read."""
    body = untyped_flood()
    assert body.count(b"\n") >= MAX_METRICS_SAMPLES - 1
    kept = select_families(body, SERIES_NAMES)
    assert kept.count(b"\n") == 4                       # two TYPE lines, two samples
    exposition = parse(body, SERIES_NAMES)
    assert sorted(exposition.families) == sorted([WAITING, "vllm:num_requests_running"])
    assert [s.value for s in exposition.families[WAITING].samples] == [3.0]


def test_30_2_all_of_an_untyped_flood_parses_into_one_family_per_name_in_one_pass() -> None:
    """Without names every sample is kept, each family built once (the samples were re-copied
    into a new tuple per line before: 50,000 lines cost 12 s)."""
    lines = "".join(f"n{i % 20}{{i=\"{i}\"}} {i}\n" for i in range(20 * MAX_METRICS_FAMILY_SAMPLES))
    exposition = parse(lines.encode())
    assert sorted(len(f.samples) for f in exposition.families.values()) == [MAX_METRICS_FAMILY_SAMPLES] * 20
    assert {f.type for f in exposition.families.values()} == {"unknown"}


def test_30_2_a_flood_of_one_engine_family_stops_at_its_bound() -> None:
    with pytest.raises(ExpositionError, match=f"more than {MAX_METRICS_FAMILY_SAMPLES}"):
        parse(wanted_flood(), SERIES_NAMES)
    with pytest.raises(ExpositionError, match="same series twice"):
        parse(HOSTILE_BODIES["duplicate-series"], SERIES_NAMES)


def test_30_2_parsing_stops_at_the_pass_budget_and_the_pods_left_are_missing() -> None:
    """The time bound per pass: from_pods parses every pod within `budget` seconds of one clock;
    past it a pod is missing with the reason, never parsed on."""
    f = fleet(2, metric("QueueDepth", 1))
    placement = place_fleet(f)
    r0, r1 = placement.find(NS, "chat").replicas
    many = "".join(f'{WAITING}{{i="{i}"}} 0\n' for i in range(MAX_METRICS_FAMILY_SAMPLES - 1)).encode()
    pods = tuple(PodScrape(ReplicaKey(NS, "chat", r.cluster, r.index), f"p{r.index}", True, body)
                 for r, body in ((r0, honest()), (r1, b"# TYPE " + WAITING.encode() + b" gauge\n" + many)))
    ticks = iter(range(1_000_000))              # one second a look at the clock
    replicas, _ = from_pods(placement, {"east": ClusterMetrics("east", pods)}, budget=1.5,
                            clock=lambda: float(next(ticks)))
    assert replicas[r0.name].pods[0].exposition is not None
    assert "time budget" in (replicas[r1.name].pods[0].error or ""), replicas[r1.name]


@settings(max_examples=60, deadline=None, derandomize=True)
@given(body=st.one_of(st.binary(max_size=2000), st.lists(st.sampled_from(
    [f"# TYPE {WAITING} gauge", f"{WAITING} 1", f'{WAITING}{{a="b"}} NaN', f"{TTFT}_bucket{{le=\"-Inf\"}} 3",
     f'{TTFT}_bucket{{le="+Inf"}} 1e400', f"# TYPE {TTFT} histogram", f"{WAITING}", "x 1", "# HELP x y", "\x00",
     f'{WAITING}{{a="\\""}} 2', f"  {WAITING} 3", f"{WAITING}_total 1", "{{{"]), max_size=40).map(
        lambda ls: "\n".join(ls).encode())))
def test_30_2_property_any_body_parses_or_is_one_exposition_error(body: bytes) -> None:
    """Whatever a pod answers, parse gives families or an ExpositionError, and the readings
    built from it are a reading within the bounds or the replica's reason: never a raise."""
    with contextlib.suppress(ExpositionError):
        parse(body, SERIES_NAMES)
    got = readings_of(honest(), body)
    for reading in got.values():
        if isinstance(reading, MetricReading):
            assert math.isfinite(reading.total) and reading.total >= 0 and reading.reporting >= 1
        else:
            assert isinstance(reading, Unreadable)


# ---------------------------------------------------------------- item 3

@pytest.mark.parametrize("activity, out_for, released", [
    (Activity.IDLE, 119, False), (Activity.IDLE, 120, True), (Activity.GONE, 120, True),
    (Activity.UNOBSERVED, 120, True), (Activity.BUSY, 120, False), (Activity.UNKNOWN, 120, False),
    (Activity.UNKNOWN, 599, False), (Activity.UNKNOWN, 600, True), (Activity.BUSY, 600, True),
], ids=lambda v: str(v))
def test_30_3_unknown_waits_until_it_reads_idle_up_to_the_grace(activity: Activity, out_for: float,
                                                                 released: bool) -> None:
    assert drain_finished(out_for, 120, 600, activity) is released


def test_30_3_what_a_read_says_of_each_draining_replica() -> None:
    """A pod answering 500 or not Ready, or a cluster unreachable: unknown (it waits); no pod
    listed: gone; a cluster with no kubeconfig: unobserved (the drain time alone)."""
    f = load_manifest_text(to_yaml([
        gpu_class("g1", 1), cluster("east", pool("gpu", "g1", 8)), cluster("west", pool("gpu", "g1", 8)),
        cluster("north", pool("gpu", "g1", 8)), deployment("chat", 7, namespace=NS),
        replica_autoscaler("chat", "chat", 8, metric("QueueDepth", 1), namespace=NS)]))
    placement = place_fleet(f)
    east = [r for r in placement.find(NS, "chat").replicas if r.cluster == "east"]
    west = next(r for r in placement.find(NS, "chat").replicas if r.cluster == "west")
    north = next(r for r in placement.find(NS, "chat").replicas if r.cluster == "north")
    idle, busy, failing, unready, gone = east[0], east[1], east[2], west, north

    def scrape(r, body=None, error=None, ready=True):
        return PodScrape(ReplicaKey(NS, "chat", r.cluster, r.index), f"{r.name}-pod", ready, body, None, error)

    readings = {"east": ClusterMetrics("east", (scrape(idle, honest(0, 0)), scrape(busy, honest(0, 1)),
                                               scrape(failing, error="the pod's /metrics answered HTTP 500"))),
                "west": ClusterMetrics("west", (scrape(unready, ready=False),)),
                "north": ClusterMetrics("north", ())}
    draining = [Draining(NS, "chat", r, NOW) for r in (idle, busy, failing, unready, gone)]
    replicas, _ = from_pods(placement, readings)
    got = drain_activity(f, draining, readings, replicas)
    assert got == {idle.name: Activity.IDLE, busy.name: Activity.BUSY, failing.name: Activity.UNKNOWN,
                   unready.name: Activity.UNKNOWN, gone.name: Activity.GONE}
    down = {**readings, "east": Unreachable("east", "no answer within 5s")}
    assert drain_activity(f, draining[:1], down, replicas) == {idle.name: Activity.UNKNOWN}
    assert drain_activity(f, draining[:1], {}, replicas) == {idle.name: Activity.UNOBSERVED}


# ---------------------------------------------------------------- low: a history from the future

def test_30_low_a_history_stamped_in_the_future_is_clamped_to_now() -> None:
    """A recommendation of 10 stamped an hour ahead (a clock set back, a hand-edited state) held
    every scale-down for that hour plus the window; clamped, it holds for the window alone."""
    autoscaler = scaler(10, queue(4))
    future = History(recommendations=(Recommendation(NOW + 3600, 10),))
    low = {"QueueDepth": MetricReading(4.0, 10, observed_at=NOW)}        # 0.4 waiting each: 1 replica
    first = decide(autoscaler, 10, low, future, NOW)
    assert first.desired == 10 and all(r.at <= NOW for r in first.history.recommendations)
    later = NOW + 301                                                     # past the 300 s window
    second = decide(autoscaler, 10, {"QueueDepth": MetricReading(4.0, 10, observed_at=later)}, first.history, later)
    assert second.desired == 1, second.message
    assert history([(0, 3)]).clamped(NOW) == history([(0, 3)])


def test_30_low_a_replica_draining_since_the_future_drains_from_now() -> None:
    """Draining "since" a year ahead, a replica never reached its drain time: clamped, the
    pass's own rule (here: out for 0 s or more) releases it now."""
    f = fleet(1, metric("QueueDepth", 1))
    two = place_fleet(fleet(2, metric("QueueDepth", 1))).to_json()
    kept, leaving = FleetPlacement.from_json(two).find(NS, "chat").replicas
    doc = FleetPlacement.from_json(two).to_json()
    doc["deployments"][0]["replicas"] = [kept.to_json()]
    doc["deployments"][0]["desired"] = 1
    state = ScalingState({(NS, "chat"): AutoscalerState(1, History.seeded(1, NOW))},
                         (Draining(NS, "chat", leaving, NOW + 365 * 86400),))
    cycle = scale_fleet(f, state, FileMetricsSource({(NS, "chat"): {"QueueDepth": 1.0}}), NOW, doc,
                        lambda fl, prev: place_fleet(fl, FleetPlacement.from_json(prev) if prev else None).to_json(),
                        lambda d: NOW - d.since >= 0)
    assert [d.replica.name for d in cycle.drained] == [leaving.name], cycle.state.draining
