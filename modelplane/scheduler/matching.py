"""Matching one member's device requests against one pool's class (semantics §2.4).

The result depends only on the member's requests and the class, never on the cluster or
on capacity, so it is memoized per pair: every pool of a class on every cluster, and
every member asking for the same devices, shares one answer.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from .placement_types import ResolvedRequest
from .shape import ClassView, MemberShape

if TYPE_CHECKING:  # annotations only: modelplane.cel is imported when first needed
    from modelplane.cel import SelectorCache


@dataclass(frozen=True)
class MemberMatch:
    resolved: tuple[ResolvedRequest, ...]   # DRA matches only; Synthetic ones resolve nothing
    per_pod: tuple[int, ...]                # devices one pod takes, per device kind of the class
    synthetic_only: bool                    # matched something, but nothing claimable
    drivers: tuple[str, ...] = ()           # the driver of the device each `resolved` request matched

    @property
    def claims(self) -> bool:
        return bool(self.resolved)


@dataclass(frozen=True)
class NoMatch:
    request: str
    why: str

    def __str__(self) -> str:
        return f"request {self.request!r} {self.why}"


class Matcher:
    def __init__(self, selector_cache: SelectorCache | None = None) -> None:
        if selector_cache is None:
            # Deferred: modelplane.cel costs ~0.16 s to import (see shape._compile_error).
            from modelplane.cel import SelectorCache

            selector_cache = SelectorCache()
        self._cel = selector_cache
        # Keyed by what the answer depends on: the member's requests by content (members
        # of every deployment asking for the same devices share it) and the class.
        self._memo: dict[tuple[tuple[object, ...], str], MemberMatch | NoMatch] = {}

    def match(self, member: MemberShape, cls: ClassView) -> MemberMatch | NoMatch:
        key = (member.match_key, cls.name)
        hit = self._memo.get(key)
        if hit is None:
            hit = self._memo[key] = self._match(member, cls)
        return hit

    def _selects(self, cels: tuple[str, ...], cls: ClassView, i: int) -> bool | str:
        """Whether every selector matches device kind i, or how one of them errored."""
        device = cls.devices[i]
        view = cls.device_view(i)
        for s, expr in enumerate(cels):
            result = self._cel.result(expr, cls.name, device.name, view)
            if result.error is not None:
                return f"selector #{s} errored on device {device.name}: {result.error}"
            if not result.matched:
                return False
        return True

    def _match(self, member: MemberShape, cls: ClassView) -> MemberMatch | NoMatch:
        remaining = [d.count for d in cls.devices]
        taken = [0] * len(cls.devices)
        resolved = []
        drivers = []
        matched_any = False
        # Greedy in request order, first device in class order, no backtracking: the
        # reference's rule, kept so Node mode reproduces its placements exactly.
        for req in member.requests:
            chosen = None
            short_of = None
            errors = []
            for i in range(len(cls.devices)):
                selected = self._selects(req.cels, cls, i)
                if isinstance(selected, str):
                    # On the cluster the request's DeviceClass keeps other kinds' devices
                    # away from its selector, so an error on one kind is that kind's refusal
                    # (a selector on GPU memory fails on a NIC). Only when the selector
                    # errors on every kind is the error the reason, not "matched no device".
                    errors.append(selected)
                    continue
                if not selected:
                    continue
                if remaining[i] >= req.count:
                    chosen = i
                    break
                if short_of is None:
                    short_of = i
            if chosen is None:
                if short_of is None:
                    failed_everywhere = len(errors) == len(cls.devices)
                    return NoMatch(req.name, "; ".join(errors) if failed_everywhere else "matched no device")
                d = cls.devices[short_of]
                return NoMatch(req.name, f"matched too few devices (needs {req.count}, "
                                         f"{d.name} has {remaining[short_of]} of {d.count} "
                                         f"per node left)")
            matched_any = True
            remaining[chosen] -= req.count
            taken[chosen] += req.count
            device = cls.devices[chosen]
            if device.dra:
                resolved.append(ResolvedRequest(req.name, device.device_class_name,
                                                req.count, req.cels))
                drivers.append(device.driver)
        return MemberMatch(tuple(resolved), tuple(taken), matched_any and not resolved, tuple(drivers))
