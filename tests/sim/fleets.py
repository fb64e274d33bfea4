"""Fleets the sim stack tests write to temp dirs (besides examples/kind and examples/canary),
built by tests/manifests.py."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.manifests import (
    FAKE_DRIVER,
    cluster,
    deployment,
    device,
    engine,
    fake_gpu_class,
    gateway,
    inference_class,
    kind_source,
    mem_at_least,
    member,
    pool,
    request,
    taint,
    to_yaml,
)

# The name NVML reports for this GPU, what the NVIDIA DRA driver publishes as productName.
NVML_H100 = "NVIDIA H100 80GB HBM3"
ENGINE = "vllm/vllm-openai:v0.26.0"
SHORT_NAME_SELECTOR = 'device.attributes["gpu.nvidia.com"].productName == "H100"'
EKS = {"source": "EKS", "eks": {"region": "us-east-1"}}


def h100(name: str, memory: str = "81559Mi", product: str = NVML_H100) -> dict[str, Any]:
    """A p5.48xlarge class: 8 x H100 80GB."""
    return inference_class(
        name,
        device("gpu", 8, memory, attributes={"productName": {"string": product}}),
        description="p5.48xlarge, 8 x H100 80GB; the driver publishes 81559Mi each.",
        provisioning={"provider": "EKS", "eks": {"instanceType": "p5.48xlarge",
                                                 "accelerator": {"type": "nvidia-h100-80gb", "count": 8}}},
    )


def eks_cluster(name: str, cls: str, nodes: int, fabric: dict[str, str] | None = None) -> dict[str, Any]:
    efa = {"fabric": fabric.get("type", "None"), "domain": fabric.get("domain")} if fabric else {}
    return cluster(name, pool("h100", cls, nodes, zones=["us-east-1a"], **efa),
                   labels={"modelplane.ai/region": name}, source=EKS)


def _member(role: str, gpus: int, selector: str, nodes: int | None = None) -> dict[str, Any]:
    return member(role, request("gpu", gpus, selector), nodes=nodes, image=ENGINE)


def _deployment(name: str, replicas: int, eng: dict[str, Any], region: str | None = None) -> dict[str, Any]:
    return deployment(name, replicas, eng, namespace="ml-team",
                      selector={"modelplane.ai/region": region} if region else None)


def gang_fleet(directory: Path) -> Path:
    """One EKS cluster, 8 p5 nodes on an EFA fabric: `llama-405b`, one replica of two copies of a
    Leader + 2-Worker gang (8 GPUs per pod: 3 nodes a copy), and `llama-8b`, two replicas of 4 GPUs
    (device-granular: one node holds both)."""
    usable = mem_at_least("79Gi")
    gang = engine("vllm", _member("Leader", 8, usable), _member("Worker", 8, usable, nodes=2), copies=2)
    docs = [
        h100("h100"),
        eks_cluster("gang-east", "h100", 8, {"type": "EFA", "domain": "use1"}),
        gateway("gang-east"),
        _deployment("llama-405b", 1, gang),
        _deployment("llama-8b", 2, engine("vllm", _member("Standalone", 4, usable))),
    ]
    return _write(directory, docs)


def gotcha_fleet(directory: Path) -> Path:
    """Silent failure 1 (mission) both ways, on two EKS clusters of one p5 node each:
    `nominal-class` selects `>= 80Gi` on cluster `nominal`, whose class declares the nominal 80Gi
    for an H100 (the driver publishes 81559Mi): the fleet scheduler places it, the real
    kube-scheduler cannot allocate its claim. `nominal-selector` selects `>= 80Gi` on cluster
    `usable`, whose class declares the usable 81559Mi: no H100 satisfies it, and the fleet
    scheduler refuses it first."""
    docs = [
        h100("h100-nominal", "80Gi"),
        h100("h100"),
        eks_cluster("nominal", "h100-nominal", 1),
        eks_cluster("usable", "h100", 1),
        gateway("usable"),
    ]
    for name, region in (("nominal-class", "nominal"), ("nominal-selector", "usable")):
        eng = engine("vllm", _member("Standalone", 8, mem_at_least("80Gi")))
        docs.append(_deployment(name, 1, eng, region))
    return _write(directory, docs)


def attribute_gap_fleet(directory: Path) -> Path:
    """The published-device-attributes gotcha on one EKS cluster of one p5 node: class
    `h100-short-name` declares `productName: H100` where the NVIDIA DRA driver publishes NVML's
    `NVIDIA H100 80GB HBM3`, and `short-name` selects `productName == "H100"`. The fleet scheduler
    places it (the class says H100); the real kube-scheduler finds no device of that name."""
    docs = [
        h100("h100-short-name", product="H100"),
        eks_cluster("short-name", "h100-short-name", 1),
        gateway("short-name"),
        _deployment("short-name", 1, engine("vllm", _member("Standalone", 8, SHORT_NAME_SELECTOR))),
    ]
    return _write(directory, docs)


def scaling_fleet(directory: Path, replicas: int, drained: str | None = None) -> Path:
    """Two Kind clusters of 3 one-GPU nodes (alpha, beta) and `chat` with `replicas` replicas;
    `drained`: a NoExecute taint on that cluster (its replicas are evicted and placed again)."""
    docs = [fake_gpu_class(), gateway("alpha")]
    docs += [cluster(c, pool("gpu", "fake-gpu", 3), labels={"modelplane.ai/region": c},
                     source=kind_source("kindest/node:v1.35.1"),
                     taints=[taint("maintenance", "NoExecute", "drain")] if c == drained else None)
             for c in ("alpha", "beta")]
    docs.append(_deployment("chat", replicas, engine("mock", _member("Standalone", 1, mem_at_least(20, FAKE_DRIVER)))))
    return _write(directory, docs)


ZONES = ["us-east-1a", "us-east-1b"]


def _zonal_gang(copies: int, workers: int = 1) -> dict[str, Any]:
    """A Leader + Worker vLLM engine, 8 H100s per pod (one p5 node each)."""
    usable = mem_at_least("79Gi")
    return engine("vllm", _member("Leader", 8, usable), _member("Worker", 8, usable, nodes=workers), copies=copies)


def zonal_gang_fleet(directory: Path, nodes: int = 4, copies: int = 2, replicas: int = 1,
                     workers: int = 1) -> Path:
    """`zonal`: an EKS pool of `nodes` p5 nodes spread over us-east-1a and us-east-1b (half in
    each), and `gang`: `replicas` replicas of `copies` copies of a Leader + `workers`-Worker gang."""
    docs = [h100("h100"), cluster("zonal", pool("gpu", "h100", nodes, zones=ZONES), source=EKS),
            _deployment("gang", replicas, _zonal_gang(copies, workers))]
    return _write(directory, docs)


def split_and_zonal_gang_fleet(directory: Path, split_zones: list[str]) -> Path:
    """`split`: an EKS pool of two p5 nodes over `split_zones`; `zonal`: four nodes over two
    zones; `gang`: three replicas of one copy of a Leader + 1-Worker gang (8 GPUs a pod)."""
    docs = [h100("h100"), cluster("split", pool("gpu", "h100", 2, zones=split_zones), source=EKS),
            cluster("zonal", pool("gpu", "h100", 4, zones=ZONES), source=EKS),
            _deployment("gang", 3, _zonal_gang(1))]
    return _write(directory, docs)


def _write(directory: Path, docs: list[dict[str, Any]]) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "fleet.yaml").write_text(to_yaml(docs))
    return directory
