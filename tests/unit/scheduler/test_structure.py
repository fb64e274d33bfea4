"""The scheduler's shape: one fill loop and one reserve, no import circle, no layer below
the renderers importing them, and a new plugin as one file plus one registry line (the
worked examples of docs/scheduler.md, run as written)."""

from __future__ import annotations

import ast
import re
from pathlib import Path
from types import ModuleType

import pytest

from modelplane.scheduler import fill, place_fleet, plugins
from modelplane.scheduler.plugins.spread_before_pack import SpreadBeforePack

from .helpers import H100, cluster, deployment, load, of, pool, where

ROOT = Path(__file__).resolve().parents[3]
SCHEDULER = ROOT / "modelplane" / "scheduler"
DOCS = ROOT / "docs" / "scheduler.md"


def _module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports(path: Path, modules: set[str] | None = None) -> set[str]:
    """Every module of ours the file imports, at any depth of the file (function-level too).
    `from pkg import mod` imports `pkg.mod` when that is one of `modules`, else `pkg`."""
    name = _module_name(path)
    package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
    out = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names if a.name.startswith("modelplane")}
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - node.level + 1]
                module = ".".join([*base, node.module] if node.module else base)
            else:
                module = node.module or ""
            if module.startswith("modelplane"):
                subs = {f"{module}.{a.name}" for a in node.names} & (modules or set())
                out |= subs if subs and len(subs) == len(node.names) else {module, *subs}
    return out


def _graph(paths: list[Path]) -> dict[str, set[str]]:
    names = {_module_name(p): p for p in paths}
    return {n: {m for m in _imports(p, set(names)) if m in names and m != n} for n, p in names.items()}


def test_there_is_one_fill_loop_and_one_reserve():
    """Found by name: the fill stage's loop and its reserve are the only ones. The moves
    back reserve through the same function; no module keeps a second fill."""
    loops, reserves = [], []
    for path in SCHEDULER.rglob("*.py"):
        for node in ast.parse(path.read_text()).body:          # module-level functions only
            if isinstance(node, ast.FunctionDef):
                if re.fullmatch(r"fill\w*", node.name) and any(isinstance(n, ast.While) for n in ast.walk(node)):
                    loops.append((path.name, node.name))
                if re.fullmatch(r"(reserve|.*_reserve)", node.name):
                    reserves.append((path.name, node.name))
    assert loops == [("fill.py", "fill_deployment")]
    assert reserves == [("fill.py", "reserve")]
    assert "from .fill import" in (SCHEDULER / "preferences.py").read_text()
    assert not (SCHEDULER / "policy_fill.py").exists() and not (SCHEDULER / "policies.py").exists()
    assert callable(fill.fill_deployment) and callable(fill.reserve)


def test_no_module_of_the_scheduler_imports_another_in_a_circle():
    graph = _graph(sorted(SCHEDULER.rglob("*.py")))
    seen: dict[str, int] = {}          # 1: on the path, 2: done

    def visit(node: str, path: list[str]) -> None:
        seen[node] = 1
        for nxt in sorted(graph[node]):
            if seen.get(nxt) == 1:
                pytest.fail("import circle: " + " -> ".join([*path[path.index(nxt):], nxt]))
            if nxt not in seen:
                visit(nxt, [*path, nxt])
        seen[node] = 2

    for node in sorted(graph):
        if node not in seen:
            visit(node, [node])


def test_the_framework_imports_no_plugin():
    """The cycle, the stages and the fill know plugins only through hooks and Key slots: no
    module of the scheduler outside plugins/ imports a plugin module, at any depth of the file.
    The package's __init__ (place_fleet, the composition root) hands the registry to
    pipeline.start and imports the registry alone."""
    paths = sorted(SCHEDULER.rglob("*.py"))
    names = {_module_name(p) for p in paths}
    framework = [p for p in paths if "plugins" not in p.relative_to(SCHEDULER).parts and p.name != "__init__.py"]
    assert {p.name for p in framework} >= {"cycle.py", "fill.py", "feasibility.py", "pipeline.py", "preferences.py",
                                           "retain.py", "results.py", "growth.py", "queues.py"}
    plugin_modules = "modelplane.scheduler.plugins"
    found = {str(p.relative_to(ROOT)): sorted(m for m in _imports(p, names) if m.startswith(plugin_modules))
             for p in framework}
    assert {p: m for p, m in found.items() if m} == {}
    root = _imports(SCHEDULER / "__init__.py", names)
    assert sorted(m for m in root if m.startswith(plugin_modules)) == [plugin_modules]


# The layers the renderers build on (docs/design.md: data flows one way).
BELOW_RENDER = ["api", "scheduler", "cel.py", "celcost.py", "cel_grammar.py", "quantity.py", "semver.py",
                "storage.py", "naming.py", "vocabulary.py", "limits.py", "gcpause.py"]


def test_no_layer_below_the_renderers_imports_them():
    """The one ground-floor vocabulary (modelplane.vocabulary) holds what they used to
    reach up into render/ for: no arrow runs back up."""
    paths = []
    for name in BELOW_RENDER:
        target = ROOT / "modelplane" / name
        paths += sorted(target.rglob("*.py")) if target.is_dir() else [target] if target.exists() else []
    assert len(paths) > 30
    offenders = {str(p.relative_to(ROOT)): sorted(m for m in _imports(p) if m.startswith("modelplane.render"))
                 for p in paths}
    assert {p: m for p, m in offenders.items() if m} == {}


# -- the worked examples of docs/scheduler.md ------------------------------------------

def _doc_plugin(file: str) -> ModuleType:
    """The python block of the docs that starts with `# modelplane/scheduler/plugins/<file>`,
    loaded as a module."""
    blocks = re.findall(r"```python\n(.*?)```", DOCS.read_text(), flags=re.S)
    source = next(b for b in blocks if b.startswith(f"# modelplane/scheduler/plugins/{file}\n"))
    module = ModuleType(f"doc_plugin_{file[:-3]}")
    exec(compile(source, str(DOCS), "exec"), module.__dict__)
    return module


def _registered(monkeypatch: pytest.MonkeyPatch, plugin: type, before: type | None = None) -> None:
    """The one registry line: `plugin` in REGISTRY, before `before` (at the end if None)."""
    registry = list(plugins.REGISTRY)
    registry.insert(registry.index(before) if before else len(registry), plugin)
    monkeypatch.setattr(plugins, "REGISTRY", tuple(registry))


def _cost_fleet() -> list[dict]:
    return [H100, *(cluster(name, pool("p", "h100", 2), labels={"example.org/cost": cost})
                    for name, cost in (("a", "30"), ("b", "10"), ("c", "20"))),
            deployment("m", 3)]


def test_the_cost_plugin_of_the_docs_is_one_file_and_one_registry_line(monkeypatch):
    assert where(place_fleet(load(_cost_fleet()), accounting="Node"), "m") == ["a#0", "b#0", "c#0"]
    cost = _doc_plugin("cost.py")
    _registered(monkeypatch, cost.Cost, before=SpreadBeforePack)
    placed = place_fleet(load(_cost_fleet()), accounting="Node")
    # cheapest first: b holds two, then c; spread-before-pack breaks no tie here
    assert where(placed, "m") == ["b#0", "b#1", "c#0"]
    # without the label the plugin binds nowhere: the base placement, untouched
    plain = [H100, cluster("a", pool("p", "h100", 2)), cluster("b", pool("p", "h100", 2)), deployment("m", 3)]
    assert where(place_fleet(load(plain), accounting="Node"), "m") == ["a#0", "a#1", "b#0"]


def test_the_replica_cap_sketch_of_the_docs_caps_the_count_and_says_so(monkeypatch):
    replica_cap = _doc_plugin("replica_cap.py")
    _registered(monkeypatch, replica_cap.ReplicaCap)
    pools = [H100, cluster("a", pool("p", "h100", 4)), cluster("b", pool("p", "h100", 4))]
    capped = of(place_fleet(load([*pools, deployment("m", 5, labels={"example.org/max-replicas": "2"})]),
                            accounting="Node"), "m")
    assert (len(capped.replicas), capped.desired) == (2, 2)
    c = capped.condition("Capped")
    assert (c.status, c.reason, c.message) == ("True", "MaxReplicas",
                                               "2 of 5 replicas: example.org/max-replicas is 2")
    under = of(place_fleet(load([*pools, deployment("m", 1, labels={"example.org/max-replicas": "2"})]),
                           accounting="Node"), "m")
    assert len(under.replicas) == 1 and under.condition("Capped").status == "False"
    # no label: the plugin binds nowhere, the spec's count stands and no condition is added
    plain = of(place_fleet(load([*pools, deployment("m", 5)]), accounting="Node"), "m")
    assert len(plain.replicas) == 5 and plain.condition("Capped") is None


@pytest.mark.parametrize("example", sorted(p.name for p in (ROOT / "examples").iterdir() if p.is_dir()))
def test_nothing_a_placement_builds_is_cyclic(example):
    """place_fleet pauses the collector, so what it builds must be freed by reference
    counting: a cycle (a binding and its deployment pointing at each other) left a
    1,000-cluster plan with 80,000 objects for a full collection to find. Also across
    plans fed back as --previous, with an outage, and for candidate_clusters. (CEL's
    first evaluation of a selector is not ours: it runs once, before counting.)"""
    import gc

    from modelplane.api import load_manifests
    from modelplane.scheduler import FleetPlacement, Outage, candidate_clusters

    fleet = load_manifests(ROOT / "examples" / example)
    place_fleet(fleet)      # CEL evaluates each selector once (its errors hold frames): cached from here
    gc.collect()
    enabled = gc.isenabled()
    gc.disable()
    try:
        first = place_fleet(fleet)
        again = place_fleet(fleet, previous=FleetPlacement.from_json(first.to_json()),
                            outages={name: Outage("down", evacuate=True) for name in list(fleet.clusters)[:1]})
        candidate_clusters(fleet)
        assert gc.collect() == 0
        assert again is not None
    finally:
        if enabled:
            gc.enable()


def test_the_docs_state_the_pipeline_as_it_runs():
    """The package docstring and docs/scheduler.md list the stages of pipeline.STAGES,
    and the plugins of the registry, in the order they run."""
    import modelplane.scheduler as scheduler
    from modelplane.scheduler.pipeline import STAGES

    names = ["compile", *(s.name for s in STAGES)]
    docstring = scheduler.__doc__ or ""
    listed = re.findall(r"^\s*\d+\. (\S.*?)\s+—", docstring, flags=re.M)
    assert listed == names
    table = re.findall(r"^\| \d+ \| ([^|]+?) \|", DOCS.read_text(), flags=re.M)
    assert table == names
    plugin_rows = re.findall(r"^\| `([a-z-]+)` \| [a-z_/(), ]+ \|", DOCS.read_text(), flags=re.M)
    assert plugin_rows == [p.name for p in plugins.REGISTRY]
