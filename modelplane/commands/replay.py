"""`modelplane replay TRACE`: a Mooncake-format request trace replayed over a simulated fleet
(modelplane.kvroute: the engine model, a router, the discrete-event simulator; no process, no socket):
time to first token p50/p90/p99, throughput, the prefix hit rate counted at the engines and each
cluster's share. The fleet is `--clusters N --replicas M` (equal weights, or `--weights`), or the
clusters and ModelService weights a manifest directory places (`--manifests DIR --service NS/NAME`).
Exit 0, or 2 on invalid input. The real Traefik data path is not replayed (docs/kv-routing.md)."""

from __future__ import annotations

import argparse
import math
import sys

from modelplane.commands.output import JSON, YAML, add_output, dump
from modelplane.commands.parsers import Subparsers
from modelplane.json_types import JsonObject

MAX_FLEET = 1000
MAX_SPEEDUP = 1e4


def _positive_int(name: str, high: int) -> type[int]:
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{name} must be an integer") from None
        if not 1 <= value <= high:
            raise argparse.ArgumentTypeError(f"{name} must be within 1..{high}")
        return value
    return parse  # type: ignore[return-value]


def _positive_float(name: str, high: float) -> type[float]:
    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{name} must be a number") from None
        if not (math.isfinite(value) and 0 < value <= high):
            raise argparse.ArgumentTypeError(f"{name} must be a number in (0, {high:g}]")
        return value
    return parse  # type: ignore[return-value]


def add_parser(subparsers: Subparsers) -> None:
    from modelplane.kvroute.routers import ROUTERS

    p = subparsers.add_parser(
        "replay", help="replay a request trace over a simulated fleet and compare routers",
        description="Replay a Mooncake-format JSONL trace (timestamp ms, input_length, output_length, hash_ids) "
                    "over simulated clusters of vLLM-like engines (a KV cache of blocks with LRU eviction, prefill "
                    "per uncached token, decode per output token, a batch limit) and print TTFT p50/p90/p99, "
                    "throughput, the prefix hit rate counted at the engines and per-cluster shares.")
    p.add_argument("trace", metavar="TRACE", help="the trace file (JSONL, Mooncake format)")
    p.add_argument("--router", choices=sorted(ROUTERS), default="cache-aware", help="default: cache-aware")
    p.add_argument("--clusters", type=_positive_int("--clusters", MAX_FLEET), default=4, help="default: 4")
    p.add_argument("--replicas", type=_positive_int("--replicas", MAX_FLEET), default=4,
                   help="replicas per cluster (default: 4)")
    p.add_argument("--weights", metavar="W,W,...", help="one weight per cluster (default: equal)")
    p.add_argument("--manifests", metavar="MANIFEST_DIR",
                   help="take clusters, replicas and weights from the placement of this fleet's --service")
    p.add_argument("--service", metavar="NS/NAME", help="the ModelService of --manifests (default: the only one)")
    p.add_argument("--limit", type=_positive_int("--limit", 10_000_000), help="replay the first N requests only")
    p.add_argument("--speedup", type=_positive_float("--speedup", MAX_SPEEDUP), default=1.0,
                   help="divide the trace's arrival times by this (default: 1, as recorded)")
    p.add_argument("--kv-blocks", type=_positive_int("--kv-blocks", 10 ** 8), metavar="N",
                   help="KV cache capacity of each replica in blocks (default: 860, an H100 with Llama-3-8B)")
    add_output(p, (JSON, YAML), what="the result")
    p.set_defaults(func=run)


def _weights(text: str, clusters: int) -> list[float]:
    try:
        values = [float(w) for w in text.split(",")]
    except ValueError:
        raise ValueError("--weights: comma-separated numbers, one per cluster") from None
    if len(values) != clusters or any(not math.isfinite(w) or w < 0 for w in values) or not any(values):
        raise ValueError(f"--weights: {clusters} finite, non-negative numbers, at least one positive")
    return values


def _manifest_fleet(path: str, service: str | None) -> list[tuple[str, int, float]]:
    """(cluster, replicas, weight) of the ModelService's active tier, as `plan` places the fleet."""
    from modelplane.commands.output import load_fleet
    from modelplane.plan.build import fleet_routes_for
    from modelplane.routing import active_tier, cluster_weights
    from modelplane.scheduler import place_fleet

    fleet = load_fleet(path)
    routes = fleet_routes_for(fleet, place_fleet(fleet))
    if service is None:
        if len(routes) != 1:
            names = ", ".join(f"{r.namespace}/{r.name}" for r in routes) or "none"
            raise ValueError(f"--service: the fleet has {len(routes)} ModelServices ({names}); name one")
        route = routes[0]
    else:
        found = [r for r in routes if f"{r.namespace}/{r.name}" == service or r.name == service]
        if len(found) != 1:
            raise ValueError(f"--service: no single ModelService {service!r} in {path}")
        route = found[0]
    tier = active_tier(route.backends)
    weights = cluster_weights(tier)
    replicas = {c: sum(1 for b in tier if b.endpoint.cluster == c) for c in weights}
    if not weights:
        raise ValueError(f"ModelService {route.namespace}/{route.name} has no placed replica in a cluster")
    return [(c, replicas[c], float(w)) for c, w in weights.items()]


def summary_text(doc: JsonObject) -> str:
    ttft = doc["ttft_s"]
    assert isinstance(ttft, dict)
    lines = [
        f"router {doc['router']}: {doc['requests']} requests, {doc['failed']} failed, {doc['retried']} retried",
        f"  TTFT p50 {ttft['p50']:.3f} s  p90 {ttft['p90']:.3f} s  p99 {ttft['p99']:.3f} s",
        f"  throughput {doc['throughput_output_tokens_per_s']:.0f} output tokens/s",
        f"  prefix hit rate {doc['prefix_hit_rate']:.1%} (engines' vllm:prefix_cache_hits / queries, tokens)",
        f"  summaries {doc['summary_bytes_each']:.0f} bytes each, {doc['summary_bytes_per_cluster_per_s']:.0f} bytes "
        "per cluster per second (one a second at most, when requests arrive)",
        "  cluster shares: " + ", ".join(f"{k} {v:.1%}" for k, v in dict(doc["cluster_shares"]).items()),
    ]
    return "\n".join(lines) + "\n"


def run(args: argparse.Namespace) -> int:
    from modelplane.kvroute.engine import EngineProfile
    from modelplane.kvroute.fleet import FleetState, build_cluster
    from modelplane.kvroute.sim import simulate
    from modelplane.kvroute.trace import TraceError, read_trace

    try:
        profile = EngineProfile(**({"kv_capacity_blocks": args.kv_blocks} if args.kv_blocks else {}))
        if args.manifests:
            spec = _manifest_fleet(args.manifests, args.service)
        else:
            weights = _weights(args.weights, args.clusters) if args.weights else [1.0] * args.clusters
            spec = [(f"c{i}", args.replicas, weights[i]) for i in range(args.clusters)]
        trace = read_trace(args.trace, limit=args.limit)
    except (TraceError, ValueError, OSError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    fleet = FleetState([build_cluster(name, n, profile, w) for name, n, w in spec], profile)
    doc = simulate(trace, fleet, args.router, speedup=args.speedup).to_json()
    sys.stdout.write(dump(doc, args.output) if args.output in (JSON, YAML) else summary_text(doc))
    return 0
