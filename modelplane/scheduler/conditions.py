"""The ReplicasScheduled condition of a deployment's placement."""

from __future__ import annotations

from .types import Condition

TYPE = "ReplicasScheduled"


def replicas_scheduled(desired: int, placed: int, candidates: int,
                       invalid: str | None = None) -> Condition:
    if invalid:
        return Condition(TYPE, "False", "InvalidNodeSelector", invalid)
    if desired == 0:
        return Condition(TYPE, "True", "ScaledToZero", "replicas is 0: deployment parked")
    if candidates == 0:
        return Condition(TYPE, "False", "NoClusters",
                         "No InferenceCluster matches the cluster selectors")
    if placed >= desired:
        return Condition(TYPE, "True", "ReplicasCreated", f"Scheduled {placed} of {desired} replicas")
    if placed > 0:
        # Diverges from the reference on purpose: a partial shortfall is not "True".
        return Condition(TYPE, "False", "PartialCapacity", f"Scheduled {placed} of {desired} replicas")
    return Condition(TYPE, "False", "InsufficientCapacity",
                     f"0 of {desired} replicas scheduled (checked {candidates} clusters)")


OVERDRAWN = "Overdrawn"


def overdrawn(dropped: list[str]) -> Condition:
    """The previous placement kept more replicas on a pool than it holds; those listed
    were not kept (docs/scheduler.md, "Overdrawn pools")."""
    return Condition(OVERDRAWN, "True", "PreviousPlacementOvercommitted",
                     f"{len(dropped)} kept replica(s) did not fit their pool and were not kept: "
                     + "; ".join(dropped))
