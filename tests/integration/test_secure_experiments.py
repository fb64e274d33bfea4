"""The routing experiments again with TLS, API keys and mutual TLS on, and a key rotation
under load: the protections must cost no request."""
import threading
import time
from collections import Counter
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest

from modelplane.commands.traffic import run_split, tls_context

from .helpers import NS, SVC, replica, secure, select
from .test_streaming_soak import _stream_once

STREAMS, CLIENTS, SLOW = 2000, 8, 4
KEY_A, KEY_B = "sk-rotation-old-0123456789", "sk-rotation-new-9876543210"


def test_health_failing_at_run_time_moves_the_share_without_failures(secure_fleet):
    auth = secure(secure_fleet)
    eps = secure_fleet.start_engines([replica("big", 0, "east"), replica("small", 0, "west")],
                                     faults={"small-0": ["--fail-health-after", "5"]})
    secure_fleet.route({SVC: [select("big", 90), select("small", 10)]}, eps)
    res = run_split(secure_fleet.service_url(*SVC), 200, on_request=lambda i, r: time.sleep(0.005), **auth)
    assert res.failed == 0 and res.by_replica["small-0"] >= 5, res.errors
    last_small = max(i for i, r in enumerate(res.sequence) if r == "small-0")
    assert set(res.sequence[last_small + 1:]) == {"big-0"} and last_small < 180


def test_engine_killed_mid_stream_loses_no_request(secure_fleet):
    auth = secure(secure_fleet)
    eps = secure_fleet.start_engines([replica("big", 0, "east"), replica("small", 0, "west")],
                                     faults={"small-0": ["--exit-after", "5"]})
    secure_fleet.route({SVC: [select("big", 90), select("small", 10)]}, eps)
    res = run_split(secure_fleet.service_url(*SVC), 200, **auth)
    assert res.failed == 0, res.errors
    assert res.by_replica == {"big-0": 195, "small-0": 5}


@pytest.mark.timeout(240)
def test_2000_streams_with_a_key_rotation_in_the_middle_lose_none(secure_fleet):
    """8 clients stream 2,000 completions; midway a new key is added, the clients move to it
    and the old key is revoked while SLOW streams authenticated with it are still being
    answered (their engine takes 1.5 s): every stream is whole, the old key is refused from
    then on, and nothing was reloaded (the keys are files the plugin re-reads)."""
    fleet = secure_fleet
    fleet.set_callers({"team-a": KEY_A})
    eps = fleet.start_engines([replica("qwen", 0, "east"), replica("qwen", 1, "west"), replica("slow", 0, "east")],
                              faults={"slow-0": ["--delay-ms", "1500", "--record-headers"]})
    fleet.route({SVC: [select("qwen")], (NS, "slow"): [select("slow")]}, eps)
    url = fleet.service_url(*SVC) + "/v1/chat/completions"
    slow_url = fleet.service_url(NS, "slow") + "/v1/chat/completions"
    verify = tls_context(fleet.edge_cert.cert)

    current, read_b, done = [KEY_A], set(), [0]
    lock, rotated = threading.Lock(), threading.Event()
    per_thread, clients = threading.local(), []

    def stream(_: int) -> tuple[str, str | None]:
        if not hasattr(per_thread, "client"):
            per_thread.client = httpx.Client(timeout=20, verify=verify)
            clients.append(per_thread.client)
        with lock:
            key = current[0]
            if key == KEY_B:
                read_b.add(threading.get_ident())
        per_thread.client.headers["Authorization"] = f"Bearer {key}"
        outcome = _stream_once(per_thread.client, url)
        with lock:
            done[0] += 1
        return outcome

    slow_outcomes: list[tuple[str, str | None]] = []

    def slow_stream() -> None:
        with httpx.Client(timeout=20, verify=verify, headers={"Authorization": f"Bearer {KEY_A}"}) as c:
            slow_outcomes.append(_stream_once(c, slow_url))

    problems: list[str] = []                                          # the rotator's, for the assertion below

    def until(what: str, check: Callable[[], bool], timeout: float = 120) -> bool:
        """A condition with a deadline for a loaded machine; False (and said why) at the deadline."""
        deadline = time.monotonic() + timeout
        while not check():
            if time.monotonic() > deadline:
                problems.append(f"not within {timeout:g} s: {what}")
                return False
            time.sleep(0.01)
        return True

    def rotate() -> None:
        if not until(f"a third of the streams done ({done[0]} of {STREAMS})", lambda: done[0] >= STREAMS // 3):
            return
        slow = [threading.Thread(target=slow_stream) for _ in range(SLOW)]
        for t in slow:
            t.start()
        try:
            if not until("the slow streams reached their engine", lambda: len(httpx.get(
                    f"{fleet.engines['slow-0'].url}/debug/headers").json()["requests"]) >= SLOW):
                return
            fleet.set_callers({"team-a": KEY_A, "team-b": KEY_B})      # add the new key
            with lock:
                current[0] = KEY_B                                        # clients move to it
            if not until(f"every client on the new key ({len(read_b)} of {CLIENTS})",
                         lambda: len(read_b) >= CLIENTS or done[0] >= STREAMS):
                return
            fleet.set_callers({"team-b": KEY_B})                          # revoke the old one
            rotated.set()
        finally:
            for t in slow:
                t.join()

    rotator = threading.Thread(target=rotate)
    rotator.start()
    try:
        with ThreadPoolExecutor(CLIENTS) as pool:
            outcomes = list(pool.map(stream, range(STREAMS)))
    finally:
        rotator.join()
        for c in clients:
            c.close()
    assert rotated.is_set() and len(read_b) == CLIENTS, problems or f"{len(read_b)} of {CLIENTS} clients moved"
    assert Counter(o for o, _ in outcomes) == {"ok": STREAMS}
    assert Counter(o for o, _ in slow_outcomes) == {"ok": SLOW}, "a stream in flight was cut by the revocation"
    with httpx.Client(verify=verify, headers={"Authorization": f"Bearer {KEY_A}"}) as old:
        assert old.post(url, json={}).status_code == 401
    callers = {c for r in httpx.get(f"{fleet.engines['slow-0'].url}/debug/headers").json()["requests"]
               for c in r["callers"]}
    assert callers == {"team-a"}
