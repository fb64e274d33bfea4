"""The reference users' routing experiments, through real Traefik and mock engines.

Each test builds its fleet with the same routing module and config builders that the
Pulumi program uses (modelplane.routing, modelplane.gateway.config).
"""
import signal
import time

import pytest

from modelplane.commands.traffic import run_split

from .helpers import SVC, replica, select, wait_only


def test_90_10_over_two_deployments_is_exactly_180_20(fleet):
    eps = fleet.start_engines([replica("big", 0, "east"), replica("small", 0, "west")])
    fleet.route({SVC: [select("big", 90), select("small", 10)]}, eps)
    res = run_split(fleet.service_url(*SVC), 200)
    assert res.failed == 0
    assert res.by_deployment == {"big": 180, "small": 20}


def test_90_10_within_one_cluster_is_exactly_180_20(fleet):
    """Same split when both deployments share a workload gateway (second hop weights)."""
    eps = fleet.start_engines([replica("big", 0, "east"), replica("small", 0, "east")])
    fleet.route({SVC: [select("big", 90), select("small", 10)]}, eps)
    res = run_split(fleet.service_url(*SVC), 200)
    assert (res.failed, res.by_deployment) == (0, {"big": 180, "small": 20})


def test_nested_weights_stay_exact_per_replica_across_both_hops(fleet):
    """90 over two replicas in two clusters + 10 next to one of them: 9/9/2 -> 90/90/20.

    The control plane sees east 11 : west 9; east's gateway splits its 110 as 9 : 2."""
    eps = fleet.start_engines([replica("big", 0, "east"), replica("big", 1, "west"), replica("small", 0, "east")])
    fleet.route({SVC: [select("big", 90), select("small", 10)]}, eps)
    res = run_split(fleet.service_url(*SVC), 200)
    assert (res.failed, res.by_replica) == (0, {"big-0": 90, "big-1": 90, "small-0": 20})


def test_entry_whose_endpoints_are_gone_takes_no_share_after_rerun(fleet):
    eps = fleet.start_engines([replica("big", 0, "east"), replica("small", 0, "west")])
    services = {SVC: [select("big", 90), select("small", 10)]}
    fleet.route(services, eps)
    assert run_split(fleet.service_url(*SVC), 20).by_deployment == {"big": 18, "small": 2}

    # The small replica is evicted and cannot be re-placed: its endpoint disappears
    # and the program is re-run with what is left; then the engine really goes away.
    fleet.route(services, [e for e in eps if e.deployment == "big"])
    fleet.engines["small-0"].stop()
    res = run_split(fleet.service_url(*SVC), 200)
    assert res.failed == 0
    assert res.by_deployment == {"big": 200}


TOPOLOGIES = pytest.mark.parametrize("small_cluster", ["west", "east"], ids=["two-clusters", "one-cluster"])


@TOPOLOGIES
def test_entry_failing_health_at_run_time_moves_its_share_without_failures(fleet, small_cluster):
    """No re-run: the small engine's /health turns 503 after it served 5 requests.

    Two clusters: the control plane moves the share; one cluster: the workload gateway."""
    eps = fleet.start_engines(
        [replica("big", 0, "east"), replica("small", 0, small_cluster)],
        faults={"small-0": ["--fail-health-after", "5"]},
    )
    fleet.route({SVC: [select("big", 90), select("small", 10)]}, eps)

    # Paced so that detection (two health-check hops) happens mid-stream.
    res = run_split(fleet.service_url(*SVC), 200, on_request=lambda i, r: time.sleep(0.005))
    seq = res.sequence
    assert res.failed == 0 and len(seq) == 200
    assert res.by_replica["small-0"] >= 5  # it kept answering until detection
    last_small = max(i for i, r in enumerate(seq) if r == "small-0")
    assert last_small < 180, f"small still served request {last_small}"
    assert set(seq[last_small + 1:]) == {"big-0"}
    assert run_split(fleet.service_url(*SVC), 50).by_deployment == {"big": 50}


@TOPOLOGIES
def test_engine_killed_mid_stream_loses_no_request(fleet, small_cluster):
    """The small engine's process exits after its 5th answer (a crash, not a drain)."""
    eps = fleet.start_engines(
        [replica("big", 0, "east"), replica("small", 0, small_cluster)],
        faults={"small-0": ["--exit-after", "5"]},
    )
    fleet.route({SVC: [select("big", 90), select("small", 10)]}, eps)
    res = run_split(fleet.service_url(*SVC), 200)
    assert res.failed == 0, res.errors
    assert res.by_replica == {"big-0": 195, "small-0": 5}
    assert not fleet.engines["small-0"].alive()


def test_health_recovers_and_the_split_comes_back(fleet):
    eps = fleet.start_engines([replica("big", 0, "east"), replica("small", 0, "west")])
    fleet.route({SVC: [select("big", 90), select("small", 10)]}, eps)
    small = fleet.engines["small-0"]
    small.signal(signal.SIGUSR1)  # /health -> 503
    wait_only(fleet.service_url(*SVC), "big-0")
    assert run_split(fleet.service_url(*SVC), 50).by_deployment == {"big": 50}
    small.signal(signal.SIGUSR2)  # healthy again
    deadline = time.monotonic() + 60         # the health check sees it again; a liveness bound
    while time.monotonic() < deadline:
        res = run_split(fleet.service_url(*SVC), 20)
        if res.by_deployment.get("small"):
            break
        time.sleep(0.1)
    assert res.failed == 0 and res.by_deployment.get("small")


def test_cluster_pin_drains_the_other_cluster_without_moving_replicas(fleet):
    eps = fleet.start_engines([replica("qwen", 0, "east"), replica("qwen", 1, "west")])
    fleet.route({SVC: [select("qwen", cluster="east")]}, eps)
    pinned = run_split(fleet.service_url(*SVC), 60)
    assert pinned.failed == 0
    assert pinned.by_replica == {"qwen-0": 60}  # 60/0: west keeps running, idle
    assert fleet.engines["qwen-1"].alive()

    fleet.route({SVC: [select("qwen")]}, eps)
    unpinned = run_split(fleet.service_url(*SVC), 60)
    assert (unpinned.failed, unpinned.by_replica) == (0, {"qwen-0": 30, "qwen-1": 30})


def test_streaming_and_other_paths_pass_through_both_hops(fleet):
    """Everything below the service prefix reaches the engine as `/v1/...` (reference §4.4)."""
    import httpx

    eps = fleet.start_engines([replica("qwen", 0, "east")])
    fleet.route({SVC: [select("qwen")]}, eps)
    with httpx.Client(base_url=fleet.service_url(*SVC)) as c:
        with c.stream("POST", "/v1/chat/completions", json={"stream": True}) as r:
            data = [line for line in r.iter_lines() if line.startswith("data: ")]
        assert r.status_code == 200 and data[-1] == "data: [DONE]" and len(data) == 4
        assert c.post("/v1/messages", json={}).json()["content"][0]["text"] == "served by qwen-0"
        assert c.get("/v1/models").json()["data"][0]["id"] == "qwen"
        assert c.get("/health").status_code == 200
