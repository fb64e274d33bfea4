"""Counted nouns in messages: "1 cluster", "2 clusters", never "1 cluster(s)"."""

from __future__ import annotations


def counted(n: int, noun: str, plural: str | None = None) -> str:
    """`n` and the noun in the number `n` calls for (`plural`, else the noun + "s"); only the
    last word of a phrase is inflected: counted(2, "advisory finding") == "2 advisory findings"."""
    return f"{n} {noun if n == 1 else plural or noun + 's'}"
