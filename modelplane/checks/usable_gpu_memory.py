"""usable-gpu-memory: classes must publish the memory the driver really reports, and
selectors must not depend on the marketing size (mission: silent failure 1)."""

from __future__ import annotations

from typing import Iterable

from modelplane.cel import CelError, DeviceView, compile_selector, selector_matches
from modelplane.quantity import Quantity, QuantityError

from .context import CheckContext
from .findings import MANDATORY, Finding
from .registry import register
from .tables import GPU_PRODUCTS, PRODUCT_ATTRIBUTES, GpuProduct

POLICY = "usable-gpu-memory"


def _accelerator_type(cls) -> str | None:
    prov = cls.spec.provisioning
    if prov is None:
        return None
    block = getattr(prov, prov.provider.lower(), None)
    accel = getattr(block, "accelerator", None)
    return accel.type if accel else None


def _memory_key(device) -> str | None:
    for key in device.capacity:
        if key.rpartition("/")[2] == "memory":
            return key
    return None


def identify(cls, device) -> GpuProduct | None:
    """The known product a class device is, from its product attribute, else (for a device
    with memory) the class's provisioned accelerator type."""
    for key in PRODUCT_ATTRIBUTES:
        for attr_key, value in device.attributes.items():
            if attr_key.rpartition("/")[2] == key and value.string:
                product = next((p for p in GPU_PRODUCTS if p.matches(value.string)), None)
                if product:
                    return product
    accel = _accelerator_type(cls)
    if accel and _memory_key(device):
        return next((p for p in GPU_PRODUCTS if p.matches(accel)), None)
    return None


def _view(device, memory_key: str, memory: str) -> DeviceView:
    attributes = {k: v.raw() for k, v in device.attributes.items()}
    capacity = {k: v.raw() for k, v in device.capacity.items()}
    capacity[memory_key] = {"value": memory}
    return DeviceView.from_spec(device.driver, attributes, capacity)


def _class_findings(ctx: CheckContext) -> Iterable[Finding]:
    for cls in ctx.fleet.classes.values():
        for i, device in enumerate(cls.spec.devices):
            product = identify(cls, device)
            key = _memory_key(device)
            if product is None or key is None:
                continue
            declared = device.capacity[key].value
            try:
                too_big = Quantity.parse(declared) > Quantity.parse(product.usable)
            except QuantityError:
                continue  # the loader already rejects malformed quantities
            if too_big:
                yield Finding(
                    POLICY, MANDATORY, ctx.ref(cls), f"spec.devices[{i}].capacity.{key}",
                    f"declares {declared} for an {product.name}, but the {device.driver} driver "
                    f"publishes only {product.usable} for that GPU: a selector asking for more than "
                    f"{product.usable} (e.g. >= {declared}) matches this class at fleet level, the "
                    f"replica is placed, and DRA never binds the claim, so its pods stay Pending "
                    f"without an error. "
                    f"Fix: declare {key}: {product.usable} (the usable figure).",
                )


def _deployment_findings(ctx: CheckContext) -> Iterable[Finding]:
    # Known-product devices, each as it would look with nominal and with usable memory.
    targets = []
    for cls in ctx.fleet.classes.values():
        for device in cls.spec.devices:
            product, key = identify(cls, device), _memory_key(device)
            if product is None or key is None or product.nominal == product.usable:
                continue
            try:
                targets.append((cls, device, product, key, _view(device, key, product.nominal),
                                _view(device, key, product.usable)))
            except ValueError:
                continue
    if not targets:
        return
    for dep in ctx.fleet.deployments.values():
        for e, engine in enumerate(dep.spec.template.spec.engines):
            for m, member in enumerate(engine.members):
                for d, request in enumerate(member.requests):
                    yield from _request_findings(ctx, dep, e, m, d, request, targets)


def _request_findings(ctx, dep, e, m, d, request, targets) -> Iterable[Finding]:
    try:
        compiled = [compile_selector(s.cel) for s in request.selectors]
    except CelError:
        return  # an invalid selector is the loader's and the scheduler's error, not ours
    reported: set[int] = set()
    for cls, device, product, key, nominal, usable in targets:
        if not all(selector_matches(c, nominal) for c in compiled):
            continue
        for s, c in enumerate(compiled):
            if s in reported or selector_matches(c, usable):
                continue
            reported.add(s)
            domain = key.partition("/")[0] if "/" in key else device.driver
            name = key.rpartition("/")[2]
            yield Finding(
                POLICY, MANDATORY, ctx.ref(dep),
                f"spec.template.spec.engines[{e}].members[{m}].nodeSelector.devices[{d}].selectors[{s}].cel",
                f"only the nominal {product.nominal} of an {product.name} satisfies this selector; "
                f"the {device.driver} driver publishes {product.usable}, so on pools of class "
                f"{cls.metadata.name} (device {device.name}) DRA never binds the claim and pods "
                f"stay Pending. Fix: select on the usable figure, e.g. "
                f"device.capacity[\"{domain}\"].{name}.compareTo(quantity(\"{product.suggest}\")) >= 0.",
            )


@register(POLICY, MANDATORY, "GPU memory in classes and selectors must be what the driver reports, "
          "not the marketing size")
def check(ctx: CheckContext) -> Iterable[Finding]:
    yield from _class_findings(ctx)
    yield from _deployment_findings(ctx)
