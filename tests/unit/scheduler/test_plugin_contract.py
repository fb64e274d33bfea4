"""What the framework holds a plugin to (issue 28, items 1 and 2).

A refusal is judged by the kind its plugin sets, the way a Kubernetes filter plugin sets its
status code (Unschedulable vs UnschedulableAndUnresolvable, pkg/scheduler/framework/interface.go):
a new plugin added as docs/scheduler.md says (one class, one registry line) gets the verdicts
its refusals' kinds call for, with no table of codes to extend. What the framework needs of a
plugin is a declared hook: a misspelled one is an error when the class is made, a registry
without a plugin that places engines is refused (as Kubernetes refuses a profile without a
bind plugin), and a sole score's `queue` hook serves the fill's order."""

from __future__ import annotations

from typing import Self

import pytest

from modelplane.scheduler import place_fleet, plugins
from modelplane.scheduler.cycle import Binding, Cycle, DeploymentState
from modelplane.scheduler.plugins.device_fit import DeviceFit
from modelplane.scheduler.plugins.spread_before_pack import SpreadBeforePack
from modelplane.scheduler.reasons import CAPACITY, NEVER, POLICY, Kind, Reason
from modelplane.scheduler.shape import ClusterView

from .helpers import H100, cluster, deployment, engine, load, of, pool, standalone, verdicts

FROZEN = "example.org/frozen"
NF, UP, BL = "NotFeasible", "FitsAfterScaleUp", "Blocked"


class ChangeFreeze(Binding):
    """A filter a platform team might add: no new replica on a cluster under a change freeze."""

    name = "change-freeze"
    policy_name = "change freeze"
    _kind: Kind = POLICY

    @classmethod
    def bind(cls, cycle: Cycle, st: DeploymentState) -> Self | None:  # noqa: ARG003 - one answer for all
        return cls()

    def filter(self, cluster: ClusterView) -> Reason | None:
        if cluster.labels.get(FROZEN) != "true":
            return None
        return Reason("ChangeFreeze", self.name, "the cluster is under a change freeze", self._kind)


def _registered(monkeypatch: pytest.MonkeyPatch, plugin: type[Binding]) -> None:
    """The one registry line, before the base score."""
    registry = list(plugins.REGISTRY)
    registry.insert(registry.index(SpreadBeforePack), plugin)
    monkeypatch.setattr(plugins, "REGISTRY", tuple(registry))


def _frozen(name: str, nodes: int, **kw: object) -> dict:
    return cluster(name, pool("p", "h100", nodes, **kw), labels={FROZEN: "true"})


@pytest.mark.parametrize("name, docs, placed, want", [
    # Before the kinds, this one read FitsAfterScaleUp twice ("fits on a after adding 1 node(s) to
    # pool p (0 -> 1 nodes: raise nodeCount from 0 to 1)"): its refusal code was in no table of
    # blocking codes, so feasibility took it for capacity and told people to grow a frozen cluster.
    ("the only cluster is frozen and has no nodes yet: Blocked, not a scale-up of it",
     [H100, _frozen("a", 0), deployment("m", 2)], [], [BL, BL]),
    ("frozen with room: Blocked",
     [H100, _frozen("a", 4), deployment("m", 1)], [], [BL]),
    ("a frozen cluster beside one that can grow: the other one grows",
     [H100, _frozen("a", 4), cluster("b", pool("p", "h100", 1)), deployment("m", 2)], ["b#0"], [UP]),
    ("frozen, and its pools could never hold the engine anyway: NotFeasible",
     [H100, _frozen("a", 4), deployment("m", 1, engine("main", standalone(gpus=2)))], [], [NF]),
], ids=lambda v: v if isinstance(v, str) and " " in v else "")
def test_a_new_filter_plugins_policy_refusal_is_blocked_never_a_scale_up(monkeypatch, name, docs, placed, want):
    _registered(monkeypatch, ChangeFreeze)
    fp = place_fleet(load(docs), accounting="Node")
    assert [f"{r.cluster}#{r.index}" for r in of(fp, "m").replicas] == placed, name
    assert verdicts(fp, "m") == want, [u.feasibility for u in of(fp, "m").unplaced]
    for u in of(fp, "m").unplaced:
        assert u.feasibility is not None
        if u.feasibility.verdict == BL:
            assert u.feasibility.message == "every cluster that could hold it refuses it by policy: change freeze (a)"


@pytest.mark.parametrize("kind, want, words", [
    (POLICY, BL, "every cluster that could hold it refuses it by policy: change freeze (a)"),
    (CAPACITY, UP, "fits on a after adding 1 node to pool p (0 -> 1 nodes: raise nodeCount from 0 to 1)"),
    (NEVER, NF, "no pool of the 1 cluster the selectors match could ever hold it, at any size "
                "(first, a: the cluster is under a change freeze)"),
])
def test_the_verdict_follows_the_kind_the_plugin_sets(monkeypatch, kind, want, words) -> None:
    """The same refusal of a cluster without nodes, three kinds: a policy no scale-up answers,
    capacity the scale-up simulation answers, a cluster no size of which would do."""
    plugin = type(f"ChangeFreeze_{kind}", (ChangeFreeze,), {"_kind": kind})
    _registered(monkeypatch, plugin)
    fp = place_fleet(load([H100, _frozen("a", 0), deployment("m", 1)]), accounting="Node")
    (u,) = of(fp, "m").unplaced
    assert u.feasibility is not None and (u.feasibility.verdict, u.feasibility.message) == (want, words)
    assert u.reasons["a"].kind == kind and u.reasons["a"].plugin == "change-freeze"


def test_without_the_plugin_the_same_fleet_places_on_the_frozen_cluster() -> None:
    fp = place_fleet(load([H100, _frozen("a", 1), deployment("m", 1)]), accounting="Node")
    assert [r.cluster for r in of(fp, "m").replicas] == ["a"]


def test_two_reasons_alike_in_words_but_not_in_code_are_two_reasons() -> None:
    """A Reason is a value of all its fields, not its message (as a `str` subclass it was:
    `.upper()` dropped its code, and two codes of one message hashed alike)."""
    a = Reason("ChangeFreeze", "change-freeze", "frozen", POLICY)
    b = Reason("Other", "change-freeze", "frozen", POLICY)
    assert a != b and len({a, b}) == 2 and not isinstance(a, str)
    with pytest.raises(AttributeError):
        a.code = "x"     # type: ignore[misc]  # frozen


@pytest.mark.parametrize("misspelled, hint", [
    ("filtr", "did you mean 'filter'?"),
    ("scroe", "did you mean 'score'?"),
    ("reserv", "did you mean 'reserve'?"),
    ("helper", ""),
])
def test_a_misspelled_hook_is_an_error_when_the_class_is_made(misspelled, hint) -> None:
    with pytest.raises(TypeError, match=f"defines '{misspelled}', which is no hook of Binding") as err:
        type("Typo", (Binding,), {"name": "typo", misspelled: lambda self, cluster: None})
    assert hint in str(err.value) and "start with '_'" in str(err.value)


def test_a_plugins_own_helpers_are_private_and_allowed() -> None:
    plugin = type("Fine", (Binding,), {"name": "fine", "_helper": lambda self: 1,
                                       "filter": lambda self, cluster: None})
    assert plugin.overrides == frozenset({"filter"})


def test_a_registry_without_a_plugin_that_places_engines_is_refused(monkeypatch) -> None:
    monkeypatch.setattr(plugins, "REGISTRY", tuple(p for p in plugins.REGISTRY if p is not DeviceFit))
    with pytest.raises(ValueError, match="no plugin of the registry places engines"):
        place_fleet(load([H100, cluster("a", pool("p", "h100", 1)), deployment("m", 1)]))


ASKED: list[str] = []          # deployments whose fill asked ByNameReversed.queue


class ByNameReversed(Binding):
    """A base score in reverse name order, with a queue hook serving that order."""

    name = "by-name-reversed"

    def __init__(self, st: DeploymentState) -> None:
        self._st = st

    @classmethod
    def bind(cls, cycle: Cycle, st: DeploymentState) -> Self | None:  # noqa: ARG003 - the cycle is not needed
        return cls(st)

    def score(self, cluster: ClusterView) -> int:
        return -sum(ord(ch) << (8 * (8 - i)) for i, ch in enumerate(cluster.name[:8]))

    def queue(self, names: list[str], skips: object = None, refuses: object = None) -> _Reversed:  # noqa: ARG002
        ASKED.append(self._st.name)
        return _Reversed(names)


class _Reversed:
    def __init__(self, names: list[str]) -> None:
        self._names = sorted(names, reverse=True)

    def best(self) -> str | None:
        return self._names[0] if self._names else None

    def took(self, name: str) -> None:
        assert self._names[0] == name

    def drop(self, name: str) -> None:
        self._names.remove(name)


def test_a_sole_scores_queue_hook_serves_the_fill(monkeypatch) -> None:
    docs = [H100, *(cluster(n, pool("p", "h100", 1)) for n in ("a", "b", "c")), deployment("m", 2)]
    without_queue = type("ByNameReversedScoreOnly", (ByNameReversed,), {"queue": Binding.queue})
    monkeypatch.setattr(plugins, "REGISTRY", tuple(without_queue if p is SpreadBeforePack else p
                                                   for p in plugins.REGISTRY))
    scored = place_fleet(load(docs), accounting="Node")
    monkeypatch.setattr(plugins, "REGISTRY", tuple(ByNameReversed if p is without_queue else p
                                                   for p in plugins.REGISTRY))
    ASKED.clear()
    queued = place_fleet(load(docs), accounting="Node")
    assert ASKED == ["default/m"]
    assert [r.cluster for r in of(queued, "m").replicas] == [r.cluster for r in of(scored, "m").replicas] == ["b", "c"]
