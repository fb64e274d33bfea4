"""The cycle: one placement pass's state, and the extension points its plugins implement.

* `Cycle` — fleet-wide: the compiled clusters, the matcher, the ledger, what each plugin
  and stage keeps (by `Key`: a slot the plugin or stage that defines the key owns), and
  the filters' answers, memoized by their keys.
* `DeploymentState` — one deployment through the pipeline: the replicas it keeps (and
  what each charges), the ones placed now, the unplaced, and every replica not kept with
  why. Its operations (`keep`, `drop`, `set_aside`, `take_index`, `place`) are the only
  way stages change it.
* `Binding` — what one plugin does for one deployment: a no-op for every hook, a plugin
  overrides the hooks it uses. A plugin is a Binding subclass with a `name` and a `bind`
  classmethod; the registry (`plugins/__init__.py`) lists them in the order they run. A
  public name a plugin defines that Binding does not (a misspelled hook) is a TypeError
  when its class is created: helpers of a plugin start with `_`.

The framework (this module, the stages, the fill) imports no plugin: what it needs of one is
a hook here, or a `Key` slot the plugin owns. Hooks, in the order the pipeline calls them:

| hook | when | returns |
|---|---|---|
| `desired(n)` | compile | the replicas the deployment wants now |
| `filter(cluster)` | once per cluster and `key` | a Reason to keep new replicas off, or None |
| `keep(kept)` | retain, per previous replica | a Reason to not keep it, or None |
| `begin()` | fill starts | |
| `queue(open, skips, refuses)` | fill, when its score is the only one | the clusters in that score's order |
| `admit(cluster, remaining)` | fill, a cluster comes up | a Reason it may not take one more, or None |
| `refuses_already(cluster)` | fill, then | True: skip it without reserving (`explain` says why, if asked) |
| `score(cluster)` | fill, ordering clusters | an int; lower is better, per plugin in registry order |
| `reserve(r)` / `unreserve(r)` | fill, placing on the cluster | a Reason to refuse (earlier reserves are undone) |
| `unplaced(missing)` | fill ended short | |
| `admit_move(replica, cluster)` | moves back, a more preferred cluster | a Reason it may not move there, or None |
| `never(cluster)` | feasibility | a Reason no size of the cluster holds a replica, or None |
| `scale_up(s)` | feasibility, like Kubernetes' PostFilter | whether a replica fits after the nodes it adds |
| `conditions()`, `status(s)` | results | conditions, the placementPolicy block |

Every refusal a fill hook gives must stay true for the rest of that deployment's fill
(capacity and budgets only shrink, spread counts only grow): a refusing cluster is not
asked again. A refusal's kind (reasons.POLICY, CAPACITY, NEVER) is the plugin's to set:
feasibility's verdict follows it.

What a plugin answers about one more replica on a cluster through `explain`, `never` and
`scale_up` must depend on the cluster only through its template (`ClusterView.template_id`: its
pools, their sizes and zones) and its ledger state: the fill and feasibility ask one cluster of
each class and count the rest (scheduler.census). Feasibility reads a refusal `refuses_already`
knows as CAPACITY, or as its `never` hook's where that refuses; a class explained otherwise
has its clusters written down one by one (scheduler.unplaced).
"""

from __future__ import annotations

from collections.abc import Callable, Container, Hashable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar, Generic, Self, TypeVar, cast

from modelplane.api import Fleet

from .conditions import Condition
from .growth import ScaleUp
from .ledger import ChargeKey, Ledger, ObservedCapacity, Trial, Usage
from .matching import Matcher
from .placement_types import DeploymentPlacement, EnginePlacement, FleetPlacement, PlacedReplica, Unplaced
from .policy import NO_POLICY, DeploymentPolicy
from .policy_types import BudgetStatus, PolicyStatus
from .queues import ClusterQueue, SkipList
from .reasons import Reason, Refusal
from .shape import ClusterView, DeploymentShape, Outage

T = TypeVar("T")
Ident = tuple[str, int]                       # (cluster, index): a replica's identity
# (pool, usages) a kept replica charges on its cluster; ((pool, zone), usages) for a gang's zone
Charges = list[tuple[ChargeKey, list[Usage]]]


class Key(Generic[T]):
    """A typed slot of the cycle state, owned by one plugin or stage."""

    __slots__ = ("name",)

    def __init__(self, name: str) -> None:
        self.name = name


class _Slots:
    def __init__(self) -> None:
        self._slots: dict[str, object] = {}

    def get(self, key: Key[T]) -> T | None:
        return cast("T | None", self._slots.get(key.name))

    def put(self, key: Key[T], value: T) -> T:
        self._slots[key.name] = value
        return value


class DeploymentState(_Slots):
    def __init__(self, shape: DeploymentShape, retained: Iterable[PlacedReplica] = (),
                 charges: Mapping[Ident, Charges] | None = None,
                 policy: DeploymentPolicy = NO_POLICY) -> None:
        super().__init__()
        self.shape = shape
        self.policy = policy
        self.desired = shape.desired
        self.engines_id = 0                     # its engines by content, as a number (Cycle.engines_id)
        self.bindings: tuple[Binding, ...] = ()
        self.hooks: dict[str, list[Binding]] = {}   # hook -> the bindings overriding it (see `bind`)
        self._kept: dict[Ident, PlacedReplica] = {}
        self._held: dict[Ident, PlacedReplica] = {}
        self._taken: dict[str, set[int]] = {}
        self.charges: dict[Ident, Charges] = dict(charges or {})
        for rep in retained:
            self._add(rep)
        self.placed: list[PlacedReplica] = []
        self.unplaced: list[Unplaced] = []
        # previous replicas not kept, with why (moved, drained, scaled down, ...)
        self.dropped: list[tuple[PlacedReplica, Reason]] = []
        self.overdrawn: list[str] = []          # kept replicas their pool could not hold (the ledger stage)
        self.candidates = 0                     # clusters passing the candidate filters
        self.refused: dict[str, Refusal] = {}   # fill: why each cluster refused a replica
        # when the fill ended short: why each cluster it tried refused (scheduler.unplaced), and
        # the clusters a plugin knew to refuse for other than capacity, with why (feasibility reads both)
        self.attempted: dict[str, Reason] = {}
        self.known_other: dict[str, Reason] = {}
        self.surge = 0                          # replicas above `desired`: new halves of moves in flight
        self.conditions: list[Condition] = []   # what stages report (Overdrawn, FailedOver)

    def bind(self, bindings: Iterable[Binding]) -> None:
        self.bindings = tuple(bindings)
        self.hooks = {hook: [] for hook in HOOKS}
        for b in self.bindings:
            for hook in b.overrides:
                self.hooks[hook].append(b)

    @property
    def key(self) -> tuple[str, str]:
        return self.shape.key

    @property
    def name(self) -> str:
        return f"{self.shape.namespace}/{self.shape.name}"

    @property
    def retained(self) -> list[PlacedReplica]:
        """The previous replicas it keeps."""
        return list(self._kept.values())

    @property
    def current(self) -> list[PlacedReplica]:
        """Every replica it has now: kept, then placed in this pass."""
        return [*self._kept.values(), *self.placed]

    def is_kept(self, rep: PlacedReplica) -> bool:
        return self._kept.get((rep.cluster, rep.index)) is rep

    def _add(self, rep: PlacedReplica) -> None:
        self._kept[(rep.cluster, rep.index)] = rep
        self._taken.setdefault(rep.cluster, set()).add(rep.index)

    def _remove(self, rep: PlacedReplica) -> bool:
        """Take `rep` out of the kept replicas (or those on hold); whether it was there."""
        ident = (rep.cluster, rep.index)
        if self._kept.get(ident) is rep:
            del self._kept[ident]
            self._taken[rep.cluster].discard(rep.index)
            return True
        if self._held.get(ident) is rep:
            del self._held[ident]
            return True
        return False

    def keep(self, rep: PlacedReplica, charges: Charges) -> None:
        self._add(rep)
        self.charges[(rep.cluster, rep.index)] = charges

    def drop(self, rep: PlacedReplica, why: Reason) -> None:
        """Not kept: out of the count and off the ledger (if it was on it), reported with why."""
        if self._remove(rep):
            self.charges.pop((rep.cluster, rep.index), None)
        self.dropped.append((rep, why))

    def set_aside(self, rep: PlacedReplica) -> None:
        """Out of the count and off the ledger, but not gone (a failover holds it)."""
        if self._remove(rep):
            self.charges.pop((rep.cluster, rep.index), None)

    def hold(self, rep: PlacedReplica) -> None:
        """Out of the count while still charged, until `rejoin` (a move's new half during scale-down)."""
        if self._remove(rep):
            self._held[(rep.cluster, rep.index)] = rep

    def rejoin(self, rep: PlacedReplica) -> None:
        if self._held.get((rep.cluster, rep.index)) is rep:
            del self._held[(rep.cluster, rep.index)]
            self._add(rep)

    def replicas_on(self, cluster: str) -> int:
        """Replicas it has on `cluster` now (kept and placed)."""
        taken = self._taken.get(cluster)
        return len(taken) if taken else 0

    def take_index(self, cluster: str) -> int:
        """The lowest index this deployment does not use on `cluster`, now taken."""
        taken = self._taken.setdefault(cluster, set())
        index = 0
        while index in taken:
            index += 1
        taken.add(index)
        return index

    def place(self, rep: PlacedReplica) -> None:
        """A new replica (its index from `take_index`)."""
        self.placed.append(rep)


@dataclass(frozen=True)
class Filtered:
    """What the filter hooks say of every cluster for one deployment (memoized by their keys)."""

    key: tuple[object, ...]              # the filter hooks and their keys: equal keys, equal answers
    reasons: dict[str, Reason]           # cluster -> the first filter refusing it
    not_candidate: dict[str, Reason]     # cluster -> the first candidate filter refusing it
    candidates: list[ClusterView]        # clusters no candidate filter refuses
    open: list[str]                      # clusters no filter refuses, by name


class Cycle(_Slots):
    def __init__(self, fleet: Fleet, clusters: dict[str, ClusterView], matcher: Matcher, accounting: str, *,
                 previous: FleetPlacement | None = None, outages: Mapping[str, Outage] | None = None,
                 observed: ObservedCapacity | None = None,
                 explain: Container[tuple[str, str]] = ()) -> None:
        super().__init__()
        self.fleet = fleet
        self.clusters = clusters                 # sorted by name
        self.matcher = matcher
        self.accounting = accounting
        self.previous = previous
        self.outages: Mapping[str, Outage] = outages or {}
        self.observed = observed
        self.deployments: list[DeploymentState] = []
        self.ledger = Ledger(accounting)         # capacity left: built by the ledger stage
        # how many times fill charged each cluster: an explanation holds while this does not
        # change, so the plugins word a refusal once per (cluster, charges, engines)
        self.charged: dict[str, int] = {}
        self.commits = 0                         # replicas fill has placed (any cluster)
        self.touched: list[str] = []             # every cluster fill charged, once per charge, in order
        # the deployments whose every cluster's reason is kept (Refusals.by_cluster), by key
        self.explain: Container[tuple[str, str]] = explain
        self._engine_ids: dict[tuple[object, ...], int] = {}
        self.result: list[DeploymentPlacement] = []
        self.budgets: list[BudgetStatus] = []
        self._filtered: dict[tuple[object, ...], Filtered] = {}
        self._filter_refusals: dict[tuple[str, Hashable], dict[str, Reason]] = {}

    @property
    def unit(self) -> str:
        return "nodes" if self.accounting == "Node" else "devices"

    def placement(self) -> FleetPlacement:
        return FleetPlacement(self.result, self.budgets)

    def engines_id(self, shape: DeploymentShape) -> int:
        """A number per distinct engines (by content): deployments of one shape share it."""
        return self._engine_ids.setdefault(shape.engines_key, len(self._engine_ids))

    def _refusals(self, binding: Binding) -> dict[str, Reason]:
        """One filter's refusals (cluster -> reason, in cluster order), asked once per
        cluster and shared by every deployment the filter's key is equal for."""
        key = (binding.name, binding.key)
        hit = self._filter_refusals.get(key)
        if hit is None:
            hit = self._filter_refusals[key] = {
                name: why for name, cluster in self.clusters.items() if (why := binding.filter(cluster)) is not None}
        return hit

    def filtered(self, st: DeploymentState) -> Filtered:
        """Every cluster's first filter refusal for `st` (registry order), its candidates
        (no candidate filter refuses them) and its open clusters (no filter does)."""
        filters = st.hooks["filter"]
        key = tuple((b.name, b.key) for b in filters)
        hit = self._filtered.get(key)
        if hit is None:
            reasons: dict[str, Reason] = {}
            not_candidate: dict[str, Reason] = {}
            for b in filters:
                for name, why in self._refusals(b).items():
                    reasons.setdefault(name, why)
                    if b.candidate:
                        not_candidate.setdefault(name, why)
            reasons = {name: reasons[name] for name in self.clusters if name in reasons}   # cluster order
            hit = self._filtered[key] = Filtered(
                key, reasons, not_candidate, [c for c in self.clusters.values() if c.name not in not_candidate],
                [name for name in self.clusters if name not in reasons])
        return hit


@dataclass
class Keeping:
    """A previous replica the retain stage asks the `keep` hooks about. Device fit fills in
    its engines (re-resolved against the current spec) and what it charges."""

    previous: PlacedReplica
    cluster: ClusterView
    index: int
    engines: dict[str, EnginePlacement] | None = None
    charges: Charges = field(default_factory=list)


@dataclass(slots=True)
class Reservation:
    """One replica being placed on one cluster: device fit charges `ledger` (a trial unless
    nothing after it may refuse) and sets `engines`; later reserve hooks read them."""

    cluster: ClusterView
    ledger: Ledger | Trial
    engines: dict[str, EnginePlacement] | None = None
    notes: dict[str, object] | None = None    # what a hook must undo, by plugin name


class Binding:
    """What one plugin does for one deployment. Every hook here is a no-op; a plugin
    overrides the ones it uses (the module docstring lists them). A subclass may define
    only the names defined here (hooks and declarations) and private ones."""

    name: ClassVar[str] = ""
    candidate: ClassVar[bool] = False        # a filter refusal makes the cluster no candidate at all
    reserve_refuses: ClassVar[bool] = True   # False: reserve only records, it never refuses
    places_engines: ClassVar[bool] = False   # its reserve sets `Reservation.engines` (one plugin must)
    # What a Blocked verdict calls this plugin's POLICY refusals ("taints"); its name if empty.
    policy_name: ClassVar[str] = ""
    overrides: ClassVar[frozenset[str]] = frozenset()   # the hooks it overrides (set at class creation)

    # What `filter` depends on besides the cluster: the answers are memoized by it,
    # across deployments (a filter reading anything else must put it in its key).
    key: Hashable = ()

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        for attr in vars(cls):
            if not attr.startswith("_") and not hasattr(Binding, attr):
                import difflib  # only to word the error

                near = difflib.get_close_matches(attr, [n for n in vars(Binding) if not n.startswith("_")], n=1)
                hint = f"did you mean {near[0]!r}? " if near else ""
                raise TypeError(f"plugin {cls.__qualname__} defines {attr!r}, which is no hook of Binding: "
                                f"{hint}(a plugin's own helpers start with '_')")
        cls.overrides = frozenset(h for h in HOOKS if getattr(cls, h) is not getattr(Binding, h))

    @classmethod
    def bind(cls, cycle: Cycle, st: DeploymentState) -> Self | None:  # noqa: ARG003 - a no-op hook
        """This plugin's part in placing `st`, or None when it has none."""
        return None

    def desired(self, desired: int) -> int:
        return desired

    def filter(self, cluster: ClusterView) -> Reason | None:  # noqa: ARG002 - a no-op hook
        return None

    def keep(self, kept: Keeping) -> Reason | None:  # noqa: ARG002 - a no-op hook
        return None

    def begin(self) -> None:
        return None

    def queue(self, names: list[str], skips: SkipList | None = None,  # noqa: ARG002 - a no-op hook
              refuses: Callable[[str], bool] | None = None) -> ClusterQueue | None:  # noqa: ARG002
        """The fill's order over `names` (the open clusters, sorted) when this plugin's score
        is the only one: the order that score gives (None: the fill's own `ScoredQueue`).
        With `skips` and `refuses`, clusters `refuses` names are stepped over, never handed out."""
        return None

    # What `refuses_already` depends on besides the cluster (deployments with equal keys get
    # equal answers, so the fill may share what it learnt of them).
    refuses_key: Hashable = ()

    def refuses_already(self, cluster: ClusterView) -> bool:  # noqa: ARG002 - a no-op hook
        """Whether this plugin knows, without trying, that `cluster` refuses one more replica
        (it refused the same demand earlier in the pass): the fill then skips the cluster and
        asks `explain` only if the reason is read. Once True, it must stay True for the pass."""
        return False

    def explain(self, cluster: ClusterView) -> Reason:
        """Why `cluster` refuses, for a plugin whose `refuses_already` said so: what trying it
        now would answer, the same for every cluster of its class (scheduler.census)."""
        raise NotImplementedError(f"{self.name} says clusters refuse but not why")

    def admit(self, cluster: ClusterView, remaining: int) -> Refusal | None:  # noqa: ARG002 - a no-op hook
        return None

    def score(self, cluster: ClusterView) -> int:  # noqa: ARG002 - a no-op hook
        return 0

    def rescore_all(self) -> bool:
        """After a replica is placed: True when other clusters' scores may have gone down
        (the fill then re-sorts every cluster, not only the one that took it)."""
        return False

    def reserve(self, r: Reservation) -> Refusal | None:  # noqa: ARG002 - a no-op hook
        return None

    def unreserve(self, r: Reservation) -> None:  # noqa: ARG002 - a no-op hook
        return None

    def unplaced(self, missing: int) -> None:  # noqa: ARG002 - a no-op hook
        """The fill ended with `missing` replicas placed nowhere."""
        return None

    def admit_move(self, replica: PlacedReplica, cluster: ClusterView) -> Reason | None:  # noqa: ARG002
        """Why `replica` may not move back to the more preferred `cluster` now (the moves
        back ask after every admit hook let the cluster through, before reserving), or None."""
        return None

    # What `never` and `scale_up` depend on besides the cluster and the ledger: feasibility
    # shares their answers between deployments with equal keys.
    scale_up_key: Hashable = ()

    def never(self, cluster: ClusterView) -> Reason | None:  # noqa: ARG002 - a no-op hook
        """Why no size of `cluster` could hold one replica (feasibility: NotFeasible there), or None;
        the same for every cluster of one template, whatever its state."""
        return None

    def scale_up(self, s: ScaleUp) -> bool:  # noqa: ARG002 - a no-op hook
        """Feasibility, for a replica the fill left unplaced: charge one more replica on
        `s.ledger`, adding through `s.growth` the nodes this plugin's part needs (in registry
        order, after the earlier hooks' nodes). False: no growth of the cluster lets it fit."""
        return True

    def conditions(self) -> list[Condition]:
        return []

    def status(self, status: PolicyStatus) -> None:  # noqa: ARG002 - a no-op hook
        return None


# The hooks the pipeline collects per deployment (DeploymentState.hooks), each in registry order.
HOOKS = ("desired", "filter", "keep", "begin", "queue", "admit", "refuses_already", "score", "reserve",
         "unreserve", "unplaced", "admit_move", "never", "scale_up", "conditions", "status")


# A plugin: a Binding subclass (its `name` and `bind`), listed in plugins.REGISTRY.
Plugin = type[Binding]
