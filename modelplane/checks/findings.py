"""The one result type every check returns, and the enforcement levels."""

from __future__ import annotations

from dataclasses import dataclass, replace

MANDATORY = "mandatory"
ADVISORY = "advisory"
DISABLED = "disabled"
LEVELS = (MANDATORY, ADVISORY, DISABLED)


@dataclass(frozen=True)
class Finding:
    """One violation: which policy, how loud, where (resource + camelCase field path), and
    a message saying what will happen and how to fix it."""

    policy: str
    level: str
    resource: str
    field: str
    message: str

    def with_level(self, level: str) -> Finding:
        return self if level == self.level else replace(self, level=level)

    @property
    def location(self) -> str:
        return f"{self.resource} {self.field}" if self.field else self.resource

    def __str__(self) -> str:
        return f"[{self.level}] {self.policy}: {self.location}: {self.message}"
