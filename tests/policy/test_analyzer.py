"""The pack end to end through pulumi_policy's analyzer: registration, default levels,
config overriding a level, violations from the placement resource's inputs, secrets."""

from __future__ import annotations

from modelplane.scheduler import place_fleet
from tests.unit.checks.fleets import NOMINAL_CEL, base, deployment, existing_cluster, fleet, h100_class

from .analyzer import POLICIES, Analyzer, secret

PLACEMENT = "pulumi-python:dynamic/modelplane:FleetPlacement"
EXPECTED_LEVELS = {
    "usable-gpu-memory": "mandatory", "published-device-attributes": "mandatory", "cache-revision-match": "mandatory",
    "prefill-decode-needs-nixl": "mandatory", "fabric": "mandatory", "fabric-multi-node-tcp": "advisory",
    "replicas-fully-scheduled": "mandatory", "pool-label-on-existing-clusters": "mandatory",
    "declared-capacity": "advisory", "kind-node-image": "mandatory", "kind-node-digest": "advisory",
    "secrets": "mandatory",
    "efa-exposure": "advisory", "gke-pool-size": "mandatory", "gke-gpudirect": "advisory",
    "modelexpress-server": "mandatory", "modelexpress-image": "advisory",
    "sglang-prefill-decode": "mandatory", "sglang-port": "mandatory",
    "gateway-auth-needs-tls": "mandatory", "gateway-exposed": "advisory",
    "endpoint-key-needs-tls": "mandatory", "gateway-redirect-with-keys": "advisory",
    "modelplane-fleet-present": "advisory",
    "engine-variables": "mandatory",
    "cloud-pool-provisioning": "mandatory",
    "efa-dra-device-class": "mandatory",
    "eks-autoscale-from-zero": "advisory",
    "pcie-alignment": "mandatory",
    "sglang-metrics": "mandatory",
    "service-selector": "mandatory", "budget-scope": "mandatory", "observed-names": "mandatory",
}


def placement_props(docs, observed=None, with_placement=True) -> dict:
    """The placement resource's checked inputs, as the program's dynamic provider makes them."""
    f = fleet(*docs)
    props = {"fleet": f.to_documents(), "accounting": "Device",
             "__provider": "PROVIDER-PICKLE"}
    if with_placement:
        props["placement"] = place_fleet(f, observed=observed).to_json()
    if observed is not None:
        props["observed"] = observed
    return props


def test_pack_registers_every_policy_with_its_default_level():
    assert Analyzer().info() == EXPECTED_LEVELS


def test_clean_fleet_has_no_violations():
    assert Analyzer().analyze(PLACEMENT, "placement", placement_props(base())) == []


NOMINAL_CLASS = (
    "GPU memory in classes and selectors must be what the driver reports, not the marketing size\n"
    "InferenceClass/h100 (placement.fleet#0) spec.devices[0].capacity.memory: declares 80Gi for an NVIDIA "
    "H100 80GB, but the gpu.nvidia.com driver publishes only 81559Mi for that GPU: a selector asking for "
    "more than 81559Mi (e.g. >= 80Gi) matches this class at fleet level, the replica is placed, and DRA "
    "never binds the claim, so its pods stay Pending without an error. Fix: declare memory: 81559Mi "
    "(the usable figure)."
)


def test_violation_is_mandatory_by_default_and_config_lowers_it():
    props = placement_props(base(**{"class": h100_class("80Gi")}))
    analyzer = Analyzer()
    assert analyzer.analyze(PLACEMENT, "placement", props) == [
        ("usable-gpu-memory", "mandatory", NOMINAL_CLASS)]
    analyzer.configure({"usable-gpu-memory": {"enforcementLevel": "advisory"}})
    assert analyzer.analyze(PLACEMENT, "placement", props) == [
        ("usable-gpu-memory", "advisory", NOMINAL_CLASS)]
    analyzer.configure({"usable-gpu-memory": {"enforcementLevel": "disabled"}})
    assert analyzer.analyze(PLACEMENT, "placement", props) == []


def test_config_properties_reach_the_check():
    pd = deployment().replace("engines:\n", "serving: {mode: PrefillDecode}\n      engines:\n", 1)
    pd = pd.replace("      - name: vllm\n", "      - name: prefill\n        phase: Prefill\n")
    decode = pd[pd.index("      - name: prefill"):].replace("name: prefill\n        phase: Prefill",
                                                          "name: decode\n        phase: Decode")
    pd = (pd.rstrip("\n") + "\n" + decode).replace("vllm/vllm-openai:v0.20.1", "myorg/engine:2.0.0")
    props = placement_props(base(deployment=pd))
    analyzer = Analyzer()
    got = analyzer.analyze(PLACEMENT, "placement", props)
    assert [(p, lvl) for p, lvl, _ in got] == [("prefill-decode-needs-nixl", "mandatory")] * 2
    analyzer.configure({"prefill-decode-needs-nixl": {"enforcementLevel": "mandatory",
                                                      "images": {"myorg/engine": "2.0.0"}}})
    assert analyzer.analyze(PLACEMENT, "placement", props) == []


def test_partial_shortfall_and_observed_capacity_from_the_inputs():
    props = placement_props(base(deployment=deployment(replicas=3), cluster=existing_cluster(nodes=3)),
                            observed={"byo": {"h100": 2}})
    got = Analyzer().analyze(PLACEMENT, "placement", props)
    assert [(p, lvl) for p, lvl, _ in got] == [
        ("replicas-fully-scheduled", "mandatory"), ("declared-capacity", "advisory")]
    assert got[0][2].splitlines()[1].startswith(
        "ModelDeployment/ml-team/llama (placement.fleet#2) spec.replicas: 2 of 3 replicas placed "
        "(ReplicasScheduled=False, PartialCapacity: Scheduled 2 of 3 replicas).")


def test_missing_placement_is_computed_from_the_fleet():
    props = placement_props(base(deployment=deployment(NOMINAL_CEL)), with_placement=False)
    got = Analyzer().analyze(PLACEMENT, "placement", props)
    assert [p for p, _, _ in got] == ["usable-gpu-memory", "replicas-fully-scheduled"]


def test_unknown_inputs_at_preview_are_reported_not_crashed():
    props = placement_props(base())
    props["fleet"] = "04da6b54-80e4-46f7-96ec-b56ff0331ba9"  # the engine's unknown-string sentinel
    got = Analyzer().analyze(PLACEMENT, "placement", props)
    assert {lvl for _, lvl, _ in got} == {"advisory"}
    assert got[0][2].startswith("can't run policy 'usable-gpu-memory' from policy pack 'modelplane@v0.1.0' "
                                "during preview: string value at .fleet can't be known during preview")


SECRET_DATA = (
    "Hugging Face tokens and SaaS API keys only as secrets\n"
    "kubernetes:core/v1:Secret 'hf-token' stringData.HF_TOKEN: Secret data is a plaintext Pulumi input: it is "
    "stored unencrypted in the state file and shown in previews and diffs. Fix: pass it as a secret "
    "(pulumi.Config().require_secret(...) or pulumi.Output.secret(...))."
)


def test_secret_values_arrive_marked_and_plain_ones_are_violations():
    analyzer = Analyzer()
    assert POLICIES.SECRETS_MARKED
    assert analyzer.analyze("kubernetes:core/v1:Secret", "hf-token",
                            {"stringData": {"HF_TOKEN": secret("hf_abc")}}) == []
    assert analyzer.analyze("kubernetes:core/v1:Secret", "hf-token",
                            {"stringData": {"HF_TOKEN": "hf_abc"}}) == [("secrets", "mandatory", SECRET_DATA)]
    assert analyzer.analyze("modelplane:index:ModelCache", "llama", {"hfToken": secret("hf_abc")}) == []
    assert [p for p, _, _ in analyzer.analyze("modelplane:index:ModelCache", "llama", {"hfToken": "hf_abc"})] \
        == ["secrets"]


def test_rendered_workload_with_a_literal_token_is_a_violation():
    pod = {"spec": {"template": {"spec": {"containers": [
        {"name": "engine", "image": "vllm/vllm-openai:v0.20.1",
         "env": [{"name": "HF_TOKEN", "value": secret("hf_abc")}]}]}}}}
    got = Analyzer().analyze("kubernetes:apps/v1:Deployment", "llama", pod)
    assert [(p, lvl) for p, lvl, _ in got] == [("secrets", "mandatory")]
    assert got[0][2].splitlines()[1].startswith(
        "kubernetes:apps/v1:Deployment 'llama' spec.template.spec.containers[0].env[0].value: "
        "environment variable HF_TOKEN has a literal value in the pod spec")


def test_stack_without_a_placement_resource_is_flagged():
    analyzer = Analyzer()
    assert analyzer.analyze_stack([(PLACEMENT, "placement", placement_props(base()))]) == []
    got = analyzer.analyze_stack([("kubernetes:core/v1:Namespace", "ml-team", {"metadata": {"name": "ml-team"}})])
    assert [(p, lvl) for p, lvl, _ in got] == [("modelplane-fleet-present", "advisory")]


def test_inputs_that_do_not_load_make_the_fleet_policies_not_applicable():
    props = placement_props(base())
    props["fleet"][0]["spec"]["devices"][0]["capacity"]["memory"]["value"] = "lots"
    response = Analyzer().analyze_response(PLACEMENT, "placement", props)
    assert list(response.diagnostics) == []
    reasons = {n.policy_name: n.reason for n in response.not_applicable}
    assert set(reasons) == set(EXPECTED_LEVELS) - {"modelplane-fleet-present"}
    assert reasons["fabric"].startswith("the placement inputs do not load: 1 problem in the manifests")


UNKNOWN_STRING = "04da6b54-80e4-46f7-96ec-b56ff0331ba9"


def test_unknown_placement_at_preview_is_recomputed_so_mandatory_policies_still_run():
    props = placement_props(base(**{"class": h100_class("80Gi")}))
    props["placement"] = UNKNOWN_STRING
    assert Analyzer().analyze(PLACEMENT, "placement", props) == [
        ("usable-gpu-memory", "mandatory", NOMINAL_CLASS)]


def test_secrets_skip_unknown_values_and_still_judge_the_rest():
    pod = {"spec": {"template": {"spec": {"containers": [
        {"name": "engine", "image": UNKNOWN_STRING,
         "env": [{"name": "HF_TOKEN", "value": UNKNOWN_STRING},
                 {"name": "OPENAI_API_KEY", "value": "sk-live-123"}]}]}}}}
    got = Analyzer().analyze("kubernetes:apps/v1:Deployment", "llama", pod)
    assert [m.splitlines()[1].split(":")[0:3] for _, _, m in got] == [
        ["kubernetes", "apps/v1", "Deployment 'llama' spec.template.spec.containers[0].env[1].value"]]


def test_the_pack_refuses_a_gang_no_zone_of_its_pool_holds():
    """A 2-node gang copy on a GKE pool of one node in each of two zones: the scheduler refuses it
    (ZoneShortfall), and the pack fails the preview through replicas-fully-scheduled with that
    reason; the same pool with two nodes per zone passes."""
    from tests.unit.checks.test_gang_zones import _docs

    got = Analyzer().analyze(PLACEMENT, "placement",
                             placement_props(_docs("GKE", "nodeCount: 2, zones: [us-central1-a, us-central1-b]")))
    assert [(p, lvl) for p, lvl, _ in got] == [("replicas-fully-scheduled", "mandatory")], got
    assert "needs 16 devices on 2 nodes in one zone of pool h100" in got[0][2]
    assert "(us-central1-a: 8 of 8, us-central1-b: 8 of 8)" in got[0][2]
    fits = Analyzer().analyze(PLACEMENT, "placement",
                              placement_props(_docs("GKE", "nodeCount: 4, zones: [us-central1-a, us-central1-b]")))
    assert [p for p, lvl, _ in fits if lvl == "mandatory"] == [], fits
