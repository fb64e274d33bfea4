"""Device-selector CEL: cel-python (celpy) plus the Kubernetes DRA extensions, one module a
concern:

* `selector` — compile (checked, cached) and evaluate within the runtime cost limit;
* `validate` — plan-time checks of names, arity, literals, patterns; syntax errors worded;
* `library`  — the ``quantity``/``semver``/``matches`` libraries and their runtime costs;
* `evaluator`— celpy's interpreter with ``cel.bind``, cel-go's comprehensions and node costs;
* `cost`     — Kubernetes' limits (length, estimated and runtime cost, our nesting bound);
* `device`   — the ``device`` a selector reads; `keys` — the keys it names literally;
* `grammar`  — celpy's parser, cached per user; `errors`, `tree` — shared small pieces.
"""

from .device import DeviceView
from .errors import CelError
from .keys import DeviceKey, referenced_keys
from .selector import (
    CompiledSelector,
    SelectorCache,
    SelectorResult,
    compile_selector,
    evaluate_selector,
    selector_matches,
)

__all__ = [
    "CelError", "CompiledSelector", "DeviceKey", "DeviceView", "SelectorCache", "SelectorResult",
    "compile_selector", "evaluate_selector", "referenced_keys", "selector_matches",
]
