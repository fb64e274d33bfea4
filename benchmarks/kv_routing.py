"""Issue 29's acceptance in one run, in the simulator (modelplane.kvroute): the Mooncake conversation
trace over 4 clusters x 4 replicas of the calibrated engine model, every router of the harness, and
each ratio of the acceptance next to its goal.

    .venv/bin/python benchmarks/kv_routing.py                       # the defaults below
    .venv/bin/python benchmarks/kv_routing.py --speedup 10 --kv-blocks 860 -o json

* the main scenario: the trace with its arrival times divided by --speedup (default 10: the recorded
  hour carries 3.4 requests/s, ~40k prefill tokens/s, which 16 replicas of the model serve at 11%
  busy; compressed 10x round robin saturates them, the regime where routing matters; at 9 the p90
  goal against the oracle is missed, 1.30x: docs/kv-routing.md gives both),
  each replica holding --kv-blocks blocks (default 860, an H100 serving Llama-3-8B: every cache is
  full by mid-trace and about half of what it holds are blocks the trace reuses);
* the canary: the first 10,000 requests at the recorded rate over weights 30/30/30/10 (stable on
  c0..c2, canary on c3): the canary's share must be 10% +- 1 percentage point;
* failover: cluster c1 lost (refuses every connection, publishes nothing) for the middle third of the
  trace, then the same window answering 429: 0 failed requests, none placed on c1 meanwhile.

`--traefik` also times both hops through real Traefik (traefik_hops): 2 clusters x 2 live mock engines,
the first --hop-requests requests of the trace (default 2,000) one at a time through plain weighted routes
and through the kvroute plugin, the four paths interleaved request by request,
p50/p99 of each and what the plugin adds at p99 (the issue's goal: <= 1 ms on the control-plane hop).
The 2 x 2 decision agreement with the simulator is a test (tests/unit/kvroute/test_kvroute_traefik.py).

Prints a table per router and one line per goal (MET / MISSED) and exits 1 when a goal is missed."""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from modelplane.kvroute.engine import EngineProfile  # noqa: E402
from modelplane.kvroute.routers import ROUTERS  # noqa: E402
from modelplane.kvroute.sim import Fault, SimResult, run  # noqa: E402
from modelplane.kvroute.trace import read_trace  # noqa: E402

TRACE = ROOT.parent / "shared" / "traces" / "mooncake-conversation.jsonl"


def _row(res: SimResult, seconds: float) -> str:
    return (f"{res.router:13s} {res.percentile(50):8.3f} {res.percentile(90):8.3f} {res.percentile(99):8.3f} "
            f"{res.hit_rate:8.1%} {res.throughput:9.0f} {res.failed:6d}  {seconds:5.1f}s  "
            + " ".join(f"{k}={v:.1%}" for k, v in res.shares().items()))


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--trace", default=str(TRACE))
    p.add_argument("--speedup", type=float, default=10.0)
    p.add_argument("--kv-blocks", type=int, default=860)
    p.add_argument("-o", "--output", choices=("json",), default=None)
    p.add_argument("--traefik", action="store_true", help="also time both hops through real Traefik")
    p.add_argument("--hop-requests", type=int, default=2000,
                   help="requests of the trace timed through each Traefik path (default 2000; more steadies the p99)")
    args = p.parse_args()
    trace = read_trace(args.trace)
    profile = EngineProfile(kv_capacity_blocks=args.kv_blocks)
    results: dict[str, SimResult] = {}
    print(f"trace {args.trace}: {len(trace)} requests, speedup {args.speedup:g}, 4 clusters x 4 replicas, "
          f"{args.kv_blocks} KV blocks a replica")
    print(f"{'router':13s} {'p50 s':>8s} {'p90 s':>8s} {'p99 s':>8s} {'hit':>8s} {'tok/s':>9s} {'failed':>6s}")
    for name in ROUTERS:
        t0 = time.perf_counter()
        results[name] = run(trace, clusters=4, replicas=4, router=name, profile=profile, speedup=args.speedup)
        print(_row(results[name], time.perf_counter() - t0))

    canary = run(trace[:10_000], clusters=4, replicas=4, router="cache-aware", profile=profile,
                 weights=(0.3, 0.3, 0.3, 0.1))
    third = len(trace) // 3
    window = (trace[third].arrival_s / args.speedup, trace[2 * third].arrival_s / args.speedup)
    faults: dict[int, SimResult] = {}
    for status in (503, 429):
        faults[status] = run(trace, clusters=4, replicas=4, router="cache-aware", profile=profile,
                             speedup=args.speedup, faults=[Fault("c1", window[0], window[1], status)])
    placed_on_c1 = {
        status: sum(1 for r, pl in zip(trace, res.placements, strict=True)
                    if pl is not None and pl[0] == "c1" and window[0] <= r.arrival_s / args.speedup < window[1])
        for status, res in faults.items()}

    ours, oracle, wrr, phash = (results[n] for n in ("cache-aware", "oracle", "wrr", "prefix-hash"))
    canary_share = canary.shares().get("c3", 0.0)
    goals = [
        ("prefix hit rate vs oracle", ours.hit_rate / oracle.hit_rate, ">= 0.90",
         ours.hit_rate >= 0.9 * oracle.hit_rate),
        ("p90 TTFT vs oracle", ours.percentile(90) / oracle.percentile(90), "<= 1.25",
         ours.percentile(90) <= 1.25 * oracle.percentile(90)),
        ("p90 TTFT: wrr / ours", wrr.percentile(90) / ours.percentile(90), ">= 20",
         wrr.percentile(90) >= 20 * ours.percentile(90)),
        ("p90 TTFT: prefix-hash / ours", phash.percentile(90) / ours.percentile(90), ">= 2",
         phash.percentile(90) >= 2 * ours.percentile(90)),
        ("throughput: ours / wrr", ours.throughput / wrr.throughput, ">= 2", ours.throughput >= 2 * wrr.throughput),
        ("canary share (10,000 requests, 90/10)", canary_share, "0.10 +- 0.01", abs(canary_share - 0.10) <= 0.01),
        ("c1 lost mid-replay: failed requests", faults[503].failed, "0",
         faults[503].failed == 0 and placed_on_c1[503] == 0),
        ("c1 answering 429 mid-replay: failed requests", faults[429].failed, "0",
         faults[429].failed == 0 and placed_on_c1[429] == 0),
    ]
    print()
    for name, value, goal, met in goals:
        print(f"{name:46s} {value:10.3f}   goal {goal:14s} {'MET' if met else 'MISSED'}")
    if not args.traefik:
        print(f"{'control-plane hop p99 through real Traefik':46s} {'-':>10s}   {'':19s} run with --traefik")
    print(f"{'Traefik vs simulator decisions (2x2, 2,000)':46s} {'-':>10s}   {'':19s} "
          "tests/unit/kvroute/test_kvroute_traefik.py")
    if args.traefik:
        hops = traefik_hops(trace[:args.hop_requests])
        print(f"\nthrough real Traefik, {min(args.hop_requests, len(trace)):,} requests one at a time, the paths "
              "interleaved (2 clusters x 2 live engines):")
        for label, (p50, p99) in hops.items():
            print(f"  {label:18s} p50 {p50:6.2f} ms  p99 {p99:6.2f} ms")
        for hop in ("workload", "control"):
            added = hops[f"{hop} kvroute"][1] - hops[f"{hop} plain"][1]
            goal = "   goal <= 1 ms: " + ("MET" if added <= 1.0 else "MISSED") if hop == "control" else ""
            print(f"  the plugin adds {added:+.2f} ms at p99 on the {hop} hop{goal}")
    print(f"\nsummaries: {ours.to_json()['summary_bytes_each']:.0f} bytes each, at most one a second per cluster; "
          f"measured {ours.summary_bytes_per_cluster_s:.0f} bytes per cluster per second; "
          f"refused {ours.summaries_refused}")
    print(f"failover: {faults[503].retried} requests retried on another cluster when c1 was lost, "
          f"{faults[429].retried} when it answered 429; placed on c1 meanwhile: {placed_on_c1}")
    if args.output == "json":
        print(json.dumps({"routers": {n: r.to_json() for n, r in results.items()}, "canary": canary.to_json(),
                          "lost": faults[503].to_json(), "busy": faults[429].to_json(),
                          "goals": [{"name": n, "value": v, "goal": g, "met": m} for n, v, g, m in goals]}, indent=2))
    return 0 if all(m for *_, m in goals) else 1


def traefik_hops(trace: list) -> dict[str, tuple[float, float]]:
    """p50/p99 milliseconds of one request at a time through each hop, plain and with the kvroute plugin
    (the four paths interleaved request by request), in front of 2 clusters x 2 live mock engines (the KV
    model, waits scaled to 0):

    * workload hop: a plain weighted route to cluster c0's engines, and c0's kvroute (workload mode);
    * control-plane hop: a plain weighted route to the two clusters' gateways, and kvroute in its
      control-plane mode (summaries read once a second); both then cross the clusters' kvroute.

    Three Traefik processes: one control plane, one workload gateway per cluster.

    Every process is stopped after."""
    import tempfile

    import httpx

    from modelplane.gateway.kvroute import KV_PLUGIN
    from modelplane.runtime.process import Engine, Traefik

    out: dict[str, tuple[float, float]] = {}
    with tempfile.TemporaryDirectory(prefix="kv-hop-") as tmp:
        engines = {f"c{c}r{r}": Engine(f"c{c}r{r}", Path(tmp), deployment="chat",
                                       extra=["--kv-blocks", "860", "--kv-time-scale", "0"])
                   for c in range(2) for r in range(2)}
        gateways = [Traefik(f"c{c}", Path(tmp), kvroute=True) for c in range(2)]   # the workload gateways
        control = Traefik("control", Path(tmp), kvroute=True)
        traefiks = [*gateways, control]
        try:
            for e in engines.values():
                e.wait_ready()
            for t in traefiks:
                t.wait_ready()

            def route(prefix: str, middlewares: list[str], service: str) -> dict:
                return {"entryPoints": ["web"], "rule": f"PathPrefix(`/{prefix}/`)", "middlewares": middlewares,
                        "service": service}

            strip = {"strip": {"stripPrefix": {"prefixes": ["/w-plain", "/cp-plain", "/cp-kv", "/kv"]}}}
            for c, gw in enumerate(gateways):
                servers = [{"url": engines[f"c{c}r{r}"].url} for r in range(2)]
                gw.apply({"http": {
                    "routers": {"plain": route("w-plain", ["strip"], "engines"), "kv": route("kv", ["strip", "kv"],
                                                                                          "noop@internal"),
                                "all": {"entryPoints": ["web"], "rule": "PathPrefix(`/`)", "priority": 1,
                                        "middlewares": ["kv"], "service": "noop@internal"}},
                    "middlewares": {**strip, "kv": {"plugin": {KV_PLUGIN: {
                        "replicas": [s["url"] for s in servers], "kvBlocks": 860, "cluster": f"c{c}"}}}},
                    "services": {"engines": {"loadBalancer": {"servers": servers}}}}}, timeout=60)
            control.apply({"http": {
                "routers": {"plain": route("cp-plain", ["strip"], "gateways"),
                            "kv": route("cp-kv", ["strip", "cp"], "noop@internal")},
                "middlewares": {**strip, "cp": {"plugin": {KV_PLUGIN: {
                    "clusters": [{"name": f"c{c}", "url": gw.url, "weight": 1} for c, gw in enumerate(gateways)]}}}},
                "services": {"gateways": {"loadBalancer": {"servers": [{"url": gw.url} for gw in gateways]}}}}},
                timeout=60)
            paths = {"workload plain": f"{gateways[0].url}/w-plain", "workload kvroute": f"{gateways[0].url}/kv",
                     "control plain": f"{control.url}/cp-plain", "control kvroute": f"{control.url}/cp-kv"}
            # Interleaved: each request of the trace goes through every path in turn, the order
            # rotating from one request to the next, so a stall of the shared machine (what makes a
            # p99 here) falls on the paths alike instead of on whichever ran during it.
            times: dict[str, list[float]] = {label: [] for label in paths}
            labels = list(paths)
            with httpx.Client(timeout=10) as client:
                for n, r in enumerate(trace):
                    body = {"messages": [], "kv_block_hashes": list(r.blocks), "prompt_tokens": r.input_tokens,
                            "max_tokens": r.output_tokens}
                    for label in labels[n % len(labels):] + labels[:n % len(labels)]:
                        t0 = time.perf_counter()
                        answer = client.post(f"{paths[label]}/v1/chat/completions", json=body)
                        times[label].append((time.perf_counter() - t0) * 1000)
                        if answer.status_code != 200:
                            raise SystemExit(f"{label}: status {answer.status_code}")
            for label, taken in times.items():
                taken.sort()
                out[label] = (taken[len(taken) // 2], taken[min(len(taken) - 1, int(len(taken) * 0.99))])
        finally:
            for t in traefiks:
                t.stop()
            for e in engines.values():
                e.stop()
    return out


if __name__ == "__main__":
    sys.exit(main())
