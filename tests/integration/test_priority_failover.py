"""Priority tiers (newer reference): a higher tier takes traffic only when every
endpoint of the lower tiers is unhealthy, and gives it back when they recover."""
import signal

from modelplane.commands.traffic import run_split

from .helpers import SVC, replica, select, wait_only


def test_backup_tier_only_serves_while_primary_is_down(fleet):
    eps = fleet.start_engines([replica("primary", 0, "east"), replica("backup", 0, "west")])
    fleet.route({SVC: [select("primary", 5, priority=0), select("backup", 5, priority=1)]}, eps)
    url = fleet.service_url(*SVC)
    assert run_split(url, 40).by_deployment == {"primary": 40}

    fleet.engines["primary-0"].signal(signal.SIGUSR1)
    wait_only(url, "backup-0")
    res = run_split(url, 40)
    assert (res.failed, res.by_deployment) == (0, {"backup": 40})

    fleet.engines["primary-0"].signal(signal.SIGUSR2)
    wait_only(url, "primary-0")
    res = run_split(url, 40)
    assert (res.failed, res.by_deployment) == (0, {"primary": 40})


def test_tiers_sharing_a_cluster_stay_separate(fleet):
    """Backup lives next to a primary: it must stay idle while any primary is healthy."""
    eps = fleet.start_engines([
        replica("primary", 0, "east"), replica("primary", 1, "west"), replica("backup", 0, "east"),
    ])
    fleet.route({SVC: [select("primary", 1, priority=0), select("backup", 1, priority=1)]}, eps)
    url = fleet.service_url(*SVC)
    assert run_split(url, 40).by_replica == {"primary-0": 20, "primary-1": 20}

    fleet.engines["primary-0"].signal(signal.SIGUSR1)  # east's primary down, east's backup fine
    wait_only(url, "primary-1")
    res = run_split(url, 40)
    assert (res.failed, res.by_replica) == (0, {"primary-1": 40})

    fleet.engines["primary-1"].signal(signal.SIGUSR1)  # no primary left anywhere
    wait_only(url, "backup-0")
    res = run_split(url, 40)
    assert (res.failed, res.by_replica) == (0, {"backup-0": 40})
