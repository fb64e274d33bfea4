"""Which serving engine an Engine of a ModelDeployment runs (SGLang, vLLM or unknown), read from its
image and command line: the renderers (P/D router, SGLang's metrics flag), the checks and the
autoscaler's metric tables all ask it, so it sits below all of them."""

from __future__ import annotations

import shlex

from modelplane.api import Engine


def command_words(engine: Engine) -> list[str]:
    """Every word of every member's command and args (shell-split; an unbalanced quote split on spaces)."""
    out: list[str] = []
    for member in engine.members:
        c = member.template.spec.engine
        for entry in [*(c.command or []), *(c.args or [])]:
            try:
                out.extend(shlex.split(entry))
            except ValueError:
                out.extend(entry.split())
    return out


def engine_family(engine: Engine) -> str | None:
    """"sglang" or "vllm" when the engine's image or command line says which, else None."""
    images = " ".join(m.template.spec.engine.image for m in engine.members).lower()
    words = " ".join(command_words(engine))
    if "sglang" in images or "sglang.launch_server" in words or "sglang serve" in words:
        return "sglang"
    if "vllm" in images or "vllm" in words:
        return "vllm"
    return None
