"""Joining Outputs whose values are large JSON (a placement, observed capacity).

`pulumi.Output.all(a, b)` passes each argument through `Output.from_input`, which unwraps
an Output's value deeply: every nested dict and list of it becomes Outputs of its own
(pulumi/output.py, `from_input`). For a 10,000-cluster placement that is millions of
Outputs and asyncio futures: 73% of the fleet stack's samples under py-spy at 10k clusters
(docs/scale.md); benchmarks/output_join.py times both on placement JSON in one run.
`joined` awaits each Output as it is: values that hold no Output (what a provider
returns) come through unchanged, with the same dependencies, secrecy and unknowns.
"""

from __future__ import annotations

import functools
from typing import Any

import pulumi


def joined(*outputs: pulumi.Output[Any]) -> pulumi.Output[list[Any]]:
    """The values of `outputs`, in order, as one Output: unknown when any is unknown, secret
    when any is secret, depending on every one's resources. A value is not copied or unwrapped."""
    result: pulumi.Output[list[Any]] = pulumi.Output.from_input([])
    for output in outputs:
        result = result.apply(functools.partial(_then, output))
    return result


def _then(output: pulumi.Output[Any], done: list[Any]) -> pulumi.Output[list[Any]]:
    # An apply whose function returns an Output takes that Output's value as it is.
    return output.apply(lambda value: [*done, value])


__all__ = ["joined"]
