"""Gateway overhead: requests/s and p50/p99 latency through Traefik vs straight to one engine.

    .venv/bin/python benchmarks/gateway.py [-n 2000] [-c 8] [--rounds 3] [--json]

One mock engine; per variant a workload-cluster gateway and a control-plane gateway in
front of it, all on 127.0.0.1, configured by modelplane.gateway exactly as in tests and
the demo. Measured in the same run, same client, same concurrency:

* direct: straight to the engine (the baseline);
* workload gateway: one hop;
* both hops: what callers use, with zero-loss failover (retry on 502-504, request
  bodies up to 16 KiB buffered on every hop); the goal is >= 0.85x direct req/s and
  <= 1.3x its p50 (the data path's goal);
* both, 64 KiB / 4 MiB buffer: larger retry bounds (4 MiB was the former one), to show
  what the bound costs: Traefik allocates it for every request, whatever the body;
* both, no 5xx retry: network-error retries only, which loses requests while a cluster
  is being marked down (docs/data-path.md), only to price that safety;
* both, bare Traefik: the floor, two Traefiks each with one router straight to one
  server (no middleware, no weighted service, no health check): what two hops of this
  proxy cost on this machine whatever the configuration;
* both, TLS+keys+mTLS: what a fleet put on the internet serves: HTTPS at the edge, the
  callerauth plugin checking an API key, mutual TLS between the hops; the goal is its p50
  within 1.2x of "both hops" (the secured data path's goal); "both, TLS+mTLS" leaves the keys out and
  "both, TLS+mTLS+ForwardAuth" checks them with Traefik's ForwardAuth against a small
  Python server (benchmarks/forward_auth.py) instead of the plugin, to price the choice.

The box is shared and its load moves, so targets are measured in interleaved rounds
and each figure is the median over rounds. Gateway CPU is the Traefiks' user+system
time per request (from /proc), the figure least disturbed by other load. The mock
engine answers in well under a millisecond, so the ratios show gateway cost, not model
cost; on a real engine the same absolute overhead is a rounding error.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import threading
import time
from dataclasses import dataclass, replace
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import ssl  # noqa: E402

import yaml  # noqa: E402

from modelplane.gateway.config import Config, Tuning  # noqa: E402
from modelplane.routing import DEPLOYMENT_LABEL, RouteEntry, replica_endpoint  # noqa: E402
from modelplane.runtime.fleet import LocalFleet, LocalSecurity  # noqa: E402
from modelplane.runtime.process import Managed, Traefik, listen_socket  # noqa: E402

BODY = {"model": "bench", "messages": [{"role": "user", "content": "hello"}]}
GOAL_RPS, GOAL_P50 = 0.85, 1.3
GOAL_SECURED_P50 = 1.2   # the secured path's p50 over the plain path's: the secured path's goal
SHIPPED = "both hops"
FLOOR = "both, bare Traefik"
SECURED = "both, TLS+keys+mTLS"
NO_KEYS = "both, TLS+mTLS"
FORWARD_AUTH = "both, TLS+mTLS+ForwardAuth"
KEY = "sk-benchmark-0123456789abcdef"
VARIANTS: dict[str, tuple[Tuning, LocalSecurity | None]] = {
    SHIPPED: (Tuning(), None),
    "both, 64 KiB buffer": (replace(Tuning(), retry_max_body=64 * 1024), None),
    "both, 4 MiB buffer": (replace(Tuning(), retry_max_body=4 * 1024 * 1024), None),
    "both, no 5xx retry": (replace(Tuning(), retry_on_5xx=False), None),
    SECURED: (Tuning(), LocalSecurity()),
    NO_KEYS: (Tuning(), LocalSecurity(auth=False)),
    FORWARD_AUTH: (Tuning(), LocalSecurity()),
}
FORWARD_AUTH_SERVER = Path(__file__).resolve().parent / "forward_auth.py"
TICK = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK


def measure(url: str, n: int, concurrency: int, warmup: int = 50, client: dict | None = None) -> dict:
    target = url.rstrip("/") + "/v1/chat/completions"
    client = client or {}
    with httpx.Client(timeout=10, **client) as c:
        for _ in range(warmup):
            c.post(target, json=BODY)
    latencies: list[float] = []
    failed = 0
    lock = threading.Lock()
    remaining = [n]

    def worker() -> None:
        nonlocal failed
        with httpx.Client(timeout=10, **client) as c:
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


@dataclass
class Target:
    url: str
    gateway_pids: tuple[int, ...]
    client: dict | None = None      # httpx.Client arguments: the key, the edge certificate


def client_args(f: LocalFleet) -> dict | None:
    if f.security is None:
        return None
    args: dict = {"verify": ssl.create_default_context(cafile=f.edge_cert.cert) if f.edge_cert else True}
    if f.security.auth:
        args["headers"] = {"Authorization": f"Bearer {KEY}"}
    return args


def use_forward_auth(f: LocalFleet) -> int:
    """Swap the control plane's callerauth middlewares for ForwardAuth to a Python server
    (plus a headers middleware removing the key, which ForwardAuth leaves in); returns its pid."""
    assert f.control is not None
    sock = listen_socket()
    port = sock.getsockname()[1]
    server = Managed("forward-auth", [sys.executable, str(FORWARD_AUTH_SERVER), "--listen-fd", str(sock.fileno()),
                                      "--keys-dir", str(f.keys_dir)], f.work_dir, group=f.group,
                     pass_fds=[sock.fileno()])
    sock.close()
    f._procs.append(server)
    cfg = yaml.safe_load((f.control.dynamic_dir / f.control.DYNAMIC).read_text())
    http = cfg["http"]
    http["routers"] = {k: v for k, v in http["routers"].items() if not k.startswith("generation-")}
    for name in [m for m in http["middlewares"] if m.startswith("auth-")]:
        http["middlewares"][name] = {"forwardAuth": {"address": f"http://127.0.0.1:{port}/",
                                                     "authResponseHeaders": ["X-Modelplane-Caller"]}}
    http["middlewares"]["drop-key"] = {"headers": {"customRequestHeaders": {"Authorization": ""}}}
    for router in http["routers"].values():
        if any(m.startswith("auth-") for m in router.get("middlewares", [])):
            router["middlewares"].insert(1, "drop-key")
    f.control.apply(cfg)
    return server.proc.pid


def bare(prefix: str, server: str, *, strip: bool) -> Config:
    """One router straight to one server: the least a Traefik hop can do."""
    router: Config = {"entryPoints": ["web"], "rule": f"PathPrefix(`{prefix}/`)", "service": "s"}
    http: Config = {"routers": {"r": router}, "services": {"s": {"loadBalancer": {"servers": [{"url": server}]}}}}
    if strip:
        router["middlewares"] = ["strip"]
        http["middlewares"] = {"strip": {"stripPrefix": {"prefixes": [prefix]}}}
    return {"http": http}


def run(n: int, concurrency: int, rounds: int) -> dict:
    entries = {("bench", "chat"): [RouteEntry("all", 1, {DEPLOYMENT_LABEL: "engine"})]}
    fleets = {name: LocalFleet(tuning=t, security=sec) for name, (t, sec) in VARIANTS.items()}
    first = fleets[SHIPPED]
    bare_hops: list[Traefik] = []
    extra_pids: dict[str, tuple[int, ...]] = {}
    try:
        eps = first.start_engines([replica_endpoint("bench", "engine-0", "engine", "local", 0)])
        for f in fleets.values():
            if f.security is not None and f.security.auth:
                f.set_callers({"bench": KEY})
            f.route(entries, eps)  # same engine, a pair of gateways per variant
        extra_pids[FORWARD_AUTH] = (use_forward_auth(fleets[FORWARD_AUTH]),)
        wl = first.workload["local"]
        targets = {"direct": Target(eps[0].url, ()),
                   "workload gateway": Target(f"{wl.url}/bench/chat", (wl.proc.pid,))}
        for name, f in fleets.items():
            assert f.control is not None
            targets[name] = Target(f.service_url("bench", "chat"),
                                   (f.control.proc.pid, f.workload["local"].proc.pid, *extra_pids.get(name, ())),
                                   client_args(f))
        bare_hops = [Traefik(f"bare-{i}", first.work_dir, group=first.group) for i in range(2)]
        for t in bare_hops:
            t.wait_ready()
        bare_wl, bare_cp = bare_hops
        bare_wl.apply(bare("/bench/chat", eps[0].url, strip=True))
        bare_cp.apply(bare("/bench/chat", bare_wl.url, strip=False))
        targets["both, bare Traefik"] = Target(f"{bare_cp.url}/bench/chat", (bare_cp.proc.pid, bare_wl.proc.pid))
        samples: dict[str, list[dict]] = {name: [] for name in targets}
        for _ in range(rounds):
            for name, t in targets.items():
                before = sum(cpu_seconds(p) for p in t.gateway_pids)
                r = measure(t.url, n, concurrency, client=t.client)
                r["gateway_cpu_us"] = (sum(cpu_seconds(p) for p in t.gateway_pids) - before) / (n + 50) * 1e6
                samples[name].append(r)
    finally:
        for t in bare_hops:
            t.stop()
        for f in fleets.values():
            f.stop()
    results = {name: {k: statistics.median(s[k] for s in runs) for k in runs[0]} | {
        "failed": sum(s["failed"] for s in runs)} for name, runs in samples.items()}
    base = results["direct"]
    ratios = {name: {"rps": r["rps"] / base["rps"], "p50": r["p50_ms"] / base["p50_ms"],
                     "p99": r["p99_ms"] / base["p99_ms"]} for name, r in results.items()}
    goal = ratios[SHIPPED]
    plain, secured = results[SHIPPED], results[SECURED]
    vs_plain = {"rps": secured["rps"] / plain["rps"], "p50": secured["p50_ms"] / plain["p50_ms"],
                "gateway_cpu_us": secured["gateway_cpu_us"] - plain["gateway_cpu_us"]}
    return {"requests": n, "concurrency": concurrency, "rounds": rounds, "results": results, "ratios": ratios,
            "goal": {"rps_ratio_min": GOAL_RPS, "p50_ratio_max": GOAL_P50,
                     "met": goal["rps"] >= GOAL_RPS and goal["p50"] <= GOAL_P50, "floor": ratios[FLOOR]},
            "secured": {"vs_plain": vs_plain, "p50_ratio_max": GOAL_SECURED_P50,
                        "met": vs_plain["p50"] <= GOAL_SECURED_P50}}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("-n", type=int, default=2000, help="requests per target and round")
    p.add_argument("-c", type=int, default=8, help="concurrent clients")
    p.add_argument("--rounds", type=int, default=3, help="interleaved rounds; figures are medians")
    p.add_argument("--json", action="store_true")
    a = p.parse_args(argv)
    out = run(a.n, a.c, a.rounds)
    results, ratios = out["results"], out["ratios"]
    if a.json:
        print(json.dumps(out, indent=2))
    else:
        print(f"{a.n} requests per target x {a.rounds} interleaved rounds (medians), {a.c} concurrent clients, "
              f"mock engine on 127.0.0.1, load average {os.getloadavg()[0]:.1f}")
        print(f"{'target':<27} {'req/s':>7} {'p50 ms':>7} {'p99 ms':>7} {'failed':>6} {'gw cpu us':>9}   "
              f"{'rps ratio':>9} {'p50 ratio':>9} {'p99 ratio':>9}")
        for name, r in results.items():
            x = ratios[name]
            print(f"{name:<27} {r['rps']:>7.0f} {r['p50_ms']:>7.2f} {r['p99_ms']:>7.2f} {r['failed']:>6.0f} "
                  f"{r['gateway_cpu_us']:>9.0f}   {x['rps']:>9.2f} {x['p50']:>9.2f} {x['p99']:>9.2f}")
        verdict = "met" if out["goal"]["met"] else "NOT met"
        print(f"goal for '{SHIPPED}': >= {GOAL_RPS}x direct req/s and <= {GOAL_P50}x its p50: {verdict}")
        floor = ratios[FLOOR]
        print(f"floor ('{FLOOR}'): {floor['rps']:.2f}x req/s, {floor['p50']:.2f}x p50")
        sec = out["secured"]["vs_plain"]
        verdict = "met" if out["secured"]["met"] else "NOT met"
        print(f"'{SECURED}' vs '{SHIPPED}': {sec['rps']:.2f}x req/s, {sec['p50']:.2f}x p50, "
              f"{sec['gateway_cpu_us']:+.0f} us gateway CPU a request (goal p50 <= {GOAL_SECURED_P50}x: {verdict})")
    return 1 if any(r["failed"] for r in results.values()) else 0


if __name__ == "__main__":
    sys.exit(main())
