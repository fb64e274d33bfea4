"""The DRA drivers this program knows, and what they publish for a GPU: the attribute and capacity
keys of a device with their value types, and the values that follow from what the GPU is.

One home for these facts. The sim publishes its ResourceSlices from them (modelplane.node_objects), and the
checks compare InferenceClasses and selectors with them (modelplane.checks.usable_gpu_memory and
modelplane.checks.published_attributes). A class is the fleet scheduler's picture of a device; the
kube-scheduler evaluates the same CEL selectors against what the driver publishes, so wherever the
two differ a replica is placed and its claim never binds.

Sources, read in this machine's Go module cache (`go env GOMODCACHE`):
- gpu.nvidia.com: sigs.k8s.io/dra-driver-nvidia-gpu v0.4.1. cmd/gpu-kubelet-plugin/deviceinfo.go
  (`GpuInfo.Attributes`, `GetDevice`: the full GPU); nvlib.go (where each value comes from:
  NVML's device name, go-nvlib's architecture and brand strings, the "major.minor" compute capability
  and the driver versions as semver, `addressingMode` only where NVML reports one, the PCIe root
  only where sysfs resolves it); partitions.go (capacity `memory`, and with the DynamicMIG feature
  the MIG profile maxima); mig.go (`CommonAttributesMig`, `CommonCapacitiesMig`) and the VFIO
  device in deviceinfo.go (keys of the other device types); the chart's DeviceClass `gpu.nvidia.com`
  selects `type == 'gpu'`, the full GPUs. github.com/NVIDIA/go-nvlib v0.11.0
  pkg/nvlib/device/device.go (the architecture strings). k8s.io/dynamic-resource-allocation
  deviceattribute (the standard keys `resource.kubernetes.io/pciBusID` and `pcieRoot`).
- gpu.example.com: sigs.k8s.io/dra-example-driver v0.4.0, internal/profiles/gpu/gpu.go (the same
  fixed values on every fake GPU; `partition`, `partitionable` and `full` only with
  `kubeletPlugin.gpuPartitions`). Its chart's DeviceClass selects the driver only.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from modelplane.api.inference_class import AttributeValue, DeviceKind, InferenceClass
from modelplane.vocabulary import EXAMPLE_DRIVER, NVIDIA_DRIVER

# A typed attribute value as ResourceSlices and InferenceClasses spell it: {"string": "Hopper"}.
RawAttribute = dict[str, object]

# What a simulated NVIDIA node reports for its host driver stack (a current datacenter branch),
# unless its class declares the versions its nodes run.
NVIDIA_DRIVER_VERSION = "580.126.20"
NVIDIA_CUDA_DRIVER_VERSION = "13.0.0"


# ------------------------------------------------------------------------------------- GPU products

@dataclass(frozen=True)
class GpuProduct:
    name: str
    pattern: str      # regex, case-insensitive, searched in productName / accelerator type
    usable: str       # memory the driver really publishes (NVML total / amdgpu VRAM total)
    nominal: str      # the marketing size read as binary units, what people write in CEL
    suggest: str      # a whole-Gi threshold at or below `usable`, for the fix in messages

    def matches(self, text: str) -> bool:
        return re.search(self.pattern, text, re.IGNORECASE) is not None


# Usable memory per product, as the DRA driver publishes it in ResourceSlices. Each figure carries
# its source, because a wrong entry turns a loud failure back into a silent one.
GPU_PRODUCTS: tuple[GpuProduct, ...] = (
    # NVML memory.Total 81,559 MiB (shared/reference/k8s-api-shapes.md §3, NVIDIA DRA driver
    # deviceinfo.go + thundergolfer.com/blog/nvidia-gpu-memory-capacity); 361 MiB short of 80Gi.
    # H100 NVL (94GB) is a different product, hence the 80GB anchor.
    GpuProduct("NVIDIA H100 80GB", r"h100\D.*80\s*gb|h100-80gb|h100-mega-80gb", "81559Mi", "80Gi", "79Gi"),
    # NVML total 81,920 MiB = exactly 80Gi (k8s-api-shapes.md §3): nominal equals usable.
    GpuProduct("NVIDIA A100 80GB", r"a100\D.*80\s*gb|a100-80gb", "80Gi", "80Gi", "80Gi"),
    # NVML total 143,771 MiB, about 140.4 GiB, so ">= 141Gi" is false (k8s-api-shapes.md §3;
    # modelplane-semantics.md §6 declares 140Gi for the same reason).
    GpuProduct("NVIDIA H200 141GB", r"h200", "143771Mi", "141Gi", "140Gi"),
    # nvidia-smi memory.total 183,359 MiB (179 GB as Vultr's HGX B200 cookbook reports from
    # nvidia-smi, docs.vultr.com/inference-cookbook/cuda/getting-started/hardware-overview);
    # the MiB figure is the widely reported one, not re-measured here.
    GpuProduct("NVIDIA B200 180GB", r"b200", "183359Mi", "180Gi", "179Gi"),
    # nvidia-smi memory.total 46,068 MiB with ECC on (widely reported for L40S/L40; not
    # re-measured here). Marketing says 48 GB.
    GpuProduct("NVIDIA L40S 48GB", r"l40s", "46068Mi", "48Gi", "44Gi"),
    # 23,034 MiB (modelplane-semantics.md §6, the reference's GKE g2 example class).
    GpuProduct("NVIDIA L4 24GB", r"(^|[^a-z0-9])l4($|[^0-9a-z])", "23034Mi", "24Gi", "22Gi"),
    # rocm-smi "VRAM Total Memory (B): 205822885888" = 196,288 MiB (about 191.7 GiB), widely
    # reported for MI300X; not re-measured here. Marketing says 192 GB.
    GpuProduct("AMD Instinct MI300X 192GB", r"mi300x", "196288Mi", "192Gi", "191Gi"),
)

# Attribute keys a GPU driver publishes its product string under (gpu.nvidia.com uses
# productName; dra-example-driver uses model).
PRODUCT_ATTRIBUTES = ("productName", "product", "model")


@dataclass(frozen=True)
class NvidiaGpuIdentity:
    """What the NVIDIA DRA driver publishes about a full GPU besides memory: the NVML product name
    (one per variant of the product; the sim publishes the first unless the class names another),
    the architecture string and the CUDA compute capability."""

    product_names: tuple[str, ...]
    architecture: str
    compute_capability: str


# Keyed by GpuProduct.name. Product names as NVML (`nvidia-smi --query-gpu=name`) reports them,
# widely reported and not re-measured on hardware here; compute capabilities from NVIDIA's CUDA GPU
# table (Hopper 9.0, A100 8.0, Blackwell B200 10.0, Ada 8.9), published as semver "9.0.0";
# architecture names as go-nvlib v0.11.0 spells them.
NVIDIA_GPU_IDENTITIES: dict[str, NvidiaGpuIdentity] = {
    "NVIDIA H100 80GB": NvidiaGpuIdentity(("NVIDIA H100 80GB HBM3",), "Hopper", "9.0.0"),
    "NVIDIA A100 80GB": NvidiaGpuIdentity(("NVIDIA A100-SXM4-80GB", "NVIDIA A100 80GB PCIe"), "Ampere", "8.0.0"),
    "NVIDIA H200 141GB": NvidiaGpuIdentity(("NVIDIA H200", "NVIDIA H200 NVL"), "Hopper", "9.0.0"),
    "NVIDIA B200 180GB": NvidiaGpuIdentity(("NVIDIA B200",), "Blackwell", "10.0.0"),
    "NVIDIA L40S 48GB": NvidiaGpuIdentity(("NVIDIA L40S",), "Ada Lovelace", "8.9.0"),
    "NVIDIA L4 24GB": NvidiaGpuIdentity(("NVIDIA L4",), "Ada Lovelace", "8.9.0"),
}
NVML_PRODUCT_NAMES: tuple[str, ...] = tuple(n for i in NVIDIA_GPU_IDENTITIES.values() for n in i.product_names)


def _accelerator_type(cls: InferenceClass) -> str | None:
    prov = cls.spec.provisioning
    if prov is None:
        return None
    block = getattr(prov, "vultr_baremetal" if prov.provider == "VultrBaremetal" else prov.provider.lower(), None)
    accelerator = getattr(block, "accelerator", None)
    return str(accelerator.type) if accelerator is not None else None


def memory_key(device: DeviceKind) -> str | None:
    """The device's declared GPU memory capacity key (`memory`, or `<domain>/memory`)."""
    return next((key for key in device.capacity if key.rpartition("/")[2] == "memory"), None)


def identify(cls: InferenceClass, device: DeviceKind) -> GpuProduct | None:
    """The known product a class device is, from its product attribute, else (for a device with
    memory) the class's provisioned accelerator type."""
    for key in PRODUCT_ATTRIBUTES:
        for attr_key, value in device.attributes.items():
            if attr_key.rpartition("/")[2] == key and value.string:
                product = next((p for p in GPU_PRODUCTS if p.matches(value.string)), None)
                if product:
                    return product
    accelerator = _accelerator_type(cls)
    if accelerator and memory_key(device):
        return next((p for p in GPU_PRODUCTS if p.matches(accelerator)), None)
    return None


# ------------------------------------------------------------------------------------- driver profiles

STRING, VERSION, INT, BOOL, QUANTITY = "string", "version", "int", "bool", "quantity"


@dataclass(frozen=True)
class Published:
    """One key a driver publishes on its devices."""

    type: str                 # string | version | int | bool for an attribute, quantity for a capacity
    fixed: str | None = None  # the one value the driver publishes on every device, whatever the node
    default: str | None = None  # what the sim publishes when neither the product nor the class says
    when: str = ""            # empty: on every device; else the condition under which it is published
    per_device: bool = False  # the value differs between the devices of one node (UUID, PCI address)


def _uuid(serial: str) -> str:
    return f"{serial[:8]}-{serial[8:12]}-{serial[12:16]}-{serial[16:20]}-{serial[20:32]}"


@dataclass(frozen=True)
class DriverProfile:
    """What one driver publishes for the devices of one DeviceClass. Keys are spelled as in a
    ResourceSlice: bare names are in the driver's own domain (`device.attributes["<driver>"]`),
    others are qualified (`resource.kubernetes.io/pciBusID`)."""

    driver: str
    device_class: str | None           # the DeviceClass whose devices these are; None: any of the driver
    attributes: Mapping[str, Published]
    capacity: Mapping[str, Published]
    per_device: Callable[[int, str], dict[str, RawAttribute]]   # (index on the node, 32 hex digits)
    # Keys the driver publishes only on its other device types, with which ones: not on these devices.
    elsewhere: Mapping[str, str] = field(default_factory=dict)
    elsewhere_pattern: tuple[str, str] | None = None    # (regex of keys, which device types)

    def covers(self, device: DeviceKind) -> bool:
        return (device.claim == "DRA" and device.driver == self.driver
                and (self.device_class is None or device.device_class_name == self.device_class))

    def key(self, declared: str) -> str:
        """The ResourceSlice key of a class key: `<driver>/name` is the bare `name`."""
        domain, _, name = declared.rpartition("/")
        return name if domain == self.driver else declared

    def published_elsewhere(self, key: str) -> str | None:
        if key in self.elsewhere:
            return self.elsewhere[key]
        if self.elsewhere_pattern is not None and re.fullmatch(self.elsewhere_pattern[0], key):
            return self.elsewhere_pattern[1]
        return None


_NVIDIA_MIG = "MIG devices (DeviceClass mig.nvidia.com)"
_NVIDIA_VFIO = "VFIO passthrough devices (DeviceClass vfio.gpu.nvidia.com)"
_MIG_MAXIMA = "with the DynamicMIG feature on a MIG-capable GPU (the MIG profile maxima)"
_PARTITIONS = "with kubeletPlugin.gpuPartitions set"

NVIDIA_GPU = DriverProfile(
    driver=NVIDIA_DRIVER, device_class=NVIDIA_DRIVER,
    attributes={
        "type": Published(STRING, fixed="gpu"),
        "uuid": Published(STRING, per_device=True),
        "productName": Published(STRING, default="NVIDIA GPU"),
        "brand": Published(STRING, default="Nvidia"),
        "architecture": Published(STRING, default="Unknown"),
        "cudaComputeCapability": Published(VERSION, default="0.0.0"),
        "driverVersion": Published(VERSION, default=NVIDIA_DRIVER_VERSION),
        "cudaDriverVersion": Published(VERSION, default=NVIDIA_CUDA_DRIVER_VERSION),
        "addressingMode": Published(STRING, when="on coherent-memory platforms (where NVML reports an "
                                                 "addressing mode: ATS, HMM or None)"),
        "resource.kubernetes.io/pciBusID": Published(STRING, per_device=True),
        "resource.kubernetes.io/pcieRoot": Published(STRING, when="where sysfs resolves the GPU's PCIe root",
                                                     per_device=True),
    },
    capacity={
        "memory": Published(QUANTITY),
        **{key: Published(QUANTITY, when=_MIG_MAXIMA)
           for key in ("multiprocessors", "copyEngines", "decoders", "encoders", "jpegEngines", "ofaEngines")},
    },
    per_device=lambda index, serial: {
        "uuid": {STRING: f"GPU-{_uuid(serial)}"},
        "resource.kubernetes.io/pciBusID": {STRING: f"0000:{0x18 + 0x10 * index:02x}:00.0"},
    },
    elsewhere={"parentUUID": _NVIDIA_MIG, "profile": _NVIDIA_MIG, "deviceID": _NVIDIA_VFIO,
               "vendorID": _NVIDIA_VFIO, "numa": _NVIDIA_VFIO, "iommuFDEnabled": _NVIDIA_VFIO,
               "addressableMemory": _NVIDIA_VFIO},
    elsewhere_pattern=(r"memorySlice\d+", _NVIDIA_MIG),
)

EXAMPLE_GPU = DriverProfile(
    driver=EXAMPLE_DRIVER, device_class=None,
    attributes={
        "index": Published(INT, per_device=True),
        "uuid": Published(STRING, per_device=True),
        "model": Published(STRING, fixed="LATEST-GPU-MODEL"),
        "driverVersion": Published(VERSION, fixed="1.0.0"),
        "partition": Published(INT, when=_PARTITIONS, per_device=True),
        "partitionable": Published(BOOL, when=_PARTITIONS),
        "full": Published(BOOL, when=_PARTITIONS),
    },
    capacity={"memory": Published(QUANTITY, fixed="80Gi"), "compute": Published(QUANTITY, fixed="100")},
    per_device=lambda index, serial: {"index": {INT: index}, "uuid": {STRING: f"gpu-{_uuid(serial)}"}},
)

DRIVER_PROFILES: tuple[DriverProfile, ...] = (NVIDIA_GPU, EXAMPLE_GPU)


def profile_of(device: DeviceKind) -> DriverProfile | None:
    """The profile of the driver that publishes this class device, None for a driver (or an NVIDIA
    device class other than full GPUs) this program does not model."""
    return next((p for p in DRIVER_PROFILES if p.covers(device)), None)


def profile_for_domain(domain: str) -> DriverProfile | None:
    """The profile of the driver whose own domain `domain` is (`device.attributes["<domain>"]`)."""
    return next((p for p in DRIVER_PROFILES if p.driver == domain), None)


def value_type(value: AttributeValue) -> str:
    return str(next(iter(value.raw())))


# ------------------------------------------------------------------------------------- published values

def determined_attributes(cls: InferenceClass, device: DeviceKind) -> dict[str, RawAttribute]:
    """Attribute values (ResourceSlice key -> typed value) the driver publishes on every device of
    this kind whatever the class declares: its fixed values, and for an identified NVIDIA product the
    NVML name (the class's, when it names one of the product's variants), architecture and compute
    capability. Empty for a driver this program does not model."""
    profile = profile_of(device)
    if profile is None:
        return {}
    out: dict[str, RawAttribute] = {k: {p.type: p.fixed} for k, p in profile.attributes.items() if p.fixed is not None}
    product = identify(cls, device) if profile is NVIDIA_GPU else None
    identity = NVIDIA_GPU_IDENTITIES.get(product.name) if product is not None else None
    if identity is not None:
        declared = declared_attributes(profile, device).get("productName", {}).get(STRING)
        name = declared if declared in identity.product_names else identity.product_names[0]
        out.update({"productName": {STRING: name}, "architecture": {STRING: identity.architecture},
                    "cudaComputeCapability": {VERSION: identity.compute_capability}})
    return out


def determined_capacity(cls: InferenceClass, device: DeviceKind) -> dict[str, str]:
    """Capacity values the driver publishes whatever the class declares: its fixed values, and the
    usable memory of an identified NVIDIA product."""
    profile = profile_of(device)
    if profile is None:
        return {}
    out = {k: p.fixed for k, p in profile.capacity.items() if p.fixed is not None}
    product = identify(cls, device) if profile is NVIDIA_GPU else None
    if product is not None:
        out["memory"] = product.usable
    return out


def declared_attributes(profile: DriverProfile, device: DeviceKind) -> dict[str, RawAttribute]:
    """The class's attribute values for keys the driver publishes, with the type it publishes them
    as, by ResourceSlice key."""
    out: dict[str, RawAttribute] = {}
    for key, value in device.attributes.items():
        published = profile.attributes.get(profile.key(key))
        if published is not None and value_type(value) == published.type:
            out[profile.key(key)] = dict(value.raw())
    return out


def published_attributes(cls: InferenceClass, device: DeviceKind, index: int, serial: str) -> dict[str, object]:
    """The attributes the device's driver publishes on the `index`-th device of this kind on a node
    (`serial`: 32 hex digits unique to it). Per key: the value the product or the driver determines,
    else the per-device value, else the class's (what its nodes run), else the driver's default;
    keys published only under a condition appear when the class declares them. A driver this
    program does not model publishes the class's attributes verbatim."""
    profile = profile_of(device)
    if profile is None:
        return {k: dict(v.raw()) for k, v in device.attributes.items()}
    values = {**declared_attributes(profile, device), **profile.per_device(index, serial),
              **determined_attributes(cls, device)}
    out: dict[str, object] = {}
    for key, published in profile.attributes.items():
        value = values.get(key) or ({published.type: published.default} if published.default is not None else None)
        if value is not None:
            out[key] = value
    return out


def published_capacity(cls: InferenceClass, device: DeviceKind) -> dict[str, object]:
    """The capacity the device's driver publishes: what it determines, else the class's figure (an
    unidentified GPU's memory, a DynamicMIG maximum the class states). A driver this program does
    not model publishes the class's capacity verbatim."""
    profile = profile_of(device)
    if profile is None:
        return {k: dict(v.raw()) for k, v in device.capacity.items()}
    declared = {profile.key(k): v.value for k, v in device.capacity.items()}
    values = {**declared, **determined_capacity(cls, device)}
    return {k: {"value": values[k]} for k in profile.capacity if k in values}
