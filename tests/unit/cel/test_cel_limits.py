"""Issue 9, item 2: CEL selectors are bounded as Kubernetes bounds DRA selectors (length,
estimated cost at load, runtime cost per evaluation), deep nesting is an error, and a
selector that errors says so instead of "matched no device". Bounds are asserted with the
cost counters, never the wall clock."""

from __future__ import annotations

import pytest

from modelplane.__main__ import main
from modelplane.api import ManifestError, load_documents
from modelplane.cel import CelError, DeviceView, compile_selector, evaluate_selector
from modelplane.cel.cost import MAX_COST, MAX_EXPRESSION_LENGTH, MAX_NESTING, estimated_cost
from modelplane.scheduler import place_fleet
from tests.manifests import (
    cluster,
    deployment,
    engine,
    gpu_class,
    mem_at_least,
    member,
    pool,
    request,
    to_yaml,
)

H100 = DeviceView.from_spec("gpu.nvidia.com", {"architecture": {"string": "Hopper"}, "cores": {"int": 132}},
                            {"memory": {"value": "81559Mi"}})
EIGHT = "[1, 2, 3, 4, 5, 6, 7, 8]"
CEL_PATH = "spec.template.spec.engines[0].members[0].nodeSelector.devices[0].selectors[0].cel"


def nested_maps(levels: int) -> str:
    body = "x1"
    for i in range(levels, 0, -1):
        body = f"{EIGHT}.map(x{i}, {body})"
    return body + ".size() > 0"


def doubling(levels: int, seed: str = '"xx"') -> str:
    body = f"a{levels}.size() > 0"
    for i in range(levels, 0, -1):
        body = f"cel.bind(a{i}, a{i - 1} + a{i - 1}, {body})"
    return f"cel.bind(a0, {seed}, {body})"


def fleet_with(cel: str) -> list[dict]:
    return [gpu_class("h100", 8, "81559Mi"), cluster("a", pool("p1", "h100", 1)),
            deployment("m", 1, engine("main", member("Standalone", request("gpu", 1, cel))))]


def test_2_limits_are_the_apiservers_for_dra_selectors():
    """k8s.io/api/resource/v1 types.go: CELSelectorExpressionMaxLength = 10 * 1024 and
    CELSelectorExpressionMaxCost = 1000000; k8s.io/dynamic-resource-allocation/cel
    compile.go compares the estimated cost with the latter and passes it to
    cel.CostLimit for every evaluation (checked with the search tool)."""
    assert MAX_EXPRESSION_LENGTH == 10 * 1024
    assert MAX_COST == 1_000_000


@pytest.mark.parametrize("cel", [
    nested_maps(6),            # 8^6 loop bodies: estimated 4.6M
    nested_maps(7),            # the "over a minute"
    doubling(30),              # the cel.bind chain that reached 2 GiB
    doubling(30, "[1]"),       # the same with lists, which celpy copies
    '"x".contains(string(device.attributes["gpu.nvidia.com"].cores))',   # a string of unknown size
])
def test_2_over_budget_selectors_are_rejected_at_load_with_the_field_path(cel):
    with pytest.raises(ManifestError) as err:
        load_documents(fleet_with(cel))
    message = str(err.value)
    assert f"at {CEL_PATH}: " in message
    assert "too complex" in message or "nested" in message


def test_2_too_long_selectors_are_refused():
    cel = "true && " * (MAX_EXPRESSION_LENGTH // 8) + "true"
    with pytest.raises(CelError, match=f"longer than the {MAX_EXPRESSION_LENGTH}"):
        compile_selector(cel)


def test_2_five_nested_maps_fit_the_budget_and_evaluation_spends_what_was_estimated():
    cel = nested_maps(5)
    compiled = compile_selector(cel)
    estimate = estimated_cost(compiled._program.ast)
    assert estimate == 580_447 <= MAX_COST      # cel-go's rules give the same worst case
    result = evaluate_selector(compiled, H100)
    assert result.matched and result.error is None
    assert result.cost == estimate


def test_2_runaway_evaluation_stops_at_the_runtime_limit():
    compiled = compile_selector(nested_maps(5))
    result = evaluate_selector(compiled, H100, limit=10_000)
    assert not result.matched
    assert result.error.startswith("operation cancelled: actual cost limit exceeded")
    assert 10_000 < result.cost <= 10_000 + 20   # stopped within one step of the limit


def test_2_a_doubling_chain_is_charged_before_each_concatenation():
    compiled = compile_selector(doubling(16))      # within the estimate: 2^17 characters at most
    full = evaluate_selector(compiled, H100)
    assert full.matched and full.cost <= estimated_cost(compiled._program.ast)
    stopped = evaluate_selector(compiled, H100, limit=2_000)
    assert "actual cost limit exceeded" in stopped.error
    # Each concatenation is charged (0.1 per character of its result) before it runs, so
    # the one that crossed the limit never built its string: the overshoot is that one
    # charge, which in a doubling chain is about what all earlier steps cost together.
    assert stopped.cost <= 2 * 2_000 + 100


@pytest.mark.parametrize("depth", [MAX_NESTING + 1, 200, 5_000])
def test_2_deeply_nested_parentheses_are_an_error_not_matched_no_device(depth):
    cel = "(" * depth + "true" + ")" * depth
    with pytest.raises(ManifestError) as err:
        load_documents(fleet_with(cel))
    assert f"at {CEL_PATH}: " in str(err.value) and "levels deep" in str(err.value)


def test_2_selectors_at_the_nesting_bound_evaluate():
    for cel in ("(" * (MAX_NESTING - 1) + "true" + ")" * (MAX_NESTING - 1),
                "[" * (MAX_NESTING - 2) + "1" + "]" * (MAX_NESTING - 2) + " != []",
                " && ".join(["true"] * MAX_NESTING)):
        assert evaluate_selector(compile_selector(cel), H100).matched


@pytest.mark.parametrize("cel, how", [
    ('device.attributes["gpu.nvidia.com"].cores / 0 > 1', "division by zero"),
    ('device.attributes["gpu.nvidia.com"].missing == "x"', "no such key: missing"),
    ('device.attributes["gpu.nvidia.com"].architecture > 1', "no such overload: string > int"),
    ('device.attributes["gpu.nvidia.com"].cores + 9223372036854775807 > 0', "integer overflow"),
    ('device.attributes["gpu.nvidia.com"].cores', "the result is 'int', not 'bool'"),
    ('[1, 2][device.attributes["gpu.nvidia.com"].cores] == 1', "index out of range"),
])
def test_2_runtime_errors_are_reported_as_errors(cel, how):
    result = evaluate_selector(compile_selector(cel), H100)
    assert (result.matched, result.error) == (False, how)


@pytest.mark.parametrize("cel, how", [
    ('device.capacity["gpu.nvidia.com"].memory.compareTo(quantity("1Gi")) / 0 > 0', "division by zero"),
    ('device.attributes["gpu.nvidia.com"].nope == "x"', "no such key: nope"),
    ('device.attributes["gpu.nvidia.com"].productName > 1', "no such key: productName"),
])
def test_2_plan_and_lint_say_the_selector_errored(tmp_path, capsys, cel, how):
    (tmp_path / "fleet.yaml").write_text(to_yaml(fleet_with(cel)))
    assert main(["plan", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert f"request 'gpu' selector #0 errored on device gpu: {how}" in out
    assert "matched no device" not in out
    assert main(["lint", str(tmp_path)]) == 1
    out = capsys.readouterr().out
    assert f"selector #0 errored on device gpu: {how}" in out


def test_2_an_error_on_another_device_kind_is_that_kinds_refusal():
    # A GPU-memory selector cannot evaluate on a NIC (no such capacity): the request still
    # matches the GPU, as on a cluster where the DeviceClass keeps NICs away from it.
    docs = fleet_with(mem_at_least(40))
    docs[0]["spec"]["devices"].insert(0, {"name": "nic", "driver": "nic.nvidia.com", "claim": "Synthetic",
                                          "count": 8})
    (placed,) = place_fleet(load_documents(docs)).deployments
    assert len(placed.replicas) == 1


def test_2_an_invalid_constant_regex_is_a_load_error():
    with pytest.raises(ManifestError, match="invalid regular expression for matches()"):
        load_documents(fleet_with('device.attributes["gpu.nvidia.com"].architecture.matches("(")'))


def test_2_regular_expressions_run_in_linear_time():
    # RE2, as cel-go: a pattern that backtracks exponentially in Python's re is linear here.
    cel = 'device.attributes["gpu.nvidia.com"].architecture.matches("^(a+)+$")'
    view = DeviceView.from_spec("gpu.nvidia.com", {"architecture": {"string": "a" * 60 + "!"}}, {})
    assert evaluate_selector(compile_selector(cel), view).matched is False


@pytest.mark.parametrize("cel", [
    mem_at_least(40),
    'device.attributes["gpu.nvidia.com"].architecture == "Hopper" && device.driver == "gpu.nvidia.com"',
    'device.attributes["gpu.nvidia.com"].all(k, k.startsWith("a") || k == "cores")',
    'cel.bind(a, device.attributes["gpu.nvidia.com"], a.exists(k, k.contains("arch")))',
    '["Hopper", "Ampere"].exists_one(n, n == device.attributes["gpu.nvidia.com"].architecture)',
    '[1, 2, 3].filter(x, x > 1).map(y, y * 2).size() == 2',
    '"Hop" + "per" in ["Hopper"]',
    nested_maps(3),
])
def test_runtime_cost_never_exceeds_the_estimate(cel):
    compiled = compile_selector(cel)
    result = evaluate_selector(compiled, H100)
    assert result.error is None
    assert result.cost <= estimated_cost(compiled._program.ast)
