"""The registry: every per-cluster plugin of the cycle, in the order its hooks run.

Order matters where hooks compose: filters give each cluster the first refusal in this
order (candidate filters first); scores rank clusters lexicographically in this order,
then by name; reserve hooks run in this order (device fit places the engines that the
budgets after it charge). A new plugin is one file in this package and one line here
(docs/scheduler.md, "Adding a plugin").
"""

from __future__ import annotations

from modelplane.scheduler.cycle import Plugin

from .budgets import Budgets
from .cache_staging import CacheStaging
from .device_fit import DeviceFit
from .gang_zones import GangZones
from .outages import Outages
from .selectors import Selectors
from .spread import Spread
from .spread_before_pack import SpreadBeforePack
from .taints import Taints
from .tiers import Tiers

REGISTRY: tuple[Plugin, ...] = (
    Selectors,           # filter (candidate): the deployment's clusterSelector
    CacheStaging,        # filter (candidate): where its ModelCache is staged
    Outages,             # filter: unreachable or unready clusters, failovers in flight
    Taints,              # filter: NoSchedule/NoExecute; keep: NoExecute evicts
    Tiers,               # filter: in no tier; score: tier rank
    Spread,              # admit, score, reserve: spreadConstraints
    DeviceFit,           # keep: pins still match; reserve: engines on the pools' capacity
    GangZones,           # keep, reserve: a gang copy's nodes from one zone of its pools
    Budgets,             # reserve: FleetBudgets pay for the devices
    SpreadBeforePack,    # score: fewest replicas of the deployment, then name
)
