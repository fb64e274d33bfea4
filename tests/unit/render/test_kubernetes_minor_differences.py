"""What the objects we render must meet on Kubernetes 1.35 (the EKS default, modelplane.clouds.
versions.EKS_DEFAULT_VERSION) that the sim's kube-apiserver 1.36 does not check (docs/sim.md,
"Kubernetes minors"). The sim dry run (tests/sim/test_dry_run.py) judges every object on 1.36;
building a second control plane at 1.35 would double the sim's cold build, so the differences
were read from the upstream sources instead, and these tests pin the ones that touch what we
render.

kubernetes/kubernetes pkg/features/kube_features.go, v1.35.5 against v1.36.3: among the gates whose
default changes between the two minors, these change what the API server accepts of our kinds:
* RelaxedServiceNameValidation (alpha, off, in 1.35; beta, on, in 1.36): Service names are DNS-1035
  labels on 1.35 (pkg/apis/core/validation/validation.go `ValidateServiceName =
  NameIsDNS1035Label`), DNS labels on 1.36;
* DRAConsumableCapacity, DRADeviceTaints, DRAExtendedResource, DRAPartitionableDevices,
  DRADeviceBindingConditions (off in 1.35, on in 1.36): the fields they gate (a request's
  `capacity` and `tolerations`, a DeviceClass's `extendedResourceName`, a slice's counters and
  binding conditions) are dropped on 1.35;
* StrictIPCIDRValidation (off in 1.35, on in 1.36): IP and CIDR fields, stricter on 1.36 only.
The others (kubelet, scheduler, Job mutability, the Pods API, watch cache) do not validate objects
we render; apiserver's DeclarativeValidationBeta reimplements existing rules."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from modelplane.api import load_manifests
from modelplane.checks import place
from modelplane.plan import gitops_gateway_urls, plan_fleet

ROOT = Path(__file__).resolve().parents[3]
EXAMPLES = sorted(p for p in (ROOT / "examples").iterdir() if p.is_dir())
DNS_1035 = re.compile(r"[a-z]([-a-z0-9]{0,61}[a-z0-9])?")     # 63 characters at most
# Fields the DRA gates above (off in 1.35) gate, by where they sit in a claim request or class.
DRA_FIELDS_OFF_IN_1_35 = {"capacity", "tolerations", "extendedResourceName", "bindingConditions",
                          "bindingFailureConditions", "allowMultipleAllocations"}
IP_FIELDS = {"clusterIP", "clusterIPs", "externalIPs", "loadBalancerIP", "loadBalancerSourceRanges"}


def _objects(example: Path) -> Iterator[dict]:
    fleet = load_manifests(example)
    plan = plan_fleet(fleet, place(fleet))
    for objects in plan.manifests(gitops_gateway_urls(fleet)[0]).values():
        yield from objects


def _keys(value: object) -> Iterator[str]:
    if isinstance(value, dict):
        for k, v in value.items():
            yield k
            yield from _keys(v)
    elif isinstance(value, list):
        for v in value:
            yield from _keys(v)


@pytest.mark.parametrize("example", EXAMPLES, ids=lambda p: p.name)
def test_rendered_service_names_meet_the_1_35_rule_the_sims_1_36_relaxes(example: Path) -> None:
    bad = [o["metadata"]["name"] for o in _objects(example)
           if o["kind"] == "Service" and not DNS_1035.fullmatch(o["metadata"]["name"])]
    assert bad == []


@pytest.mark.parametrize("example", EXAMPLES, ids=lambda p: p.name)
def test_rendered_dra_objects_use_no_field_kubernetes_1_35_drops(example: Path) -> None:
    for obj in _objects(example):
        if obj["apiVersion"].startswith("resource.k8s.io/"):
            assert not DRA_FIELDS_OFF_IN_1_35 & set(_keys(obj["spec"])), (obj["kind"], obj["metadata"]["name"])
        if obj["kind"] == "Service":
            assert not IP_FIELDS & set(obj["spec"]), obj["metadata"]["name"]
