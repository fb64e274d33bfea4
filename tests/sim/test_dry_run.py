"""Every rendered object meets a real API server: each example fleet and each fleet the sim
suite builds, as written and with every cluster re-sourced to each source profile (Kind, EKS,
GKE, Existing), is planned exactly as `render` and the stacks plan it, and every object is sent
to a simulated cluster's kube-apiserver v1.36 as a server-side apply with `dryRun=All`: real
validation, defaulting, admission and the LeaderWorkerSet webhooks, nothing stored. Namespaces
are applied for real first (a namespaced object's dry-run needs its namespace).

Objects whose kind the sim serves no CRD for (Grove's PodCliqueSet, KAI's Queue: the Go module
proxy refuses both modules, docs/sim.md) cannot be checked there; they are listed, per kind,
in the test's output and must be exactly those kinds: a new unserved kind fails the test."""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from modelplane.api import load_documents, load_manifests
from modelplane.plan import gitops_gateway_urls, plan_fleet
from modelplane.render.storage_class import storage_class_manifest
from modelplane.scheduler import place_fleet
from sim import KubeClient, SimFleet
from tests import manifests as g
from tests.sim.fleets import attribute_gap_fleet, gang_fleet, gotcha_fleet, scaling_fleet

from .conftest import REPO

pytestmark = [pytest.mark.sim]

EXAMPLES = REPO / "examples"
FIELD_MANAGER = "modelplane-dry-run"
# Kubernetes 1.35's Service name rule (ValidateServiceName = NameIsDNS1035Label, 63 at most).
DNS_1035 = re.compile(r"[a-z]([-a-z0-9]{0,61}[a-z0-9])?")
# Sources whose cache StorageClass the program creates (components/sources/eks.py, gke.py).
PROVISIONED_STORAGE = ("EKS", "GKE")
# The kinds the sim's API server has no CRD for, and why (docs/sim.md).
UNSERVED = {("grove.io/v1alpha1", "PodCliqueSet"): "Grove CRDs (module refused by the Go proxy)",
            ("scheduling.run.ai/v2", "Queue"): "KAI scheduler CRDs (module refused by the Go proxy)"}

PROFILES: dict[str, dict[str, Any] | None] = {
    "as written": None,
    "Kind": {"source": "Kind"},
    "EKS": {"source": "EKS", "eks": {"region": "us-east-1"}},
    "GKE": {"source": "GKE", "gke": {"region": "us-central1"}},
    "Existing": {"source": "Existing", "existing": {"cache": {"storageClassName": "nfs-rwx"}}},
}


def _observe_fleet(directory: Path) -> Path:
    """tests/sim/test_observe.py's fleet (imported: the fleet is that module's)."""
    from tests.sim.test_observe import fleet_docs

    directory.mkdir(parents=True, exist_ok=True)
    (directory / "fleet.yaml").write_text(g.to_yaml(fleet_docs()))
    return directory


SIM_SUITE_FLEETS: dict[str, Callable[[Path], Path]] = {
    "sim:gang": gang_fleet, "sim:gotcha": gotcha_fleet, "sim:attribute-gap": attribute_gap_fleet,
    "sim:scaling": lambda d: scaling_fleet(d, 2), "sim:scaling-drained": lambda d: scaling_fleet(d, 3, "west"),
    "sim:observe": _observe_fleet,
}


def _documents(path: Path) -> list[dict[str, Any]]:
    return load_manifests(path).to_documents()


def _resourced(docs: list[dict[str, Any]], profile: dict[str, Any] | None) -> list[dict[str, Any]]:
    if profile is None:
        return docs
    out = json.loads(json.dumps(docs))
    for doc in out:
        if doc["kind"] == "InferenceCluster":
            doc["spec"]["cluster"] = dict(profile)
            if profile["source"] == "GKE":
                # GKE GPU pools need zones (gke-pool-size); the renderers do not read them
                for pool in doc["spec"].get("nodePools", []):
                    pool.setdefault("zones", ["us-central1-a"])
    return out


def _objects(docs: list[dict[str, Any]]) -> Iterator[tuple[str, dict[str, Any]]]:
    """(cluster, object) for everything the program applies to the clusters of one fleet: the
    cluster plans and the control plane (what `render` writes), the charts' pre-objects and the
    cache StorageClass of the clusters the program provisions."""
    fleet = load_documents(docs)
    plan = plan_fleet(fleet, place_fleet(fleet))
    for cluster, objects in plan.manifests(gitops_gateway_urls(fleet)[0]).items():
        for obj in objects:
            yield cluster, obj
    for name, cluster_plan in plan.clusters.items():
        for chart in cluster_plan.foundation.charts:
            # components/serving.py creates each chart's namespace before its pre-objects
            yield name, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": chart.namespace}}
            for obj in chart.pre_objects:
                yield name, obj
        source = fleet.clusters[name].source if name in fleet.clusters else ""
        if source in PROVISIONED_STORAGE:
            yield name, storage_class_manifest(source, file_system_id="fs-0123456789abcdef0", network="default")


class Server:
    """One simulated API server: discovery, then server-side applies."""

    def __init__(self, kube: KubeClient) -> None:
        self.kube = kube
        self.resources: dict[tuple[str, str], tuple[str, bool]] = {}   # (apiVersion, kind) -> (plural, namespaced)
        groups = [("v1", "/api/v1")] + [
            (v["groupVersion"], f"/apis/{v['groupVersion']}")
            for grp in kube.get("/apis")["groups"] for v in grp["versions"]]
        for version, path in groups:
            for res in kube.get(path)["resources"]:
                if "/" not in res["name"]:
                    self.resources[(version, res["kind"])] = (res["name"], res["namespaced"])

    def path(self, obj: dict[str, Any]) -> str | None:
        found = self.resources.get((obj["apiVersion"], obj["kind"]))
        if found is None:
            return None
        plural, namespaced = found
        base = "/api/v1" if obj["apiVersion"] == "v1" else f"/apis/{obj['apiVersion']}"
        meta = obj["metadata"]
        where = f"/namespaces/{meta['namespace']}" if namespaced and meta.get("namespace") else ""
        return f"{base}{where}/{plural}/{meta['name']}"

    def apply(self, obj: dict[str, Any], *, dry_run: bool) -> tuple[int, str]:
        path = self.path(obj)
        assert path is not None
        params = {"fieldManager": FIELD_MANAGER, "force": "true", **({"dryRun": "All"} if dry_run else {})}
        resp = self.kube.http.request("PATCH", path, content=json.dumps(obj), params=params,
                                      headers={"Content-Type": "application/apply-patch+yaml"})
        return resp.status_code, resp.text


@pytest.fixture(scope="module")
def server(module_fleet: Callable[[str | Path], tuple[SimFleet, dict[str, Path]]],
           tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """One simulated EKS cluster with NVIDIA GPUs: every CRD and webhook the sim has (LWS, the
    NVIDIA DRA driver's) is installed there."""
    directory = tmp_path_factory.mktemp("dry-run-server")
    docs = [g.inference_class("h100", g.device("gpu", 8, "81559Mi")),
            g.cluster("dry-run", g.pool("gpu", "h100", 1, zones=["us-east-1a"]),
                      source={"source": "EKS", "eks": {"region": "us-east-1"}})]
    (directory / "fleet.yaml").write_text(g.to_yaml(docs))
    _, kubeconfigs = module_fleet(directory)
    with KubeClient.from_kubeconfig(kubeconfigs["dry-run"]) as kube:
        yield Server(kube)


def _fleets(tmp: Path) -> dict[str, list[dict[str, Any]]]:
    fleets = {f"examples/{p.name}": _documents(p) for p in sorted(EXAMPLES.iterdir()) if p.is_dir()}
    for name, build in SIM_SUITE_FLEETS.items():
        fleets[name] = _documents(build(tmp / name.replace(":", "-")))
    return fleets


@pytest.mark.timeout(1200)
def test_every_rendered_object_of_every_fleet_and_source_profile_is_accepted_by_a_real_api_server(
        server: Server, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """kube-apiserver v1.36.3 (built from k8s.io/kubernetes) and the LWS webhooks of the version
    the chart installs judge each object as `pulumi up` would send it (server-side apply, the
    Kubernetes provider's default); `dryRun=All` stores nothing (Kubernetes API concepts,
    "Dry-run"). Service names are also held to 1.35's rule, which 1.36 relaxes (docs/sim.md)."""
    rejected: list[str] = []
    unserved: Counter[str] = Counter()
    unloadable: list[str] = []
    checked = 0
    for fleet_name, docs in _fleets(tmp_path).items():
        for profile_name, profile in PROFILES.items():
            try:
                objects = list(_objects(_resourced(docs, profile)))
            except Exception as exc:   # noqa: BLE001 - a profile the fleet cannot take: listed below
                unloadable.append(f"{fleet_name} as {profile_name}: {type(exc).__name__}: {str(exc)[:200]}")
                continue
            for _, obj in objects:
                if obj["kind"] == "Namespace":
                    server.apply(obj, dry_run=False)
            for cluster, obj in objects:
                if server.path(obj) is None:
                    key = (obj["apiVersion"], obj["kind"])
                    assert key in UNSERVED, f"{fleet_name}/{profile_name}: the sim serves no {key}: not checked"
                    unserved[f"{obj['kind']} ({UNSERVED[key]})"] += 1
                    continue
                if obj["kind"] == "Service" and not DNS_1035.fullmatch(obj["metadata"]["name"]):
                    # The sim's 1.36 accepts it (RelaxedServiceNameValidation); 1.35, the EKS
                    # default, refuses it (tests/unit/render/test_kubernetes_minor_differences.py).
                    rejected.append(f"{fleet_name} as {profile_name}, cluster {cluster}: Service "
                                    f"{obj['metadata']['name']}: not a DNS-1035 label (refused by Kubernetes 1.35)")
                status, text = server.apply(obj, dry_run=True)
                checked += 1
                if status not in (200, 201):
                    message = yaml.safe_load(text).get("message", text) if text.startswith("{") else text
                    rejected.append(f"{fleet_name} as {profile_name}, cluster {cluster}: {obj['kind']} "
                                    f"{obj['metadata'].get('namespace', '')}/{obj['metadata']['name']}: HTTP {status} "
                                    f"{str(message)[:400]}")
    with capsys.disabled():
        print(f"\n[dry-run] {checked} objects accepted by kube-apiserver (dryRun=All)")
        for what, count in sorted(unserved.items()):
            print(f"[dry-run] NOT CHECKED (no CRD on the sim): {count} x {what}")
        for line in unloadable:
            print(f"[dry-run] profile not applicable: {line}")
    assert rejected == [], "\n".join(rejected)
    assert checked > 500


def test_the_dry_run_refuses_what_the_api_server_and_the_lws_webhook_refuse(server: Server) -> None:
    """The check above can fail: a Service name that is no DNS label is refused by the API server
    (kubernetes/kubernetes pkg/apis/core/validation ValidateServiceName; 1.36 accepts a leading
    digit, RelaxedServiceNameValidation), and a LeaderWorkerSet whose name starts with a digit by
    the LWS webhook the sim runs (kubernetes-sigs/lws pkg/webhooks/leaderworkerset_webhook.go,
    NameIsDNS1035Label, v0.7.0, v0.9.0 and v0.10.0)."""
    server.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "ml-team"}}, dry_run=False)
    service = {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "chat.8b", "namespace": "ml-team"},
               "spec": {"ports": [{"port": 8000}]}}
    status, text = server.apply(service, dry_run=True)
    assert status == 422 and "metadata.name" in text
    pod = {"spec": {"containers": [{"name": "engine", "image": "vllm/vllm-openai:v0.26.0"}]}}
    lws = {"apiVersion": "leaderworkerset.x-k8s.io/v1", "kind": "LeaderWorkerSet",
           "metadata": {"name": "8b-chat-1a2b3-vllm", "namespace": "ml-team"},
           "spec": {"replicas": 1, "leaderWorkerTemplate": {"size": 2, "workerTemplate": pod}}}
    status, text = server.apply(lws, dry_run=True)
    assert status in (400, 403, 422) and "admission webhook" in text and "DNS-1035" in text, text
    lws["metadata"]["name"] = "m-8b-chat-1a2b3-vllm"
    assert server.apply(lws, dry_run=True)[0] in (200, 201)
