"""Gang zones over random EKS/GKE fleets (hypothesis): no placed gang copy uses more of a zone
than the zone holds, every copy on a pool spanning zones has one zone of its pools, and that
still holds when a fleet is re-planned from its own placement on smaller pools.

What a zone holds is recomputed here from the cloud rule, not from the scheduler's views: an
EKS pool's zones are each sure of nodes // zones (Auto Scaling spreads evenly, AWS picks the
zones that get the remainder); a fixed GKE pool holds nodeCount / zones per zone; an autoscaled
GKE pool (total limits, location policy ANY) caps no zone below the pool."""

from __future__ import annotations

import copy
from collections import defaultdict
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from modelplane.api import load_documents
from modelplane.scheduler import FleetPlacement, place_fleet
from tests.manifests import cluster, deployment, engine, gpu_class, mem_at_least, member, pool, request

SETTINGS = settings(max_examples=80, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
GPUS = 8


@st.composite
def zoned_fleets(draw: st.DrawFn) -> list[dict[str, Any]]:
    docs: list[dict[str, Any]] = [gpu_class("h100", GPUS)]
    for c in range(draw(st.integers(1, 3))):
        source = draw(st.sampled_from(["EKS", "GKE"]))
        region = "us-east-1" if source == "EKS" else "us-central1"
        suffixes = ["a", "b", "c"] if source == "EKS" else ["-a", "-b", "-c"]
        pools = []
        for p in range(draw(st.integers(1, 2))):
            zones = [region + s for s in suffixes[:draw(st.integers(1, 3))]]
            autoscaled = source == "GKE" and draw(st.booleans())
            per_zone = draw(st.integers(0, 3))
            nodes = per_zone * len(zones) if source == "GKE" else draw(st.integers(0, 8))
            pools.append(pool(f"p{p}", "h100", nodes, nodes + draw(st.integers(1, 4)) if autoscaled else None,
                              zones=zones if source == "GKE" or draw(st.booleans()) else None))
        docs.append(cluster(f"c{c}", *pools, source={"source": source, source.lower(): {"region": region}}))
    for d in range(draw(st.integers(1, 4))):
        gpus = draw(st.sampled_from([4, 8]))
        r = request("gpu", gpus, mem_at_least(40))
        if draw(st.integers(0, 3)) == 0:
            eng = engine("main", member("Standalone", r))
        else:
            eng = engine("main", member("Leader", r), member("Worker", r, nodes=draw(st.integers(1, 3))),
                         copies=draw(st.integers(1, 2)))
        docs.append(deployment(f"m{d}", draw(st.integers(1, 4)), eng))
    return docs


def zone_holds(docs: list[dict[str, Any]]) -> dict[tuple[str, str], tuple[list[str], int | None]]:
    """(cluster, pool) -> (its zones, nodes each zone holds or None when uncapped), from the docs."""
    out: dict[tuple[str, str], tuple[list[str], int | None]] = {}
    for d in docs:
        if d["kind"] != "InferenceCluster":
            continue
        src = d["spec"]["cluster"]
        # an EKS pool without zones spans the cluster's VPC: its pools' zones, else the region's
        # first two, always at least two (modelplane.clouds.aws.eks_zones)
        vpc = sorted({z for p in d["spec"]["nodePools"] for z in p.get("zones") or []}) or ["us-east-1a", "us-east-1b"]
        if len(vpc) < 2:
            vpc += [z for z in ("us-east-1a", "us-east-1b") if z not in vpc][:1]
        for p in d["spec"]["nodePools"]:
            zones = p.get("zones") or (vpc if src["source"] == "EKS" else [])
            nodes = p.get("maxNodeCount") or p["nodeCount"]
            capped = not (src["source"] == "GKE" and p.get("maxNodeCount"))
            out[(d["metadata"]["name"], p["name"])] = (list(dict.fromkeys(zones)),
                                                       nodes // len(zones) if capped and zones else None)
    return out


def check_zones(docs: list[dict[str, Any]], fp: FleetPlacement, accounting: str) -> None:
    holds = zone_holds(docs)
    fleet = load_documents(copy.deepcopy(docs))
    used: dict[tuple[str, str, str], int] = defaultdict(int)     # nodes (Node) or devices (Device)
    for dp in fp.deployments:
        spec = fleet.deployments[(dp.namespace, dp.name)].spec.template.spec
        for r in dp.replicas:
            for e in spec.engines:
                placed = r.engines[e.name]
                if len(e.members) < 2:
                    assert placed.zones == ()
                    continue
                pools = placed.pools_for(len(e.members))
                zoned = [p for p in set(pools) if len(holds[(r.cluster, p)][0]) > 1]
                if not zoned:
                    assert placed.zones == ()
                    continue
                assert len(placed.zones) == e.copies, (r.name, placed.zones)
                for zone in placed.zones:
                    assert all(zone in holds[(r.cluster, p)][0] for p in pools if holds[(r.cluster, p)][0]), zone
                    for m, p in zip(e.members, pools, strict=True):
                        pods = m.pods
                        gpus = sum(q.count for q in m.node_selector.devices) if m.node_selector else 0
                        used[(r.cluster, p, zone)] += pods if accounting == "Node" else pods * gpus
    for (c, p, zone), n in used.items():
        zones, per_zone = holds[(c, p)]
        if per_zone is None:
            continue
        cap = per_zone if accounting == "Node" else per_zone * GPUS
        assert n <= cap, f"{c}/{p} zone {zone}: gang copies use {n}, the zone holds {cap}"


@given(zoned_fleets(), st.sampled_from(["Node", "Device"]))
@SETTINGS
def test_no_placed_gang_copy_uses_more_of_a_zone_than_it_holds(docs: list[dict[str, Any]], accounting: str) -> None:
    fp = place_fleet(load_documents(copy.deepcopy(docs)), accounting=accounting)
    check_zones(docs, fp, accounting)


@given(zoned_fleets(), st.sampled_from(["Node", "Device"]))
@SETTINGS
def test_a_replan_on_smaller_pools_keeps_within_every_zone(docs: list[dict[str, Any]], accounting: str) -> None:
    """Kept gangs charge their recorded zones; a zone they overdraw drops them."""
    first = place_fleet(load_documents(copy.deepcopy(docs)), accounting=accounting)
    smaller = copy.deepcopy(docs)
    for d in smaller:
        for p in d["spec"].get("nodePools", []) if d["kind"] == "InferenceCluster" else []:
            step = len(p.get("zones") or [None]) if d["spec"]["cluster"]["source"] == "GKE" else 1
            p["nodeCount"] = max(0, p["nodeCount"] - step)
            if p.get("maxNodeCount"):
                p["maxNodeCount"] = max(p["nodeCount"], p["maxNodeCount"] - step, 1)
    again = place_fleet(load_documents(copy.deepcopy(smaller)), previous=first, accounting=accounting)
    check_zones(smaller, again, accounting)
