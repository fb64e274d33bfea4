"""The nearest known name to a mistyped one: the "did you mean" of every reference by name
(manifests naming classes, clusters, caches, deployments; --observed naming clusters and
pools; ModelService selectors). Standard library only, so the loader can use it."""

from __future__ import annotations

from collections.abc import Iterable

# difflib's default similarity cut-off: `chat-canry` -> `chat-canary` (0.95), `h10` -> `h100`
# (0.86), but not `gpu` -> `cpu-pool`.
CUTOFF = 0.6
# Names compared at most: a fleet of thousands of clusters suggests from the first ones in order
# rather than spending seconds on a hint.
MAX_CANDIDATES = 5000


def nearest(name: str, candidates: Iterable[str]) -> str | None:
    """The candidate most like `name`, or None when none is alike enough (or `name` is one)."""
    pool: list[str] = []
    for candidate in candidates:
        if candidate == name:
            return None
        if len(pool) < MAX_CANDIDATES:
            pool.append(candidate)
    import difflib  # deferred: only a name that resolves to nothing needs it, and `plan` starts every run

    found = difflib.get_close_matches(name, sorted(set(pool)), n=1, cutoff=CUTOFF)
    return found[0] if found else None


def did_you_mean(name: str, candidates: Iterable[str], after: str = "; ") -> str:
    """`<after>did you mean 'x'?` for the nearest candidate, or '' when there is none: appended
    to a message that names `name`."""
    found = nearest(name, candidates)
    return f"{after}did you mean {found!r}?" if found is not None else ""
