"""published-device-attributes: what an InferenceClass declares about a device of a known DRA driver
must be what that driver publishes, and selectors must name keys it publishes.

The fleet scheduler evaluates a deployment's CEL selectors against the class; the kube-scheduler
evaluates the same selectors against the driver's ResourceSlices. An attribute key the driver never
publishes, a value it publishes differently (`productName: H100` where NVML says `NVIDIA H100 80GB
HBM3`) or a value of another type matches at fleet level and on no device in the cluster: the
replica is placed and its pods stay Pending without an error. What the drivers publish is
modelplane.drivers, the same facts the sim publishes; the memory figure is usable-gpu-memory's.
"""

from __future__ import annotations

import difflib
import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from modelplane.api import Fleet
from modelplane.api.inference_class import AttributeValue, DeviceKind, InferenceClass
from modelplane.cel import DeviceKey, DeviceView, referenced_keys
from modelplane.drivers import (
    NVIDIA_GPU,
    NVIDIA_GPU_IDENTITIES,
    NVML_PRODUCT_NAMES,
    DriverProfile,
    RawAttribute,
    determined_attributes,
    identify,
    memory_key,
    profile_for_domain,
    profile_of,
    published_attributes,
    published_capacity,
    value_type,
)
from modelplane.quantity import Quantity, QuantityError
from modelplane.semver import Semver, SemverError

from .context import CheckContext
from .findings import MANDATORY, Finding
from .registry import register
from .selectors import RequestSite, request_sites, selectors_only_declared

POLICY = "published-device-attributes"
_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_SILENT = ("matches this class at fleet level and no device in the cluster, so the replica is placed "
           "and its pods stay Pending without an error")


def _field(kind: str, key: str) -> str:
    return f"{kind}.{key}" if _IDENTIFIER.fullmatch(key) else f'{kind}["{key}"]'


def _literal(raw: Mapping[str, object]) -> str:
    """A typed value as a manifest writes it: {string: NVIDIA H100 80GB HBM3}."""
    ((kind, value),) = raw.items()
    return f"{{{kind}: {value}}}"


def _shown(raw: Mapping[str, object]) -> str:
    ((kind, value),) = raw.items()
    return json.dumps(value) if kind == "string" else str(value)


def _same(declared: Mapping[str, object], published: Mapping[str, object]) -> bool:
    ((kind, value),) = declared.items()
    ((want_kind, want),) = published.items()
    if kind != want_kind:
        return False
    if kind == "version":
        try:
            return Semver.parse(str(value)) == Semver.parse(str(want))
        except SemverError:
            return False
    return value == want


def _close(key: str, keys: Iterable[str]) -> str:
    match = difflib.get_close_matches(key, list(keys), n=1, cutoff=0.6)
    return f", or use the driver's own key {match[0]}" if match else ""


# ------------------------------------------------------------------------------------- classes

@dataclass(frozen=True)
class _Declared:
    """One declared attribute of a class device of a known driver."""

    cls: InferenceClass
    device: DeviceKind
    profile: DriverProfile
    key: str                  # as the class spells it
    value: AttributeValue

    @property
    def slice_key(self) -> str:
        return self.profile.key(self.key)


def _unknown_attribute(d: _Declared) -> str:
    elsewhere = d.profile.published_elsewhere(d.slice_key)
    where = (f"only on {elsewhere}, not on the devices of DeviceClass {d.device.device_class_name}"
             if elsewhere else "on none of its devices")
    return (f"declares attribute {d.key}, which the {d.profile.driver} driver publishes {where}: a "
            f"selector on it {_SILENT}. Fix: remove {d.key}{_close(d.slice_key, d.profile.attributes)} "
            f"(it publishes {', '.join(d.profile.attributes)}).")


def _attribute_problem(d: _Declared, determined: Mapping[str, RawAttribute]) -> str | None:
    published = d.profile.attributes.get(d.slice_key)
    if published is None:
        return _unknown_attribute(d)
    driver, declared_type = d.profile.driver, value_type(d.value)
    want = determined.get(d.slice_key)
    if declared_type != published.type:
        example = _literal(want) if want is not None else f"{{{published.type}: ...}}"
        return (f"declares {d.key} as a {declared_type}, but the {driver} driver publishes it as a "
                f"{published.type}: a selector comparing it with a {declared_type} {_SILENT}. "
                f"Fix: declare {d.key}: {example}.")
    if published.per_device:
        return (f"declares {d.key}, which the {driver} driver publishes with a value that varies between "
                f"devices: one value in the class matches at most one device in the cluster, while the fleet "
                f"scheduler takes it for all {d.device.count} device(s) of every node of this class, so a "
                f"selector on it places replicas whose claims never bind. Fix: remove {d.key}.")
    if want is not None and not _same(d.value.raw(), want):
        return _value_mismatch(d, want)
    if want is None and d.profile is NVIDIA_GPU and d.slice_key == "productName":
        return _partial_product_name(d)
    return None


def _value_mismatch(d: _Declared, want: RawAttribute) -> str:
    published = d.profile.attributes[d.slice_key]
    product = identify(d.cls, d.device)
    on = "on every device" if published.fixed is not None or product is None else f"on an {product.name}"
    shown = _shown(want)
    identity = NVIDIA_GPU_IDENTITIES.get(product.name) if product is not None else None
    if d.slice_key == "productName" and identity is not None:
        shown = " or ".join(json.dumps(n) for n in identity.product_names) + " (the name NVML reports)"
    return (f"declares {d.key} {_shown(d.value.raw())}, but {on} the {d.profile.driver} driver publishes "
            f"{shown}: a selector comparing {d.key} with the declared value {_SILENT}. "
            f"Fix: declare {d.key}: {_literal(want)}.")


def _partial_product_name(d: _Declared) -> str | None:
    """A productName that is part of a known NVML name but not one (`H100`) is no name the driver
    ever publishes, even where the product is not identified."""
    name = d.value.string or ""
    candidates = [n for n in NVML_PRODUCT_NAMES if name and name.lower() in n.lower() and name != n]
    if not candidates or name in NVML_PRODUCT_NAMES:
        return None
    return (f"declares productName {json.dumps(name)}, which is not a name NVML reports: the "
            f"{d.profile.driver} driver publishes the GPU's full name, e.g. "
            f"{' or '.join(json.dumps(c) for c in candidates)}: a selector comparing productName with "
            f"{json.dumps(name)} {_SILENT}. Fix: declare the exact name `nvidia-smi --query-gpu=name` prints "
            f"on these nodes, e.g. productName: {{string: {candidates[0]}}}.")


def _capacity_problem(profile: DriverProfile, key: str, value: str) -> str | None:
    published = profile.capacity.get(profile.key(key))
    if published is None:
        return (f"declares capacity {key}, which the {profile.driver} driver does not publish on these "
                f"devices: a selector on it {_SILENT}. Fix: remove {key}"
                f"{_close(profile.key(key), profile.capacity)} (it publishes {', '.join(profile.capacity)}).")
    if published.fixed is None:
        return None
    try:
        too_big = Quantity.parse(value) > Quantity.parse(published.fixed)
    except QuantityError:
        return None  # the loader already rejects malformed quantities
    if not too_big:
        return None
    return (f"declares {value}, but the {profile.driver} driver publishes {published.fixed} on every device: "
            f"a selector asking for more than {published.fixed} {_SILENT}. Fix: declare {key}: {published.fixed}.")


def _class_findings(ctx: CheckContext) -> Iterable[Finding]:
    for cls in ctx.fleet.classes.values():
        for i, device in enumerate(cls.spec.devices):
            profile = profile_of(device)
            if profile is None:
                continue
            determined = determined_attributes(cls, device)
            for key, value in device.attributes.items():
                message = _attribute_problem(_Declared(cls, device, profile, key, value), determined)
                if message is not None:
                    yield Finding(POLICY, MANDATORY, ctx.ref(cls), f"spec.devices[{i}].{_field('attributes', key)}",
                                  message)
            for key, capacity in device.capacity.items():
                message = _capacity_problem(profile, key, capacity.value)
                if message is not None:
                    yield Finding(POLICY, MANDATORY, ctx.ref(cls), f"spec.devices[{i}].{_field('capacity', key)}",
                                  message)


# ------------------------------------------------------------------------------------- selectors

@dataclass(frozen=True)
class _Target:
    """A class device of a known driver as the fleet scheduler sees it (declared) and as the
    kube-scheduler does (published; its memory left as declared, usable-gpu-memory's business)."""

    cls: InferenceClass
    device: DeviceKind
    profile: DriverProfile
    declared: DeviceView
    published: DeviceView


def _targets(fleet: Fleet) -> list[_Target]:
    targets = []
    for cls in fleet.classes.values():
        for device in cls.spec.devices:
            profile = profile_of(device)
            if profile is None:
                continue
            capacity = published_capacity(cls, device)
            key = memory_key(device)
            if key is not None and identify(cls, device) is not None:
                capacity[profile.key(key)] = {"value": device.capacity[key].value}
            try:
                declared = DeviceView.from_spec(device.driver, {k: v.raw() for k, v in device.attributes.items()},
                                                {k: v.raw() for k, v in device.capacity.items()})
                published = DeviceView.from_spec(device.driver, published_attributes(cls, device, 0, "0" * 32),
                                                 capacity)
            except ValueError:
                continue
            targets.append(_Target(cls, device, profile, declared, published))
    return targets


def _declaring_classes(fleet: Fleet, profile: DriverProfile, ref: DeviceKey) -> list[str]:
    out = []
    for cls in fleet.classes.values():
        for device in cls.spec.devices:
            keys = device.attributes if ref.map == "attributes" else device.capacity
            if profile.covers(device) and any(profile.key(k) == ref.name for k in keys):
                out.append(cls.metadata.name)
    return sorted(set(out))


def _unknown_reference(fleet: Fleet, ref: DeviceKey) -> str | None:
    profile = profile_for_domain(ref.domain)
    if profile is None:
        return None
    keys = profile.attributes if ref.map == "attributes" else profile.capacity
    if ref.name in keys or profile.published_elsewhere(ref.name) is not None:
        return None
    declaring = _declaring_classes(fleet, profile, ref)
    outcome = (f"yet class {', '.join(declaring)} declares it, so the fleet scheduler places the replica "
               "there and its claim never binds" if declaring
               else "and no class declares it, so the fleet scheduler cannot place the replica either")
    noun = "attribute" if ref.map == "attributes" else "capacity"
    own = [k for k in keys if "/" not in k]   # the keys in the driver's own domain
    return (f"selects on {noun} {ref.name} of domain {ref.domain}, which the {profile.driver} driver never "
            f"publishes: no device in any cluster satisfies this selector, {outcome}. Fix: select on one "
            f"the driver publishes{_close(ref.name, own)} (in {ref.domain}: {', '.join(own)}).")


def _value(view: DeviceView, ref: DeviceKey) -> object | None:
    domains = view.attributes if ref.map == "attributes" else view.capacity
    return domains.get(ref.domain, {}).get(ref.name)


def _text(value: object) -> str:
    return json.dumps(value) if isinstance(value, str) else str(value)


def _differences(t: _Target, expression: str) -> tuple[str, str]:
    """What differs among the keys the selector reads, and a selector on the published value when
    one string attribute is all that differs."""
    diffs, example = [], ""
    for ref in referenced_keys(expression):
        declared, published = _value(t.declared, ref), _value(t.published, ref)
        if declared == published:
            continue
        shown = "not published" if published is None else f"published {_text(published)}"
        diffs.append(f"{ref.name}: {shown}, declared {'nothing' if declared is None else _text(declared)}")
        if ref.map == "attributes" and isinstance(published, str):
            example = f", e.g. device.attributes[{json.dumps(ref.domain)}].{ref.name} == {json.dumps(published)}"
    return "; ".join(diffs) or "the values it reads differ", example if len(diffs) == 1 else ""


def _deployment_findings(ctx: CheckContext) -> Iterable[Finding]:
    targets = _targets(ctx.fleet)
    for site in request_sites(ctx.fleet):
        reported: set[int] = set()
        for s, selector in enumerate(site.request.selectors):
            for ref in referenced_keys(selector.cel):
                message = _unknown_reference(ctx.fleet, ref)
                if message is not None:
                    reported.add(s)
                    yield Finding(POLICY, MANDATORY, ctx.ref(site.deployment), site.selector_path(s), message)
                    break
        yield from _mismatch_findings(ctx, site, targets, reported)


def _mismatch_findings(ctx: CheckContext, site: RequestSite, targets: list[_Target],
                       reported: set[int]) -> Iterable[Finding]:
    for t, s in selectors_only_declared(site, targets, lambda t: t.declared, lambda t: t.published, reported):
        differences, example = _differences(t, site.compiled[s].expression)
        yield Finding(
            POLICY, MANDATORY, ctx.ref(site.deployment), site.selector_path(s),
            f"matches what class {t.cls.metadata.name} declares for device {t.device.name} but not what "
            f"the {t.profile.driver} driver publishes for it ({differences}): the fleet scheduler places "
            f"the replica on pools of class {t.cls.metadata.name} and DRA never binds the claim, so its "
            f"pods stay Pending. Fix: select on the published value{example}, and declare it in the class.",
        )


@register(POLICY, MANDATORY, "Device attributes and capacity keys in classes, and the keys selectors read, "
          "must be what the DRA driver publishes")
def check(ctx: CheckContext) -> Iterable[Finding]:
    yield from _class_findings(ctx)
    yield from _deployment_findings(ctx)
