"""Growing a cluster's pools on a trial of the ledger: what the feasibility stage simulates for
a replica that fits nowhere, and what the plugins' `scale_up` hooks work with.

`ScaleUp` is one more replica on one cluster, after nodes are added: feasibility makes it (a
trial of its hypothetical ledger, an empty `Growth`), then every `scale_up` hook adds the nodes
its part needs (device fit: the pools its engines go to; gang zones: a zone for each copy) and
says whether the replica then fits. The nodes added, per pool, are the plan the verdict words.

A zoned pool's new nodes spread evenly over its zones, as its nodes do (modelplane.clouds.zones):
each zone holds `nodes // zones` of the grown pool.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from .ledger import DevicePool, NodePool, PoolKey, PoolState, Trial, Usage, fresh_nodes
from .placement_types import EnginePlacement
from .shape import ClusterView, PoolView


@dataclass
class Growth:
    """Nodes a scale-up adds to one cluster's pools: `before` by earlier replicas' plans,
    `pools` by this one."""

    cluster: ClusterView
    before: Mapping[str, int]
    pools: dict[str, int]

    def nodes(self, pool: PoolView) -> int:
        return pool.nodes + self.before.get(pool.name, 0) + self.pools.get(pool.name, 0)

    def add(self, trial: Trial, pool_name: str, n: int, *, commit: bool = True) -> None:
        """`n` more nodes in the pool (and its zones) on `trial`; counted in `pools` if `commit`."""
        view = self.cluster.pool(pool_name)
        assert view is not None
        per_node, key = per_node_devices(view), (self.cluster.name, pool_name)
        trial.put(key, grown(trial.state(key), n, per_node))
        if view.zoned:
            now = self.nodes(view)
            more = n if view.zone_nodes is None else (now + n) // len(view.zones) - now // len(view.zones)
            for zone in view.zones:
                trial.put((*key, zone), grown(trial.state((*key, zone)), more, per_node))
        if commit:
            self.pools[pool_name] = self.pools.get(pool_name, 0) + n


@dataclass
class ScaleUp:
    """One more replica on `cluster` after adding nodes: the hooks charge `ledger` (a trial)
    and add nodes through `growth`; the first hook to place the engines sets `engines`,
    which later hooks (and the budgets' charge) read."""

    cluster: ClusterView
    ledger: Trial
    growth: Growth
    engines: dict[str, EnginePlacement] | None = None
    # (pool state, usages, devices per node) -> nodes to add: shared by every scale-up of the pass
    memo: dict[tuple[object, ...], int] = field(default_factory=dict)

    @property
    def nodes(self) -> int:
        return sum(self.growth.pools.values())

    def nodes_to_add(self, state: PoolState, usages: list[Usage], pool: PoolView) -> int:
        """`nodes_to_add`, memoized by what it depends on."""
        per_node = per_node_devices(pool)
        key = (fingerprint(state), tuple(usages), per_node)
        hit = self.memo.get(key)
        if hit is None:
            hit = self.memo[key] = nodes_to_add(state, usages, per_node)
        return hit


def per_node_devices(pool: PoolView) -> tuple[int, ...]:
    return tuple(d.count for d in pool.cls.devices)


def cluster_keys(cluster: ClusterView) -> list[PoolKey]:
    """The ledger states of a cluster: its pools, and the zones of those that span zones."""
    return [(cluster.name, p.name) for p in cluster.pools] + [
        (cluster.name, p.name, z) for p in cluster.pools if p.zoned for z in p.zones]


def fingerprint(state: PoolState) -> object:
    """What a pool's answer depends on (a ledger holds one kind of pool)."""
    if isinstance(state, NodePool):
        return state.free
    assert isinstance(state, DevicePool)
    return (frozenset(state.groups.items()), state.overdraft)


def nodes_to_add(state: PoolState, usages: list[Usage], per_node: tuple[int, ...]) -> int:
    """Nodes to add so that `usages` fit: in Node accounting the missing nodes; in Device
    accounting one fresh node per pod the current nodes cannot hold, packed best-fit,
    plus one per kept pod that is already without a node (an upper bound)."""
    if isinstance(state, NodePool):
        return max(0, sum(pods for pods, _ in usages) - state.free)
    assert isinstance(state, DevicePool)
    groups = dict(state.groups)
    failed = []
    for pods, per_pod in usages:
        for _ in range(pods):
            if not DevicePool._place(groups, per_pod):
                failed.append(per_pod)
    return state.overdraft + fresh_nodes(failed, per_node)


def grown(state: PoolState, n: int, per_node: tuple[int, ...]) -> PoolState:
    """`state` with `n` more empty nodes; kept pods without a node take new ones first."""
    if isinstance(state, NodePool):
        return NodePool(state.free + n)
    assert isinstance(state, DevicePool)
    groups = dict(state.groups)
    absorbed = min(n, state.overdraft)
    if n - absorbed:
        groups[per_node] = groups.get(per_node, 0) + n - absorbed
    return DevicePool(groups, state.overdraft - absorbed)
