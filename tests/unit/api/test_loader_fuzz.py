"""Issue 9 acceptance: whatever a manifest file holds, `plan`, `render` and `lint` (run
in-process through the real entry point) exit 0 or 2 (lint also 1: a finding) with an
error naming the file, never a traceback, and never print a secret value."""

from __future__ import annotations

import copy
import io
import tempfile
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path
from typing import Any

import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import modelplane.cel  # noqa: F401 - celpy raises the recursion limit on import; do it before hypothesis runs
from modelplane.__main__ import main
from tests.manifests import cluster, deployment, gpu_class, model_cache, pool

SECRET = "sk-FUZZ-SECRET-0f9e8d7c"
FUZZ = settings(max_examples=40, deadline=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])

ENDPOINT = {"apiVersion": "modelplane.ai/v1alpha1", "kind": "ModelEndpoint",
            "metadata": {"name": "saas", "namespace": "default"},
            "spec": {"origin": "https://api.example.com",
                     "credential": {"apiKey": {"secretRef": {"name": "saas-key", "key": "apiKey"}}}}}
SERVICE = {"apiVersion": "modelplane.ai/v1alpha1", "kind": "ModelService",
           "metadata": {"name": "chat", "namespace": "default"},
           "spec": {"endpoints": [{"selector": {"matchLabels": {"modelplane.ai/deployment": "m"}}, "weight": 9},
                                  {"selector": {"matchLabels": {"example.org/saas": "yes"}}}]}}


def base_fleet() -> list[dict[str, Any]]:
    cache = model_cache("qwen")
    cache["spec"]["huggingFace"]["authSecret"] = {"name": "hf", "key": "HF_TOKEN"}
    return [gpu_class("h100", 8, "81559Mi"), cluster("a", pool("p1", "h100", 2), pool("p2", "h100", 1)),
            deployment("m", 2, cache="qwen"), cache, copy.deepcopy(ENDPOINT), copy.deepcopy(SERVICE)]


# Where a secret may be put, and how: each sets a secret-bearing field of the base fleet.
SECRET_PLACES = [
    (4, ("spec", "credential"), SECRET),
    (4, ("spec", "credential", "apiKey"), SECRET),
    (4, ("spec", "credential", "apiKey", "secretRef"), SECRET),
    (4, ("spec", "origin"), f"https://bob:{SECRET}@api.example.com"),
    (4, ("spec", "origin"), f"https://api.example.com?api_key={SECRET}"),
    (3, ("spec", "huggingFace", "authSecret"), SECRET),
    (3, ("spec", "huggingFace", "repo"), f"https://user:{SECRET}@huggingface.co/Qwen/Qwen3-0.6B"),
    (3, ("spec", "huggingFace", "repo"), f"Qwen/{SECRET}"),
    (2, ("spec", "template", "spec", "engines", 0, "members", 0, "template", "spec", "containers", 0, "env"),
     [{"name": "HF_TOKEN", "value": SECRET}]),
    (2, ("spec", "template", "spec", "engines", 0, "members", 0, "template", "spec", "containers", 0, "args"),
     ["--api-key", SECRET]),
]

scalars = st.one_of(st.none(), st.booleans(), st.integers(min_value=-(2**70), max_value=2**70),
                    st.floats(allow_nan=True), st.text(max_size=12),
                    st.sampled_from(["", "\n", "eu-west\n", "80Gi", "1" * 50, "modelplane.ai/v1alpha1",
                                     "ModelDeployment", "true", "device.driver ==", "((((", "-1"]))
values = st.recursive(scalars, lambda inner: st.one_of(
    st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=8), inner, max_size=3)), max_leaves=8)


def paths(node: Any, prefix: tuple = ()) -> list[tuple]:
    out = [prefix]
    if isinstance(node, dict):
        for key, child in node.items():
            out += paths(child, (*prefix, key))
    elif isinstance(node, list):
        for i, child in enumerate(node):
            out += paths(child, (*prefix, i))
    return out


def set_path(doc: Any, path: tuple, value: Any) -> Any:
    if not path:
        return value
    target = doc
    for part in path[:-1]:
        target = target[part] if isinstance(target, (dict, list)) and part in (
            range(len(target)) if isinstance(target, list) else target) else None
        if target is None:
            return doc
    if isinstance(target, dict) or (isinstance(target, list) and path[-1] < len(target)):
        target[path[-1]] = value
    return doc


@st.composite
def mutated_fleets(draw: st.DrawFn) -> list[Any]:
    docs: list[Any] = base_fleet()
    for doc, path, secret in draw(st.lists(st.sampled_from(SECRET_PLACES), max_size=3)):
        docs[doc] = set_path(docs[doc], path, copy.deepcopy(secret))
    for _ in range(draw(st.integers(0, 4))):
        i = draw(st.integers(0, len(docs) - 1))
        path = draw(st.sampled_from(paths(docs[i])))
        if any(isinstance(p, str) and p in ("credential", "huggingFace", "env", "args") for p in path):
            continue   # keep secrets where they were put: values moved elsewhere may be quoted
        action = draw(st.sampled_from(["replace", "delete", "unknown-key"]))
        if action == "replace":
            docs[i] = set_path(docs[i], path, draw(values))
        elif action == "delete" and path and isinstance(docs[i], dict):
            parent = docs[i]
            for part in path[:-1]:
                parent = parent[part]
            if isinstance(parent, dict):
                parent.pop(path[-1], None)
        elif isinstance(docs[i], dict):
            docs[i][draw(st.text(min_size=1, max_size=6))] = draw(values)
    return docs


def run(argv: list[str]) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        code = main(argv)   # an exception escaping here fails the test: that is the traceback
    return code, out.getvalue(), err.getvalue()


def check_every_command(manifest: Path, root: Path) -> None:
    for argv, allowed in ((["plan", str(manifest)], {0, 2}),
                          (["plan", str(manifest), "--json"], {0, 2}),
                          (["render", str(manifest), str(root / "out")], {0, 2}),
                          (["lint", str(manifest)], {0, 1, 2})):
        code, out, err = run(argv)
        assert code in allowed, (argv, code, err)
        assert "Traceback" not in out + err
        assert SECRET not in out + err, (argv, out + err)
        if code == 2:
            assert str(manifest) in err, (argv, err)


@FUZZ
@given(mutated_fleets())
def test_any_yaml_tree_exits_cleanly_and_never_prints_a_secret(docs):
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        manifest = root / "fleet.yaml"
        manifest.write_text(yaml.safe_dump_all(docs, sort_keys=False, allow_unicode=True))
        check_every_command(manifest, root)


yaml_like = st.text(alphabet=st.sampled_from(list("ab:-[]{}&*!|>'\"#%@`,?\n\t 01.~")), max_size=200)


@FUZZ
@given(st.one_of(st.binary(max_size=300), yaml_like.map(str.encode),
                 st.builds(lambda a, b: a + b, yaml_like.map(str.encode), st.binary(max_size=20))))
def test_any_bytes_exit_cleanly_with_the_file_named(data):
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        manifest = root / "fleet.yaml"
        manifest.write_bytes(data)
        check_every_command(manifest, root)
