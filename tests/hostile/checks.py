"""What every hostile test asserts of what a surface printed or stored: no credential, no
traceback, no control character (in text, and in every string of a JSON value, where
json.dumps would hide them as escapes)."""

from __future__ import annotations

import re
from typing import Any

from tests.hostile.conftest import TOKEN

CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def assert_clean(*texts: str) -> None:
    for text in texts:
        assert TOKEN not in text, text[:500]
        assert "Traceback" not in text
        assert not CONTROL.search(text), repr(text[:500])


def assert_clean_json(value: Any) -> None:
    if isinstance(value, str):
        assert TOKEN not in value and not CONTROL.search(value) and "\n" not in value, repr(value[:500])
    elif isinstance(value, dict):
        for k, v in value.items():
            assert_clean_json(k)
            assert_clean_json(v)
    elif isinstance(value, list):
        for v in value:
            assert_clean_json(v)
