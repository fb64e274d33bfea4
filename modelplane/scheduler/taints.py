"""Cluster taints versus deployment tolerations (semantics §7, Kubernetes rules)."""

from __future__ import annotations

from .shape import Taint, Toleration


def tolerates(tol: Toleration, taint: Taint) -> bool:
    if tol.effect and tol.effect != taint.effect:
        return False
    if tol.operator == "Exists":
        return not tol.key or tol.key == taint.key
    return tol.key == taint.key and (tol.value or "") == (taint.value or "")


def untolerated(taints: tuple[Taint, ...], tolerations: tuple[Toleration, ...],
                effects: tuple[str, ...]) -> Taint | None:
    """First taint with one of `effects` that no toleration covers (every taint must be
    tolerated; tolerating one of two is not enough)."""
    for taint in taints:
        if taint.effect in effects and not any(tolerates(t, taint) for t in tolerations):
            return taint
    return None


def repelling_taint(taints: tuple[Taint, ...], tolerations: tuple[Toleration, ...]) -> Taint | None:
    """A cluster takes no new replicas while any NoSchedule or NoExecute taint is untolerated."""
    return untolerated(taints, tolerations, ("NoSchedule", "NoExecute"))


def evicting_taint(taints: tuple[Taint, ...], tolerations: tuple[Toleration, ...]) -> Taint | None:
    """Existing replicas are dropped only by an untolerated NoExecute taint (drain)."""
    return untolerated(taints, tolerations, ("NoExecute",))
