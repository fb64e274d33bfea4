"""`pulumi preview` at scale on the real engine: our program on the
render stack against the engine's own floor, measured in the same run.

Every run gets a throwaway `file://` backend and PULUMI_HOME under a temp directory and a
throwaway stack whose config file is removed again (also on Ctrl-C); the whole process
tree of each `pulumi` run is measured and stopped (benchmarks/proctree.py).
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from proctree import TreeRun, run_tree

REPO = Path(__file__).resolve().parents[1]
FLOOR = REPO / "benchmarks" / "floor"
RENDER_STACK = REPO / "stacks" / "Pulumi.render.yaml"
# The engine serializes the whole snapshot after every step, even in a preview, where the
# result is discarded: O(resources^2). PULUMI_SKIP_CHECKPOINTS (the engine's own switch,
# pulumi/pulumi#10668) keeps only the final one. Both engine settings are measured.
SKIP_CHECKPOINTS = {"PULUMI_SKIP_CHECKPOINTS": "true"}


def engine_env() -> dict[str, str]:
    """The environment scripts/engine-env sets up; SystemExit with its reason when the
    tools are not built."""
    script = f'set -e; out="$({shlex.quote(str(REPO / "scripts" / "engine-env"))})"; eval "$out"; env -0'
    proc = subprocess.run(["bash", "-c", script], capture_output=True, text=True, cwd=REPO)
    if proc.returncode != 0:
        raise SystemExit(f"the real Pulumi engine is not available: {proc.stderr.strip()}")
    return dict(kv.split("=", 1) for kv in proc.stdout.split("\0") if "=" in kv)


@dataclass
class Preview:
    label: str
    resources: int          # in every stack of the run
    run: TreeRun
    stacks: int = 1

    @property
    def ms_per_resource(self) -> float:
        return 1000 * self.run.wall / max(1, self.resources)


def created(stdout: str) -> int:
    """Resources a preview would create, from its summary (`+ N to create`)."""
    found = re.search(r"\+\s+(\d+) to create", stdout)
    return int(found.group(1)) if found else 0


class Workspace:
    """A temp directory with a `file://` backend and PULUMI_HOME, for throwaway stacks of a
    project directory (ours: the repository; the floor's: benchmarks/floor)."""

    def __init__(self, base: Mapping[str, str], root: Path) -> None:
        self.root = root
        (root / "state").mkdir(parents=True, exist_ok=True)
        (root / "home").mkdir(exist_ok=True)
        self.env = {**base, "PULUMI_BACKEND_URL": f"file://{root / 'state'}", "PULUMI_HOME": str(root / "home"),
                    "PULUMI_CONFIG_PASSPHRASE": base.get("PULUMI_CONFIG_PASSPHRASE") or "modelplane-benchmark"}
        self.config_files: list[Path] = []

    def init(self, project: Path, config: Mapping[str, Any], config_dir: Path | None = None) -> str:
        """A new stack of `project` with `config`; returns its name."""
        name = f"bench-{uuid.uuid4().hex[:10]}"
        path = (config_dir or project) / f"Pulumi.{name}.yaml"
        path.write_text("# Throwaway stack of benchmarks/scale.py; removed when it ends.\n"
                        + yaml.safe_dump({"config": dict(config)}, sort_keys=True))
        self.config_files.append(path)
        subprocess.run(["pulumi", "stack", "init", name, "--non-interactive", "--secrets-provider", "passphrase"],
                       cwd=project, env=self.env, check=True, capture_output=True, timeout=300)
        return name

    def preview(self, label: str, project: Path, stack: str, *, timeout: float,
                extra_env: Mapping[str, str] | None = None) -> Preview:
        run = run_tree(["pulumi", "preview", "--stack", stack, "--non-interactive", "--color", "never",
                        "--suppress-outputs"],
                       cwd=str(project), env={**self.env, **(extra_env or {})}, timeout=timeout)
        if run.returncode != 0 and not run.timed_out:
            raise RuntimeError(f"{label}: pulumi preview failed:\n{run.stdout[-3000:]}\n{run.stderr[-3000:]}")
        return Preview(label, created(run.stdout), run)

    def close(self) -> None:
        for path in self.config_files:
            path.unlink(missing_ok=True)
            # shard stacks the split driver made next to a fleet stack (`<name>.<shard>`)
            for shard in path.parent.glob(path.name.removesuffix(".yaml") + ".*.yaml"):
                shard.unlink(missing_ok=True)
        shutil.rmtree(self.root, ignore_errors=True)


@contextlib.contextmanager
def workspace(env: Mapping[str, str]) -> Iterator[Workspace]:
    ws = Workspace(env, Path(tempfile.mkdtemp(prefix="modelplane-scale-")))
    try:
        yield ws
    finally:
        ws.close()


def render_stack_config(manifests: Path, render_dir: Path, **extra: Any) -> dict[str, Any]:
    config = dict((yaml.safe_load(RENDER_STACK.read_text()) or {}).get("config") or {})
    config.update({"modelplane:manifests": str(manifests), "modelplane:renderDir": str(render_dir)})
    config.update({f"modelplane:{k}": v for k, v in extra.items()})
    return config


def preview_ours(ws: Workspace, manifests: Path, *, timeout: float, extra_env: Mapping[str, str] | None = None,
                 label: str = "ours, one stack") -> Preview:
    stack = ws.init(REPO, render_stack_config(manifests, ws.root / "render-ours"), REPO / "stacks")
    return ws.preview(label, REPO, stack, timeout=timeout, extra_env=extra_env)


def preview_floor(ws: Workspace, resources: int, *, timeout: float,
                  extra_env: Mapping[str, str] | None = None) -> Preview:
    """N plain ConfigMaps; N + 2 (stack, provider) resources in all, like ours' count."""
    config = {"modelplane-floor:resources": max(0, resources - 2),
              "modelplane-floor:renderDir": str(ws.root / "render-floor")}
    stack = ws.init(FLOOR, config)
    return ws.preview("floor: ConfigMaps, one provider", FLOOR, stack, timeout=timeout, extra_env=extra_env)


def preview_objects(ws: Workspace, manifests: Path, *, timeout: float,
                    extra_env: Mapping[str, str] | None = None) -> Preview:
    """Our objects (what `modelplane render` writes) registered flat, one provider per
    cluster: what the objects cost without our program."""
    rendered = ws.root / "rendered"
    subprocess.run([sys.executable, "-m", "modelplane", "render", str(manifests), str(rendered)], cwd=REPO,
                   check=True, capture_output=True, env={**os.environ, "PYTHONPATH": str(REPO)})
    config = {"modelplane-floor:objects": str(rendered), "modelplane-floor:renderDir": str(ws.root / "render-objects")}
    stack = ws.init(FLOOR, config)
    return ws.preview("our objects, flat", FLOOR, stack, timeout=timeout, extra_env=extra_env)


def preview_split(ws: Workspace, manifests: Path, *, shard_size: int, parallel: int, timeout: float) -> Preview:
    """`python -m modelplane preview` of a split fleet: the fleet stack, then every shard
    stack (`parallel` at once); resources summed over all stacks. Timed on its second
    run: the first creates the shard stacks and their config, like `stack init` for one
    stack (which is not timed either)."""
    config = render_stack_config(manifests, ws.root / "render-split", split={"role": "fleet", "shardSize": shard_size})
    stack = ws.init(REPO, config, REPO / "stacks")
    argv = [sys.executable, "-m", "modelplane", "preview", "--stack", stack, "--parallel", str(parallel)]
    env = {**ws.env, "PYTHONPATH": str(REPO)}
    setup = run_tree(argv, cwd=str(REPO), env=env, timeout=timeout)
    if setup.returncode != 0:
        raise RuntimeError(f"split preview (setup) failed:\n{setup.stdout[-3000:]}\n{setup.stderr[-3000:]}")
    run = run_tree(argv, cwd=str(REPO), env=env, timeout=timeout)
    if run.returncode != 0 and not run.timed_out:
        raise RuntimeError(f"split preview failed:\n{run.stdout[-3000:]}\n{run.stderr[-3000:]}")
    resources = sum(int(n) for n in re.findall(r"\(create (\d+)", run.stdout))
    stacks = len(re.findall(r"^\[\d+/\d+\] ", run.stdout, flags=re.M))
    label = f"ours, split: {stacks} stacks of {shard_size}, {parallel} at once"
    return Preview(label, resources, run, stacks)


def preview_floor_split(ws: Workspace, resources: int, *, stacks: int, parallel: int, timeout: float) -> Preview:
    """The floor split the way ours is: `stacks` floor stacks sharing `resources`,
    `parallel` previews at once (what splitting costs the engine itself)."""
    names = [ws.init(FLOOR, {"modelplane-floor:resources": max(0, resources // stacks - 2),
                             "modelplane-floor:renderDir": str(ws.root / f"render-floor-{i}")})
             for i in range(stacks)]
    argv = ["pulumi", "preview", "--non-interactive", "--color", "never", "--suppress-outputs", "--stack"]
    start = time.perf_counter()
    with ThreadPoolExecutor(max_workers=parallel) as pool:
        runs = list(pool.map(lambda name: run_tree([*argv, name], cwd=str(FLOOR), env={**ws.env, **SKIP_CHECKPOINTS},
                                                   timeout=timeout), names))
    wall = time.perf_counter() - start
    cpu: dict[str, float] = {}
    for r in runs:
        for role, seconds in r.cpu.items():
            cpu[role] = cpu.get(role, 0.0) + seconds
    # previews ran `parallel` at a time: the peak is about the sum of the largest ones
    peak = sum(sorted((r.peak_memory for r in runs), reverse=True)[:parallel])
    total = TreeRun(argv, max(r.returncode for r in runs), wall, peak, cpu,
                    {"stacks": len(runs)}, timed_out=any(r.timed_out for r in runs))
    return Preview(f"floor, split: {stacks} stacks, {parallel} at once", sum(created(r.stdout) for r in runs), total)


def summary(p: Preview) -> dict[str, Any]:
    return {"label": p.label, "resources": p.resources, "seconds": round(p.run.wall, 2),
            "ms_per_resource": round(p.ms_per_resource, 2), "peak_mib": p.run.peak_memory >> 20,
            "cpu": {k: round(v, 2) for k, v in sorted(p.run.cpu.items())}, "processes": p.run.processes,
            "timed_out": p.run.timed_out}


def dumps(rows: list[dict[str, Any]]) -> str:
    return json.dumps(rows, indent=1)


@dataclass
class Applied:
    label: str
    run: TreeRun
    states: dict[str, dict[str, Any]]      # stack -> `pulumi stack export`


def export(ws: Workspace, project: Path, stack: str) -> dict[str, Any]:
    out = subprocess.run(["pulumi", "stack", "export", "--stack", stack], cwd=project, env=ws.env,
                         capture_output=True, text=True, check=True, timeout=600).stdout
    return dict(json.loads(out))


def up_ours(ws: Workspace, manifests: Path, *, timeout: float, skip_checkpoints: bool) -> Applied:
    stack = ws.init(REPO, render_stack_config(manifests, ws.root / "render-up"), REPO / "stacks")
    run = run_tree(["pulumi", "up", "--yes", "--skip-preview", "--stack", stack, "--non-interactive", "--color",
                    "never", "--suppress-outputs", "--suppress-progress"], cwd=str(REPO),
                   env={**ws.env, **(SKIP_CHECKPOINTS if skip_checkpoints else {})}, timeout=timeout)
    if run.returncode != 0 and not run.timed_out:
        raise RuntimeError(f"pulumi up failed:\n{run.stdout[-3000:]}\n{run.stderr[-3000:]}")
    return Applied("ours, one stack", run, {} if run.timed_out else {stack: export(ws, REPO, stack)})


def up_split(ws: Workspace, manifests: Path, *, shard_size: int, parallel: int, timeout: float,
             skip_checkpoints: bool) -> Applied:
    config = render_stack_config(manifests, ws.root / "render-split-up",
                                 split={"role": "fleet", "shardSize": shard_size})
    stack = ws.init(REPO, config, REPO / "stacks")
    argv = [sys.executable, "-m", "modelplane", "up", "--stack", stack, "--parallel", str(parallel)]
    run = run_tree([*argv, "--skip-checkpoints"] if skip_checkpoints else argv, cwd=str(REPO),
                   env={**ws.env, "PYTHONPATH": str(REPO)}, timeout=timeout)
    if run.returncode != 0 and not run.timed_out:
        raise RuntimeError(f"split up failed:\n{run.stdout[-3000:]}\n{run.stderr[-3000:]}")
    names = re.findall(r"^\[\d+/\d+\] (\S+): ok", run.stdout, flags=re.M)
    return Applied(f"ours, split: {len(names)} stacks of {shard_size}, {parallel} at once", run,
                   {} if run.timed_out else {name: export(ws, REPO, name) for name in names})


def state_sizes(applied: Applied) -> dict[str, int]:
    """Bytes of the stacks' state, in parts: the placement resource (its fleet, its
    placement), the stack outputs, the Kubernetes objects, everything else."""
    sizes = {"total": 0, "placement resource": 0, "  its fleet manifests": 0, "  its placement": 0,
             "stack outputs": 0, "kubernetes objects": 0}
    for state in applied.states.values():
        resources = state.get("deployment", {}).get("resources") or []
        sizes["total"] += len(json.dumps(state))
        for r in resources:
            size = len(json.dumps(r))
            if r["type"] == "pulumi-python:dynamic/modelplane:FleetPlacement":
                sizes["placement resource"] += size
                for part in (r.get("inputs") or {}, r.get("outputs") or {}):
                    sizes["  its fleet manifests"] += len(json.dumps(part.get("fleet"))) if "fleet" in part else 0
                    sizes["  its placement"] += len(json.dumps(part.get("placement")))
            elif r["type"] == "pulumi:pulumi:Stack":
                sizes["stack outputs"] += len(json.dumps(r.get("outputs") or {}))
            elif r["type"].startswith("kubernetes:") and not r["type"].startswith("pulumi:providers"):
                sizes["kubernetes objects"] += size
    return sizes
