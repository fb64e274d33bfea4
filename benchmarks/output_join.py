"""Joining a placement-sized Output with another: `pulumi.Output.all` against
`components.outputs.joined`, in one run (a ratio; absolute seconds depend on the machine).

    .venv/bin/python benchmarks/output_join.py --replicas 100000

The placement JSON is D deployments of 10 replicas each (the shape the placement provider
returns). `Output.all` unwraps the value deeply (an Output per nested dict and list);
`joined` does not. Both results are checked equal to the value.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import pulumi  # noqa: E402

from components.outputs import joined  # noqa: E402


def placement_json(replicas: int) -> dict[str, Any]:
    return {"deployments": [{"name": f"d{i}", "namespace": "ns",
                             "replicas": [{"cluster": f"c{(i * 10 + j) % 10000}", "index": j, "pool": "gpu"}
                                          for j in range(10)]} for i in range(max(1, replicas // 10))]}


async def timed(replicas: int) -> tuple[float, float]:
    value = placement_json(replicas)
    placement = pulumi.Output.from_input("").apply(lambda _: value)
    await placement.future()
    # joined first: the deep unwrap leaves tasks behind that would run in its time
    started = time.perf_counter()
    shallow = await joined(placement, pulumi.Output.from_input(None)).future()
    flat = time.perf_counter() - started
    started = time.perf_counter()
    every = await pulumi.Output.all(placement, pulumi.Output.from_input(None)).future()
    deep = time.perf_counter() - started
    assert every is not None and shallow is not None and every[0] == value and shallow[0] is value
    return deep, flat


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--replicas", type=int, default=20000, help="replicas in the placement (default 20000)")
    args = p.parse_args()
    deep, flat = asyncio.run(timed(args.replicas))
    print(f"{args.replicas} replicas: Output.all {deep:.2f} s, joined {flat:.3f} s, "
          f"ratio {deep / max(flat, 1e-6):.0f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
