"""published-device-attributes: classes and selectors against what the DRA drivers publish
(modelplane.drivers). Table-driven: each case is a fleet and the (resource, field, words) of every
finding it must produce, in order."""

import pytest

from .fleets import NOMINAL_CEL, base, deployment, findings, h100_class, messages

POLICY = "published-device-attributes"
CLASS = "InferenceClass/h100 (fleet.yaml#0)"
DEPLOYMENT = "ModelDeployment/ml-team/llama (fleet.yaml#2)"
SELECTOR = "spec.template.spec.engines[0].members[0].nodeSelector.devices[0].selectors[0].cel"
ATTRIBUTES = """    attributes:
      productName: {string: NVIDIA H100 80GB HBM3}
      architecture: {string: Hopper}
      cudaComputeCapability: {version: 9.0.0}
"""


def h100(attributes: str = ATTRIBUTES, capacity: str = "", device_class: str = "gpu.nvidia.com") -> str:
    """The test fleet's H100 class with other GPU attributes (YAML lines under the device), extra
    capacity lines and another deviceClassName."""
    doc = h100_class().replace(ATTRIBUTES, attributes).replace(
        "      memory: {value: 81559Mi}\n", "      memory: {value: 81559Mi}\n" + capacity)
    return doc.replace("deviceClassName: gpu.nvidia.com", f"deviceClassName: {device_class}", 1)


def assert_findings(got, want):
    """Exactly the findings `want` lists, in order: (resource, field, words of the message)."""
    assert [(f.resource, f.field) for f in got] == [(r, f) for r, f, _ in want], [str(f) for f in got]
    for finding, (_, _, words) in zip(got, want, strict=True):
        assert words in finding.message, finding.message


def attrs(*lines: str) -> str:
    return "    attributes:\n" + "".join(f"      {line}\n" for line in lines)


EKS_H100 = """
apiVersion: modelplane.ai/v1alpha1
kind: InferenceClass
metadata:
  name: h100
spec:
  provisioning:
    provider: EKS
    eks: {instanceType: p5.48xlarge, accelerator: {type: nvidia-h100-80gb, count: 8}}
  devices:
  - name: gpu
    driver: gpu.nvidia.com
    deviceClassName: gpu.nvidia.com
    count: 8
    attributes: {productName: {string: %s}}
    capacity: {memory: {value: 81559Mi}}
"""

FAKE_GPU = """
apiVersion: modelplane.ai/v1alpha1
kind: InferenceClass
metadata:
  name: h100
spec:
  devices:
  - name: gpu
    driver: gpu.example.com
    deviceClassName: gpu.example.com
    count: 8
    attributes: {%s}
    capacity: {memory: {value: %s}}
"""


def fake_gpu(attributes: str = "model: {string: LATEST-GPU-MODEL}", memory: str = "80Gi") -> str:
    return FAKE_GPU % (attributes, memory)


CLASS_CASES = [
    pytest.param([h100()], [], id="the exact NVML name, architecture and compute capability pass"),
    pytest.param([h100(attrs("gpu.nvidia.com/productName: {string: NVIDIA H100 80GB HBM3}",
                             "resource.kubernetes.io/pcieRoot: {string: pci0000:00}"))],
                 [(CLASS, 'spec.devices[0].attributes["resource.kubernetes.io/pcieRoot"]',
                   "a value that varies between devices")],
                 id="a key qualified with the driver's domain is the bare key; a per-device key is not a class fact"),
    pytest.param([EKS_H100 % "H100"],
                 [(CLASS, "spec.devices[0].attributes.productName",
                   'declares productName "H100", but on an NVIDIA H100 80GB the gpu.nvidia.com driver publishes '
                   '"NVIDIA H100 80GB HBM3" (the name NVML reports)')],
                 id="a short product name on a class identified by its provisioned accelerator"),
    pytest.param([h100(attrs("productName: {string: H100}"))],
                 [(CLASS, "spec.devices[0].attributes.productName",
                   'declares productName "H100", which is not a name NVML reports: the gpu.nvidia.com driver '
                   'publishes the GPU\'s full name, e.g. "NVIDIA H100 80GB HBM3"')],
                 id="a part of an NVML name on a class nothing identifies"),
    pytest.param([h100(attrs("productName: {string: NVIDIA A100 80GB PCIe}"))], [],
                 id="either NVML name of a product with two variants"),
    pytest.param([h100(attrs("productName: {string: NVIDIA A100-SXM4-40GB}"))], [],
                 id="an exact name of a product the tables do not know is not flagged"),
    pytest.param([h100(attrs("productName: {string: NVIDIA H100 80GB HBM3}", "architecture: {string: Ampere}"))],
                 [(CLASS, "spec.devices[0].attributes.architecture",
                   'declares architecture "Ampere", but on an NVIDIA H100 80GB the gpu.nvidia.com driver '
                   'publishes "Hopper"')],
                 id="the wrong architecture for the product"),
    pytest.param([h100(attrs("productName: {string: NVIDIA H100 80GB HBM3}",
                             "cudaComputeCapability: {version: 8.0.0}"))],
                 [(CLASS, "spec.devices[0].attributes.cudaComputeCapability",
                   "declares cudaComputeCapability 8.0.0, but on an NVIDIA H100 80GB the gpu.nvidia.com driver "
                   "publishes 9.0.0")],
                 id="the wrong compute capability for the product"),
    pytest.param([h100(attrs("cudaComputeCapability: {string: '9.0'}"))],
                 [(CLASS, "spec.devices[0].attributes.cudaComputeCapability",
                   "declares cudaComputeCapability as a string, but the gpu.nvidia.com driver publishes it as a "
                   "version")],
                 id="a value of another type than the driver publishes"),
    pytest.param([h100(attrs("computeCapability: {version: 9.0.0}"))],
                 [(CLASS, "spec.devices[0].attributes.computeCapability",
                   "declares attribute computeCapability, which the gpu.nvidia.com driver publishes on none of "
                   "its devices")],
                 id="a key the driver never publishes"),
    pytest.param([h100(attrs("profile: {string: 1g.10gb}"))],
                 [(CLASS, "spec.devices[0].attributes.profile",
                   "publishes only on MIG devices (DeviceClass mig.nvidia.com), not on the devices of DeviceClass "
                   "gpu.nvidia.com")],
                 id="a MIG key on the full-GPU device class"),
    pytest.param([h100(attrs("profile: {string: 1g.10gb}"), device_class="mig.nvidia.com")], [],
                 id="NVIDIA device classes other than full GPUs are not modelled"),
    pytest.param([h100(attrs("addressingMode: {string: ATS}"), capacity="      multiprocessors: {value: '132'}\n")],
                 [], id="keys the driver publishes only on some nodes may be declared"),
    pytest.param([h100(capacity="      bandwidth: {value: 3350G}\n")],
                 [(CLASS, "spec.devices[0].capacity.bandwidth",
                   "declares capacity bandwidth, which the gpu.nvidia.com driver does not publish")],
                 id="a capacity the driver does not publish"),
    pytest.param([fake_gpu()], [], id="the example driver's fixed model"),
    pytest.param([fake_gpu("model: {string: H100}")],
                 [(CLASS, "spec.devices[0].attributes.model",
                   'declares model "H100", but on every device the gpu.example.com driver publishes '
                   '"LATEST-GPU-MODEL"')],
                 id="another model than the example driver's"),
    pytest.param([fake_gpu(memory="160Gi")],
                 [(CLASS, "spec.devices[0].capacity.memory",
                   "declares 160Gi, but the gpu.example.com driver publishes 80Gi on every device")],
                 id="more memory than the example driver's fixed 80Gi"),
    pytest.param([fake_gpu(memory="40Gi")], [], id="less memory than the example driver publishes is safe"),
]


@pytest.mark.parametrize(("docs", "want"), CLASS_CASES)
def test_class_declarations(docs, want):
    assert_findings(findings(docs, POLICY), want)


def test_a_class_finding_says_what_happens_and_the_fix():
    assert messages([EKS_H100 % "H100"], POLICY) == [
        f"[mandatory] published-device-attributes: {CLASS} spec.devices[0].attributes.productName: declares "
        'productName "H100", but on an NVIDIA H100 80GB the gpu.nvidia.com driver publishes "NVIDIA H100 80GB '
        'HBM3" (the name NVML reports): a selector comparing productName with the declared value matches this '
        "class at fleet level and no device in the cluster, so the replica is placed and its pods stay Pending "
        "without an error. Fix: declare productName: {string: NVIDIA H100 80GB HBM3}."
    ]


def test_a_misspelt_key_names_the_drivers_own():
    (message,) = [f.message for f in findings([h100(attrs("computeCapability: {version: 9.0.0}"))], POLICY)]
    assert "Fix: remove computeCapability, or use the driver's own key cudaComputeCapability (it publishes type, " \
           "uuid, productName, brand, architecture, cudaComputeCapability," in message


SELECTOR_CASES = [
    pytest.param(h100(), 'device.attributes["gpu.nvidia.com"].productName == "NVIDIA H100 80GB HBM3"', [],
                 id="a selector on what the driver publishes"),
    pytest.param(EKS_H100 % "H100", 'device.attributes["gpu.nvidia.com"].productName == "H100"',
                 [(CLASS, "spec.devices[0].attributes.productName", 'the gpu.nvidia.com driver publishes "NVIDIA'),
                  (DEPLOYMENT, SELECTOR,
                   'matches what class h100 declares for device gpu but not what the gpu.nvidia.com driver '
                   'publishes for it (productName: published "NVIDIA H100 80GB HBM3", declared "H100")')],
                 id="a selector only the class's short name satisfies"),
    pytest.param(h100(attrs("productName: {string: H100}")),
                 'device.attributes["gpu.nvidia.com"].productName == "H100"',
                 [(CLASS, "spec.devices[0].attributes.productName", "not a name NVML reports")],
                 id="where nothing identifies the product, the class's finding says it"),
    pytest.param(h100(), 'device.attributes["gpu.nvidia.com"].gpuModel == "H100"',
                 [(DEPLOYMENT, SELECTOR,
                   "selects on attribute gpuModel of domain gpu.nvidia.com, which the gpu.nvidia.com driver never "
                   "publishes: no device in any cluster satisfies this selector, and no class declares it")],
                 id="a key no driver publishes and no class declares"),
    pytest.param(h100(attrs("computeCapability: {version: 9.0.0}")),
                 'device.attributes["gpu.nvidia.com"].computeCapability.isGreaterThan(semver("8.9.0"))',
                 [(CLASS, "spec.devices[0].attributes.computeCapability", "publishes on none of its devices"),
                  (DEPLOYMENT, SELECTOR, "yet class h100 declares it, so the fleet scheduler places the replica "
                                         "there and its claim never binds")],
                 id="a key no driver publishes that the class declares"),
    pytest.param(h100(), 'device.capacity["gpu.nvidia.com"].bandwidth.compareTo(quantity("1T")) >= 0',
                 [(DEPLOYMENT, SELECTOR, "selects on capacity bandwidth of domain gpu.nvidia.com")],
                 id="a capacity the driver does not publish"),
    pytest.param(h100(), 'device.attributes["gpu.nvidia.com"].profile == "1g.10gb"', [],
                 id="a MIG key is published by the driver, on its MIG devices"),
    pytest.param(h100(), 'device.attributes["resource.kubernetes.io"].pcieRoot != ""', [],
                 id="standard keys are not the driver's domain"),
    pytest.param(h100(), 'device.attributes["example.com"].anything == 1', [],
                 id="domains of drivers not modelled"),
    pytest.param(h100_class("80Gi"), NOMINAL_CEL, [],
                 id="nominal memory is usable-gpu-memory's finding, not this one's"),
    pytest.param(fake_gpu(), 'device.attributes["gpu.example.com"].model == "LATEST-GPU-MODEL"', [],
                 id="the example driver's model"),
]


@pytest.mark.parametrize(("cls", "cel", "want"), SELECTOR_CASES)
def test_selectors(cls, cel, want):
    assert_findings(findings(base(**{"class": cls, "deployment": deployment(cel)}), POLICY), want)


def test_a_selector_finding_gives_the_selector_to_write():
    docs = base(**{"class": EKS_H100 % "H100",
                   "deployment": deployment('device.attributes["gpu.nvidia.com"].productName == "H100"')})
    assert messages(docs, POLICY)[1] == (
        f"[mandatory] published-device-attributes: {DEPLOYMENT} {SELECTOR}: matches what class h100 declares for "
        'device gpu but not what the gpu.nvidia.com driver publishes for it (productName: published "NVIDIA '
        'H100 80GB HBM3", declared "H100"): the fleet scheduler places the replica on pools of class h100 and DRA '
        "never binds the claim, so its pods stay Pending. Fix: select on the published value, e.g. "
        'device.attributes["gpu.nvidia.com"].productName == "NVIDIA H100 80GB HBM3", and declare it in the class.'
    )
