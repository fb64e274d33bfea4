"""Names that become object names are checked at load by the rule of the object they become,
with the fix, so `lint` and `pulumi preview` refuse them instead of the API server at `up`."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from modelplane.api import load_manifest_text
from modelplane.api.loader import ManifestError
from modelplane.naming import replica_name
from modelplane.render.names import lws_name

DEPLOYMENT = """
apiVersion: modelplane.ai/v1alpha1
kind: ModelDeployment
metadata: {name: %s, namespace: ml-team}
spec:
  replicas: 1
  template:
    spec:
      engines:
      - name: vllm
        members:
        - nodeSelector: {devices: [{name: gpu, selectors: [{cel: 'true'}]}]}
          template: {spec: {containers: [{name: engine, image: vllm/vllm-openai:v0.26.0}]}}
"""

DNS_1035 = __import__("re").compile(r"[a-z]([-a-z0-9]*[a-z0-9])?")


def _error(text: str) -> str:
    with pytest.raises(ManifestError) as caught:
        load_manifest_text(text, source="fleet.yaml")
    return str(caught.value)


@pytest.mark.parametrize("name", ["8b-chat", "llama-3.1", "'0x'"])
def test_a_deployment_name_must_be_a_dns_1035_label_because_it_starts_its_services_name(name: str) -> None:
    """kubernetes-sigs/lws pkg/webhooks/leaderworkerset_webhook.go (v0.7.0, v0.9.0, v0.10.0) validates the
    LWS name with NameIsDNS1035Label ("the lws name is used as the name for headless service"),
    and so does kubernetes/kubernetes pkg/apis/core/validation ValidateServiceName on clusters
    without RelaxedServiceNameValidation (alpha, off, in 1.34). The replica's Service is the
    replica name and the LWS `<replica>-<engine>`, both starting with the deployment's name."""
    name_value = name.strip("'")
    rendered = replica_name(name_value, "eks-a", 0)
    assert not DNS_1035.fullmatch(rendered) or not DNS_1035.fullmatch(lws_name(rendered, "vllm"))
    message = _error(DEPLOYMENT % name)
    assert "at metadata.name" in message and "DNS-1035" in message and "rename it (e.g. '" in message
    suggestion = message.split("rename it (e.g. '", 1)[1].split("'", 1)[0]
    load_manifest_text(DEPLOYMENT % suggestion)           # the fix it names is one that loads


def test_a_valid_deployment_name_gives_dns_1035_service_and_lws_names() -> None:
    fleet = load_manifest_text(DEPLOYMENT % "chat-8b")
    replica = replica_name("chat-8b", "eks-a", 3)
    assert DNS_1035.fullmatch(replica) and DNS_1035.fullmatch(lws_name(replica, "vllm"))
    assert ("ml-team", "chat-8b") in fleet.deployments


CLUSTER = """
apiVersion: modelplane.ai/v1alpha1
kind: InferenceCluster
metadata: {name: %s}
spec:
  cluster: {source: %s}
  nodePools: [{name: %s, className: gpu, nodeCount: 1}]
"""


@pytest.mark.parametrize("name", ["eu.west", "a" * 64])
def test_a_cluster_name_must_be_a_dns_label_because_it_is_a_label_value_and_starts_node_names(name: str) -> None:
    """Kubernetes label values hold at most 63 characters (apimachinery IsValidLabelValue);
    `modelplane.ai/cluster: <name>` is on every object we render, and `<cluster>-<pool>` names the
    EKS node group, GKE node pool and kind nodes, which take no dots."""
    assert "not a DNS label" in _error(CLUSTER % (name, "Kind", "gpu"))


@pytest.mark.parametrize("pool", ["H100", "h100_efa", "h100.efa"])
def test_a_pool_name_must_be_a_dns_label_because_it_names_node_groups_and_node_pools(pool: str) -> None:
    """The pool name is the `modelplane.ai/pool` label value and part of `<cluster>-<pool>`, the
    EKS node group name (letters, digits, '-', '_', pulumi_aws eks NodeGroup `node_group_name`) and
    the GKE node pool name (lowercase letters, digits and '-')."""
    assert "node pool name" in _error(CLUSTER % ("eu-west", "Kind", pool))


def test_an_eks_node_group_name_must_fit_63_characters_with_pulumis_suffix() -> None:
    """pulumi_aws eks NodeGroup `node_group_name`: "can't be longer than 63 characters"; Pulumi
    auto-names ours `<cluster>-<pool>-<7 random characters>`."""
    long = CLUSTER.replace("{source: %s}", "{source: EKS, eks: {region: us-east-1}}") + """
---
apiVersion: modelplane.ai/v1alpha1
kind: InferenceClass
metadata: {name: gpu}
spec:
  devices: [{name: gpu, driver: gpu.nvidia.com, deviceClassName: gpu.nvidia.com, count: 8}]
"""
    message = _error(long % ("production-us-east-1-inference", "h100-efa-capacity-block-a"))
    assert "EKS allows 63" in message and "h100-efa-capacity-block-a" in message
    load_manifest_text(long % ("prod-use1", "h100-efa-capacity-block-a"))


def test_a_cache_name_is_a_label_value_of_at_most_63_characters() -> None:
    """`modelplane.ai/modelcache: <cache>` labels the cache's PVC and Job (label values <= 63)."""
    cache = """
apiVersion: modelplane.ai/v1alpha1
kind: ModelCache
metadata: {name: %s, namespace: ml-team}
spec:
  source: HuggingFace
  huggingFace: {repo: Qwen/Qwen3-0.6B, sizeGiB: 5}
"""
    assert "at most 63 characters" in _error(cache % ("q" * 64))
    assert ("ml-team", "qwen-3.1") in load_manifest_text(cache % "qwen-3.1").caches


# What Kubernetes requires of the names of the objects we render, per kind (kubernetes/kubernetes
# pkg/apis/core/validation/validation.go, v1.35.5 and v1.36.3): a Service's name is a DNS-1035
# label (`ValidateServiceName = NameIsDNS1035Label`; 1.36 relaxes it to a DNS label only with
# RelaxedServiceNameValidation, beta there, alpha and off in 1.35, pkg/features/kube_features.go),
# a Namespace's a DNS label, every other kind's a DNS subdomain (at most 253 characters).
DNS_LABEL = __import__("re").compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")
DNS_SUBDOMAIN = __import__("re").compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")


def name_problem(obj: dict) -> str | None:
    kind, name = obj["kind"], obj["metadata"]["name"]
    if kind == "Service":
        ok = len(name) <= 63 and DNS_1035.fullmatch(name)
    elif kind == "Namespace":
        ok = len(name) <= 63 and DNS_LABEL.fullmatch(name)
    else:
        ok = len(name) <= 253 and DNS_SUBDOMAIN.fullmatch(name)
    return None if ok else f"{kind} {name!r}"


KIND_CLUSTER = """
apiVersion: modelplane.ai/v1alpha1
kind: InferenceCluster
metadata: {name: '%s'}
spec: {cluster: {source: Kind}}
"""


@pytest.mark.parametrize("name", ["1east", "0", "9-west", "e" * 56])
def test_a_cluster_name_must_fit_its_gateway_services_dns_1035_name(name: str) -> None:
    """Issue 27 item 8: InferenceCluster `1east` rendered Service `1east-gateway`, which
    Kubernetes 1.35 (the EKS default) refuses: ValidateServiceName is NameIsDNS1035Label there
    (pkg/apis/core/validation/validation.go, v1.35.5). The sim's 1.36 accepted it only because
    RelaxedServiceNameValidation turned beta (on) in 1.36 (pkg/features/kube_features.go), so the
    load refuses it, and a name too long for the `-gateway` suffix, naming the fix."""
    message = _error(KIND_CLUSTER % name)
    assert "at metadata.name" in message and "gateway Service ('<name>-gateway')" in message
    if name[0].isdigit():
        suggestion = message.split("rename it (e.g. '", 1)[1].split("'", 1)[0]
        load_manifest_text(KIND_CLUSTER % suggestion)
    else:
        assert "may have at most 55" in message


@settings(max_examples=150, deadline=None)
@given(st.from_regex(r"[a-z0-9]([-a-z0-9]{0,70}[a-z0-9])?", fullmatch=True))
def test_every_cluster_name_the_load_accepts_renders_objects_kubernetes_accepts(name: str) -> None:
    """For any DNS-label-shaped name: the load accepts it exactly when every object the cluster's
    foundation renders (namespace, gateway Deployment, Service, ConfigMaps) has a name its kind
    accepts, by the rules above."""
    from modelplane.plan import plan_foundation
    from modelplane.render.gateway import workload_gateway_name

    try:
        fleet = load_manifest_text(KIND_CLUSTER % name)
    except ManifestError:
        assert name_problem({"kind": "Service", "metadata": {"name": workload_gateway_name(name)}}), name
        return
    problems = [p for o in plan_foundation(fleet, name).objects() if (p := name_problem(o))]
    assert problems == []


SECRET_ENDPOINT = """
apiVersion: modelplane.ai/v1alpha1
kind: ModelEndpoint
metadata: {name: saas, namespace: ml-team}
spec:
  url: https://api.example.com
  credential: {apiKey: {secretRef: {name: '%s', key: '%s'}}}
"""


@pytest.mark.parametrize("name, key, field", [
    ("Together_Key", "apiKey", "secretRef.name"), ("together", "api key", "secretRef.key"),
    ("together", "..", "secretRef.key")])
def test_a_credential_secret_reference_follows_the_secrets_name_and_key_rules(name: str, key: str,
                                                                               field: str) -> None:
    """A hand-written endpoint's credential names a Secret (a DNS subdomain,
    apimachinery NameIsDNSSubdomain) and its data key (apimachinery IsConfigMapKey); the gateway's
    egress reads it as `egress.<namespace>.<name>` / `key` (modelplane.render.gateway), which the
    API server would refuse at `up` otherwise."""
    message = _error(SECRET_ENDPOINT % (name, key))
    assert field in message
    load_manifest_text(SECRET_ENDPOINT % ("together-key", "api_key.v2"))


def test_a_hugging_face_token_secret_reference_follows_the_secrets_name_and_key_rules() -> None:
    """The staging Job reads `huggingFace.authSecret.key` from a Secret (modelplane.render.cache):
    the same Secret name and data key rules."""
    cache = """
apiVersion: modelplane.ai/v1alpha1
kind: ModelCache
metadata: {name: qwen, namespace: ml-team}
spec:
  source: HuggingFace
  huggingFace: {repo: Qwen/Qwen3-0.6B, sizeGiB: 5, authSecret: {name: '%s', key: '%s'}}
"""
    assert "huggingFace.authSecret.name" in _error(cache % ("HF", "HF_TOKEN"))
    assert "huggingFace.authSecret.key" in _error(cache % ("hf", "HF TOKEN"))
    load_manifest_text(cache % ("hf", "HF_TOKEN"))
