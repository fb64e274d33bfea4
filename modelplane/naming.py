"""Deterministic object names (semantics §0.2).

Both helpers hash the full readable string and keep only a 57-character prefix, so
names stay within the 63-character Kubernetes label/name limit while distinct inputs
keep distinct names even when their prefixes collide.
"""

from __future__ import annotations

import hashlib

_PREFIX_MAX = 57


def _hash5(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:5]


def _prefix(text: str) -> str:
    return text[:_PREFIX_MAX].rstrip("-")


def child_name(*parts: str) -> str:
    """`<joined parts, truncated>-<sha256(joined)[:5]>`; the hash is always appended."""
    joined = "-".join(str(p) for p in parts)
    return f"{_prefix(joined)}-{_hash5(joined)}"


def replica_name(deployment: str, cluster: str, index: int) -> str:
    """Opaque replica name: only the deployment is readable; cluster and index live in
    labels, so a replica keeps its name when it is updated in place on the same
    (cluster, index)."""
    return f"{_prefix(deployment)}-{_hash5(f'{deployment}-{cluster}-{index}')}"


def claim_template_name(replica: str, engine: str, role: str) -> str:
    """The ResourceClaimTemplate of one member role of an engine of a replica (the renderer writes
    it, verify reads it back)."""
    return child_name(replica, engine, role.lower(), "devices")
