"""Issue 9, items 7, 9, 10, 11 and `.YAML`: reading manifest files fails with an error
naming the file, document and line, never a traceback; sizes and depths are bounded."""

from __future__ import annotations

import os

import pytest
import yaml

from modelplane.api import ManifestError, load_manifest_text, load_manifests
from modelplane.api.yaml_reader import read_documents
from modelplane.limits import MAX_MANIFEST_FILE_BYTES, MAX_YAML_DEPTH

CLASS = """apiVersion: modelplane.ai/v1alpha1
kind: InferenceClass
metadata: {name: l4}
spec:
  devices:
  - {name: gpu, driver: gpu.nvidia.com, deviceClassName: gpu.nvidia.com, count: 1}
"""


def error(path) -> ManifestError:
    with pytest.raises(ManifestError) as err:
        load_manifests(path)
    return err.value


def test_9_duplicate_keys_are_errors_with_file_and_line(tmp_path):
    (tmp_path / "a.yaml").write_text(CLASS.replace("  devices:", "  description: x\n  description: y\n  devices:"))
    message = str(error(tmp_path))
    assert f"{tmp_path / 'a.yaml'}, line 6: duplicate key 'description' " \
           "(first at line 5)" in message


def test_9_duplicate_keys_in_a_later_document_name_that_document():
    text = CLASS + "---\n" + CLASS.replace("metadata: {name: l4}", "metadata: {name: a, name: b}")
    with pytest.raises(ManifestError, match=r"x.yaml, document 1, line 10: duplicate key 'name'"):
        load_manifest_text(text, source="x.yaml")


def test_11_yaml_syntax_errors_give_the_real_document_index_and_line():
    text = CLASS + "---\n" + CLASS + "---\nkind: [unclosed\nmetadata: x\n"
    with pytest.raises(ManifestError) as err:
        load_manifest_text(text, source="x.yaml")
    assert str(err.value.issues[0]).startswith("x.yaml, document 2, line 16: not valid YAML: ")


def test_7_deep_yaml_nesting_is_an_error_not_a_recursion_error(tmp_path):
    for depth in (MAX_YAML_DEPTH + 1, 500):
        (tmp_path / "deep.yaml").write_text("a: " + "[" * depth + "]" * depth + "\n")
        assert f"nested more than {MAX_YAML_DEPTH} levels deep" in str(error(tmp_path / "deep.yaml"))
    # far past the bound either our builder or libyaml (at 1,000 levels) stops first
    for opener, closer in (("{a: ", "}"), ("[", "]")):
        (tmp_path / "deep.yaml").write_text("a: " + opener * 100_000 + closer * 100_000 + "\n")
        message = str(error(tmp_path / "deep.yaml"))
        assert "nested more than" in message or "not valid YAML: exceeded maximum nesting depth" in message
    (tmp_path / "deep.yaml").write_text("a:\n" + "".join("  " * i + "- \n" for i in range(1, 600)))
    assert "nested more than" in str(error(tmp_path / "deep.yaml"))


def test_7_alias_expansion_is_bounded():
    lines = ["a0: &a0 [x, x, x, x, x, x, x, x, x, x]"]
    lines += [f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 10) + "]" for i in range(1, 9)]
    with pytest.raises(ManifestError, match="aliases expand to more than"):
        load_manifest_text("\n".join(lines), source="bomb.yaml")


def test_7_11_non_utf8_file_is_named_with_its_line(tmp_path):
    (tmp_path / "a.yaml").write_bytes(CLASS.encode() + b"# caf\xe9\n")
    message = str(error(tmp_path))
    assert f"{tmp_path / 'a.yaml'}, line 7: not UTF-8 text: byte 0xe9" in message


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads files whatever their mode")
def test_7_unreadable_file_is_an_error(tmp_path):
    (tmp_path / "a.yaml").write_text(CLASS)
    (tmp_path / "a.yaml").chmod(0)
    assert f"{tmp_path / 'a.yaml'}: cannot read this file" in str(error(tmp_path))


def test_7_a_file_that_fails_to_open_is_reported(tmp_path, monkeypatch):
    # Runs as any user (root reads mode-0 files): the failure is injected where the loader opens.
    (tmp_path / "a.yaml").write_text(CLASS)
    real_open = open

    def failing_open(file, *args, **kwargs):
        if os.fspath(file).endswith("a.yaml"):
            raise PermissionError(13, "Permission denied", os.fspath(file))
        return real_open(file, *args, **kwargs)

    monkeypatch.setattr("builtins.open", failing_open)
    message = str(error(tmp_path))
    assert f"{tmp_path / 'a.yaml'}: cannot read this file: Permission denied" in message


@pytest.mark.skipif(os.geteuid() == 0, reason="root lists directories whatever their mode")
def test_10_an_unreadable_subdirectory_is_an_error_not_skipped(tmp_path):
    (tmp_path / "a.yaml").write_text(CLASS)
    (tmp_path / "team").mkdir()
    (tmp_path / "team" / "b.yaml").write_text(CLASS.replace("l4", "l40"))
    (tmp_path / "team").chmod(0)
    try:
        assert f"{tmp_path / 'team'}: cannot list this directory" in str(error(tmp_path))
    finally:
        (tmp_path / "team").chmod(0o755)


def test_10_a_directory_that_fails_to_list_is_reported(tmp_path, monkeypatch):
    # Runs as any user: the listing failure is injected where os.walk reports it.
    (tmp_path / "a.yaml").write_text(CLASS)
    (tmp_path / "team").mkdir()
    real_scandir = os.scandir

    def scandir(path):
        if os.fspath(path).endswith("team"):
            raise PermissionError(13, "Permission denied", os.fspath(path))
        return real_scandir(path)

    monkeypatch.setattr(os, "scandir", scandir)
    message = str(error(tmp_path))
    assert f"{tmp_path / 'team'}: cannot list this directory: Permission denied" in message


def test_7_an_oversized_file_is_refused_before_it_is_read_whole(tmp_path):
    big = tmp_path / "big.yaml"
    with open(big, "wb") as fh:
        fh.truncate(MAX_MANIFEST_FILE_BYTES + 1)
    assert f"larger than {MAX_MANIFEST_FILE_BYTES} bytes" in str(error(tmp_path))


@pytest.mark.parametrize("text, message", [
    ("replicas: " + "1" * 5000, "an integer written with 5000 characters is too long"),
    ("replicas: 99999999999999999999", "does not fit in 64 bits"),
    ("a: !!python/object:os.system x", "unsupported tag 'tag:yaml.org,2002:python/object:os.system'"),
    ("a: *nowhere", "alias *nowhere refers to no anchor"),
    ("a: \x00", "the character #x0000 is not allowed"),
])
def test_7_11_hostile_scalars_are_errors_naming_the_file(text, message):
    with pytest.raises(ManifestError) as err:
        load_manifest_text(text, source="x.yaml")
    assert str(err.value.issues[0]).startswith("x.yaml, line 1: ")
    assert message in str(err.value)


def test_upper_case_yaml_suffix_is_a_manifest(tmp_path):
    (tmp_path / "a.YAML").write_text(CLASS)
    (tmp_path / "b.Yml").write_text(CLASS.replace("l4", "l40"))
    (tmp_path / "notes.txt").write_text("not a manifest: [")
    assert sorted(load_manifests(tmp_path).classes) == ["l4", "l40"]


def test_symlinked_directories_are_read_once(tmp_path):
    (tmp_path / "real").mkdir()
    (tmp_path / "real" / "a.yaml").write_text(CLASS)
    (tmp_path / "real" / "loop").symlink_to(tmp_path / "real")
    assert list(load_manifests(tmp_path).classes) == ["l4"]


@pytest.mark.parametrize("text", [
    CLASS,
    "a: &x {b: [1, 2.5, true, null, 2024-01-02, '3', 0x1f, 1_000]}\nc: *x\nd:\n  <<: *x\n  e: 1\n",
    "---\n---\na: 1\n...\n---\n- [a, {b: c}]\n",
    "a: |\n  text\n  more\nb: >-\n  folded\n  line\n",
])
def test_values_are_exactly_what_safe_load_gives(text):
    assert [d.value for d in read_documents(text)] == list(yaml.load_all(text, Loader=yaml.SafeLoader))
