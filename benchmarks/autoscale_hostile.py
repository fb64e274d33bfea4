"""One autoscaling pass of the placement provider's check() over hostile engine pods: wall
time and peak memory of the process that runs it (acceptance of the fourth hardening round:
within 10 s and 300 MB for 40 hostile pods), next to the same pass over as many honest pods
(the baseline, measured in the same run).

    .venv/bin/python benchmarks/autoscale_hostile.py                 # 40 hostile pods, timeout 5 s
    .venv/bin/python benchmarks/autoscale_hostile.py --pods 80 --timeout 3
    .venv/bin/python benchmarks/autoscale_hostile.py --only untyped-flood    # one body for every pod

The fleet: one honest cluster of 4 pods and one cluster whose 40 pods (by default) each answer
a hostile /metrics body from tests/hostile/metrics.py in turn (an untyped flood of 50,000
samples, a flood of the queue gauge, histograms with negative, infinite or overflowing bounds,
NaN, 400-digit numbers, garbage, not UTF-8, ...) or the server's hostile modes (huge,
gzip-bomb, endless, dripping, deep, failing, redirecting), read through the hostile API server's pod
proxy (tests/hostile/server.py) with the TTFT window on (each pod read twice). The pass is
compute_placement() with an `autoscale` and an `observe` input, exactly as check() calls it, in
a child process whose peak RSS a launcher reads (tests/hostile/measure.py).

Prints one row per run (seconds, peak MB, the decision) and exits 1 when the hostile pass
breaks a bound or decides differently from the baseline's honest replicas alone.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.hostile.autoscale_fleet import HONEST, NOW, NS, Body, documents, news, serve  # noqa: E402
from tests.hostile.measure import run_python  # noqa: E402
from tests.hostile.metrics import HOSTILE_BODIES, HOSTILE_MODES, honest  # noqa: E402
from tests.hostile.server import HostileServer  # noqa: E402

MAX_SECONDS = 10.0
MAX_PEAK_MB = 300.0
HONEST_PODS = 4


def bodies(only: str | None) -> list[Body]:
    return [HOSTILE_BODIES.get(only, only)] if only is not None else [*HOSTILE_BODIES.values(), *HOSTILE_MODES]


def child(spec_file: str) -> int:
    """The pass itself (run in the measured child process)."""
    from providers.placement import compute_placement

    spec = json.loads(Path(spec_file).read_text())
    start = time.monotonic()
    outputs, failures = compute_placement(spec["olds"], spec["news"], now=NOW)
    seconds = time.monotonic() - start
    scaler = ((outputs or {}).get("autoscaling") or {}).get("autoscalers", {}).get(f"{NS}/chat", {})
    print(json.dumps({"seconds": seconds, "failures": [f.reason for f in failures],
                      "replicas": scaler.get("replicas"), "held": (scaler.get("held") or {}).get("reason")}))
    return 0


def one_pass(base: Path, server: HostileServer, pods: int, timeout: float, *, hostile: bool,
             only: str | None = None) -> dict[str, Any]:
    docs = documents(HONEST_PODS, pods)
    answers = bodies(only)

    def body(cluster: str, i: int) -> Body:
        return honest(3, 2, 0.5) if cluster == HONEST or not hostile else answers[i % len(answers)]

    placement = serve(server, docs, body)
    work = Path(tempfile.mkdtemp(prefix="pass-", dir=base))
    spec = {"olds": {"placement": placement.to_json()},
            "news": news(server, work / "kube", docs, timeout, ttft_window=1.0)}
    (work / "spec.json").write_text(json.dumps(spec))
    run = run_python(str(Path(__file__).resolve()), "--child", str(work / "spec.json"))
    if run.code != 0:
        return {"error": f"exit {run.code}: {run.stderr[-2000:]}", "seconds": run.seconds, "peak": run.peak_mb}
    result = json.loads(run.stdout.strip().splitlines()[-1])
    return {**result, "process_seconds": run.seconds, "peak": run.peak_mb}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pods", type=int, default=40, help="hostile pods (default 40)")
    parser.add_argument("--timeout", type=float, default=5.0, help="the pass's read timeout in seconds (default 5)")
    parser.add_argument("--only", choices=[*HOSTILE_BODIES, *HOSTILE_MODES],
                        help="every hostile pod answers this body or mode (default: each in turn)")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        return child(args.child)
    base = Path(tempfile.mkdtemp(prefix="autoscale-hostile-"))
    server = HostileServer().start()
    try:
        baseline = one_pass(base, server, args.pods, args.timeout, hostile=False)
        hostile = one_pass(base, server, args.pods, args.timeout, hostile=True, only=args.only)
    finally:
        server.stop()
        shutil.rmtree(base, ignore_errors=True)
    print(f"{'pass':<10} {'check() s':>10} {'process s':>10} {'peak MB':>8}  decision")
    failed = False
    for name, row in (("honest", baseline), ("hostile", hostile)):
        if "error" in row:
            print(f"{name:<10} {row['error']}")
            failed = True
            continue
        decision = f"{row['replicas']} replicas" + (f", held ({row['held']})" if row["held"] else "")
        print(f"{name:<10} {row['seconds']:10.2f} {row['process_seconds']:10.2f} {row['peak']:8.0f}  {decision}"
              + (f"; failures: {row['failures']}" if row["failures"] else ""))
    if not failed:
        over = hostile["seconds"] > MAX_SECONDS or hostile["peak"] > MAX_PEAK_MB or hostile["failures"]
        if over:
            print(f"\nOVER: the hostile pass must stay within {MAX_SECONDS:g} s and {MAX_PEAK_MB:g} MB, "
                  "without a failure")
        failed = bool(over)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
