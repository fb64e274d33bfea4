"""Issue 9, item 7: a 5,000-digit quantity is an error naming where it is, not Python's
4,300-digit ValueError escaping as a traceback."""

from __future__ import annotations

import pytest

from modelplane.api import ManifestError, load_documents
from modelplane.quantity import MAX_DIGITS, MAX_EXPONENT, Quantity, QuantityError
from tests.manifests import deployment, engine, gpu_class, member, request


@pytest.mark.parametrize("text, problem", [
    ("1" * 5000, f"5000 digits, at most {MAX_DIGITS} are supported"),
    ("1" * 5000 + "Gi", f"5000 digits, at most {MAX_DIGITS} are supported"),
    ("0." + "1" * 5000, f"5001 digits, at most {MAX_DIGITS} are supported"),
    ("1e" + "9" * 5000, "exponent is too large"),
    (f"1e{MAX_EXPONENT + 1}", "is too large"),
])
def test_7_huge_quantities_are_quantity_errors(text, problem):
    with pytest.raises(QuantityError, match=problem):
        Quantity.parse(text)


def test_quantities_at_the_bounds_still_parse_and_print():
    assert str(Quantity.parse("9" * MAX_DIGITS)) == "9" * MAX_DIGITS
    assert str(Quantity.parse(f"1e{MAX_EXPONENT}")).startswith("1")
    assert Quantity.parse("1e-" + "9" * 5000).nanos == 1   # below 1n rounds up, as in Kubernetes


def test_7_a_5000_digit_quantity_in_a_selector_is_a_load_error():
    cel = f'device.capacity["gpu.nvidia.com"].memory.compareTo(quantity("{"1" * 5000}")) >= 0'
    docs = [gpu_class("g1"), deployment("m", 1, engine("main", member("Standalone", request("gpu", 1, cel))))]
    with pytest.raises(ManifestError, match=f"5000 digits, at most {MAX_DIGITS} are supported"):
        load_documents(docs)


def test_7_a_5000_digit_capacity_is_a_load_error():
    docs = [gpu_class("g1", memory="1" * 5000)]
    with pytest.raises(ManifestError, match="spec.devices.0.capacity.memory.value|capacity"):
        load_documents(docs)
