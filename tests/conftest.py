"""Every test run: SIGTERM and SIGHUP tear fixtures down as Ctrl-C does, also under xdist
(tests/signals.py); xdist groups and the slowest modules first (tests/parallel.py); the wall
span of each test directory for CI's phase table (tests/phases.py).

hypothesis is imported here, at collection, not first by its pytest plugin's terminal summary
at the end of a run that never used it (`pytest tests/pulumi`). That late import goes through
pytest's assertion rewriting (`ast.parse`), and by then the run has left garbage whose
finalizers import modules the same way; a collection inside the outer parse resets CPython
3.11's AST recursion counter, which is global, and the outer parse fails with "SystemError:
AST constructor recursion depth mismatch": exit 1 after every test passed (cpython#106905's
family; the counter is per interpreter in 3.11)."""

import hypothesis  # noqa: F401  (see above)

pytest_plugins = ["tests.signals", "tests.parallel", "tests.loud_skip", "tests.phases"]
