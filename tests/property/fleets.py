"""Hypothesis strategies for random fleets, as manifest dicts (see tests/manifests.py)."""

from __future__ import annotations

from hypothesis import strategies as st

from tests.manifests import (
    cluster,
    deployment,
    device,
    engine,
    gpu_class,
    inference_class,
    mem_at_least,
    member,
    pool,
    request,
)

NIC = 'device.driver == "nic.nvidia.com"'
CLASSES = {
    "g1": gpu_class("g1", 1, "81559Mi"),
    "g2": gpu_class("g2", 2, "81559Mi"),
    "g8": gpu_class("g8", 8, "81559Mi"),
    "l4": gpu_class("l4", 1, "23034Mi"),
    "ib": inference_class("ib", device("gpu", 8, "143Gi"),
                          device("nic", 8, "0", claim="Synthetic", driver="nic.nvidia.com")),
    # a GPU-less coordinator pool: Leaders asking for its slot can only span to GPUs
    "cpu": inference_class("cpu", device("slot", 1, "0", claim="Synthetic", driver="cpu.modelplane.ai")),
}
SLOT = 'device.driver == "cpu.modelplane.ai"'
REGIONS = ("us", "eu")


@st.composite
def pools(draw, domains: bool) -> list[dict]:
    n = draw(st.integers(1, 3))
    out = []
    for i in range(n):
        domain = draw(st.sampled_from([None, "f1", "f2"])) if domains else None
        out.append(pool(f"p{i}", draw(st.sampled_from(sorted(CLASSES))), draw(st.integers(0, 4)),
                        domain=domain))
    if domains and n > 1 and draw(st.booleans()):
        # a coordinator pool on the fabric of the pool after it, so spanning is common
        out[0] = pool("p0", "cpu", draw(st.integers(0, 2)),
                      domain=draw(st.sampled_from([out[1].get("fabric", {}).get("domain") or "f1", "f2"])))
    return out


@st.composite
def clusters(draw, domains: bool = True, taints: bool = True) -> list[dict]:
    n = draw(st.integers(1, 5))
    out = []
    for i in range(n):
        t = []
        if taints and draw(st.integers(0, 4)) == 0:
            t = [{"key": "maint", "effect": draw(st.sampled_from(["NoSchedule", "NoExecute"]))}]
        out.append(cluster(f"c{i}", *draw(pools(domains)),
                           labels={"region": draw(st.sampled_from(REGIONS))}, taints=t))
    return out


@st.composite
def engines(draw, name: str) -> dict:
    mem = draw(st.sampled_from([16, 40, 100]))
    copies = draw(st.integers(1, 2))
    if draw(st.booleans()):
        return engine(name, member("Standalone", request("gpu", draw(st.sampled_from([1, 2, 4, 8])),
                                                         mem_at_least(mem))), copies=copies)
    leader_kind = draw(st.sampled_from(["none", "gpu", "nic", "slot", "slot"]))
    leader = {"none": member("Leader"),
              "gpu": member("Leader", request("gpu", draw(st.sampled_from([1, 8])), mem_at_least(mem))),
              "nic": member("Leader", request("nic", 1, NIC)),
              "slot": member("Leader", request("slot", 1, SLOT))}[leader_kind]
    worker = member("Worker", request("gpu", draw(st.sampled_from([1, 2, 8])), mem_at_least(mem)),
                    nodes=draw(st.integers(1, 3)))
    return engine(name, leader, worker, copies=copies)


@st.composite
def deployments(draw, count: tuple[int, int] = (1, 4)) -> list[dict]:
    n = draw(st.integers(*count))
    out = []
    for i in range(n):
        engs = [draw(engines("main"))]
        if draw(st.integers(0, 3)) == 0:
            engs.append(draw(engines("aux")))
        selector = {"region": draw(st.sampled_from(REGIONS))} if draw(st.booleans()) else None
        tol = [{"key": "maint", "operator": "Exists"}] if draw(st.integers(0, 3)) == 0 else None
        out.append(deployment(f"d{i}", draw(st.integers(0, 6)), *engs, selector=selector,
                              tolerations=tol))
    return out


@st.composite
def fleets(draw, domains: bool = True, taints: bool = True, count: tuple[int, int] = (1, 4)) -> list[dict]:
    return [*CLASSES.values(), *draw(clusters(domains, taints)), *draw(deployments(count))]
