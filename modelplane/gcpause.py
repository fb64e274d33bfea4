"""Pause the cyclic garbage collector while a reader builds many objects.

A collection of the oldest generation scans every live object, and allocating many
objects triggers collections: reading 10,000 replicas while the loaded fleet is alive
spent 85% of its time in them (benchmarks/loader.py). What the readers build is acyclic
(plain values, pydantic models, dataclasses), so nothing is lost by collecting later.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def gc_paused() -> Iterator[None]:
    """Disable automatic collection inside the block; restore what was set before."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()
