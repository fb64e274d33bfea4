"""The published-device-attributes gotcha on the sim stack (silent failure 2, mission): a class that
declares productName `H100` where the driver publishes NVML's full name. The policy pack mandatory
stops the preview naming the class field; advisory, `up` applies and the real kube-scheduler cannot
allocate the claim. A module of its own, apart from test_stack_gotchas.py, so that only one fleet is
up at a time (docs/ci.md#memory). Needs both tool groups (scripts/bootstrap-tools)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
from pulumi import automation as auto

from sim import SimFleet
from tests.sim.conftest import StackFactory
from tests.sim.fleets import NVML_H100, SHORT_NAME_SELECTOR, attribute_gap_fleet
from tests.sim.stack import SimStack, bounded_await, failed_scheduling, ml_team_pods

from .conftest import REPO

pytestmark = [pytest.mark.sim, pytest.mark.engine]

PACK = str(REPO / "policy-packs" / "modelplane")


@pytest.fixture(scope="module")
def attribute_gap(module_fleet: Callable[..., tuple[SimFleet, dict[str, Path]]],
                  tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, SimFleet]:
    manifests = attribute_gap_fleet(tmp_path_factory.mktemp("attribute-gap"))
    sim, _ = module_fleet(manifests)
    return manifests, sim


@pytest.fixture(scope="module")
def attribute_gap_stack(attribute_gap: tuple[Path, SimFleet], module_sim_stack: StackFactory) -> SimStack:
    manifests, sim = attribute_gap
    return module_sim_stack(manifests, sim.state_dir, bounded_await(sim))


def test_published_device_attributes_mandatory_pack_stops_the_preview_naming_the_class_field(
        attribute_gap_stack: SimStack) -> None:
    """With the pack as shipped, `preview` fails naming the class field that declares productName
    `H100` and the name the driver publishes, and the selector only that short name satisfies;
    nothing reaches the cluster."""
    with pytest.raises(auto.errors.CommandError) as failed:
        attribute_gap_stack.preview(policy_packs=[PACK])
    text = str(failed.value)
    assert "[mandatory]  published-device-attributes" in text, text
    assert "InferenceClass/h100-short-name (" in text
    assert ('spec.devices[0].attributes.productName: declares productName "H100", but on an NVIDIA H100 80GB the '
            f'gpu.nvidia.com driver publishes "{NVML_H100}"') in text, text
    assert f"Fix: declare productName: {{string: {NVML_H100}}}" in text
    assert "ModelDeployment/ml-team/short-name" in text and "selectors[0].cel: matches what class h100-short-name" \
        in text
    assert attribute_gap_stack.kubernetes_objects() == []
    assert ml_team_pods(attribute_gap_stack, "short-name") == []


def test_published_device_attributes_advisory_pack_places_the_replica_and_the_real_scheduler_cannot_allocate(
        attribute_gap_stack: SimStack, tmp_path: Path) -> None:
    """With the pack advisory, `up` applies: the fleet scheduler places `short-name` (its class says
    productName H100, which its selector asks for), the simulated driver publishes what the real one
    would (NVML's full name), so its pod stays Pending with the kube-scheduler's reason in its
    events, and `up` fails after the sim's await timeout naming the Deployment."""
    config = tmp_path / "advisory.json"
    config.write_text(json.dumps({"published-device-attributes": "advisory"}))
    with pytest.raises(auto.errors.CommandError) as failed:
        attribute_gap_stack.up(policy_packs=[PACK], policy_pack_configs=[str(config)])
    text = str(failed.value)
    assert "[advisory]  published-device-attributes" in text, text
    assert "ml-team/short-name: 1 of 1 replicas placed" in text
    assert "short-name" in text and "timed out waiting to be Ready" in text, text

    (pod,) = ml_team_pods(attribute_gap_stack, "short-name")
    assert pod["status"]["phase"] == "Pending"
    with attribute_gap_stack.kube("short-name") as kube:
        (template,) = kube.items("/apis/resource.k8s.io/v1/namespaces/ml-team/resourceclaimtemplates")
        selectors = template["spec"]["spec"]["devices"]["requests"][0]["exactly"]["selectors"]
        assert selectors == [{"cel": {"expression": SHORT_NAME_SELECTOR}}]
        names = {d["attributes"]["productName"]["string"]
                 for s in kube.items("/apis/resource.k8s.io/v1/resourceslices") for d in s["spec"]["devices"]}
        assert names == {NVML_H100}

        message = failed_scheduling(kube, pod)
    assert "cannot allocate all claims" in message, message
