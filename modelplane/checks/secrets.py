"""secrets: Hugging Face tokens and SaaS API keys only ever as secrets - never a literal in
a manifest, a pod spec, or a plain (unencrypted) Pulumi input."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence

from modelplane.json_types import JsonValue
from modelplane.redact import secret_like

from .context import CheckContext, ProgramResource
from .engine_args import tokens
from .findings import MANDATORY, Finding
from .registry import register

POLICY = "secrets"
SECRET_TYPE = "kubernetes:core/v1:Secret"
PLACEMENT_TYPE = "pulumi-python:dynamic/modelplane:FleetPlacement"
_SECRET_FLAGS = ("--api-key", "--hf-token", "--token")
_SUBSTITUTION = re.compile(r"\$(\(|\{)?[A-Za-z_][A-Za-z0-9_]*(\)|\})?")


class SecretString(str):
    """A string that arrived as a Pulumi secret. Behaves as the plain value everywhere else."""

    __slots__ = ()


def _literal(value: object) -> bool:
    return isinstance(value, str) and value != "" and not _SUBSTITUTION.fullmatch(value)


_ENV_FIX = ("Fix: use valueFrom.secretKeyRef naming a Kubernetes Secret (e.g. {name: hf-token, "
            "key: HF_TOKEN}).")


def _fleet_findings(ctx: CheckContext) -> Iterable[Finding]:
    for dep in ctx.fleet.deployments.values():
        for e, engine in enumerate(dep.spec.template.spec.engines):
            for m, member in enumerate(engine.members):
                container = member.template.spec.engine
                base = f"spec.template.spec.engines[{e}].members[{m}].template.spec.containers[0]"
                for v, env in enumerate(container.env):
                    if not secret_like(env.name):
                        continue
                    if _literal(env.value):
                        yield Finding(
                            POLICY, MANDATORY, ctx.ref(dep), f"{base}.env[{v}].value",
                            f"environment variable {env.name} of engine {engine.name!r} is a literal "
                            f"in the manifest: the token is readable by anyone who can read the "
                            f"manifest or the workload, and lands unencrypted in the Pulumi state. "
                            + _ENV_FIX,
                        )
                    elif env.value_from and env.value_from.config_map_key_ref:
                        yield Finding(
                            POLICY, MANDATORY, ctx.ref(dep), f"{base}.env[{v}].valueFrom.configMapKeyRef",
                            f"environment variable {env.name} of engine {engine.name!r} comes from a "
                            f"ConfigMap, which is stored and shown in plain text. " + _ENV_FIX,
                        )
                words = tokens(container)
                for n, (field, i, word) in enumerate(words):
                    flag, eq, inline = word.partition("=")
                    if flag not in _SECRET_FLAGS:
                        continue
                    value = inline if eq else (words[n + 1][2] if n + 1 < len(words) else "")
                    where = (field, i) if eq or n + 1 >= len(words) else words[n + 1][:2]
                    if _literal(value):
                        yield Finding(
                            POLICY, MANDATORY, ctx.ref(dep), f"{base}.{where[0]}[{where[1]}]",
                            f"engine {engine.name!r} passes a literal value to {flag} on its command "
                            f"line, readable in the manifest, the pod spec and the process list. Fix: "
                            f"set an env var from valueFrom.secretKeyRef and pass {flag}=$(VAR_NAME).",
                        )
    # A ModelEndpoint URL carrying a key is refused by the loader (modelplane.redact), so
    # every command and this check see only clean URLs.


def _walk(value: JsonValue, path: str) -> Iterable[tuple[str, str, JsonValue]]:
    """(path, key, value) for every mapping entry below `value`."""
    if isinstance(value, Mapping):
        for key in value:
            child = value[key]
            here = f"{path}.{key}" if path else str(key)
            yield here, str(key), child
            yield from _walk(child, here)
    elif isinstance(value, Sequence) and not isinstance(value, (str, bytes)):
        for i in range(len(value)):
            yield from _walk(value[i], f"{path}[{i}]")


def resource_findings(resource: ProgramResource) -> list[Finding]:
    """Secret rules for one resource the program registers."""
    where = f"{resource.type} {resource.name!r}"
    found: list[Finding] = []
    plain = ("is a plaintext Pulumi input: it is stored unencrypted in the state file and shown in "
             "previews and diffs. Fix: pass it as a secret (pulumi.Config().require_secret(...) or "
             "pulumi.Output.secret(...)).")
    props = resource.props
    if resource.type == SECRET_TYPE and resource.secrets_marked:
        for block in ("stringData", "data"):
            entries = props.get(block) if isinstance(props, Mapping) else None
            if not isinstance(entries, Mapping):
                continue
            for key in entries:
                if isinstance(entries[key], str) and not isinstance(entries[key], SecretString):
                    found.append(Finding(POLICY, MANDATORY, where, f"{block}.{key}", f"Secret data {plain}"))
    for path, key, value in _walk({k: props[k] for k in props if not
                                   (resource.type == PLACEMENT_TYPE and k == "fleet")}, ""):
        if key == "env" and isinstance(value, Sequence) and not isinstance(value, str):
            for i in range(len(value)):
                item = value[i]
                if (isinstance(item, Mapping) and secret_like(str(item.get("name", "")))
                        and _literal(item.get("value"))):
                    found.append(Finding(
                        POLICY, MANDATORY, where, f"{path}[{i}].value",
                        f"environment variable {item['name']} has a literal value in the pod spec: "
                        f"anyone who can read the workload sees the token, secret input or not. "
                        + _ENV_FIX))
            continue
        if resource.type == SECRET_TYPE or not resource.secrets_marked:
            continue
        if secret_like(key) and _literal(value) and not isinstance(value, SecretString):
            found.append(Finding(POLICY, MANDATORY, where, path, f"{key} {plain}"))
    return found


@register(POLICY, MANDATORY, "Hugging Face tokens and SaaS API keys only as secrets")
def check(ctx: CheckContext) -> Iterable[Finding]:
    yield from _fleet_findings(ctx)
    for resource in ctx.program:
        yield from resource_findings(resource)
