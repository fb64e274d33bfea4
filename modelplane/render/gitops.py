"""The serving stack as a GitOps tool applies it: what the Pulumi program installs on a cluster
besides the models, as files.

One home for both paths: the ServingStack component creates each chart's namespace from
`chart_namespace`, its pre-chart objects from the ChartSpec, and the chart from the ChartSpec;
`modelplane render` (and the render stack) writes the same, from the same functions:

* the charts' namespaces and pre-chart objects (GKE's critical-pods ResourceQuota and NVIDIA
  driver installer DaemonSet) as ordinary manifests of the cluster directory;
* per chart, in install order, `charts/<NN>-<name>/release.yaml` (chart reference, version,
  repository, namespace, release name, and the equivalent `helm upgrade --install` argv) and
  `charts/<NN>-<name>/values.yaml`: no HelmRelease or Application CRD, so any tool (helm,
  Argo CD's helm source, Flux's HelmRelease you write) can install them;
* on an EKS cluster whose pools the cluster-autoscaler resizes, `cloud/cluster-autoscaler-iam.json`:
  the IAM policy and the Pod Identity association its service account needs (cloud resources,
  not Kubernetes objects: the render path provisions nothing, so the file says what to create).

What it leaves out, said by `render` too: the clusters, node groups, file systems and other cloud
resources (the EKS/GKE sources provision them; GitOps users bring their clusters), and nothing at
all for an Existing cluster whose `components: Provided` says its platform team runs the stack.
"""

from __future__ import annotations

import json
import shlex

import yaml

from modelplane.api import InferenceCluster
from modelplane.clouds.aws import (
    AUTOSCALER_IAM_STATEMENTS,
    AUTOSCALER_NAMESPACE,
    AUTOSCALER_SERVICE_ACCOUNT,
)
from modelplane.json_types import JsonObject
from modelplane.vocabulary import Manifest

from .meta import component_labels, metadata
from .serving import ChartSpec

# What `render` says it does not write (module docstring).
LEFT_OUT = ("not written: the clusters and their cloud resources (node groups, networks, file systems, "
            "and the IAM role the cloud/ files describe): the EKS/GKE sources provision them, a render "
            "provisions nothing; nor any serving stack for an Existing cluster with components: Provided")
CHARTS_DIR = "charts"
CLOUD_DIR = "cloud"
AUTOSCALER_IAM_FILE = f"{CLOUD_DIR}/cluster-autoscaler-iam.json"
IAM_POLICY_VERSION = "2012-10-17"


def serving_stack_provided(cluster: InferenceCluster) -> bool:
    """An Existing cluster whose platform team already runs the serving stack."""
    existing = cluster.spec.cluster.existing
    return existing is not None and existing.components == "Provided"


def chart_namespace(spec: ChartSpec) -> Manifest:
    """The namespace a chart is installed into (created before its pre-objects and the chart)."""
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": metadata(spec.namespace,
                                                                          component_labels("serving-stack"))}


def serving_stack_objects(charts: tuple[ChartSpec, ...] | list[ChartSpec]) -> list[Manifest]:
    """The charts' namespaces (once each) and the objects their pods need first."""
    namespaces: dict[str, Manifest] = {}
    for spec in charts:
        namespaces.setdefault(spec.namespace, chart_namespace(spec))
    return [*namespaces.values(), *(obj for spec in charts for obj in spec.pre_objects)]


def helm_argv(spec: ChartSpec) -> list[str]:
    """`helm upgrade --install` with exactly the chart, version and namespace the program installs."""
    repo = ["--repo", spec.repository] if spec.repository else []
    return ["helm", "upgrade", "--install", spec.name, spec.chart, *repo, "--version", spec.version,
            "--namespace", spec.namespace, "--values", "values.yaml"]


def chart_release(spec: ChartSpec, order: int) -> JsonObject:
    return {"name": spec.name, "chart": spec.chart, "version": spec.version, "repository": spec.repository,
            "namespace": spec.namespace, "order": order, "install": shlex.join(helm_argv(spec))}


def chart_dir(spec: ChartSpec, order: int) -> str:
    return f"{CHARTS_DIR}/{order:02d}-{spec.name}"


def autoscaler_iam(cluster: InferenceCluster) -> JsonObject | None:
    """What the EKS cluster-autoscaler's service account needs in IAM (the EKS source creates it:
    a role with this policy, bound by Pod Identity), or None when no autoscaler is installed."""
    if cluster.source != "EKS" or not cluster.autoscaled_pools:
        return None
    return {
        "policy": {"Version": IAM_POLICY_VERSION, "Statement": [dict(s) for s in AUTOSCALER_IAM_STATEMENTS]},
        "podIdentityAssociation": {"namespace": AUTOSCALER_NAMESPACE, "serviceAccount": AUTOSCALER_SERVICE_ACCOUNT},
        "autoscaledPools": [p.name for p in cluster.autoscaled_pools],
        "note": "create an IAM role with this policy, trusted by pods.eks.amazonaws.com, and a Pod Identity "
                "association for the service account; tag the pools' Auto Scaling groups for the autoscaler's "
                "discovery (docs/clouds.md)",
    }


def _yaml(value: object) -> str:
    return yaml.safe_dump(value, sort_keys=False, default_flow_style=False, allow_unicode=True, width=1 << 16)


def serving_stack_files(charts: tuple[ChartSpec, ...] | list[ChartSpec], iam: JsonObject | None) -> dict[str, str]:
    """Relative path -> text of every non-manifest file of the serving stack (module docstring)."""
    files: dict[str, str] = {}
    for order, spec in enumerate(charts, start=1):
        base = chart_dir(spec, order)
        files[f"{base}/release.yaml"] = _yaml(chart_release(spec, order))
        files[f"{base}/values.yaml"] = _yaml(json.loads(json.dumps(dict(spec.values))))
    if iam is not None:
        files[AUTOSCALER_IAM_FILE] = json.dumps(iam, indent=2, sort_keys=True) + "\n"
    return files
