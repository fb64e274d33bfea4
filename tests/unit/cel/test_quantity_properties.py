"""Property checks: exact arithmetic agrees with Fraction, printing round-trips."""

from fractions import Fraction

from hypothesis import given
from hypothesis import strategies as st

from modelplane.quantity import BINARY_SUFFIXES, DECIMAL_SUFFIXES, INT64_MAX, NANO, Quantity

SUFFIXES = sorted(BINARY_SUFFIXES) + sorted(DECIMAL_SUFFIXES)


@st.composite
def quantity_texts(draw):
    whole = draw(st.integers(min_value=0, max_value=10**6))
    frac = draw(st.one_of(st.just(None), st.text("0123456789", max_size=12)))
    sign = draw(st.sampled_from(["", "+", "-"]))
    suffix = draw(st.one_of(st.sampled_from(SUFFIXES), st.integers(-12, 12).map(lambda e: f"e{e}")))
    number = str(whole) if frac is None else f"{whole}.{frac}"
    return f"{sign}{number}{suffix}"


def exact(text):
    """Independent reference: the value before Kubernetes' nano rounding."""
    body = text.lstrip("+-")
    for suffix in sorted(SUFFIXES, key=len, reverse=True):
        if suffix and body.endswith(suffix):
            number, scale = body[: -len(suffix)], (
                Fraction(2) ** BINARY_SUFFIXES[suffix] if suffix in BINARY_SUFFIXES
                else Fraction(10) ** DECIMAL_SUFFIXES[suffix])
            break
    else:
        number, scale = body, Fraction(1)
    if "e" in number:
        number, exp = number.split("e")
        scale = Fraction(10) ** int(exp)
    value = Fraction(number.rstrip(".") or "0") * scale
    if body.endswith(tuple(BINARY_SUFFIXES)):
        value = min(value, Fraction(INT64_MAX))  # binary quantities saturate
    return -value if text.startswith("-") else value


@given(quantity_texts())
def test_parse_matches_reference_within_one_nano_rounded_away_from_zero(text):
    value, parsed = exact(text), Quantity.parse(text).as_fraction()
    assert abs(parsed) >= abs(value)
    assert abs(parsed) - abs(value) < Fraction(1, NANO)


@given(quantity_texts())
def test_str_round_trips(text):
    q = Quantity.parse(text)
    assert Quantity.parse(str(q)) == q


@given(quantity_texts(), quantity_texts())
def test_ordering_agrees_with_fractions(a, b):
    qa, qb = Quantity.parse(a), Quantity.parse(b)
    fa, fb = qa.as_fraction(), qb.as_fraction()
    assert (qa < qb) == (fa < fb) and (qa == qb) == (fa == fb)
    assert qa.compare_to(qb) == (fa > fb) - (fa < fb)
    assert qa.add(qb).sub(qb) == qa
