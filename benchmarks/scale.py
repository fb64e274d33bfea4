"""Scale benchmark: every figure with its baseline and ratio, from one run.

    .venv/bin/python benchmarks/scale.py                       # plan + previews at 10 and 30 clusters
    .venv/bin/python benchmarks/scale.py --sections plan       # plan only (no engine needed)
    .venv/bin/python benchmarks/scale.py --sizes 10,30,100 --timeout 3600 --json out.json

Fleets come from benchmarks/scale_fleet.py: N clusters (EKS and GKE, two pools each),
N deployments x 10 replicas of mixed shapes, caches, services.

* plan: `python -m modelplane plan` end to end (process start to last byte) on the
  1,000- and 100-cluster fleets, against a fresh process that only parses the same files
  with libyaml; where the time goes (import, load, validate, place, serialise); peak RSS.
* preview: `pulumi preview` of the render stack on the real engine, per size: our program
  in one stack, the engine's floor (as many plain ConfigMaps through one render-mode
  provider, a trivial program) and our objects registered flat (what they cost without
  our program); wall time, ms per resource, peak memory (PSS of the process tree) and CPU
  seconds per process role. With the engine's checkpoints as shipped and with
  PULUMI_SKIP_CHECKPOINTS (`--checkpoints`). And the same fleet split across stacks
  (`python -m modelplane preview`: fleet stack, then shard stacks in parallel; `--split`),
  against the floor split the same way.
* up: `pulumi up` of the render stack, one stack and split (`--up-split`), and the size
  of the state it leaves, in parts (the placement resource, stack outputs, objects).

Engine runs take minutes at 100 clusters on a 2-core machine: pick `--sizes` with care.
Every engine process is stopped when a run ends, times out or is interrupted.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import scale_engine  # noqa: E402
import scale_fleet  # noqa: E402
import scale_plan  # noqa: E402

MIB = 2**20
PLAN_GOALS = {1000: 2.0, 100: 0.5}   # seconds: plan at 1,000 clusters within 2 s, 100 within 0.5 s
PLAN_RATIO_GOAL = 3.0                # plan within 3x of parsing alone (1,000 clusters)
PLAN_RSS_GOAL = 500 * MIB            # item 4
PREVIEW_RATIO_GOAL = 1.5             # ms per resource, ours / floor (item 2)
# A split preview runs twice (the first creates the stacks) with a `pulumi` per stack:
# 100 one-cluster stacks take ~10 minutes here, and show nothing 30 did not.
MAX_SPLIT_STACKS = 40


def fleet_dir(work: Path, clusters: int) -> Path:
    path = work / f"fleet-{clusters}"
    if not path.exists():
        scale_fleet.write(scale_fleet.fleet(clusters, clusters), path)
    return path


def section_plan(work: Path, sizes: list[int], repeat: int, results: dict[str, Any]) -> None:
    print("\n## plan (seconds, best of", repeat, "fresh processes; peak RSS)")
    print(f"{'clusters':>8} {'what':<22}{'seconds':>9}{'x parse':>9}{'RSS MiB':>9}  goal")
    for clusters in sizes:
        fleet = fleet_dir(work, clusters)
        got = scale_plan.measure_plan(fleet, work, repeat)
        base = got["libyaml parse only"].seconds
        for what, t in got.items():
            goal = ""
            if what == "plan" and clusters in PLAN_GOALS:
                ok = t.seconds <= PLAN_GOALS[clusters] and (clusters != 1000 or t.seconds <= PLAN_RATIO_GOAL * base)
                goal = f"<= {PLAN_GOALS[clusters]} s" + (f" and <= {PLAN_RATIO_GOAL}x" if clusters == 1000 else "")
                goal += ": met" if ok else ": NOT met"
            if what == "plan" and clusters == 1000:
                goal += f"; RSS <= 500 MiB: {'met' if t.peak_rss <= PLAN_RSS_GOAL else 'NOT met'}"
            print(f"{clusters:>8} {what:<22}{t.seconds:>9.2f}{t.seconds / base:>9.1f}{t.peak_rss / MIB:>9.0f}  {goal}")
        phases = scale_plan.measure_phases(fleet, repeat)
        print(f"{'':>8} where the time goes: " + ", ".join(f"{k} {v:.3f}" for k, v in phases.items()))
        results.setdefault("plan", {})[str(clusters)] = {
            "runs": {k: {"seconds": v.seconds, "peak_rss_mib": v.peak_rss / MIB} for k, v in got.items()},
            "phases": phases}


def _row(p: scale_engine.Preview, fleet_resources: int, floor: scale_engine.Preview) -> str:
    cpu = ", ".join(f"{k} {v:.1f}" for k, v in sorted(p.run.cpu.items(), key=lambda kv: -kv[1]) if v >= 0.05)
    late = " TIMED OUT" if p.run.timed_out else ""
    return (f"  {p.label:<44}{p.resources:>7}{p.run.wall:>9.1f}{1000 * p.run.wall / fleet_resources:>8.1f}"
            f"{p.run.wall / floor.run.wall:>8.2f}{p.run.peak_memory / MIB:>8.0f}  cpu s: {cpu}{late}")


def section_preview(work: Path, sizes: list[int], checkpoints: dict[int, list[str]], timeout: float,
                    split: list[tuple[int, int]], results: dict[str, Any]) -> None:
    env = scale_engine.engine_env()
    print("\n## pulumi preview, render stack: a fresh stack, everything to create")
    print("  res: resources in all stacks of the run; ms/res: seconds per resource of the one-stack fleet;")
    print("  x floor: seconds / the floor's with as many resources, same run; PSS: peak of the process tree")
    print(f"  {'':<44}{'res':>7}{'seconds':>9}{'ms/res':>8}{'x floor':>8}{'PSS MiB':>8}")
    for clusters in sizes:
        fleet = fleet_dir(work, clusters)
        for mode in checkpoints[clusters]:
            extra = scale_engine.SKIP_CHECKPOINTS if mode == "skip" else {}
            print(f"{clusters} clusters, engine checkpoints: {'skipped' if extra else 'saved (the default)'}")
            with scale_engine.workspace(env) as ws:
                ours = scale_engine.preview_ours(ws, fleet, timeout=timeout, extra_env=extra)
                floor = scale_engine.preview_floor(ws, ours.resources, timeout=timeout, extra_env=extra)
                runs = [floor, scale_engine.preview_objects(ws, fleet, timeout=timeout, extra_env=extra), ours]
                # The split driver always skips checkpoints in previews.
                for size, parallel in split if mode == "skip" else []:
                    if clusters / size > MAX_SPLIT_STACKS:
                        continue
                    mine = scale_engine.preview_split(ws, fleet, shard_size=size, parallel=parallel, timeout=timeout)
                    runs.append(scale_engine.preview_floor_split(ws, ours.resources, stacks=mine.stacks,
                                                                 parallel=parallel, timeout=timeout))
                    runs.append(mine)
            for p in runs:
                print(_row(p, ours.resources, floor), flush=True)
            verdict = ours.run.wall / floor.run.wall <= PREVIEW_RATIO_GOAL
            print(f"  goal ours <= {PREVIEW_RATIO_GOAL}x the floor: {'met' if verdict else 'NOT met'} "
                  f"({ours.run.wall / floor.run.wall:.2f}x)")
            results.setdefault("preview", {}).setdefault(str(clusters), {})[mode] = [
                scale_engine.summary(p) for p in runs]


def _old_placement_bytes(fleet_path: Path) -> int:
    """What the placement resource held for this fleet before its state was made compact, computed:
    every manifest twice (inputs and outputs) and the placement twice, each unplaced
    replica with its own copy of every cluster's reason."""
    from modelplane.api import load_manifests
    from modelplane.scheduler import place_fleet
    from modelplane.scheduler.placement_types import REASONS_OF

    fleet = load_manifests(fleet_path)
    placement = place_fleet(fleet).to_json()
    for d in placement["deployments"]:
        by_index = {u["index"]: u for u in d["unplaced"]}
        for u in d["unplaced"]:
            if REASONS_OF in u:
                u["reasons"] = by_index[u.pop(REASONS_OF)]["reasons"]
    return 2 * len(json.dumps(fleet.to_documents())) + 2 * len(json.dumps(placement))


def section_up(work: Path, sizes: list[int], timeout: float, split: list[tuple[int, int]], *,
               skip_checkpoints: bool, results: dict[str, Any]) -> None:
    """`pulumi up` of a fresh render stack, one stack and split, and the state it leaves."""
    env = scale_engine.engine_env()
    mode = "skipped (--skip-checkpoints)" if skip_checkpoints else "saved after every step (the default)"
    print(f"\n## pulumi up, render stack, fresh; engine checkpoints {mode}; state after it (MB)")
    for clusters in sizes:
        fleet = fleet_dir(work, clusters)
        with scale_engine.workspace(env) as ws:
            applied = [scale_engine.up_ours(ws, fleet, timeout=timeout, skip_checkpoints=skip_checkpoints)]
            applied += [scale_engine.up_split(ws, fleet, shard_size=size, parallel=parallel, timeout=timeout,
                                              skip_checkpoints=skip_checkpoints) for size, parallel in split]
        print(f"{clusters} clusters; before item 6 the placement resource held "
              f"{_old_placement_bytes(fleet) / 1e6:.2f} MB (computed)")
        for a in applied:
            sizes_ = scale_engine.state_sizes(a)
            late = " TIMED OUT" if a.run.timed_out else ""
            print(f"  {a.label:<44}{a.run.wall:>8.1f} s  PSS {a.run.peak_memory / MIB:>6.0f} MiB{late}")
            print("    state: " + ", ".join(f"{k.strip()} {v / 1e6:.2f}" for k, v in sizes_.items()))
            results.setdefault("up", {}).setdefault(str(clusters), []).append(
                {"label": a.label, "seconds": a.run.wall, "peak_mib": a.run.peak_memory / MIB,
                 "cpu": a.run.cpu, "state_bytes": sizes_})


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sections", default="plan,preview,up",
                    help="comma-separated: plan, preview, up (default all three)")
    ap.add_argument("--plan-sizes", default="1000,100", help="cluster counts for plan (default 1000,100)")
    ap.add_argument("--sizes", default="10,30", help="cluster counts for the engine sections (default 10,30)")
    ap.add_argument("--checkpoints", choices=["skip", "save", "both"], default="both",
                    help="engine checkpoints during previews: skipped, saved (the default engine), or both")
    ap.add_argument("--save-sizes", default="10,30",
                    help="with --checkpoints both: the sizes that also run with checkpoints saved (default 10,30; "
                         "at 100 clusters that alone takes most of an hour)")
    ap.add_argument("--up-sizes", help="cluster counts for the up section (default: --sizes)")
    ap.add_argument("--up-timeout", type=float, help="seconds per up (default: --timeout)")
    ap.add_argument("--split", default="1x2,10x2",
                    help="split previews as SHARDSIZExPARALLEL, comma-separated (default 1x2,10x2; '' for none); "
                         "the driver always skips checkpoints in previews, so they run with --checkpoints skip")
    ap.add_argument("--up-split", default="10x2", help="split ups as SHARDSIZExPARALLEL (default 10x2)")
    ap.add_argument("--up-checkpoints", choices=["skip", "save"], default="save",
                    help="engine checkpoints during ups (default save, the engine's default)")
    ap.add_argument("--repeat", type=int, default=3, help="fresh processes per plan figure; the best is kept")
    ap.add_argument("--timeout", type=float, default=1800, help="seconds per engine run (default 1800)")
    ap.add_argument("--work", help="directory for generated fleets (default: a temp directory)")
    ap.add_argument("--json", help="also write every figure to this file")
    args = ap.parse_args(argv)
    sections = {s.strip() for s in args.sections.split(",") if s.strip()}
    work = Path(args.work) if args.work else Path(tempfile.mkdtemp(prefix="modelplane-scale-fleets-"))
    work.mkdir(parents=True, exist_ok=True)
    results: dict[str, Any] = {}
    if "plan" in sections:
        section_plan(work, [int(s) for s in args.plan_sizes.split(",")], args.repeat, results)
    if "preview" in sections:
        sizes = [int(s) for s in args.sizes.split(",")]
        save = {int(s) for s in args.save_sizes.split(",") if s}
        modes = {n: (["save", "skip"] if n in save else ["skip"]) if args.checkpoints == "both" else [args.checkpoints]
                 for n in sizes}
        split = [(int(a), int(b)) for a, b in (item.split("x") for item in args.split.split(",") if item)]
        section_preview(work, sizes, modes, args.timeout, split, results)
    if "up" in sections:
        up_split = [(int(a), int(b)) for a, b in (item.split("x") for item in args.up_split.split(",") if item)]
        section_up(work, [int(s) for s in (args.up_sizes or args.sizes).split(",")], args.up_timeout or args.timeout,
                   up_split,
                   skip_checkpoints=args.up_checkpoints == "skip", results=results)
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
