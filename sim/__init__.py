"""Simulated GPU clusters on real Kubernetes control planes (etcd, kube-apiserver,
kube-controller-manager, kube-scheduler, kwok, LeaderWorkerSet), one per InferenceCluster.

Not part of the pure core: this package starts processes. See docs/sim.md.

    from sim import SimFleet
    kubeconfigs = SimFleet(".modelplane/sim").up(fleet)   # {cluster: kubeconfig path}, the stacks'
                                                          # control cluster included (simulated_clusters)
"""

from .errors import SimError
from .fleet import DEFAULT_STATE_DIR, ClusterStatus, SimFleet, down, simulated_clusters, status, up
from .kube import KubeClient
from .tools import SimTools, find_tools

__all__ = ["DEFAULT_STATE_DIR", "ClusterStatus", "KubeClient", "SimError", "SimFleet", "SimTools", "down", "find_tools",
           "simulated_clusters", "status", "up"]
