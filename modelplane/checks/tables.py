"""Facts the checks compare manifests against. Each figure carries its source, because a
wrong table entry turns a loud failure back into a silent one. What GPU drivers publish (the
usable memory per product, NVML names, attribute keys) lives in modelplane.drivers, shared with
the sim."""

from __future__ import annotations

import re

# Engine images known to ship NIXL, with the first tag known to carry it. Repositories are
# normalised (no docker.io/ or library/ prefix).
NIXL_IMAGES: dict[str, str] = {
    # The NVIDIA (CUDA) vllm/vllm-openai image ships NIXL, checked for v0.20.1
    # (k8s-api-shapes.md §7.1). Older tags are not vouched for; ROCm builds ship none.
    "vllm/vllm-openai": "0.20.1",
}
# Tags that are builds without NIXL even when the repository ships it (ROCm has no RIXL).
NIXL_EXCLUDED_TAG = re.compile(r"rocm", re.IGNORECASE)


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
