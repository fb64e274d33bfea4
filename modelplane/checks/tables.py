"""Facts the checks compare manifests against. Each figure carries its source, because a
wrong table entry turns a loud failure back into a silent one."""

from __future__ import annotations

import re
from dataclasses import dataclass


@dataclass(frozen=True)
class GpuProduct:
    name: str
    pattern: str      # regex, case-insensitive, searched in productName / accelerator type
    usable: str       # memory the driver really publishes (NVML total / amdgpu VRAM total)
    nominal: str      # the marketing size read as binary units, what people write in CEL
    suggest: str      # a whole-Gi threshold at or below `usable`, for the fix in messages

    def matches(self, text: str) -> bool:
        return re.search(self.pattern, text, re.IGNORECASE) is not None


# Usable memory per product, as the DRA driver publishes it in ResourceSlices.
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


# Engine images known to ship NIXL, with the first tag known to carry it. Repositories are
# normalised (no docker.io/ or library/ prefix).
NIXL_IMAGES: dict[str, str] = {
    # The NVIDIA (CUDA) vllm/vllm-openai image ships NIXL, checked for v0.20.1
    # (k8s-api-shapes.md §7.1). Older tags are not vouched for; ROCm builds ship none.
    "vllm/vllm-openai": "0.20.1",
}
# Tags that are builds without NIXL even when the repository ships it (ROCm has no RIXL).
NIXL_EXCLUDED_TAG = re.compile(r"rocm", re.IGNORECASE)
NIXL_ANNOTATION = "modelplane.ai/nixl"


# Kind node images: kubelet 1.34.0/1.34.1 deadlocks DRA after ~30 idle minutes
# (kubernetes/kubernetes#133920, fixed in v1.34.2; k8s-api-shapes.md §1.9), and
# resource.k8s.io/v1 is only served from 1.34 (k8s-api-shapes.md §1.1).
KIND_DRA_DEADLOCK = ((1, 34, 0), (1, 34, 1))
KIND_MIN_DRA_V1 = (1, 34, 0)
KIND_FIRST_SAFE = "v1.34.2"


# Which cluster sources can carry which fabric (modelplane-semantics.md §1.2/§1.3: EFA is an
# EKS feature, InfiniBand is provisioned on Nebius and AKS). Existing clusters are declared,
# not provisioned: the platform team states what its nodes have, so both are accepted.
FABRIC_SOURCES: dict[str, tuple[str, ...]] = {
    "EFA": ("EKS", "Existing"),
    "InfiniBand": ("Nebius", "AKS", "Existing"),
}


@dataclass(frozen=True)
class NvidiaGpuIdentity:
    """What the NVIDIA DRA driver's kubelet plugin publishes about a full GPU besides memory:
    the NVML product name, the architecture string and the CUDA compute capability
    (sigs.k8s.io/dra-driver-nvidia-gpu v0.4.1 cmd/gpu-kubelet-plugin/deviceinfo.go, Attributes())."""

    product_name: str
    architecture: str
    compute_capability: str


# Keyed by GpuProduct.name. Product names as NVML reports them and compute capabilities from
# NVIDIA's CUDA GPU table (Hopper 9.0, Ampere A100 8.0, Blackwell B200 10.0, Ada 8.9);
# architecture names as go-nvlib spells them. Not re-measured on hardware here.
NVIDIA_GPU_IDENTITIES: dict[str, NvidiaGpuIdentity] = {
    "NVIDIA H100 80GB": NvidiaGpuIdentity("NVIDIA H100 80GB HBM3", "Hopper", "9.0.0"),
    "NVIDIA A100 80GB": NvidiaGpuIdentity("NVIDIA A100-SXM4-80GB", "Ampere", "8.0.0"),
    "NVIDIA H200 141GB": NvidiaGpuIdentity("NVIDIA H200", "Hopper", "9.0.0"),
    "NVIDIA B200 180GB": NvidiaGpuIdentity("NVIDIA B200", "Blackwell", "10.0.0"),
    "NVIDIA L40S 48GB": NvidiaGpuIdentity("NVIDIA L40S", "Ada Lovelace", "8.9.0"),
    "NVIDIA L4 24GB": NvidiaGpuIdentity("NVIDIA L4", "Ada Lovelace", "8.9.0"),
}
