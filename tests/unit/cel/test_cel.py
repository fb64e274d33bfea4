import pytest

import modelplane.cel as cel
from modelplane.cel import CelError, DeviceView, SelectorCache, compile_selector, selector, selector_matches
from modelplane.quantity import Quantity
from modelplane.semver import Semver

H100 = DeviceView.from_spec(
    "gpu.nvidia.com",
    {
        "type": {"string": "gpu"},
        "architecture": {"string": "Hopper"},
        "productName": {"string": "NVIDIA H100 80GB HBM3"},
        "cudaComputeCapability": {"version": "9.0.0"},
        "driverVersion": {"version": "580.126.20"},
        "index": {"int": 0},
        "mig": {"bool": False},
        "resource.kubernetes.io/pcieRoot": {"string": "pci0000:64"},
    },
    {"memory": {"value": "81559Mi"}},
)
A100 = DeviceView.from_spec(
    "gpu.nvidia.com",
    {"architecture": {"string": "Ampere"}, "cudaComputeCapability": {"version": "8.0.0"}},
    {"memory": {"value": "80Gi"}},
)
NIC = DeviceView.from_spec("nic.nvidia.com", {"linkType": {"string": "infiniband"}}, {})
EFA = DeviceView.from_spec("dra.net", {}, {})
EXAMPLE_GPU = DeviceView.from_spec(
    "gpu.example.com",
    {"index": {"int": 3}, "model": {"string": "LATEST-GPU-MODEL"}, "driverVersion": {"version": "1.0.0"}},
    {"memory": {"value": "80Gi"}},
)

NV = 'device.attributes["gpu.nvidia.com"]'
MEM = 'device.capacity["gpu.nvidia.com"].memory'
CC = f"{NV}.cudaComputeCapability"


def matches(expr, device=H100):
    return selector_matches(compile_selector(expr), device)


@pytest.mark.parametrize(
    "expr, device, expected",
    [
        # driver
        pytest.param('device.driver == "gpu.nvidia.com"', H100, True, id="driver-eq"),
        pytest.param('device.driver == "dra.net"', H100, False, id="driver-eq-other"),
        pytest.param('device.driver != "dra.net"', H100, True, id="driver-neq"),
        pytest.param('device.driver == "dra.net"', EFA, True, id="driver-efa"),
        # H100 usable memory (81559Mi) is below 80Gi
        pytest.param(f'{MEM}.compareTo(quantity("80Gi")) >= 0', H100, False, id="h100-not-80Gi"),
        pytest.param(f'{MEM}.compareTo(quantity("79Gi")) >= 0', H100, True, id="h100-79Gi"),
        pytest.param(f'{MEM}.compareTo(quantity("80G")) >= 0', H100, True, id="h100-80G-decimal"),
        pytest.param(f'{MEM}.compareTo(quantity("80Gi")) >= 0', A100, True, id="a100-80Gi"),
        pytest.param(f'{MEM}.compareTo(quantity("80Gi")) == 0', A100, True, id="compareTo-equal"),
        pytest.param(f'{MEM}.compareTo(quantity("80Gi")) == -1', H100, True, id="compareTo-minus-one"),
        pytest.param(f'{MEM}.isGreaterThan(quantity("80Gi"))', H100, False, id="nvidia-guide-example-is-wrong"),
        pytest.param(f'{MEM}.isGreaterThan(quantity("79Gi"))', H100, True, id="isGreaterThan"),
        pytest.param(f'{MEM}.isLessThan(quantity("80Gi"))', H100, True, id="isLessThan"),
        pytest.param(f'{MEM}.isLessThan(quantity("80Gi"))', A100, False, id="isLessThan-equal"),
        pytest.param(f'compareTo({MEM}, quantity("79Gi")) >= 0', H100, True, id="compareTo-global-style"),
        pytest.param(f'isLessThan({MEM}, quantity("80Gi"))', H100, True, id="isLessThan-global-style"),
        pytest.param(f'{MEM} == quantity("81559Mi")', H100, True, id="quantity-eq"),
        pytest.param(f'{MEM} != quantity("80Gi")', H100, True, id="quantity-neq"),
        pytest.param('quantity("1Gi") == quantity("1024Mi")', H100, True, id="quantity-eq-notation"),
        pytest.param('quantity("1e3") == quantity("1E3")', H100, True, id="quantity-exponent-case"),
        pytest.param('quantity("-5").sign() == -1 && sign(quantity("0")) == 0', H100, True, id="sign"),
        pytest.param(f"{MEM}.asInteger() == 85520809984", H100, True, id="asInteger"),
        pytest.param('quantity("1.5").asInteger() == 1', H100, False, id="asInteger-non-integral-errors"),
        pytest.param('quantity("1k").isInteger() && !isInteger(quantity("100m"))', H100, True, id="isInteger"),
        pytest.param('quantity("1.5Gi").asApproximateFloat() == 1610612736.0', H100, True, id="asApproximateFloat"),
        pytest.param('quantity("1Gi").add(quantity("512Mi")) == quantity("1.5Gi")', H100, True, id="add-quantity"),
        pytest.param('add(quantity("1.5"), 1) == quantity("2500m")', H100, True, id="add-int-global"),
        pytest.param('quantity("1").sub(quantity("100m")) == quantity("900m")', H100, True, id="sub"),
        pytest.param('quantity("1").add(true) == quantity("2")', H100, False, id="add-bool-errors"),
        pytest.param('isQuantity("80Gi") && !isQuantity("80GB") && !isQuantity("1K")', H100, True, id="isQuantity"),
        pytest.param(f'{MEM} < quantity("80Gi")', H100, False, id="no-lt-operator-on-quantity"),
        pytest.param(f'{MEM} == "81559Mi"', H100, False, id="quantity-vs-string-not-equal"),
        # semver
        pytest.param(f'{CC}.isGreaterThan(semver("8.9.0"))', H100, True, id="semver-isGreaterThan"),
        pytest.param(f'{CC}.isGreaterThan(semver("8.9.0"))', A100, False, id="semver-isGreaterThan-a100"),
        pytest.param(f'{CC}.isLessThan(semver("9.0.1"))', H100, True, id="semver-isLessThan"),
        pytest.param(f'{CC}.compareTo(semver("9.0.0")) == 0', H100, True, id="semver-compareTo"),
        pytest.param(f'{CC} == semver("9.0.0")', H100, True, id="semver-eq"),
        pytest.param(f'{CC} == semver("9.0.0+build.7")', H100, True, id="semver-eq-ignores-build"),
        pytest.param(f'{CC} != semver("9.0.0-rc.1")', H100, True, id="semver-neq-prerelease"),
        pytest.param(f'{CC}.major() == 9 && {CC}.minor() == 0 && {CC}.patch() == 0', H100, True,
                     id="major-minor-patch"),
        pytest.param(f"major({CC}) == 9", H100, True, id="major-global-style"),
        pytest.param(f'{NV}.driverVersion.compareTo(semver("570.0.0")) >= 0', H100, True, id="driverVersion-k8s-doc"),
        pytest.param('semver("1.0.0-rc.1").isLessThan(semver("1.0.0"))', H100, True, id="prerelease-before-release"),
        pytest.param('semver("v1.2", true) == semver("1.2.0")', H100, True, id="semver-normalize"),
        pytest.param('isSemver("1.2.3") && !isSemver("v1.2.3")', H100, True, id="isSemver-strict"),
        pytest.param('isSemver("v1.2", true) && isSemver("01.2.3", true)', H100, True, id="isSemver-normalize"),
        pytest.param('isSemver("1.2-rc.1", true)', H100, False, id="isSemver-normalize-short-with-pre"),
        pytest.param(f'{CC}.compareTo(quantity("9")) == 0', H100, False, id="semver-vs-quantity-errors"),
        pytest.param(f'{CC} < semver("10.0.0")', H100, False, id="no-lt-operator-on-semver"),
        # typed attributes, bare and qualified names
        pytest.param(f'{NV}.architecture == "Hopper"', H100, True, id="string-attr"),
        pytest.param(f'{NV}.architecture == "Hopper"', A100, False, id="string-attr-other"),
        pytest.param(f'{NV}.productName.startsWith("NVIDIA H100")', H100, True, id="string-method"),
        pytest.param(f"{NV}.index == 0", H100, True, id="int-attr"),
        pytest.param(f"{NV}.index + 1 == 1", H100, True, id="int-arith"),
        pytest.param(f"{NV}.mig == false && !{NV}.mig", H100, True, id="bool-attr"),
        pytest.param(f'{NV}["architecture"] == "Hopper"', H100, True, id="index-style-name"),
        pytest.param('device.attributes["resource.kubernetes.io"].pcieRoot == "pci0000:64"', H100, True,
                     id="qualified-key-own-domain"),
        pytest.param(f'{NV}.pcieRoot == "pci0000:64"', H100, False, id="qualified-key-not-in-driver-domain"),
        pytest.param('device.attributes["nic.nvidia.com"].linkType == "infiniband"', NIC, True, id="nic-domain"),
        # unknown names and domains
        pytest.param(f'{NV}.nope == "x"', H100, False, id="unknown-name-is-non-match"),
        pytest.param(f'!({NV}.nope == "x")', H100, False, id="unknown-name-negated-still-non-match"),
        pytest.param(f'{NV}.nope == "x" || true', H100, True, id="error-absorbed-by-or"),
        pytest.param('"gpu.nvidia.com" in device.attributes', H100, True, id="domain-presence"),
        pytest.param('"gpu.nvidia.com" in device.attributes', NIC, False, id="domain-absence"),
        pytest.param('!("x.example.com" in device.attributes)', H100, True, id="unknown-domain-absent"),
        pytest.param('size(device.attributes["x.example.com"]) == 0', H100, True, id="unknown-domain-empty-map"),
        pytest.param('device.attributes["x.example.com"].y == 1', H100, False, id="unknown-domain-name-errors"),
        pytest.param(f"has({NV}.architecture)", H100, True, id="has-present"),
        pytest.param(f"has({NV}.nope)", H100, False, id="has-absent"),
        pytest.param('has(device.attributes["x.example.com"].y)', H100, False, id="has-unknown-domain"),
        pytest.param(f'has({NV}.mig) && {NV}.mig || !has({NV}.mig)', NIC, True, id="has-guard"),
        # non-boolean results never match
        pytest.param("device.driver", H100, False, id="string-result"),
        pytest.param(f"{NV}.index", H100, False, id="int-result"),
        pytest.param(f"{MEM}", H100, False, id="quantity-result"),
        pytest.param("quantity(device.driver) == quantity(\"1\")", H100, False, id="runtime-bad-quantity"),
        # Kubernetes / modelplane doc-style selectors
        pytest.param('device.driver == "gpu.example.com" && '
                     'device.attributes["gpu.example.com"].model == "LATEST-GPU-MODEL"', EXAMPLE_GPU, True,
                     id="k8s-doc-model"),
        pytest.param('device.capacity["gpu.example.com"].memory.compareTo(quantity("40Gi")) >= 0', EXAMPLE_GPU,
                     True, id="k8s-doc-memory"),
        pytest.param('device.attributes["gpu.example.com"].driverVersion.isGreaterThan(semver("0.9.0"))',
                     EXAMPLE_GPU, True, id="k8s-doc-version"),
        pytest.param(f'{MEM}.compareTo(quantity("40Gi")) >= 0', H100, True, id="modelplane-doc-memory"),
        pytest.param(f'cel.bind(g, {NV}, g.architecture == "Hopper" && g.type == "gpu")', H100, True,
                     id="cel-bind"),
        pytest.param(f'cel.bind(g, {NV}, g.architecture == "Hopper")', A100, False, id="cel-bind-no-match"),
        pytest.param(f'{NV}.exists(k, k == "architecture")', H100, True, id="exists-macro"),
        pytest.param('[1, 2].all(i, cel.bind(j, i + 1, j > i))', H100, True, id="cel-bind-inside-macro"),
    ],
)
def test_selector(expr, device, expected):
    assert matches(expr, device) is expected


@pytest.mark.parametrize(
    "expr, fragment, line, column",
    [
        pytest.param("device.driver ==", "unexpected end of expression", 1, 17, id="truncated"),
        pytest.param('device.driver == "x" &&\n  device.driver ==', "unexpected end", 2, 19, id="multi-line"),
        pytest.param("device.driver ==\n", "unexpected end", 2, 1, id="yaml-block-trailing-newline"),
        pytest.param('device.attributes["d"].?x.orValue(1) == 1', "guard with has(", 1, 24, id="optional-syntax"),
        pytest.param("device.driver == $", "unexpected character '$'", 1, 18, id="bad-character"),
        pytest.param('device.driver = "x"', "unexpected", 1, 15, id="single-equals"),
        pytest.param("", "empty expression", None, None, id="empty"),
        pytest.param("frobnicate(device)", "unknown function 'frobnicate'", 1, 1, id="unknown-function"),
        pytest.param(f"{MEM}.isGreater(quantity('1'))", "unknown function 'isGreater'", 1, len(MEM) + 2,
                     id="unknown-method"),
        pytest.param('device.driver.lowerAscii() == "x"', "unknown function 'lowerAscii'", 1, 15,
                     id="k8s-strings-lib-unavailable"),
        pytest.param("[1].reduce(a, b, 0, a + b) == 1", "unknown function 'reduce'", 1, 5,
                     id="celpy-only-macro"),
        pytest.param('gpu.architecture == "Hopper"', "undeclared reference to 'gpu'", 1, 1, id="unknown-variable"),
        pytest.param('quantity("80GB") == quantity("1")', "unknown suffix 'GB'", 1, 1, id="bad-quantity-literal"),
        pytest.param('semver("v9.0") == semver("9.0.0")', 'leading "v"', 1, 1, id="bad-semver-literal"),
        pytest.param('quantity("1", "2") == quantity("1")', "expects 1", 1, 1, id="quantity-arity"),
        pytest.param(f'{MEM}.compareTo() == 0', "expects 2", 1, len(MEM) + 2, id="compareTo-arity"),
        pytest.param(f"{NV}.all(k)", "takes a variable name", 1, len(NV) + 2, id="macro-arity"),
        pytest.param("cel.bind(1, 2, 3)", "takes a variable name", 1, 5, id="bind-needs-variable"),
        pytest.param("cel.bind(x, 1, x == cel)", "undeclared reference to 'cel'", 1, 21, id="stray-cel"),
        pytest.param("device.bind(x, 1, x == 1)", "did you mean cel.bind", 1, 8, id="bind-on-other-receiver"),
    ],
)
def test_compile_errors(expr, fragment, line, column):
    with pytest.raises(CelError) as info:
        compile_selector(expr)
    error = info.value
    assert fragment in str(error)
    assert error.expression == expr
    assert (error.line, error.column) == (line, column)
    assert isinstance(error, ValueError)


def test_compile_error_shows_a_caret_under_the_position():
    with pytest.raises(CelError) as info:
        compile_selector("device.driver == $")
    lines = str(info.value).splitlines()
    assert lines[-2].strip() == "device.driver == $"
    assert lines[-1].index("^") == lines[-2].index("$")


def test_yaml_block_scalar_with_trailing_newline_compiles():
    assert matches('device.driver == "gpu.nvidia.com"\n  && true\n') is True


def test_normalized_semver_literal_compiles():
    assert compile_selector('semver("v9.0", true) == semver("9.0.0")').expression.startswith("semver")


def test_comprehension_variables_are_not_undeclared():
    assert matches(f"{NV}.exists(name, name == 'index')") is True


def test_compile_is_cached_by_expression_text():
    expr = f'{NV}.architecture == "Hopper" && true'
    assert compile_selector(expr) is compile_selector(expr)


def test_compile_errors_are_cached_too():
    before = selector._compile.cache_info().misses
    for _ in range(3):
        with pytest.raises(CelError):
            compile_selector("device.driver == == 'cached'")
    assert selector._compile.cache_info().misses == before + 1


def test_device_view_groups_keys_by_domain():
    assert H100.attributes["gpu.nvidia.com"]["architecture"] == "Hopper"
    assert H100.attributes["gpu.nvidia.com"]["cudaComputeCapability"] == Semver.parse("9.0.0")
    assert H100.attributes["resource.kubernetes.io"] == {"pcieRoot": "pci0000:64"}
    assert H100.capacity == {"gpu.nvidia.com": {"memory": Quantity.parse("81559Mi")}}


def test_device_view_splits_on_first_slash_only():
    view = DeviceView.from_spec("d", {"a.example/b/c": {"string": "x"}}, {})
    assert view.attributes == {"a.example": {"b/c": "x"}}
    assert matches('device.attributes["a.example"]["b/c"] == "x"', view) is True


@pytest.mark.parametrize(
    "attributes, capacity, fragment",
    [
        pytest.param({"v": {"version": "9.0"}}, {}, "'v'", id="bad-version"),
        pytest.param({"v": {"float": 1.5}}, {}, "unsupported", id="unknown-type"),
        pytest.param({"v": {"string": "a", "int": 1}}, {}, "exactly one", id="two-types"),
        pytest.param({"v": {"int": True}}, {}, "unsupported", id="bool-as-int"),
        pytest.param({}, {"memory": {"value": "80GB"}}, "capacity 'memory'", id="bad-capacity"),
    ],
)
def test_device_view_rejects_malformed_values(attributes, capacity, fragment):
    with pytest.raises(ValueError, match=fragment):
        DeviceView.from_spec("gpu.nvidia.com", attributes, capacity)


def test_selector_cache_evaluates_each_key_once(monkeypatch):
    calls = []
    real = cel.evaluate_selector

    def counting(compiled, device):
        calls.append(compiled.expression)
        return real(compiled, device)

    monkeypatch.setattr(selector, "evaluate_selector", counting)
    cache = SelectorCache()
    hopper = f'{NV}.architecture == "Hopper"'
    big = f'{MEM}.compareTo(quantity("80Gi")) >= 0'
    for _ in range(5):
        assert cache.matches(hopper, "h100", "gpu", H100) is True
        assert cache.matches(hopper, "a100", "gpu", A100) is False
        assert cache.matches(big, "h100", "gpu", H100) is False
        assert cache.matches(big, "a100", "gpu", A100) is True
    assert len(calls) == 4
    assert cache.evaluations == 4


def test_selector_cache_key_includes_device_name():
    cache = SelectorCache()
    expr = 'device.driver == "gpu.nvidia.com"'
    assert cache.matches(expr, "byo-h100", "gpu", H100) is True
    assert cache.matches(expr, "byo-h100", "nic", NIC) is False
    assert cache.evaluations == 2


def test_selector_cache_raises_compile_errors():
    cache = SelectorCache()
    with pytest.raises(CelError, match="unknown function"):
        cache.matches("nope(device)", "h100", "gpu", H100)


def test_device_views_compare_and_hash_by_content():
    again = DeviceView.from_spec("gpu.nvidia.com", {"architecture": {"string": "Ampere"},
                                                    "cudaComputeCapability": {"version": "8.0.0"}},
                                 {"memory": {"value": "81920Mi"}})
    assert again == A100 and hash(again) == hash(A100)
    assert len({again, A100, H100}) == 2


def test_selector_cache_reuses_results_for_an_equal_view_but_not_an_edited_one():
    cache = SelectorCache()
    expr = f'{NV}.architecture == "Hopper"'
    rebuilt = DeviceView.from_spec("gpu.nvidia.com", {"architecture": {"string": "Hopper"}}, {})
    edited = DeviceView.from_spec("gpu.nvidia.com", {"architecture": {"string": "Ampere"}}, {})
    assert cache.matches(expr, "pool-class", "gpu", rebuilt) is True
    assert cache.matches(expr, "pool-class", "gpu", DeviceView.from_spec(
        "gpu.nvidia.com", {"architecture": {"string": "Hopper"}}, {})) is True
    assert cache.evaluations == 1
    assert cache.matches(expr, "pool-class", "gpu", edited) is False  # same names, new content
    assert cache.evaluations == 2


def _key(map_: str, domain: str, name: str) -> cel.DeviceKey:
    return cel.DeviceKey(map_, domain, name)


@pytest.mark.parametrize(("expression", "want"), [
    pytest.param('device.attributes["gpu.nvidia.com"].productName == "x"',
                 [_key("attributes", "gpu.nvidia.com", "productName")], id="field selection"),
    pytest.param('device.attributes["gpu.nvidia.com"]["productName"] == "x"',
                 [_key("attributes", "gpu.nvidia.com", "productName")], id="index with a literal"),
    pytest.param('device.capacity["gpu.nvidia.com"].memory.compareTo(quantity("79Gi")) >= 0 && '
                 'has(device.attributes["resource.kubernetes.io"].pcieRoot) && '
                 'device.attributes["gpu.nvidia.com"].architecture == "Hopper" && '
                 'device.capacity["gpu.nvidia.com"].memory.isGreaterThan(quantity("1Gi"))',
                 [_key("capacity", "gpu.nvidia.com", "memory"),
                  _key("attributes", "resource.kubernetes.io", "pcieRoot"),
                  _key("attributes", "gpu.nvidia.com", "architecture")], id="in source order, once each, inside has()"),
    pytest.param("device.attributes[r'd'].x == 1", [_key("attributes", "d", "x")], id="raw string literal"),
    pytest.param('"gpu.nvidia.com" in device.attributes && device.driver == "x"', [], id="no key named"),
    pytest.param('cel.bind(a, device.attributes["d"], a.x == 1)', [], id="a key reached through a variable"),
    pytest.param('device.attributes["d"].exists(k, k == "x")', [], id="a comprehension over a domain"),
    pytest.param("device.attributes[", [], id="does not parse"),
])
def test_referenced_keys(expression, want):
    assert list(cel.referenced_keys(expression)) == want
