"""components.outputs.joined: what Output.all gives (values in order, unknown when one is,
secret when one is, every dependency) without unwrapping a value deeply."""

from __future__ import annotations

import asyncio
from typing import Any

import pulumi

from components.outputs import joined


def _output(value: Any, *, known: bool = True, secret: bool = False, resources: set[Any] | None = None
            ) -> pulumi.Output[Any]:
    def done(x: Any) -> asyncio.Future[Any]:
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        future.set_result(x)
        return future
    return pulumi.Output(resources or set(), done(value), done(known), done(secret))


def _run(make: Any) -> Any:
    async def go() -> Any:
        out = make()
        return (await out.future(with_unknowns=True), await out.is_known(), await out.is_secret(),
                await out.resources())
    # A loop of its own, the thread's left as it was: asyncio.run would unset it, and the
    # program tests after this one (pulumi's mocks) ask for the thread's loop.
    loop = asyncio.new_event_loop()
    try:
        return loop.run_until_complete(go())
    finally:
        loop.close()


def test_the_values_come_in_order_and_as_they_are_not_rebuilt() -> None:
    big = {"deployments": [{"name": "chat", "replicas": [{"cluster": "a", "index": 0}]}]}
    value, known, secret, _ = _run(lambda: joined(_output(big), _output(None), _output([1, 2])))
    assert value == [big, None, [1, 2]] and value[0] is big and value[0]["deployments"][0] is big["deployments"][0]
    assert known and not secret
    # what Output.all would have made of it: a copy rebuilt from an Output per nested value
    every, *_ = _run(lambda: pulumi.Output.all(_output(big), _output(None)))
    assert every[0] == big and every[0] is not big


def test_one_unknown_makes_the_join_unknown_and_its_apply_does_not_run() -> None:
    ran = []
    value, known, _, _ = _run(lambda: joined(_output({"a": 1}), _output(None, known=False))
                              .apply(lambda v: ran.append(v) or v))
    assert not known and not ran


def test_one_secret_makes_the_join_secret() -> None:
    _, known, secret, _ = _run(lambda: joined(_output({"a": 1}), _output("key", secret=True)))
    assert known and secret


def test_the_join_depends_on_every_outputs_resources() -> None:
    _, _, _, resources = _run(lambda: joined(_output(1, resources={"placement"}), _output(2, resources={"scaling"})))
    assert resources == {"placement", "scaling"}


def test_no_output_is_an_empty_list() -> None:
    value, known, secret, resources = _run(lambda: joined())
    assert value == [] and known and not secret and resources == set()
