"""The device requests of a fleet's deployments, walked once for the checks that compare selectors
with what classes declare or drivers publish."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import TypeVar

from modelplane.api import Fleet, ModelDeployment
from modelplane.api.model_deployment import DeviceRequest
from modelplane.cel import CelError, CompiledSelector, DeviceView, compile_selector, selector_matches

T = TypeVar("T")


@dataclass(frozen=True)
class RequestSite:
    """One device request of a deployment, its selectors compiled, and where it is written."""

    deployment: ModelDeployment
    path: str                                  # ...engines[e].members[m].nodeSelector.devices[d]
    request: DeviceRequest
    compiled: tuple[CompiledSelector, ...]     # one per selector, in order

    def selector_path(self, s: int) -> str:
        return f"{self.path}.selectors[{s}].cel"


def request_sites(fleet: Fleet) -> Iterator[RequestSite]:
    """Every device request of every deployment whose selectors all compile (an invalid selector
    is the loader's and the scheduler's error, not a check's)."""
    for dep in fleet.deployments.values():
        for e, engine in enumerate(dep.engines):
            for m, member in enumerate(engine.members):
                for d, request in enumerate(member.requests):
                    try:
                        compiled = tuple(compile_selector(s.cel) for s in request.selectors)
                    except CelError:
                        continue
                    yield RequestSite(dep, f"spec.template.spec.engines[{e}].members[{m}].nodeSelector.devices[{d}]",
                                      request, compiled)


def selectors_only_declared(site: RequestSite, targets: Iterable[T], declared: Callable[[T], DeviceView],
                            published: Callable[[T], DeviceView], reported: set[int]) -> Iterator[tuple[T, int]]:
    """(target, selector index) for each selector of `site` that a device satisfies as its class
    declares it (`declared`: every selector matches) but not as its driver publishes it; each
    selector once, across calls sharing `reported`."""
    for target in targets:
        if not all(selector_matches(c, declared(target)) for c in site.compiled):
            continue
        for s, compiled in enumerate(site.compiled):
            if s in reported or selector_matches(compiled, published(target)):
                continue
            reported.add(s)
            yield target, s
