from fractions import Fraction

import pytest

from modelplane.quantity import INT64_MAX, NANO, Quantity, QuantityError

Q = Quantity.parse
MI = 2**20


@pytest.mark.parametrize(
    "text, value",
    [
        pytest.param("0", Fraction(0), id="zero"),
        pytest.param("1", Fraction(1), id="plain"),
        pytest.param("+1", Fraction(1), id="plus-sign"),
        pytest.param("-1", Fraction(-1), id="minus-sign"),
        pytest.param("5.", Fraction(5), id="trailing-dot"),
        pytest.param(".5", Fraction(1, 2), id="leading-dot"),
        pytest.param("1.5Gi", Fraction(3 * 2**29), id="fractional-binary"),
        pytest.param("1Ki", Fraction(1024), id="Ki"),
        pytest.param("1Ei", Fraction(2**60), id="Ei"),
        pytest.param("81559Mi", Fraction(81559 * MI), id="h100-memory"),
        pytest.param("100m", Fraction(1, 10), id="milli"),
        pytest.param("1n", Fraction(1, NANO), id="nano"),
        pytest.param("3u", Fraction(3, 10**6), id="micro"),
        pytest.param("1k", Fraction(1000), id="kilo"),
        pytest.param("80G", Fraction(80 * 10**9), id="giga"),
        pytest.param("2E", Fraction(2 * 10**18), id="exa-suffix"),
        pytest.param("1e3", Fraction(1000), id="exponent-lower"),
        pytest.param("1E3", Fraction(1000), id="exponent-upper"),
        pytest.param("1e+3", Fraction(1000), id="exponent-plus"),
        pytest.param("25e-2", Fraction(1, 4), id="exponent-negative"),
        pytest.param("-1.5Ki", Fraction(-1536), id="negative-binary"),
    ],
)
def test_parse_valid(text, value):
    assert Q(text).as_fraction() == value


@pytest.mark.parametrize(
    "text, hint",
    [
        pytest.param("", "empty", id="empty"),
        pytest.param("Mi", "must start with a number", id="bare-suffix"),
        pytest.param("K", "must start with a number", id="bare-K"),
        pytest.param("1K", "use 'k'", id="capital-K"),
        pytest.param("1,5", "unknown suffix", id="comma"),
        pytest.param(" 1", "whitespace", id="leading-space"),
        pytest.param("1 ", "whitespace", id="trailing-space"),
        pytest.param("1 Gi", "whitespace", id="inner-space"),
        pytest.param("1\tGi", "whitespace", id="tab"),
        pytest.param("1GB", "unknown suffix", id="GB"),
        pytest.param("1gi", "unknown suffix", id="lowercase-gi"),
        pytest.param("1e", "unknown suffix", id="dangling-exponent"),
        pytest.param("1e1.5", "unknown suffix", id="fractional-exponent"),
        pytest.param("1.2.3", "unknown suffix", id="two-dots"),
        pytest.param("+", "must start with a number", id="sign-only"),
        pytest.param(".", "must start with a number", id="dot-only"),
        pytest.param("--1", "must start with a number", id="double-sign"),
        pytest.param("١", "must start with a number", id="non-ascii-digit"),
        pytest.param("1e100000", "too large", id="huge-exponent"),
    ],
)
def test_parse_invalid_explains_and_gives_an_example(text, hint):
    with pytest.raises(QuantityError) as info:
        Q(text)
    message = str(info.value)
    assert hint in message
    assert '"80Gi"' in message  # every message shows a valid example


def test_parse_rejects_non_strings():
    with pytest.raises(QuantityError, match="must be a string"):
        Q(80)  # type: ignore[arg-type]


def test_quantity_error_is_a_value_error():
    assert issubclass(QuantityError, ValueError)


@pytest.mark.parametrize(
    "text, nanos",
    [
        pytest.param("0.1n", 1, id="sub-nano-rounds-up"),
        pytest.param("-0.1n", -1, id="negative-rounds-away-from-zero"),
        pytest.param("1.0000000001", NANO + 1, id="tenth-of-nano-over-one"),
        pytest.param("1e-2000", 1, id="tiny-exponent"),
        pytest.param("0.0000000000", 0, id="zero-stays-zero"),
    ],
)
def test_rounds_up_to_nano_precision(text, nanos):
    assert Q(text).nanos == nanos


def test_binary_values_saturate_at_int64_max():
    assert Q("8Ei").nanos == INT64_MAX * NANO
    assert Q("-8Ei").nanos == -INT64_MAX * NANO
    assert Q("8E").nanos == 8 * 10**18 * NANO  # decimal values do not saturate


@pytest.mark.parametrize(
    "smaller, larger",
    [
        pytest.param("81559Mi", "80Gi", id="h100-below-80Gi"),
        pytest.param("80G", "81559Mi", id="80G-below-h100"),
        pytest.param("79Gi", "81559Mi", id="79Gi-below-h100"),
        pytest.param("143771Mi", "141Gi", id="h200-below-141Gi"),
        pytest.param("100m", "1", id="milli"),
        pytest.param("-1", "0", id="negative"),
        pytest.param("999", "1e3", id="exponent"),
        pytest.param("1Gi", "1.5Gi", id="fraction"),
        pytest.param("1n", "1u", id="nano-micro"),
    ],
)
def test_ordering(smaller, larger):
    a, b = Q(smaller), Q(larger)
    assert a < b and b > a and a != b
    assert a.compare_to(b) == -1 and b.compare_to(a) == 1


@pytest.mark.parametrize(
    "left, right",
    [
        pytest.param("1Gi", "1024Mi", id="binary-units"),
        pytest.param("1e3", "1E3", id="exponent-case"),
        pytest.param("1e3", "1k", id="exponent-vs-suffix"),
        pytest.param("1.5Gi", "1536Mi", id="fractional-binary"),
        pytest.param("100m", "0.1", id="milli-vs-fraction"),
        pytest.param("80Gi", "81920Mi", id="a100"),
        pytest.param("+0", "-0", id="signed-zero"),
    ],
)
def test_equality_ignores_notation(left, right):
    a, b = Q(left), Q(right)
    assert a == b and a.compare_to(b) == 0 and hash(a) == hash(b)


def test_80G_in_mebibytes_is_exact():
    assert Q("80G").as_fraction() / MI == Fraction("76293.9453125")


@pytest.mark.parametrize(
    "text, sign, is_integer",
    [
        pytest.param("-5", -1, True, id="negative"),
        pytest.param("0", 0, True, id="zero"),
        pytest.param("1.5", 1, False, id="fraction"),
        pytest.param("1k", 1, True, id="kilo"),
        pytest.param("1m", 1, False, id="milli"),
    ],
)
def test_sign_and_is_integer(text, sign, is_integer):
    q = Q(text)
    assert q.sign() == sign
    assert q.is_integer() is is_integer


def test_as_integer():
    assert Q("2Ki").as_integer() == 2048
    assert Q("-3").as_integer() == -3
    with pytest.raises(QuantityError, match="not an integer"):
        Q("1.5").as_integer()
    with pytest.raises(QuantityError, match="64-bit"):
        Q("10E").as_integer()


def test_as_approximate_float():
    assert Q("1.5Gi").as_approximate_float() == 1.5 * 2**30
    assert Q("100m").as_approximate_float() == pytest.approx(0.1)


@pytest.mark.parametrize(
    "left, op, right, expected",
    [
        pytest.param("1Gi", "add", "512Mi", "1.5Gi", id="add-quantity"),
        pytest.param("1.5", "add", 1, "2.5", id="add-int"),
        pytest.param("1", "sub", "100m", "900m", id="sub-quantity"),
        pytest.param("1", "sub", 3, "-2", id="sub-int-negative"),
    ],
)
def test_add_sub(left, op, right, expected):
    other = Q(right) if isinstance(right, str) else right
    assert getattr(Q(left), op)(other) == Q(expected)


def test_add_rejects_other_types():
    with pytest.raises(TypeError):
        Q("1").add(True)
    with pytest.raises(TypeError):
        Q("1").add(1.5)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "text, canonical",
    [
        pytest.param("1024Mi", "1Gi", id="binary-collapses"),
        pytest.param("1536Mi", "1536Mi", id="binary-keeps-mebi"),
        pytest.param("1.5Gi", "1536Mi", id="binary-fraction"),
        pytest.param("0.5Ki", "512", id="sub-Ki-binary"),
        pytest.param("1000", "1k", id="decimal-kilo"),
        pytest.param("0.1", "100m", id="decimal-milli"),
        pytest.param("1e3", "1e3", id="exponent-kept"),
        pytest.param("0", "0", id="zero"),
        pytest.param("-2Gi", "-2Gi", id="negative-binary"),
    ],
)
def test_str_is_canonical(text, canonical):
    assert str(Q(text)) == canonical
    assert Q(str(Q(text))) == Q(text)  # round-trips
