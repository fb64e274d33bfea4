"""Semantic versions (semver 2.0.0), strict by default, as the DRA CEL library reads them."""

from __future__ import annotations

import functools
import re

_NUM = r"0|[1-9][0-9]*"
_ALNUM_ID = r"[0-9]*[A-Za-z-][0-9A-Za-z-]*"
_PRE_ID = rf"(?:{_NUM}|{_ALNUM_ID})"
_BUILD_ID = r"[0-9A-Za-z-]+"
_STRICT = re.compile(
    rf"({_NUM})\.({_NUM})\.({_NUM})"
    rf"(?:-({_PRE_ID}(?:\.{_PRE_ID})*))?"
    rf"(?:\+({_BUILD_ID}(?:\.{_BUILD_ID})*))?"
)
_DIGITS = re.compile(r"[0-9]+")
_INT64_MAX = 2**63 - 1
_EXAMPLE = 'e.g. "1.2.3", "1.2.3-rc.1" or "1.2.3+build.5"'


class SemverError(ValueError):
    """A string that is not a valid semantic version."""


def _normalize(text: str) -> str:
    """Tolerant form: leading "v", leading zeros and missing minor/patch are accepted."""
    body = text[1:] if text.startswith("v") else text
    cut = min((i for i in (body.find("-"), body.find("+")) if i >= 0), default=len(body))
    core, tail = body[:cut], body[cut:]
    parts = core.split(".")
    if not 1 <= len(parts) <= 3 or not all(_DIGITS.fullmatch(p) for p in parts):
        raise SemverError(
            f"invalid version {text!r}: expected up to three dot-separated numbers, "
            f'optionally prefixed by "v" ({_EXAMPLE}, or "v1.2" with normalize)'
        )
    if len(parts) < 3 and tail:
        raise SemverError(
            f"invalid version {text!r}: a short version cannot carry a pre-release or build "
            f'suffix; write all three parts, e.g. "{".".join(parts + ["0"] * (3 - len(parts)))}{tail}"'
        )
    parts = [str(int(p)) for p in parts] + ["0"] * (3 - len(parts))
    return ".".join(parts) + tail


def _strict_hint(text: str) -> str:
    if text.startswith("v"):
        return 'remove the leading "v" or use normalize=true'
    core = re.split(r"[-+]", text, maxsplit=1)[0]
    parts = core.split(".")
    if len(parts) != 3:
        return "MAJOR.MINOR.PATCH needs exactly three numbers"
    if any(len(p) > 1 and p.startswith("0") for p in parts):
        return "numbers may not have leading zeros"
    return "expected MAJOR.MINOR.PATCH[-pre-release][+build]"


def _pre_key(ident: str) -> tuple[int, int, str]:
    # Numeric identifiers sort numerically and before alphanumeric ones (semver 2.0 §11.4).
    if ident.isdigit():
        return (0, int(ident), "")
    return (1, 0, ident)


# (major, minor, patch, (0 pre-release | 1 release, pre-release identifier keys))
_Precedence = tuple[int, int, int, tuple[int, tuple[tuple[int, int, str], ...]]]


@functools.total_ordering
class Semver:
    """A parsed version. Equality and ordering follow semver precedence (build ignored)."""

    __slots__ = ("major", "minor", "patch", "prerelease", "build")

    def __init__(
        self, major: int, minor: int, patch: int,
        prerelease: tuple[str, ...] = (), build: tuple[str, ...] = (),
    ) -> None:
        self.major, self.minor, self.patch = major, minor, patch
        self.prerelease, self.build = tuple(prerelease), tuple(build)

    @classmethod
    def parse(cls, text: str, *, normalize: bool = False) -> Semver:
        if not isinstance(text, str):
            raise SemverError(f"a version must be a string, got {type(text).__name__} ({_EXAMPLE})")
        candidate = _normalize(text) if normalize else text
        match = _STRICT.fullmatch(candidate)
        if match is None:
            raise SemverError(f"invalid version {text!r}: {_strict_hint(candidate)} ({_EXAMPLE})")
        major, minor, patch = (int(match.group(i)) for i in (1, 2, 3))
        if max(major, minor, patch) > _INT64_MAX:
            raise SemverError(f"invalid version {text!r}: a number exceeds 64 bits")
        pre = tuple(match.group(4).split(".")) if match.group(4) else ()
        build = tuple(match.group(5).split(".")) if match.group(5) else ()
        return cls(major, minor, patch, pre, build)

    def _precedence(self) -> _Precedence:
        # A release (no pre-release) outranks any of its pre-releases.
        pre: tuple[int, tuple[tuple[int, int, str], ...]] = (
            (0, tuple(_pre_key(i) for i in self.prerelease)) if self.prerelease else (1, ())
        )
        return (self.major, self.minor, self.patch, pre)

    def compare_to(self, other: Semver) -> int:
        mine, theirs = self._precedence(), other._precedence()
        return (mine > theirs) - (mine < theirs)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Semver):
            return NotImplemented
        return self._precedence() == other._precedence()

    def __lt__(self, other: object) -> bool:
        if not isinstance(other, Semver):
            return NotImplemented
        return self._precedence() < other._precedence()

    def __hash__(self) -> int:
        return hash(("Semver", self._precedence()))

    def __str__(self) -> str:
        text = f"{self.major}.{self.minor}.{self.patch}"
        if self.prerelease:
            text += "-" + ".".join(self.prerelease)
        if self.build:
            text += "+" + ".".join(self.build)
        return text

    def __repr__(self) -> str:
        return f"Semver({str(self)!r})"
