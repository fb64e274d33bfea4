"""The reconcile pass has one home (issue 28, item 3): modelplane.reconcile_pass assembles
observe -> decide -> place -> drain; the placement provider, `plan --observe`/`--metrics` and
the local demo's loop call it and assemble nothing themselves (the test reads their imports).
And the pass without observation or autoscalers is the scheduler's placement, unchanged."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from modelplane.api import load_documents
from modelplane.autoscale.readings import FileMetricsSource
from modelplane.autoscale.state import ScalingState
from modelplane.reconcile_pass import Scaling, first_decision, run
from modelplane.scheduler import place_fleet
from tests.manifests import cluster, deployment, gpu_class, pool, replica_autoscaler

ROOT = Path(__file__).resolve().parents[3]
# What only the pass may call: the pieces it composes.
STEPS = {("modelplane.autoscale.loop", "scale_fleet"), ("modelplane.observe.place", "place_observed"),
         ("modelplane.autoscale.scaled_placement", "decide_fleet"),
         ("modelplane.autoscale.scaled_placement", "place_decisions")}
CALLERS = ["providers/autoscale.py", "providers/observe.py", "providers/placement.py", "modelplane/commands/plan.py",
           "modelplane/runtime/scaling.py", "modelplane/autoscale/metrics_report.py"]


def _imported(path: Path) -> set[tuple[str, str]]:
    """(module, name) of every `from module import name` in the file, at any depth."""
    package = path.relative_to(ROOT).parent.parts
    names = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module:
            base = package[: len(package) - node.level + 1] if node.level else ()
            module = ".".join([*base, node.module])
            names |= {(module, a.name) for a in node.names}
    return names


@pytest.mark.parametrize("caller", CALLERS)
def test_the_callers_of_the_pass_assemble_none_of_it(caller) -> None:
    assert _imported(ROOT / caller) & STEPS == set()


def test_the_pass_is_the_only_module_that_composes_its_steps() -> None:
    users = {str(p.relative_to(ROOT)) for base in ("modelplane", "providers", "components")
             for p in (ROOT / base).rglob("*.py") if _imported(p) & STEPS}
    assert users == {"modelplane/reconcile_pass.py"}


def test_commands_read_no_metrics_and_the_provider_imports_no_command() -> None:
    """The metrics file is read by modelplane.autoscale.readings, not by commands/."""
    assert "def read_metrics" not in (ROOT / "modelplane/commands/inputs.py").read_text()
    assert not {m for m, _ in _imported(ROOT / "providers/autoscale.py")} & {"modelplane.commands.inputs"}


FLEET = [gpu_class("h100", 1, "81559Mi"), cluster("a", pool("p", "h100", 4)),
         deployment("chat", 1, namespace="ml"), replica_autoscaler("chat", "chat", 4, namespace="ml")]


def test_a_pass_without_observation_or_scaling_is_the_schedulers_placement() -> None:
    fleet = load_documents(FLEET)
    first = place_fleet(fleet).to_json()
    again = run(fleet, first, now=1.0)
    assert again.placement == place_fleet(fleet, place_fleet(fleet)).to_json()
    assert (again.capacity, again.health, again.state, again.outcomes) == (None, None, None, ())


def test_a_pass_with_scaling_decides_places_and_keeps_the_state() -> None:
    fleet = load_documents(FLEET)
    source = FileMetricsSource({("ml", "chat"): {"QueueDepth": 12.0}})   # its target: 4 a replica
    result = run(fleet, None, now=1_900_000_000.0, scaling=Scaling(ScalingState(), source))
    assert [o.decision.desired for o in result.outcomes] == [3]
    assert len(result.typed().find("ml", "chat").replicas) == 3
    assert result.state is not None and result.state.autoscalers[("ml", "chat")].replicas == 3
    # a first decision (plan --metrics) decides the same here, with no state to keep
    once = first_decision(fleet, source, None, now=1_900_000_000.0)
    assert once.placement == result.placement and once.state is None
