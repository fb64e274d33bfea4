"""Reading engine container command lines (vLLM / SGLang style flags)."""

from __future__ import annotations

import shlex

from modelplane.api.model_deployment import Container


def tokens(container: Container) -> list[tuple[str, int, str]]:
    """(field, index, token) for every word of command + args; a shell string such as
    `sh -c "vllm serve ..."` is split into its words, all reported at that entry's index."""
    out: list[tuple[str, int, str]] = []
    for field in ("command", "args"):
        entries = container.command if field == "command" else container.args
        for i, entry in enumerate(entries or []):
            words = [entry]
            if any(ch.isspace() for ch in entry):
                try:
                    words = shlex.split(entry)
                except ValueError:
                    words = entry.split()
            out.extend((field, i, w) for w in words)
    return out


def flag_value(container: Container, *names: str) -> tuple[str, str, int] | None:
    """The value of the last `--name value` / `--name=value`, with (field, index) of the value."""
    words = tokens(container)
    found = None
    for n, (field, i, word) in enumerate(words):
        for name in names:
            if word == name and n + 1 < len(words):
                nf, ni, value = words[n + 1]
                found = (value, nf, ni)
            elif word.startswith(name + "="):
                found = (word[len(name) + 1:], field, i)
    return found


def served_model(container: Container) -> str | None:
    """The model an engine loads: `--model`/`--model-path`, else the positional after `serve`."""
    flagged = flag_value(container, "--model", "--model-path")
    if flagged:
        return flagged[0]
    words = [w for _, _, w in tokens(container)]
    for n, word in enumerate(words):
        if word == "serve" and n + 1 < len(words) and not words[n + 1].startswith("-"):
            return words[n + 1]
    # vllm/vllm-openai's entrypoint is `vllm serve`, so args may start with the model.
    args = container.args or []
    if args and not args[0].startswith("-") and not any(ch.isspace() for ch in args[0]):
        return args[0]
    return None
