"""Modules that run where the project is not installed import the standard library only: the mock
engine is shipped as a ConfigMap and runs in a plain `python` image; the gateway's watchdog and
listen_fds.py are run by path with `python -I -S` (no site-packages, no project on sys.path)."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _imported(path: Path) -> set[str]:
    tops: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            tops |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            tops.add(node.module.split(".")[0])
    return tops


@pytest.mark.parametrize("module", ["modelplane/runtime/mock_engine.py", "modelplane/runtime/watchdog.py",
                                    "modelplane/runtime/listen_fds.py"])
def test_a_standalone_module_imports_the_standard_library_only(module: str) -> None:
    outside = _imported(ROOT / module) - set(sys.stdlib_module_names) - {"__future__"}
    assert not outside, f"{module} imports {sorted(outside)}: it runs without the project installed"
