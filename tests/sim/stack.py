"""The Pulumi `sim` stack on simulated clusters, driven through the Automation API, and what tests
read back from the real API servers. The fixtures that hand these out are in tests/sim/conftest.py
(`sim_engine`, `sim_stack`, `module_sim_stack`, `module_fleet`).

    stack = sim_stack(REPO / "examples" / "kind", state_dir)   # stacks/Pulumi.sim.yaml, temp backend
    stack.up()                                                 # raises auto.errors.CommandError on failure
    with stack.kube("eu-west") as kube: kube.items("/api/v1/pods")
    check_placement(stack)                                     # pods Running where the plan put them
    stack.destroy(); assert_nothing_left(stack, objects)        # every object gone from the API servers
"""

from __future__ import annotations

import contextlib
import functools
import shutil
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from pulumi import automation as auto

from automation.processes import TrackedPulumiCommand
from automation.reconcile import lock_path
from modelplane.api import Fleet, load_manifests
from modelplane.clouds.nvidia import DRA_KUBELET_PLUGIN_NODE_SELECTOR_TERMS, DRA_KUBELET_PLUGIN_TOLERATIONS
from modelplane.node_objects import cluster_nodes
from modelplane.scheduler import FleetPlacement
from providers.placement import normalize_numbers
from sim import KubeClient, SimError, SimFleet
from sim.kube import resource_path
from tests.throwaway_stack import create_throwaway_stack

REPO = Path(__file__).resolve().parents[2]
SIM_STACK_FILE = REPO / "stacks" / "Pulumi.sim.yaml"
STACK_PREFIX = "simtest-"
POOL = "modelplane.ai/pool"
MANAGED = "app.kubernetes.io/managed-by=modelplane"
LWS_WORKER_INDEX = "leaderworkerset.sigs.k8s.io/worker-index"
LWS_GROUP_INDEX = "leaderworkerset.sigs.k8s.io/group-index"
# Kinds whose objects the program registers or whose controllers make from them (pods, claims),
# listed cluster-wide by label after a destroy.
OURS = ("/api/v1/pods", "/api/v1/services", "/api/v1/configmaps", "/api/v1/secrets",
        "/api/v1/persistentvolumeclaims", "/apis/apps/v1/deployments", "/apis/apps/v1/statefulsets",
        "/apis/batch/v1/jobs", "/apis/resource.k8s.io/v1/resourceclaims",
        "/apis/resource.k8s.io/v1/resourceclaimtemplates", "/apis/leaderworkerset.x-k8s.io/v1/leaderworkersets")


def wait_for(what: str, check: Callable[[], Any], timeout: float = 90.0, interval: float = 0.5,
             explain: Callable[[], str] | None = None) -> Any:
    """`check()`'s first truthy value, polled every `interval` s; after `timeout` s an
    AssertionError naming `what`, with `explain()` (what the cluster said: `scheduler_said`) and
    the last value checked."""
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() >= deadline:
            message = f"timed out after {timeout:g}s waiting for {what} (last: {_short(value)})"
            if explain is not None:
                try:
                    message += "\n" + explain()
                except Exception as exc:  # noqa: BLE001 - the timeout is the failure; the explanation is a bonus
                    message += f"\n(could not ask the cluster why: {exc})"
            raise AssertionError(message)
        time.sleep(interval)


def _short(value: Any, limit: int = 300) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[:limit] + "..."


def scheduler_said(kube: KubeClient, namespace: str, selector: str | None = None, events: int = 20) -> str:
    """What kube-scheduler said about the pods of `namespace` (`selector`: a label selector) it
    has not bound: each one's PodScheduled condition, then the namespace's last `events`
    scheduling Events (FailedScheduling and the like), for a timeout's message."""
    params = {"labelSelector": selector} if selector else None
    lines = []
    for pod in kube.items(f"/api/v1/namespaces/{namespace}/pods", params):
        name, node = pod["metadata"]["name"], pod["spec"].get("nodeName")
        if node:
            lines.append(f"  {name}: bound to {node}")
            continue
        said = [f"{c.get('reason') or c.get('status')}: {c.get('message') or '-'}"
                for c in (pod.get("status") or {}).get("conditions") or [] if c.get("type") == "PodScheduled"]
        lines.append(f"  {name}: not bound; PodScheduled {'; '.join(said) or 'not yet set (not tried yet)'}")
    found = [e for e in kube.items(f"/api/v1/namespaces/{namespace}/events")
             if "default-scheduler" in ((e.get("source") or {}).get("component"), e.get("reportingComponent"))]
    found.sort(key=lambda e: str(e.get("lastTimestamp") or e.get("eventTime") or ""))
    lines += [f"  event {e.get('reason')} {(e.get('involvedObject') or {}).get('name')}: {e.get('message')}"
              for e in found[-events:]]
    return f"kube-scheduler on {kube.server}, namespace {namespace}:\n" + ("\n".join(lines) or "  no pods, no events")


@dataclass
class SimStack:
    """One throwaway stack of the repository's program with the sim stack's configuration,
    reaching the simulated clusters recorded in `state_dir`."""

    stack: auto.Stack
    name: str
    manifests: Path
    state_dir: Path
    config_file: Path
    env: dict[str, str] = field(default_factory=dict)   # the engine's, for CLIs run on it

    # ---------------------------------------------------------------- Pulumi

    def up(self, **kwargs: Any) -> auto.UpResult:
        return self.stack.up(color="never", **kwargs)

    def preview(self, **kwargs: Any) -> auto.PreviewResult:
        return self.stack.preview(color="never", **kwargs)

    def destroy(self, **kwargs: Any) -> auto.DestroyResult:
        return self.stack.destroy(color="never", **kwargs)

    def set_manifests(self, path: Path) -> None:
        self.manifests = path
        self.stack.set_config("modelplane:manifests", auto.ConfigValue(str(path)))

    def set_config(self, key: str, value: str, *, path: bool = False) -> None:
        self.stack.set_config(key, auto.ConfigValue(value), path=path)

    def set_config_value(self, key: str, value: Any) -> None:
        """`key` in the stack's config file set to a YAML value (a number, a block), which
        `set_config` (the CLI's `config set`) would store as a string."""
        doc = yaml.safe_load(self.config_file.read_text()) or {}
        doc.setdefault("config", {})[key] = value
        self.config_file.write_text(yaml.safe_dump(doc, sort_keys=True))

    def fleet(self) -> Fleet:
        return load_manifests(self.manifests)

    def placement(self) -> FleetPlacement:
        """The placement the last `up` applied (the stack output)."""
        raw = self.stack.outputs()["placement"].value
        return FleetPlacement.from_json(normalize_numbers(raw))

    def kubernetes_objects(self) -> list[tuple[str, str]]:
        """(cluster, API path) of every Kubernetes object in the stack's state."""
        deployment = self.stack.export_stack().deployment or {}
        resources = deployment.get("resources") or []
        kubeconfigs = {f"{r['urn']}::{r['id']}": str(r["inputs"].get("kubeconfig", ""))
                       for r in resources if r.get("type") == "pulumi:providers:kubernetes"}
        objects = []
        for res in resources:
            out = res.get("outputs") or {}
            meta = out.get("metadata") or {}
            kubeconfig = kubeconfigs.get(str(res.get("provider")), "")
            if not str(res.get("type", "")).startswith("kubernetes:") or not meta.get("name") or not kubeconfig:
                continue
            path = resource_path(str(out["apiVersion"]), str(out["kind"]), meta.get("namespace"), str(meta["name"]))
            objects.append((Path(kubeconfig).parent.name, path))
        return objects

    # ---------------------------------------------------------------- the clusters

    def kubeconfig(self, cluster: str) -> Path:
        return self.state_dir / cluster / "kubeconfig"

    @contextlib.contextmanager
    def kube(self, cluster: str) -> Iterator[KubeClient]:
        with KubeClient.from_kubeconfig(self.kubeconfig(cluster)) as kube:
            yield kube


def make_sim_stack(env: dict[str, str], manifests: Path, state_dir: Path,
                   config: dict[str, Any] | None = None) -> SimStack:
    """A new stack `simtest-<hex>` whose config is stacks/Pulumi.sim.yaml with `manifests` and
    `sim.stateDir` pointed at these, plus `config` (a None value removes the key). Remove it with
    `remove_sim_stack`."""
    name = f"{STACK_PREFIX}{uuid.uuid4().hex[:10]}"
    values = dict((yaml.safe_load(SIM_STACK_FILE.read_text()) or {}).get("config") or {})
    values["modelplane:manifests"] = str(manifests)
    values["modelplane:sim"] = {**(values.get("modelplane:sim") or {}), "stateDir": str(state_dir)}
    for key, value in (config or {}).items():
        if value is None:
            values.pop(key, None)
        else:
            values[key] = value
    # The `pulumi` scripts/engine-env put first on PATH (scripts/engine/bin, which runs the real CLI
    # with the plugins on its PATH); the Automation API runs <root>/bin/pulumi.
    found = shutil.which("pulumi", path=env.get("PATH"))
    command = TrackedPulumiCommand(root=str(Path(found).resolve().parent.parent)) if found else None
    stack, config_file = create_throwaway_stack(name, values, env, env["PULUMI_HOME"], command,
                                                "tests/sim (stack.py)")
    return SimStack(stack, name, manifests, state_dir, config_file, env)


def remove_sim_stack(stack: SimStack, *, destroy: bool = True) -> None:
    """Destroy what is left (even after a failed test; not with destroy=False, for clusters about
    to be stopped) and remove the stack and its config file."""
    try:
        if destroy and stack.kubernetes_objects():
            stack.destroy()
    except Exception:  # noqa: BLE001 - a failed destroy must not keep the config file behind
        pass
    with contextlib.suppress(Exception):
        stack.stack.workspace.remove_stack(stack.name, force=True)
    stack.config_file.unlink(missing_ok=True)
    lock_path(REPO, stack.name).unlink(missing_ok=True)     # a `reconcile` loop's lock, if one ran on it


def remove_stale_stack_files(max_age_s: float = 7200) -> None:
    """Config files of runs killed before their teardown (old enough not to be a concurrent run's)."""
    for stale in (REPO / "stacks").glob(f"Pulumi.{STACK_PREFIX}*.yaml"):
        with contextlib.suppress(OSError):
            if time.time() - stale.stat().st_mtime > max_age_s:
                stale.unlink()


# -------------------------------------------------------------------- what the clusters hold

MERGE_PATCH = {"Content-Type": "application/merge-patch+json"}


def cordon(kube: KubeClient, nodes: list[str], unschedulable: bool = True) -> None:
    """Cordon (or uncordon) `nodes`, as `kubectl cordon` does: spec.unschedulable, which
    kube-scheduler's NodeUnschedulable filter reads; uncordoning requeues the pods it refused."""
    for name in nodes:
        resp = kube.http.patch(f"/api/v1/nodes/{name}", json={"spec": {"unschedulable": unschedulable or None}},
                               headers=MERGE_PATCH)
        assert resp.status_code == 200, f"{'cordon' if unschedulable else 'uncordon'} {name}: {resp.text}"


def unschedulable(pod: dict[str, Any]) -> bool:
    """kube-scheduler tried the pod and found no node (PodScheduled False, Unschedulable)."""
    return not pod["spec"].get("nodeName") and any(
        c.get("type") == "PodScheduled" and c.get("reason") == "Unschedulable"
        for c in (pod.get("status") or {}).get("conditions") or [])


def running_pods(kube: KubeClient, namespace: str, selector: str) -> list[dict[str, Any]]:
    return [p for p in kube.items(f"/api/v1/namespaces/{namespace}/pods", {"labelSelector": selector})
            if p.get("status", {}).get("phase") == "Running" and not p["metadata"].get("deletionTimestamp")]


def allocated_devices(kube: KubeClient, pod: dict[str, Any]) -> list[dict[str, Any]]:
    """The device results of the pod's allocated claim(s), as the real kube-scheduler wrote them."""
    results: list[dict[str, Any]] = []
    for status in pod.get("status", {}).get("resourceClaimStatuses") or []:
        ns = pod["metadata"]["namespace"]
        claim = kube.get(f"/apis/resource.k8s.io/v1/namespaces/{ns}/resourceclaims/{status['resourceClaimName']}")
        allocation = (claim.get("status") or {}).get("allocation") or {}
        results += (allocation.get("devices") or {}).get("results") or []
    return results


@dataclass(frozen=True)
class ReplicaPods:
    """What one placed replica runs on its cluster: pods per (engine, member index)."""

    name: str
    cluster: str
    pods: dict[tuple[str, int], list[dict[str, Any]]]


def check_placement(stack: SimStack, timeout: float = 180.0) -> list[ReplicaPods]:
    """Every placed replica's pods are Running on nodes of the pool the plan chose for their
    member, every claim is allocated by the real kube-scheduler with the device count the plan
    charged (on the pod's own node), and each LeaderWorkerSet group has 1 + worker.nodes pods per
    copy. Returns the pods per replica."""
    fleet, placement = stack.fleet(), stack.placement()
    out = []
    for dep in placement.deployments:
        spec = fleet.deployments[(dep.namespace, dep.name)]
        for replica in dep.replicas:
            with stack.kube(replica.cluster) as kube:
                pods = _check_replica(kube, spec, dep.namespace, dep.name, replica, timeout)
            out.append(ReplicaPods(replica.name, replica.cluster, pods))
    return out


def _exactly(count: int, kube: KubeClient, namespace: str, selector: str) -> list[dict[str, Any]] | None:
    pods = running_pods(kube, namespace, selector)
    return pods if len(pods) == count else None


def _gone(kube: KubeClient, path: str) -> bool:
    return kube.request("GET", path).status_code == 404


def _check_replica(kube: KubeClient, spec: Any, namespace: str, deployment: str, replica: Any,
                   timeout: float) -> dict[tuple[str, int], list[dict[str, Any]]]:
    by_member: dict[tuple[str, int], list[dict[str, Any]]] = {}
    for engine in spec.spec.template.spec.engines:
        placed = replica.engines[engine.name]
        members = engine.members
        want = engine.copies * sum(m.pods for m in members)
        selector = (f"modelplane.ai/deployment={deployment},modelplane.ai/replica-index={replica.index},"
                    f"modelplane.ai/engine={engine.name}")
        pods = wait_for(f"{want} Running pods of {replica.name}/{engine.name} on {replica.cluster}",
                        functools.partial(_exactly, want, kube, namespace, selector), timeout,
                        explain=functools.partial(scheduler_said, kube, namespace, selector))
        gang = len(members) > 1 or any(m.role != "Standalone" for m in members)
        groups: dict[str, int] = {}
        for pod in pods:
            labels = pod["metadata"]["labels"]
            if gang:
                leader = labels[LWS_WORKER_INDEX] == "0"
                index = next(i for i, m in enumerate(members) if (m.role == "Leader") == leader)
                groups[labels[LWS_GROUP_INDEX]] = groups.get(labels[LWS_GROUP_INDEX], 0) + 1
            else:
                index = 0
            by_member.setdefault((engine.name, index), []).append(pod)
            node = kube.get(f"/api/v1/nodes/{pod['spec']['nodeName']}")
            pool = placed.member_pools[index] if placed.member_pools else placed.pool
            assert node["metadata"]["labels"].get(POOL) == pool, \
                f"{pod['metadata']['name']} runs on {node['metadata']['name']}, not on pool {pool}"
            charged = sum(r.count for r in placed.requests[index]) if placed.requests else 0
            devices = allocated_devices(kube, pod)
            assert len(devices) == charged, \
                f"{pod['metadata']['name']}: {len(devices)} devices allocated, the plan charged {charged}"
            assert {d["pool"] for d in devices} <= {pod["spec"]["nodeName"]}, devices
        if gang:
            per_copy = sum(m.pods for m in members)
            assert sorted(groups.values()) == [per_copy] * engine.copies, \
                f"{replica.name}/{engine.name}: pods per LeaderWorkerSet group {groups}, want {per_copy} each"
    return by_member


def uids(stack: SimStack) -> dict[tuple[str, str], str]:
    """{(cluster, API path): UID} of every Kubernetes object in the state, from its API server."""
    out = {}
    for cluster, path in stack.kubernetes_objects():
        with stack.kube(cluster) as kube:
            out[(cluster, path)] = str(kube.get(path)["metadata"]["uid"])
    return out


def assert_nothing_left(stack: SimStack, clusters: list[str], before: dict[tuple[str, str], str],
                        timeout: float = 90.0) -> None:
    """After `destroy`: every object the stack had (`before`, from `uids`) is gone from its API
    server, and no object labelled as ours (pods and claims their controllers made included) is
    left on any cluster."""
    assert before, "nothing was recorded before the destroy"
    for cluster, path in before:
        with stack.kube(cluster) as kube:
            wait_for(f"{path} on {cluster} to be deleted", functools.partial(_gone, kube, path), timeout)
    for cluster in clusters:
        with stack.kube(cluster) as kube:
            def leftovers() -> list[str]:
                found = []
                for path in OURS:
                    try:
                        found += [f"{path} {i['metadata'].get('namespace')}/{i['metadata']['name']}"
                                  for i in kube.items(path, {"labelSelector": MANAGED})]
                    except SimError:
                        continue  # a kind this cluster does not serve (no LWS CRD)
                found += [f"namespace {n['metadata']['name']}" for n in kube.items("/api/v1/namespaces",
                                                                                   {"labelSelector": MANAGED})]
                return found
            wait_for(f"no object of ours on {cluster}", lambda: not leftovers(), timeout,
                     explain=lambda: f"left: {leftovers()}")


def bounded_await(sim: SimFleet) -> dict[str, Any]:
    """The sim stack config of a fleet whose pods the kube-scheduler cannot place: the update fails
    after 20 s instead of the default await."""
    return {"modelplane:sim": {"stateDir": str(sim.state_dir), "awaitTimeoutSeconds": 20}}


def failed_scheduling(kube: KubeClient, pod: dict[str, Any]) -> str:
    """The kube-scheduler's FailedScheduling message for the pod, once its event appears."""
    def reason() -> str | None:
        events = kube.items("/api/v1/namespaces/ml-team/events",
                            {"fieldSelector": f"involvedObject.name={pod['metadata']['name']}"})
        return next((e["message"] for e in events if e.get("reason") == "FailedScheduling"), None)

    message: str = wait_for("the kube-scheduler's FailedScheduling event", reason)
    return message


def ml_team_pods(stack: SimStack, cluster: str) -> list[dict[str, Any]]:
    with stack.kube(cluster) as kube:
        if kube.request("GET", "/api/v1/namespaces/ml-team").status_code == 404:
            return []
        return kube.items("/api/v1/namespaces/ml-team/pods")


def _plugin_nodes(kube: KubeClient, namespace: str) -> set[str]:
    """Nodes the real DaemonSet controller and kube-scheduler ran the kubelet-plugin pods on,
    once the DaemonSet says every pod it wants is ready."""
    def settled() -> set[str] | None:
        ds = kube.get(f"/apis/apps/v1/namespaces/{namespace}/daemonsets/kubelet-plugin")
        st = ds.get("status") or {}
        pods = [p for p in kube.items(f"/api/v1/namespaces/{namespace}/pods", {"labelSelector": "app=kubelet-plugin"})
                if p.get("status", {}).get("phase") == "Running"]
        if st.get("observedGeneration") != ds["metadata"]["generation"] or not st.get("desiredNumberScheduled"):
            return None
        if st.get("numberReady") != st["desiredNumberScheduled"] or len(pods) != st["desiredNumberScheduled"]:
            return None
        return {p["spec"]["nodeName"] for p in pods}
    nodes: set[str] = wait_for("the kubelet-plugin DaemonSet to settle", settled, timeout=90)
    return nodes


def _create_kubelet_plugin(kube: KubeClient, namespace: str) -> None:
    kube.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}}, exist_ok=True)
    kube.create({"apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {"name": "kubelet-plugin",
                                                                           "namespace": namespace},
                 "spec": {"selector": {"matchLabels": {"app": "kubelet-plugin"}},
                          "template": {"metadata": {"labels": {"app": "kubelet-plugin"}}, "spec": {
                              "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
                                  "nodeSelectorTerms": [dict(t) for t in DRA_KUBELET_PLUGIN_NODE_SELECTOR_TERMS]}}},
                              "tolerations": [dict(t) for t in DRA_KUBELET_PLUGIN_TOLERATIONS],
                              "containers": [{"name": "gpus", "image": "nvcr.io/nvidia/k8s-dra-driver-gpu:v25.8.0"}],
                          }}}})

def assert_kubelet_plugin_runs_on_the_gpu_nodes_only(manifests: Path, kubeconfigs: dict[str, Path],
                                                     source: str) -> None:
    """On every cluster of a running sim of `manifests` (each `source`: EKS, GKE), a DaemonSet with the
    NVIDIA DRA kubelet plugin's node affinity and tolerations (modelplane.clouds.nvidia) gets a pod
    on every GPU node and on no other, and nvidia.com/gpu.present is on exactly the GPU nodes."""
    fleet = load_manifests(manifests)
    assert {fleet.clusters[name].source for name in kubeconfigs} == {source}
    for name, kubeconfig in kubeconfigs.items():
        shapes = cluster_nodes(fleet, fleet.clusters[name])
        gpu = {s.name for s in shapes if s.pool}
        assert gpu and gpu != {s.name for s in shapes}, f"{name}: want GPU nodes and a node without GPUs"
        with KubeClient.from_kubeconfig(kubeconfig) as kube:
            present = {n["metadata"]["name"] for n in kube.items("/api/v1/nodes",
                                                                 {"labelSelector": "nvidia.com/gpu.present=true"})}
            assert present == gpu, f"{name}: nvidia.com/gpu.present on {present}, GPU nodes {gpu}"
            _create_kubelet_plugin(kube, "nvidia-dra-driver-gpu")
            assert _plugin_nodes(kube, "nvidia-dra-driver-gpu") == gpu, name
