"""`routingPolicy.weighting: Capacity` (issue 14) through real Traefik and mock engines:
an entry's share follows each endpoint's serving copies instead of an even split."""
from dataclasses import replace

from modelplane.commands.traffic import run_split
from modelplane.routing import CAPACITY, RouteEntry, replica_endpoint

from .helpers import NS, SVC

APP = {"example.org/app": "chat"}


def app_replica(dep: str, cluster: str, copies: int):
    return replace(replica_endpoint(NS, f"{dep}-0", dep, cluster, 0, APP), capacity=copies)


def test_capacity_entry_splits_200_requests_150_50_across_clusters(fleet):
    """3 copies in east, 1 in west: the control plane's cluster weights carry the 3:1."""
    eps = fleet.start_engines([app_replica("big", "east", 3), app_replica("small", "west", 1)])
    fleet.route({SVC: [RouteEntry("chat", 1, APP, weighting=CAPACITY)]}, eps)
    res = run_split(fleet.service_url(*SVC), 200)
    assert (res.failed, res.by_deployment) == (0, {"big": 150, "small": 50})


def test_capacity_entry_splits_within_one_cluster(fleet):
    """Both in east: the workload gateway's backend weights carry the 3:1."""
    eps = fleet.start_engines([app_replica("big", "east", 3), app_replica("small", "east", 1)])
    fleet.route({SVC: [RouteEntry("chat", 1, APP, weighting=CAPACITY)]}, eps)
    res = run_split(fleet.service_url(*SVC), 200)
    assert (res.failed, res.by_deployment) == (0, {"big": 150, "small": 50})


def test_even_entry_over_the_same_endpoints_stays_100_100(fleet):
    """The reference's behaviour, unchanged when weighting is not Capacity."""
    eps = fleet.start_engines([app_replica("big", "east", 3), app_replica("small", "west", 1)])
    fleet.route({SVC: [RouteEntry("chat", 1, APP)]}, eps)
    res = run_split(fleet.service_url(*SVC), 200)
    assert (res.failed, res.by_deployment) == (0, {"big": 100, "small": 100})
