"""usable-gpu-memory: classes must publish the memory the driver really reports, and
selectors must not depend on the marketing size (mission: silent failure 1)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from modelplane.api.inference_class import DeviceKind, InferenceClass
from modelplane.cel import DeviceView
from modelplane.drivers import GpuProduct, identify, memory_key
from modelplane.quantity import Quantity, QuantityError

from .context import CheckContext
from .findings import MANDATORY, Finding
from .registry import register
from .selectors import RequestSite, request_sites, selectors_only_declared

POLICY = "usable-gpu-memory"


def _view(device: DeviceKind, key: str, memory: str) -> DeviceView:
    attributes = {k: v.raw() for k, v in device.attributes.items()}
    capacity: dict[str, object] = {k: v.raw() for k, v in device.capacity.items()}
    capacity[key] = {"value": memory}
    return DeviceView.from_spec(device.driver, attributes, capacity)


@dataclass(frozen=True)
class _Target:
    """A known-product device, as it would look with its nominal and with its usable memory."""

    cls: InferenceClass
    device: DeviceKind
    product: GpuProduct
    key: str
    nominal: DeviceView
    usable: DeviceView


def _class_findings(ctx: CheckContext) -> Iterable[Finding]:
    for cls in ctx.fleet.classes.values():
        for i, device in enumerate(cls.spec.devices):
            product = identify(cls, device)
            key = memory_key(device)
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
    targets = []
    for cls in ctx.fleet.classes.values():
        for device in cls.spec.devices:
            product, key = identify(cls, device), memory_key(device)
            if product is None or key is None or product.nominal == product.usable:
                continue
            try:
                targets.append(_Target(cls, device, product, key, _view(device, key, product.nominal),
                                       _view(device, key, product.usable)))
            except ValueError:
                continue
    if not targets:
        return
    for site in request_sites(ctx.fleet):
        yield from _request_findings(ctx, site, targets)


def _request_findings(ctx: CheckContext, site: RequestSite, targets: list[_Target]) -> Iterable[Finding]:
    reported: set[int] = set()
    for t, s in selectors_only_declared(site, targets, lambda t: t.nominal, lambda t: t.usable, reported):
        domain = t.key.partition("/")[0] if "/" in t.key else t.device.driver
        name = t.key.rpartition("/")[2]
        yield Finding(
            POLICY, MANDATORY, ctx.ref(site.deployment), site.selector_path(s),
            f"only the nominal {t.product.nominal} of an {t.product.name} satisfies this selector; "
            f"the {t.device.driver} driver publishes {t.product.usable}, so on pools of class "
            f"{t.cls.metadata.name} (device {t.device.name}) DRA never binds the claim and pods "
            f"stay Pending. Fix: select on the usable figure, e.g. "
            f"device.capacity[\"{domain}\"].{name}.compareTo(quantity(\"{t.product.suggest}\")) >= 0.",
        )


@register(POLICY, MANDATORY, "GPU memory in classes and selectors must be what the driver reports, "
          "not the marketing size")
def check(ctx: CheckContext) -> Iterable[Finding]:
    yield from _class_findings(ctx)
    yield from _deployment_findings(ctx)
