"""`plan` output of every example fleet, held byte for byte.

The snapshots under `snapshots/` were written by the scheduler as it stood before it was
reshaped into one cycle of plugins (main at d1a64a4). A change of placement, reason or
wording shows up here as a diff; an intended one updates them on purpose:

    .venv/bin/python -m tests.unit.scheduler.test_plan_snapshots      # rewrite every snapshot
    .venv/bin/python -m tests.unit.scheduler.test_plan_snapshots --placements   # and the placements

Cases: every example with `--json` (Device and Node accounting) and as the table; the
`--observed` and `--previous` files the examples ship; and the README's chains (a plan
fed back as `--previous`, four plans of the preference example). Larger generated fleets
(the benchmarks' generators, with shortfalls) are held by their digest.

Where each replica runs is held apart from the words (`placements.sha256.json`): the digest of
every `--json` case with the words left out (refusal reasons, verdict and condition messages),
written before issue 31 changed how refusals are worded. A change of words updates the
snapshots; a change of placement must also change this file, on purpose.
"""

from __future__ import annotations

import hashlib
import io
import json
import sys
from collections.abc import Callable, Iterator
from contextlib import redirect_stdout
from dataclasses import dataclass
from pathlib import Path

import pytest

from modelplane.__main__ import main

ROOT = Path(__file__).resolve().parents[3]
EXAMPLES = ROOT / "examples"
SNAPSHOTS = Path(__file__).resolve().parent / "snapshots"
DIGESTS = SNAPSHOTS / "generated.sha256.json"
PLACEMENTS = SNAPSHOTS / "placements.sha256.json"


@dataclass(frozen=True)
class Step:
    """One `plan` run: its arguments, `{prev}` standing for the file of the step before."""

    args: tuple[str, ...]


@dataclass(frozen=True)
class Case:
    name: str
    steps: tuple[Step, ...]


def _ex(name: str) -> str:
    return str(EXAMPLES / name)


def cases() -> Iterator[Case]:
    for example in sorted(p.name for p in EXAMPLES.iterdir() if p.is_dir()):
        yield Case(f"{example}.device.json", (Step((_ex(example), "--json")),))
        yield Case(f"{example}.node.json", (Step((_ex(example), "--json", "--accounting", "Node")),))
        yield Case(f"{example}.table.txt", (Step((_ex(example),)),))
    # the files the examples ship (README, docs/scheduler.md, docs/policies.md)
    for example, option, file in [("policy-feasibility", "--observed", "observed.json"),
                                  ("silent-failures", "--observed", "observed.json"),
                                  ("policy-preferences", "--observed", "outage.json"),
                                  ("scheduler-drain", "--previous", "previous.json")]:
        stem = f"{example}.{option.strip('-')}-{Path(file).stem}"
        args = (_ex(example), option, str(EXAMPLES / example / file))
        yield Case(f"{stem}.json", (Step((*args, "--json")),))
        yield Case(f"{stem}.node.json", (Step((*args, "--json", "--accounting", "Node")),))
        yield Case(f"{stem}.table.txt", (Step(args),))
    # README quick tour: a plan fed back as --previous, in Node accounting
    first = Step((_ex("kind"), "--json"))
    back = (_ex("kind"), "--previous", "{prev}", "--accounting", "Node")
    yield Case("kind.previous.node.table.txt", (first, Step(back)))
    yield Case("kind.previous.node.json", (first, Step((*back, "--json"))))
    # README: the preference example's outage, then three plans back, then the table
    prefs = _ex("policy-preferences")
    outage = Step((prefs, "--observed", str(EXAMPLES / "policy-preferences" / "outage.json"), "--json"))
    again = Step((prefs, "--previous", "{prev}", "--json"))
    for n in range(1, 4):
        yield Case(f"policy-preferences.return-{n}.json", (outage, *([again] * n)))
    yield Case("policy-preferences.return-3.table.txt", (outage, again, again, again,
                                                          Step((prefs, "--previous", "{prev}"))))
    # a drained example re-planned from its own placement
    drain = _ex("scheduler-drain")
    yield Case("scheduler-drain.replan.json",
               (Step((drain, "--json")), Step((drain, "--previous", "{prev}", "--json"))))


def run_case(case: Case, work: Path) -> str:
    prev = work / f"{case.name}.prev.json"
    out = ""
    for step in case.steps:
        args = [a.replace("{prev}", str(prev)) for a in step.args]
        buf = io.StringIO()
        with redirect_stdout(buf):
            code = main(["plan", *args])
        assert code == 0, (case.name, args)
        out = buf.getvalue()
        prev.write_text(out)
    # paths are this checkout's: the snapshot names them relative to the repository
    return out.replace(str(ROOT) + "/", "")


def placement_only(text: str) -> str:
    """A `plan --json` document without its words: each deployment's replicas (cluster, index,
    engines), its conditions (type, status, reason), its unplaced replicas (index, verdict,
    cluster, scale-up), failovers and policy state, the budgets' use. What changes only when a
    placement or a verdict does."""
    doc = json.loads(text)
    deployments = []
    for d in doc["deployments"]:
        deployments.append({
            "key": [d["namespace"], d["name"], d["desired"]],
            "replicas": d["replicas"],
            "conditions": [[c["type"], c["status"], c["reason"]] for c in d["conditions"]],
            "unplaced": [[u["index"], *([u["feasibility"]["verdict"], u["feasibility"].get("cluster"),
                                         u["feasibility"].get("scaleUp")] if "feasibility" in u else [])]
                         for u in d["unplaced"]],
            "failover": d.get("failover", []), "placementPolicy": d.get("placementPolicy", {}),
        })
    budgets = [[b["name"], b["used"], b["refusedReplicas"]] for b in doc.get("budgets", [])]
    return json.dumps({"deployments": deployments, "budgets": budgets}, sort_keys=True)


def placement_digests(work: Path) -> dict[str, str]:
    """`placement_only` of every `--json` case and generated fleet, by digest."""
    out = {}
    for case in CASES:
        if case.name.endswith(".json"):
            out[case.name] = hashlib.sha256(placement_only(run_case(case, work)).encode()).hexdigest()
    for name, make in sorted(generated().items()):
        for label, text in generated_outputs(name, make, work, texts=True).items():
            if label.endswith(".json") and not label.endswith(".fleet.yaml"):
                out[label] = hashlib.sha256(placement_only(text).encode()).hexdigest()
    return out


# ------------------------------------------------------------------ generated fleets

def _bench(name: str) -> object:
    """A benchmark module (its generators), leaving sys.path as it was: benchmarks/ holds
    modules named like packages of the repository (sim, loader)."""
    saved = list(sys.path)
    sys.path.insert(0, str(ROOT / "benchmarks"))
    try:
        return __import__(name)
    finally:
        sys.path[:] = saved


def generated() -> dict[str, Callable[[], list[dict]]]:
    """Fleets of the benchmarks' generators, small enough for a unit test, with every
    kind of shortfall: fitting nowhere, somewhere and everywhere, and scarce capacity."""
    scale_fleet = _bench("scale_fleet")
    scheduler = _bench("scheduler")
    return {
        "scale-fleet-40": lambda: scale_fleet.fleet(40, 40),                      # type: ignore[attr-defined]
        "scale-fleet-40-scarce": lambda: scale_fleet.fleet(40, 40, capacity=1 / 1.3),  # type: ignore[attr-defined]
        "scheduler-30x600": lambda: scheduler.generate(30, 2, 600, 1.25),          # type: ignore[attr-defined]
        "scheduler-30x600-half": lambda: scheduler.generate(30, 2, 600, 0.5),      # type: ignore[attr-defined]
    }


def generated_outputs(name: str, make: Callable[[], list[dict]], work: Path, *, texts: bool = False
                      ) -> dict[str, str]:
    """Digest of `plan --json` (both accountings), of the table, and of a re-plan from the
    first plan with every pool one node smaller (kept replicas overdraw and move); with
    `texts`, the outputs themselves."""
    import yaml

    fleet = work / name
    fleet.mkdir(parents=True, exist_ok=True)
    docs = make()
    (fleet / "fleet.yaml").write_text(yaml.safe_dump_all(docs, sort_keys=False))
    smaller = work / f"{name}-smaller"
    smaller.mkdir(parents=True, exist_ok=True)
    shrunk = json.loads(json.dumps(docs))
    for d in shrunk:
        for p in d.get("spec", {}).get("nodePools", []) if d["kind"] == "InferenceCluster" else []:
            p["nodeCount"] = max(0, p["nodeCount"] - 1)
    (smaller / "fleet.yaml").write_text(yaml.safe_dump_all(shrunk, sort_keys=False))
    # the generator's own output first: a changed generator is not a changed scheduler
    out = {f"{name}.fleet.yaml": hashlib.sha256((fleet / "fleet.yaml").read_bytes()).hexdigest()}
    for label, steps in [
        ("device.json", (Step((str(fleet), "--json")),)),
        ("node.json", (Step((str(fleet), "--json", "--accounting", "Node")),)),
        ("table.txt", (Step((str(fleet),)),)),
        ("replan-smaller.json", (Step((str(fleet), "--json")), Step((str(smaller), "--previous", "{prev}", "--json")))),
    ]:
        text = run_case(Case(f"{name}.{label}", steps), work)
        text = text.replace(str(work) + "/", "")
        out[f"{name}.{label}"] = text if texts else hashlib.sha256(text.encode()).hexdigest()
    return out


# ------------------------------------------------------------------------- tests

CASES = list(cases())


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_plan_output_is_byte_identical_to_its_snapshot(case: Case, tmp_path: Path) -> None:
    want = (SNAPSHOTS / case.name).read_text()
    assert run_case(case, tmp_path) == want


@pytest.mark.parametrize("name", sorted(generated()))
def test_generated_fleet_plans_are_byte_identical_to_their_digests(name: str, tmp_path: Path) -> None:
    want = json.loads(DIGESTS.read_text())
    got = generated_outputs(name, generated()[name], tmp_path)
    assert got == {k: v for k, v in want.items() if k.startswith(f"{name}.")}


def test_every_placement_is_the_one_held_apart_from_the_words(tmp_path: Path) -> None:
    """Words may change (a snapshot update says so); where replicas run and their verdicts
    only with this file (issue 31: the same placements as before on every fleet)."""
    want = json.loads(PLACEMENTS.read_text())
    assert placement_digests(tmp_path) == want


def test_every_example_has_a_snapshot() -> None:
    """A new example fleet gets its snapshots too (run this module to write them)."""
    examples = {p.name for p in EXAMPLES.iterdir() if p.is_dir()}
    held = {name.split(".")[0] for name in (c.name for c in CASES)}
    assert examples <= held
    assert {c.name for c in CASES} <= {p.name for p in SNAPSHOTS.iterdir()}


def update() -> None:
    import tempfile

    SNAPSHOTS.mkdir(exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        for case in CASES:
            (SNAPSHOTS / case.name).write_text(run_case(case, work))
        digests: dict[str, str] = {}
        for name, make in sorted(generated().items()):
            digests.update(generated_outputs(name, make, work))
        DIGESTS.write_text(json.dumps(digests, indent=1, sort_keys=True) + "\n")
        if "--placements" in sys.argv:     # only on purpose: a placement changed
            PLACEMENTS.write_text(json.dumps(placement_digests(work), indent=1, sort_keys=True) + "\n")


if __name__ == "__main__":
    update()
