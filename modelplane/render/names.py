"""Names of everything rendered on a workload cluster (semantics §0.2)."""

from __future__ import annotations

import hashlib

from modelplane.naming import child_name

# Grove spells every pod hostname as <pcs>-<i>-<group>-<j>-<clique>-<k>, which must stay a
# DNS label; 24 characters for the PodCliqueSet leaves room for the rest.
PCS_NAME_BUDGET = 24


def workload_name(replica: str, engine: str) -> str:
    # Never the replica name itself: LWS and Grove create a headless Service named after
    # the workload, and the replica's serving Service already owns the replica name.
    return child_name(replica, engine)


def claim_template_name(replica: str, engine: str, role: str) -> str:
    return child_name(replica, engine, role.lower(), "devices")


def podcliqueset_name(replica: str, engine: str) -> str:
    joined = f"{replica}-{engine}"
    digest = hashlib.sha256(joined.encode("utf-8")).hexdigest()[:5]
    prefix = joined[: PCS_NAME_BUDGET - len(digest) - 1].rstrip("-")
    return f"{prefix}-{digest}"


def serving_service_name(replica: str) -> str:
    return replica


def cache_pvc_name(namespace: str, cache: str) -> str:
    return child_name("modelcache", namespace, cache)


def cache_job_name(namespace: str, cache: str) -> str:
    return child_name("modelcache", namespace, cache, "hydrate")


def cache_secret_name(namespace: str, cache: str) -> str:
    return child_name("modelcache", namespace, cache, "auth")
