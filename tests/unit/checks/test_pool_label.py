from .fleets import base, existing_cluster, messages

POLICY = "pool-label-on-existing-clusters"


def test_present_and_apply_pass():
    applied = existing_cluster().replace(
        "poolLabel: {mode: Present}",
        "poolLabel: {mode: Apply, nodeSelector: {matchLabels: {nvidia.com/gpu.product: NVIDIA-H100-80GB-HBM3}}}")
    assert messages(base(), POLICY) == []
    assert messages(base(cluster=applied), POLICY) == []


def test_provisioned_clusters_label_their_own_pools():
    eks = """
apiVersion: modelplane.ai/v1alpha1
kind: InferenceCluster
metadata:
  name: use1
spec:
  cluster:
    source: EKS
    eks: {region: us-east-1}
  nodePools:
  - name: h100
    className: h100
"""
    assert messages(base(cluster=eks), POLICY) == []


def test_existing_pool_without_pool_label_fails():
    bare = existing_cluster().replace("    poolLabel: {mode: Present}\n", "")
    assert messages(base(cluster=bare), POLICY) == [
        "[mandatory] pool-label-on-existing-clusters: InferenceCluster/byo (fleet.yaml#1) "
        "spec.nodePools[0].poolLabel: pool 'h100' is on an Existing cluster, whose nodes nobody labels "
        "modelplane.ai/pool=h100: every pod placed on it stays Pending without an error. Fix: add poolLabel: "
        "{mode: Apply, nodeSelector: {matchLabels: {...}}} so the program labels the nodes that match, or "
        "poolLabel: {mode: Present} if the nodes already carry modelplane.ai/pool=h100."
    ]
