"""Issue 19's items against the hostile server, one cluster read at a time (in process): the
reading each mode gives, its reason as outside text, and abandoned readers that stop."""

from __future__ import annotations

import threading
import time

import pytest

from modelplane.observe.place import place_observed
from modelplane.observe.read import ClusterRead, NotRead, Unreachable, read_cluster, read_clusters
from tests.hostile.conftest import TOKEN, HostileFleet
from tests.hostile.server import FORGED, WRONG_SHAPES

pytestmark = pytest.mark.integration


def read(hostile: HostileFleet, mode: str, timeout: float = 2.0) -> ClusterRead | NotRead | Unreachable:
    return read_cluster(mode, hostile.kubeconfigs / f"{mode}.yaml", timeout)


@pytest.mark.parametrize("mode", ["huge", "endless", "gzip-bomb"])
def test_19_4_every_answer_is_capped_after_decompression(hostile: HostileFleet, mode: str) -> None:
    start = time.monotonic()
    found = read(hostile, mode)
    assert time.monotonic() - start < 4
    assert isinstance(found, NotRead) and "the answer is larger than 16777216 bytes" in found.reason, found


def test_19_4_abandoned_readers_stop_and_close_their_connections(hostile: HostileFleet) -> None:
    """A dripping server outlasts every deadline; the call returns within its bound and no
    reader keeps downloading behind it (verify --wait used to pile them up)."""
    before = {t.ident for t in threading.enumerate()}
    for _ in range(3):
        start = time.monotonic()
        found = read_clusters({"drip": hostile.kubeconfigs / "drip.yaml"}, timeout=1.0)["drip"]
        assert time.monotonic() - start < 2.5
        assert isinstance(found, Unreachable)
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        left = [t for t in threading.enumerate() if t.name.startswith("observe-") and t.ident not in before]
        if not left:
            break
        time.sleep(0.05)
    assert not left, [t.name for t in left]


@pytest.mark.parametrize("shape", WRONG_SHAPES)
def test_19_9_objects_of_the_wrong_type_make_only_their_cluster_not_read(hostile: HostileFleet, shape: str) -> None:
    mode = f"wrong-{shape}"
    readings = read_clusters({c: hostile.kubeconfigs / f"{c}.yaml" for c in (mode, "honest")}, timeout=3)
    assert isinstance(readings["honest"], ClusterRead)
    bad = readings[mode]
    assert isinstance(bad, NotRead), bad
    assert "answer unusable" in bad.reason
    plan = place_observed(hostile.fleet, None, readings, now=1_800_000_000.0)   # the rest of the fleet plans
    capacity = plan.capacity.to_json()
    assert capacity["honest"]["source"] == "observed" and capacity[mode]["source"] == "declared"


def test_19_15_deeply_nested_json_is_not_read_and_says_so(hostile: HostileFleet) -> None:
    found = read(hostile, "deep")
    assert isinstance(found, NotRead) and "nests arrays or objects deeper than" in found.reason, found


@pytest.mark.parametrize("mode", ["unauthorized", "failing"])
def test_19_16_server_text_is_stripped_capped_and_never_shows_a_header(hostile: HostileFleet, mode: str) -> None:
    found = read(hostile, mode)
    reason = found.reason
    assert TOKEN not in reason and "Bearer" not in reason
    assert "\x1b" not in reason and "\n" not in reason and "\r" not in reason and "\x07" not in reason
    assert len(reason) <= 400
    assert FORGED not in reason or not reason.startswith("OK")
    if mode == "failing":
        assert isinstance(found, Unreachable) and "Authorization: REDACTED" in reason


def test_19_7_a_slice_of_impossible_device_counts_counts_what_the_class_holds(hostile: HostileFleet) -> None:
    readings = read_clusters({"impossible": hostile.kubeconfigs / "impossible.yaml"}, timeout=3)
    plan = place_observed(hostile.fleet, None, readings, now=1_800_000_000.0)
    cluster = plan.capacity.clusters["impossible"]
    assert cluster.pools["gpu"].devices == 8 and cluster.pools["gpu"].free == ((8,),)
    assert any("publishes 100008 gpu.nvidia.com device(s)" in n for n in cluster.notes)
    placed = [r for d in plan.typed().deployments for r in d.replicas if r.cluster == "impossible"]
    assert len(placed) == 2                      # two 4-GPU replicas on one 8-GPU node, not 18


def test_19_redirects_are_not_followed_and_carry_no_token(hostile: HostileFleet) -> None:
    found = read(hostile, "redirect")
    assert isinstance(found, NotRead) and "redirects are not followed" in found.reason
    assert hostile.server.captured == []
