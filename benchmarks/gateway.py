"""Gateway overhead: requests/s and p50/p99 latency through Traefik vs straight to one engine.

    .venv/bin/python benchmarks/gateway.py [-n 2000] [-c 8]

One mock engine, its workload-cluster gateway and the control-plane gateway, all on
127.0.0.1, configured by modelplane.gateway exactly as in tests and the demo. Measured
in the same run, same client, same concurrency: direct to the engine, through the
workload gateway only (one hop), through both hops (what callers use), and through
both hops without the control plane's retry-on-5xx (to show what that safety costs). The mock
engine answers in well under a millisecond, so the ratios show gateway cost, not
model cost; on a real engine the same absolute overhead is a rounding error.
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import threading
import time
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from modelplane.gateway.config import Tuning  # noqa: E402
from modelplane.gateway.local import LocalFleet  # noqa: E402
from modelplane.routing import DEPLOYMENT_LABEL, RouteEntry, replica_endpoint  # noqa: E402

BODY = {"model": "bench", "messages": [{"role": "user", "content": "hello"}]}


def measure(url: str, n: int, concurrency: int, warmup: int = 50) -> dict:
    target = url.rstrip("/") + "/v1/chat/completions"
    with httpx.Client(timeout=10) as c:
        for _ in range(warmup):
            c.post(target, json=BODY)
    latencies: list[float] = []
    failed = 0
    lock = threading.Lock()
    remaining = [n]

    def worker() -> None:
        nonlocal failed
        with httpx.Client(timeout=10) as c:
            while True:
                with lock:
                    if remaining[0] == 0:
                        return
                    remaining[0] -= 1
                t0 = time.perf_counter()
                try:
                    ok = c.post(target, json=BODY).status_code == 200
                except httpx.HTTPError:
                    ok = False
                dt = time.perf_counter() - t0
                with lock:
                    latencies.append(dt)
                    failed += not ok

    threads = [threading.Thread(target=worker) for _ in range(concurrency)]
    start = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.perf_counter() - start
    q = statistics.quantiles(latencies, n=100)
    return {"rps": n / wall, "p50_ms": q[49] * 1000, "p99_ms": q[98] * 1000, "failed": failed}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("-n", type=int, default=2000, help="requests per target")
    p.add_argument("-c", type=int, default=8, help="concurrent clients")
    p.add_argument("--json", action="store_true")
    a = p.parse_args(argv)

    entries = {("bench", "chat"): [RouteEntry("all", 1, {DEPLOYMENT_LABEL: "engine"})]}
    with LocalFleet(tuning=Tuning()) as fleet, LocalFleet(tuning=Tuning(retry_on_5xx=False)) as plain:
        eps = fleet.start_engines([replica_endpoint("bench", "engine-0", "engine", "local", 0)])
        fleet.route(entries, eps)
        plain.route(entries, eps)  # same engine, a second pair of gateways
        targets = {
            "direct": eps[0].url,
            "workload gateway": f"{fleet.workload['local'].url}/bench/chat",
            "both hops": fleet.service_url("bench", "chat"),
            "both, no 5xx retry": plain.service_url("bench", "chat"),
        }
        results = {name: measure(url, a.n, a.c) for name, url in targets.items()}

    base = results["direct"]
    ratios = {name: {"rps": r["rps"] / base["rps"], "p50": r["p50_ms"] / base["p50_ms"],
                     "p99": r["p99_ms"] / base["p99_ms"]} for name, r in results.items()}
    if a.json:
        print(json.dumps({"requests": a.n, "concurrency": a.c, "results": results, "ratios": ratios}, indent=2))
        return 0
    print(f"{a.n} requests per target, {a.c} concurrent clients, mock engine on 127.0.0.1")
    print(f"{'target':<19} {'req/s':>8} {'p50 ms':>8} {'p99 ms':>8} {'failed':>6}   "
          f"{'rps ratio':>9} {'p50 ratio':>9} {'p99 ratio':>9}")
    for name, r in results.items():
        x = ratios[name]
        print(f"{name:<19} {r['rps']:>8.0f} {r['p50_ms']:>8.2f} {r['p99_ms']:>8.2f} {r['failed']:>6}   "
              f"{x['rps']:>9.2f} {x['p50']:>9.2f} {x['p99']:>9.2f}")
    return 1 if any(r["failed"] for r in results.values()) else 0


if __name__ == "__main__":
    sys.exit(main())
