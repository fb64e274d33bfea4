"""The shapes the observer reads from an API server: only the fields modelplane.observe uses,
typed as Kubernetes types them (strings, booleans, int64 generations, lists of objects).

An answer is decoded straight into these (msgspec: unknown fields are skipped, not kept), so
a cluster's objects cost memory for what is read and nothing else, and an object whose read
fields have the wrong type (`items` as an object, a slice `spec` as a list, a generation of
1e999, a claim's `devices` as a list, owners or taints that are not lists of objects) makes
the read a BadAnswer naming the field: the cluster is NotRead, with the reason, and the rest of
the fleet plans. Absent or null fields take their defaults, as the API server omits them.
"""

from __future__ import annotations

from typing import Annotated

import msgspec

Int64 = Annotated[int, msgspec.Meta(ge=-(2**63), le=2**63 - 1)]
Labels = dict[str, str]


class _Shape(msgspec.Struct, omit_defaults=True):
    pass


class OwnerReference(_Shape):
    kind: str = ""
    name: str = ""
    controller: bool | None = None


class ObjectMeta(_Shape):
    name: str = ""
    namespace: str = ""
    labels: Labels | None = None
    ownerReferences: list[OwnerReference] | None = None
    deletionTimestamp: str | None = None


class Condition(_Shape):
    type: str = ""
    status: str = ""
    reason: str | None = None
    message: str | None = None


class Taint(_Shape):
    key: str = ""
    value: str | None = None
    effect: str = ""


class NodeSpec(_Shape):
    taints: list[Taint] | None = None
    unschedulable: bool | None = None


class NodeStatus(_Shape):
    conditions: list[Condition] | None = None


class Node(_Shape):
    metadata: ObjectMeta | None = None
    spec: NodeSpec | None = None
    status: NodeStatus | None = None


class SlicePool(_Shape):
    name: str = ""
    generation: Int64 = 0


class SliceDevice(_Shape):
    name: str = ""


class SliceSpec(_Shape):
    driver: str = ""
    pool: SlicePool | None = None
    nodeName: str | None = None
    devices: list[SliceDevice] | None = None


class ResourceSlice(_Shape):
    metadata: ObjectMeta | None = None
    spec: SliceSpec | None = None


class DeviceResult(_Shape):
    driver: str = ""
    pool: str = ""
    device: str = ""


class DeviceAllocation(_Shape):
    results: list[DeviceResult] | None = None


class Allocation(_Shape):
    devices: DeviceAllocation | None = None


class ClaimStatus(_Shape):
    allocation: Allocation | None = None


class ResourceClaim(_Shape):
    metadata: ObjectMeta | None = None
    status: ClaimStatus | None = None


class PodClaim(_Shape):
    name: str = ""
    resourceClaimTemplateName: str | None = None


class PodSpec(_Shape):
    nodeName: str | None = None
    nodeSelector: Labels | None = None
    resourceClaims: list[PodClaim] | None = None


class Waiting(_Shape):
    reason: str | None = None
    message: str | None = None


class ContainerState(_Shape):
    waiting: Waiting | None = None


class ContainerStatus(_Shape):
    name: str = ""
    state: ContainerState | None = None


class PodClaimStatus(_Shape):
    name: str = ""
    resourceClaimName: str | None = None


class PodStatus(_Shape):
    phase: str | None = None
    message: str | None = None
    reason: str | None = None
    conditions: list[Condition] | None = None
    containerStatuses: list[ContainerStatus] | None = None
    resourceClaimStatuses: list[PodClaimStatus] | None = None


class Pod(_Shape):
    metadata: ObjectMeta | None = None
    spec: PodSpec | None = None
    status: PodStatus | None = None
