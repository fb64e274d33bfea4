"""The manifest YAML reader builds the same values as PyYAML's safe loader for any YAML
both accept: plain scalars of every core type (each distinct text is resolved once per
stream, so the same text as a key and as a value, in many documents, is where a cache
would go wrong), quoted scalars, anchors, aliases and merge keys."""

from __future__ import annotations

import math

import pytest
import yaml
from hypothesis import example, given, settings
from hypothesis import strategies as st

from modelplane.api.yaml_reader import YamlInputError, read_documents
from modelplane.limits import MAX_YAML_DEPTH

# Texts that resolve to every YAML 1.1 core type, and look-alikes that stay strings.
PLAIN = ["1", "-0", "0x1F", "0o17", "1_000", "1.5", "1e3", ".inf", "-.Inf", ".nan", "~", "null", "Null", "yes",
         "on", "False", "2002-12-14", "2001-12-14t21:59:43.10-05:00", "12:30", "x", "a b", "é", "0.0", "-0.0"]

scalars = st.one_of(st.sampled_from(PLAIN), st.integers(-(2**63), 2**63 - 1).map(str),
                    st.text(alphabet="ab01.-_", min_size=1, max_size=5))


def _node(depth: int) -> st.SearchStrategy[str]:
    """YAML text (flow style) of a node; keys of a mapping are distinct plain texts."""
    leaf = st.one_of(scalars, scalars.map(lambda s: "'" + s.replace("'", "''") + "'"))
    if depth == 0:
        return leaf
    child = _node(depth - 1)
    seq = st.lists(child, max_size=4).map(lambda xs: "[" + ", ".join(xs) + "]")
    mapping = st.dictionaries(st.sampled_from(["a", "b", "1", "yes", "x", "k"]), child, max_size=4).map(
        lambda d: "{" + ", ".join(f"{k}: {v}" for k, v in d.items()) + "}")
    return st.one_of(leaf, seq, mapping)


def _same(a: object, b: object) -> bool:
    """Equal, type for type (1 is not True, NaN matches NaN). Keys in any order: merged keys
    come after a mapping's own here, before them in PyYAML, which no manifest can tell apart."""
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a):
        return math.isnan(b)
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        return set(a) == set(b) and all(_same(a[k], b[k]) for k in a)  # type: ignore[call-overload]
    if isinstance(a, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))  # type: ignore[arg-type]
    return a == b


@settings(max_examples=150, deadline=None)
@given(st.lists(_node(3), min_size=1, max_size=4))
@example(["0b_"])       # PyYAML's own ValueError (found by this test at random)
def test_any_flow_yaml_reads_as_pyyaml_reads_it(nodes):
    text = "".join(f"--- {n}\n" for n in nodes)
    try:
        expected = list(yaml.safe_load_all(text))
    except yaml.YAMLError:
        return
    except ValueError:
        # PyYAML's resolver takes `0b_` or `0x_` for an int its constructor then cannot build (a bare
        # ValueError): ours refuses such a text with the reason, never a traceback.
        with pytest.raises(YamlInputError, match="not a valid int"):
            read_documents(text)
        return
    try:
        got = [d.value for d in read_documents(text)]
    except YamlInputError as exc:   # only what we refuse on purpose, never a value we'd read differently
        assert "duplicate key" in exc.message or "does not fit in 64 bits" in exc.message, exc.message
        return
    assert _same(got, expected), (text, got, expected)


@pytest.mark.parametrize("text", [
    "base: &b {x: 1, y: 2}\none: {<<: *b, y: 3}\ntwo: {<<: [*b, {z: 4}], x: 0}\n",
    "l: &l [1, yes, .nan]\nm: [*l, *l]\ns: &s 7\nt: *s\n",
    "1: a\nx: 1\n---\n1: b\nx: yes\n---\n- 1\n- '1'\n- 1\n- 1.0\n",
])
def test_anchors_aliases_and_merges_read_as_pyyaml_reads_them(text):
    assert _same([d.value for d in read_documents(text)], list(yaml.safe_load_all(text)))


def test_keys_equal_as_values_are_duplicates_whatever_their_text():
    # 1, 1.0 and yes are one key (as PyYAML's dict would keep one of them); so is .nan twice,
    # which PyYAML builds as one shared float.
    for text in ("1: a\n1.0: b\n", "1: a\nyes: b\n", ".nan: 1\n.nan: 2\n"):
        with pytest.raises(YamlInputError, match=r"duplicate key .* \(first at line 1\)"):
            read_documents(text)


def test_the_same_text_as_a_key_twice_is_a_duplicate_with_both_lines():
    with pytest.raises(YamlInputError, match=r"duplicate key 1 \(first at line 2\)") as err:
        read_documents("a: 1\n1: x\nb: 1\n1: y\n")
    assert err.value.line == 4


@pytest.mark.parametrize("inner", [1, 5, 40])
def test_an_alias_nests_as_deep_as_its_anchor_held_exactly(inner):
    # The anchor holds `inner` nested sequences; its alias inside `outer` more levels fits
    # while the two add up to the bound, and is refused one level past it.
    anchored = "[" * inner + "]" * inner
    for outer, fits in ((MAX_YAML_DEPTH - inner, True), (MAX_YAML_DEPTH - inner + 1, False)):
        text = f"a: &x {anchored}\nb: " + "[" * (outer - 1) + "*x" + "]" * (outer - 1) + "\n"
        if fits:
            assert read_documents(text)[0].value["b"] is not None
        else:
            with pytest.raises(YamlInputError, match=f"alias \\*x nests more than {MAX_YAML_DEPTH} levels deep"):
                read_documents(text)
