from modelplane.routing import CLUSTER_LABEL, DEPLOYMENT_LABEL, RouteEntry, replica_endpoint

NS = "ml-team"
SVC = (NS, "chat")


def replica(dep: str, index: int, cluster: str):
    return replica_endpoint(NS, f"{dep}-{index}", dep, cluster, index)


def select(dep: str, weight: int = 1, cluster: str | None = None, priority: int = 0) -> RouteEntry:
    labels = {DEPLOYMENT_LABEL: dep}
    if cluster:
        labels[CLUSTER_LABEL] = cluster
    return RouteEntry(dep, weight, labels, priority)
