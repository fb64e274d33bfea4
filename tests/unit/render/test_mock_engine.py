"""Kind clusters run the mock engine from a stock Python image: the program ships its
source as a ConfigMap and mounts it where the examples' command expects it."""

from modelplane.api import load_manifests
from modelplane.plan import plan_fleet
from modelplane.scheduler import place_fleet


def render_cluster_manifests(fleet, placement):
    return {name: plan.objects() for name, plan in plan_fleet(fleet, placement).clusters.items()}


def test_kind_example_pods_find_the_mock_engine_at_the_path_their_command_names():
    fleet = load_manifests("examples/kind")
    manifests = render_cluster_manifests(fleet, place_fleet(fleet))
    for objects in manifests.values():
        configmaps = [o for o in objects if o["kind"] == "ConfigMap" and "gateway" not in o["metadata"]["name"]]
        assert [(c["metadata"]["namespace"], c["metadata"]["name"]) for c in configmaps] == [
            ("ml-team", "modelplane-mock-engine")]
        assert "def main" in configmaps[0]["data"]["mock_engine.py"]
        for dep in (o for o in objects if o["kind"] == "Deployment" and "gateway" not in o["metadata"]["name"]):
            pod = dep["spec"]["template"]["spec"]
            engine = pod["containers"][0]
            script = engine["command"][1]
            mount = next(m for m in engine["volumeMounts"] if m["name"] == "mock-engine")
            assert script == f"{mount['mountPath']}/mock_engine.py"
            volume = next(v for v in pod["volumes"] if v["name"] == "mock-engine")
            assert volume["configMap"]["name"] == "modelplane-mock-engine"
            env = {e["name"]: e.get("value") for e in engine["env"]}
            # the mock engine answers "served by <replica>" with this name
            assert env["MODELPLANE_REPLICA"] == dep["spec"]["template"]["metadata"]["labels"]["modelplane.ai/serving"]


def test_clusters_that_are_not_kind_get_no_mock_engine():
    fleet = load_manifests("examples/aws")
    manifests = render_cluster_manifests(fleet, place_fleet(fleet))
    objects = [o for objs in manifests.values() for o in objs]
    assert objects and not [o for o in objects if o["metadata"]["name"] == "modelplane-mock-engine"]
    for dep in (o for o in objects if o["kind"] in ("Deployment",)):
        assert "mock-engine" not in [v["name"] for v in dep["spec"]["template"]["spec"]["volumes"]]
