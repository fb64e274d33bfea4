"""modelplane.kvroute.summary: the summary a cluster publishes, and every way one can be hostile (huge,
stale, forged, replayed, NaN)."""

from __future__ import annotations

import base64
import json

import pytest

from modelplane.kvroute.engine import EngineProfile
from modelplane.kvroute.routers import CacheAware
from modelplane.kvroute.sim import build_fleet
from modelplane.kvroute.summary import (
    MAX_AGE_S,
    MAX_SUMMARY_BYTES,
    SUMMARY_BITS,
    CountingFilter,
    Summary,
    SummaryError,
    decode,
    is_stale,
)
from modelplane.kvroute.trace import TraceRequest

CLUSTERS = {"c0", "c1"}


def summary(**over: object) -> dict[str, object]:
    filt = CountingFilter()
    for b in (0, 1, 2):
        filt.add(b)
    s = Summary("c0", 5, 10.0, 4, 0.25, bytes(filt.bits))
    obj: dict[str, object] = json.loads(s.encode())
    obj.update(over)
    return obj


def raw(obj: object) -> bytes:
    return json.dumps(obj).encode()


def test_round_trip_keeps_what_the_cluster_holds() -> None:
    s = decode(raw(summary()), clusters=CLUSTERS, now_s=10.5)
    assert (s.cluster, s.seq, s.replicas, s.load_s) == ("c0", 5, 4, 0.25)
    assert s.prefix((0, 1, 2, 99)) == 3 and s.prefix((7, 0)) == 0


def test_the_size_is_bounded_whatever_the_cache_holds() -> None:
    filt = CountingFilter()
    for b in range(4 * 860):             # 4 replicas x an H100's blocks
        filt.add(b)
    data = Summary("c0", 1, 0.0, 4, 0.0, bytes(filt.bits)).encode()
    assert len(data) <= MAX_SUMMARY_BYTES
    assert decode(data, clusters=CLUSTERS, now_s=0.0).prefix(tuple(range(100))) == 100


def test_counting_filter_clears_a_bit_only_when_no_holder_is_left() -> None:
    filt = CountingFilter()
    filt.add(42)
    filt.add(42)                          # two replicas hold it
    filt.remove(42)
    assert Summary("c0", 1, 0.0, 1, 0.0, bytes(filt.bits)).has(42)
    filt.remove(42)
    assert not any(filt.bits)


@pytest.mark.parametrize(("obj", "says"), [
    (summary(load_s=float("nan")), "NaN"),
    (summary(load_s=float("inf")), "Infinity"),
    (summary(load_s=-1), "load_s"),
    (summary(load_s=True), "load_s"),
    (summary(load_s=1e300), "load_s"),
    (summary(cluster="c9"), "not a cluster of the fleet"),
    (summary(cluster="x" * 5000), "not a cluster of the fleet"),
    (summary(seq=-1), "field seq"),
    (summary(replicas=0), "field replicas"),
    (summary(m=1024), "field m"),
    (summary(bits="!!not base64!!"), "field bits"),
    (summary(bits=base64.b64encode(b"\0" * 10).decode()), "field bits"),
    (summary(bits=base64.b64encode(b"\xff" * (SUMMARY_BITS // 8)).decode()), "saturated"),
    (summary(published_ms=60_000), "in the future"),
    (summary(extra=1), "exactly the fields"),
    ([1, 2, 3], "exactly the fields"),
])
def test_hostile_summaries_are_refused_naming_the_field(obj: object, says: str) -> None:
    with pytest.raises(SummaryError, match=says):
        decode(raw(obj), clusters=CLUSTERS, now_s=10.5)


def test_forged_name_is_not_echoed_with_control_characters() -> None:
    with pytest.raises(SummaryError) as err:
        decode(raw(summary(cluster="\x1b[31mevil")), clusters=CLUSTERS, now_s=10.5)
    assert "\x1b" not in str(err.value)


def test_huge_and_deep_summaries_are_refused_unparsed() -> None:
    with pytest.raises(SummaryError, match="more than"):
        decode(b" " * (MAX_SUMMARY_BYTES + 1), clusters=CLUSTERS, now_s=0.0)
    with pytest.raises(SummaryError, match="nests too deep|exactly the fields"):
        decode(b"[" * 8000 + b"]" * 8000, clusters=CLUSTERS, now_s=0.0)
    with pytest.raises(SummaryError, match="not a JSON object"):
        decode(b"\xff\xfe", clusters=CLUSTERS, now_s=0.0)


def test_a_replayed_or_reordered_summary_is_refused() -> None:
    with pytest.raises(SummaryError, match="not after 5"):
        decode(raw(summary()), clusters=CLUSTERS, now_s=10.5, last_seqs={"c0": 5})
    assert decode(raw(summary(seq=6)), clusters=CLUSTERS, now_s=10.5, last_seqs={"c0": 5}).seq == 6


def test_fleet_keeps_the_last_good_summary_and_counts_refusals() -> None:
    fleet = build_fleet(2, 1, EngineProfile())
    assert fleet.receive(raw(summary()), 10.5) is not None
    assert fleet.receive(raw(summary(load_s=float("nan"))), 10.6) is None
    assert fleet.receive(raw(summary(seq=4)), 10.7) is None          # older than the one kept
    assert fleet.summaries["c0"].seq == 5 and fleet.summaries_refused == 2


def test_a_stale_summary_counts_as_holding_nothing() -> None:
    fleet = build_fleet(2, 1, EngineProfile())
    fleet.receive(raw(summary()), 10.0)
    s = fleet.summaries["c0"]
    assert not is_stale(s, 10.0 + MAX_AGE_S) and is_stale(s, 10.0 + MAX_AGE_S + 0.1)
    router = CacheAware()
    request = TraceRequest(0, 0.0, 3 * 512, 1, (0, 1, 2))
    # fresh: c0 holds the prefix and c1 publishes nothing, so the prefix is known at c0
    assert router.cluster_for(request, fleet, 10.5, set()) is fleet.by_name["c0"]
    assert router.decisions["known"] == 1
    router.cluster_for(request, fleet, 10.0 + MAX_AGE_S + 1, set())
    assert router.decisions["new"] == 1             # stale: nothing is known of c0 any more
