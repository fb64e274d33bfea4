"""Capacity ledgers: free capacity per (cluster, pool), in nodes or in devices.

`Usage` = (pods, devices one pod takes per device kind of the pool's class); only
members that claim a DRA device produce one (claimless members cost nothing).

Node accounting (the reference): a claiming pod takes a whole node.
Device accounting (default): each node keeps its free devices per kind; all devices of
one pod come from one node, chosen best-fit. Nodes with equal free vectors are
interchangeable, so a pool is stored as {free vector: node count}: a 1,000-node pool
costs one dict entry until its nodes start to differ.

A pool whose nodes span zones also has one state per zone, keyed (cluster, pool, zone), in the
same units: what its gang copies take from that zone (plugins.gang_zones). Pods that are no gang
charge the pool only; a gang copy charges the pool and one zone of it.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Protocol

Usage = tuple[int, tuple[int, ...]]
# (cluster, pool), or (cluster, pool, zone) for the share of a zoned pool its gangs take
PoolKey = tuple[str, ...]
# What a kept replica charges on its cluster: a pool's name, or (pool, zone) for a gang's zone
ChargeKey = str | tuple[str, str]


def ledger_key(cluster: str, part: ChargeKey) -> PoolKey:
    return (cluster, part) if isinstance(part, str) else (cluster, *part)


@dataclass(frozen=True)
class ObservedPool:
    """A pool as read from its cluster (modelplane.observe): one vector per usable node of
    the devices free there, per device kind of the pool's class (class order). Devices
    held by anyone but the replicas the plan charges itself are already taken out."""

    free: tuple[tuple[int, ...], ...]

    @property
    def nodes(self) -> int:
        return len(self.free)


# `observed` of place_fleet: per cluster, per pool, a node count (declared by hand) or
# what was read from the cluster.
ObservedCapacity = Mapping[str, Mapping[str, "int | ObservedPool"]]

# The ledger's units: Device (devices claimed, the default) or Node (the reference's
# whole node per claiming pod).
ACCOUNTING_MODES = ("Device", "Node")
DEFAULT_ACCOUNTING = "Device"


class PoolState(Protocol):
    unit: str

    def copy(self) -> PoolState: ...
    def try_take(self, usages: Iterable[Usage]) -> int: ...
    def force_take(self, usages: Iterable[Usage]) -> None: ...


class NodePool:
    __slots__ = ("free",)
    unit = "nodes"

    def __init__(self, free: int) -> None:
        self.free = free

    def copy(self) -> NodePool:
        return NodePool(self.free)

    def try_take(self, usages: Iterable[Usage]) -> int:
        """Charge and return 0, or charge nothing and return how many nodes are missing."""
        need = sum(pods for pods, _ in usages)
        if need > self.free:
            return need - self.free
        self.free -= need
        return 0

    def force_take(self, usages: Iterable[Usage]) -> None:
        # Retained replicas are charged even past capacity (retain never checks it);
        # a negative balance then blocks new placements on the pool.
        self.free -= sum(pods for pods, _ in usages)


class DevicePool:
    __slots__ = ("groups", "overdraft")
    unit = "devices"

    def __init__(self, groups: dict[tuple[int, ...], int], overdraft: int = 0) -> None:
        self.groups = groups          # free devices per kind -> nodes in that state
        self.overdraft = overdraft    # retained pods that fit on no node

    @classmethod
    def full(cls, per_node: tuple[int, ...], nodes: int) -> DevicePool:
        return cls({per_node: nodes} if nodes > 0 else {})

    def copy(self) -> DevicePool:
        return DevicePool(dict(self.groups), self.overdraft)

    @staticmethod
    def _place(groups: dict[tuple[int, ...], int], per_pod: tuple[int, ...]) -> bool:
        best = None
        best_key = None
        if len(per_pod) == 1:
            # One device kind (most classes): the fewest free that still fit, directly.
            need = per_pod[0]
            for vec in groups:
                if vec[0] >= need and (best is None or vec < best):
                    best = vec
        else:
            for vec in groups:
                for f, u in zip(vec, per_pod, strict=True):
                    if f < u:
                        break
                else:
                    # best-fit: the node with the fewest free devices that still fits keeps
                    # emptier nodes whole for larger pods
                    key = (sum(vec), vec)
                    if best_key is None or key < best_key:
                        best, best_key = vec, key
        if best is None:
            return False
        left = groups[best] - 1
        if left:
            groups[best] = left
        else:
            del groups[best]
        rest = tuple(f - u for f, u in zip(best, per_pod, strict=True))
        groups[rest] = groups.get(rest, 0) + 1
        return True

    def try_take(self, usages: Iterable[Usage]) -> int:
        """Charge and return 0, or charge nothing and return how many devices are
        missing (devices of the pods that found no node)."""
        if not isinstance(usages, list):
            usages = list(usages)
        if not usages:
            return 0
        if len(usages) == 1 and usages[0][0] == 1 and not self.overdraft:
            # One pod: placing it either succeeds or changes nothing, so no copy to roll back.
            per_pod = usages[0][1]
            return 0 if self._place(self.groups, per_pod) else sum(per_pod)
        groups = dict(self.groups)
        short = 0
        for pods, per_pod in usages:
            for placed in range(pods):
                if self.overdraft or not self._place(groups, per_pod):
                    # nothing changed, so the rest of these identical pods fail too
                    short += (pods - placed) * sum(per_pod)
                    break
        if short:
            return short
        self.groups = groups
        return 0

    def force_take(self, usages: Iterable[Usage]) -> None:
        for pods, per_pod in usages:
            for _ in range(pods):
                if not self._place(self.groups, per_pod):
                    self.overdraft += 1

    def pack_retained(self, usages: list[Usage]) -> None:
        """Charge pods that already run here. The plan does not record nodes, so they
        are re-packed: in the order given (the order a fresh plan placed them, so a
        re-plan reproduces its packing), and if that leaves pods without a node, again
        largest first (best-fit decreasing); the packing with fewer misfits wins."""
        natural = self.copy()
        natural.force_take(usages)
        if natural.overdraft:
            decreasing = self.copy()
            decreasing.force_take(sorted(usages, key=lambda u: -sum(u[1])))
            if decreasing.overdraft < natural.overdraft:
                natural = decreasing
        self.groups, self.overdraft = natural.groups, natural.overdraft


class Ledger:
    def __init__(self, accounting: str) -> None:
        if accounting not in ACCOUNTING_MODES:
            raise ValueError(f"accounting must be one of {ACCOUNTING_MODES}, not {accounting!r}")
        self.accounting = accounting
        self._pools: dict[PoolKey, PoolState] = {}

    def add_pool(self, key: PoolKey, nodes: int, per_node: tuple[int, ...],
                 free: tuple[tuple[int, ...], ...] | None = None) -> None:
        """A pool of `nodes` whole nodes, or, when observed, of nodes with the `free`
        devices read from the cluster. In Node accounting an observed node counts only
        while every device the class declares for it is free (a pod takes a whole node)."""
        if free is not None:
            if self.accounting == "Node":
                self._pools[key] = NodePool(sum(1 for vec in free if _covers(vec, per_node)))
            else:
                self._pools[key] = DevicePool(dict(Counter(free)))
        elif self.accounting == "Node":
            self._pools[key] = NodePool(nodes)
        else:
            self._pools[key] = DevicePool.full(per_node, nodes)

    def state(self, key: PoolKey) -> PoolState:
        return self._pools[key]

    def put(self, key: PoolKey, state: PoolState) -> None:
        self._pools[key] = state

    def overdrawn(self) -> list[PoolKey]:
        """Pools whose kept replicas need more than they hold (retain never checks capacity)."""
        return sorted(key for key, state in self._pools.items() if _is_overdrawn(state))

    def charge_retained(self, charges: dict[PoolKey, list[Usage]]) -> None:
        """Charge every kept replica, pool by pool (capacity is not checked: a pool may
        end overdrawn and then takes nothing new). A pool that is no longer published
        consumes nothing: pods pinned to it can't run."""
        for key, usages in charges.items():
            state = self._pools.get(key)
            if state is None or not usages:
                continue
            if isinstance(state, DevicePool):
                state.pack_retained(usages)
            else:
                state.force_take(usages)


def _covers(free: tuple[int, ...], need: tuple[int, ...]) -> bool:
    return len(free) == len(need) and all(f >= n for f, n in zip(free, need, strict=True))


def _is_overdrawn(state: PoolState) -> bool:
    if isinstance(state, DevicePool):
        return state.overdraft > 0
    return isinstance(state, NodePool) and state.free < 0


class Trial:
    """Copy-on-write view over a ledger (or another trial): placing one replica on one
    cluster touches a few pools, and a failed trial must leave no trace."""

    __slots__ = ("_parent", "_touched")

    def __init__(self, parent: Ledger | Trial) -> None:
        self._parent = parent
        self._touched: dict[PoolKey, PoolState] = {}

    @property
    def accounting(self) -> str:
        return self._parent.accounting

    def state(self, key: PoolKey) -> PoolState:
        s = self._touched.get(key)
        if s is None:
            s = self._touched[key] = self._parent.state(key).copy()
        return s

    def put(self, key: PoolKey, state: PoolState) -> None:
        self._touched[key] = state

    def peek(self, key: PoolKey) -> PoolState:
        """The state as this trial sees it, not copied: read it, never change it."""
        s = self._touched.get(key)
        if s is not None:
            return s
        return self._parent.peek(key) if isinstance(self._parent, Trial) else self._parent.state(key)

    def commit(self) -> None:
        for key, state in self._touched.items():
            self._parent.put(key, state)
        self._touched = {}


def fresh_nodes(per_pods: Iterable[tuple[int, ...]], per_node: tuple[int, ...]) -> int:
    """How many fresh nodes of `per_node` free devices the pods (each its devices per kind)
    take, packed largest first, best fit (DevicePool's rule): what a scale-up must add for pods
    no current node holds, and what one gang copy takes of a zone."""
    fresh: dict[tuple[int, ...], int] = {}
    added = 0
    for per_pod in sorted(per_pods, key=lambda p: -sum(p)):
        if not DevicePool._place(fresh, per_pod):
            fresh[per_node] = fresh.get(per_node, 0) + 1
            added += 1
            DevicePool._place(fresh, per_pod)
    return added
