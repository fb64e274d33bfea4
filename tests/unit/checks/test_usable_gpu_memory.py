from modelplane.drivers import GPU_PRODUCTS
from modelplane.quantity import Quantity

from .fleets import NOMINAL_CEL, base, deployment, h100_class, messages

POLICY = "usable-gpu-memory"


def test_usable_class_and_headroom_selector_pass():
    assert messages(base(), POLICY) == []


def test_class_declaring_nominal_memory_fails_with_the_usable_figure():
    assert messages(base(**{"class": h100_class("80Gi")}), POLICY) == [
        "[mandatory] usable-gpu-memory: InferenceClass/h100 (fleet.yaml#0) spec.devices[0].capacity.memory: "
        "declares 80Gi for an NVIDIA H100 80GB, but the gpu.nvidia.com driver publishes only 81559Mi for "
        "that GPU: a selector asking for more than 81559Mi (e.g. >= 80Gi) matches this class at fleet "
        "level, the replica is placed, and DRA never binds the claim, so its pods stay Pending without "
        "an error. Fix: declare memory: 81559Mi (the usable figure)."
    ]


SELECTOR_MESSAGE = (
    "[mandatory] usable-gpu-memory: ModelDeployment/ml-team/llama (fleet.yaml#2) "
    "spec.template.spec.engines[0].members[0].nodeSelector.devices[0].selectors[0].cel: only the "
    "nominal 80Gi of an NVIDIA H100 80GB satisfies this selector; the gpu.nvidia.com driver publishes "
    "81559Mi, so on pools of class h100 (device gpu) DRA never binds the claim and pods stay Pending. "
    "Fix: select on the usable figure, e.g. "
    "device.capacity[\"gpu.nvidia.com\"].memory.compareTo(quantity(\"79Gi\")) >= 0."
)


def test_selector_only_nominal_memory_satisfies_fails_with_the_selector_to_write():
    assert messages(base(deployment=deployment(NOMINAL_CEL)), POLICY) == [SELECTOR_MESSAGE]


def test_nominal_class_and_nominal_selector_both_fail():
    # The reference's trap: both sides say 80Gi, the fleet matches, DRA never binds.
    got = messages(base(**{"class": h100_class("80Gi"), "deployment": deployment(NOMINAL_CEL)}), POLICY)
    assert len(got) == 2 and got[1] == SELECTOR_MESSAGE


def test_selector_excluding_the_product_is_not_flagged():
    cel = ('device.attributes["gpu.nvidia.com"].architecture == "Ampere" && '
           'device.capacity["gpu.nvidia.com"].memory.compareTo(quantity("80Gi")) >= 0')
    assert messages(base(deployment=deployment(cel)), POLICY) == []


def test_a100_nominal_equals_usable():
    a100 = h100_class("80Gi").replace("NVIDIA H100 80GB HBM3", "NVIDIA A100-SXM4-80GB")
    assert messages(base(**{"class": a100, "deployment": deployment(NOMINAL_CEL)}), POLICY) == []


GKE_L4 = """
apiVersion: modelplane.ai/v1alpha1
kind: InferenceClass
metadata:
  name: gke-l4
spec:
  provisioning:
    provider: GKE
    gke:
      machineType: g2-standard-8
      accelerator: {type: nvidia-l4, count: 1}
  devices:
  - name: gpu
    driver: gpu.nvidia.com
    deviceClassName: gpu.nvidia.com
    attributes:
      architecture: {string: Ada Lovelace}
    capacity:
      memory: {value: %s}
"""


def test_product_known_from_the_provisioned_accelerator():
    assert messages([GKE_L4 % "23034Mi"], POLICY) == []
    assert messages([GKE_L4 % "24Gi"], POLICY) == [
        "[mandatory] usable-gpu-memory: InferenceClass/gke-l4 (fleet.yaml#0) spec.devices[0].capacity.memory: "
        "declares 24Gi for an NVIDIA L4 24GB, but the gpu.nvidia.com driver publishes only 23034Mi for "
        "that GPU: a selector asking for more than 23034Mi (e.g. >= 24Gi) matches this class at fleet "
        "level, the replica is placed, and DRA never binds the claim, so its pods stay Pending without "
        "an error. Fix: declare memory: 23034Mi (the usable figure)."
    ]


def test_table_is_consistent():
    for p in GPU_PRODUCTS:
        usable, suggest, nominal = (Quantity.parse(x) for x in (p.usable, p.suggest, p.nominal))
        assert suggest <= usable <= nominal, p.name
        assert p.suggest.endswith("Gi"), p.name
