"""sim/cluster.py's `crd_documents`: the CRDs of a tool's manifest file, parsed once per process
(a `sim up` parsed the 2.8 MB of LWS CRDs again for every cluster: 20-30 s of a start under load)."""

from __future__ import annotations

import os
from pathlib import Path

import yaml

from sim.cluster import crd_documents


def _crd(name: str) -> dict:
    return {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": name}, "spec": {"group": "example.com"}}


def test_only_the_crds_of_the_file_in_their_order(tmp_path: Path) -> None:
    f = tmp_path / "crds.yaml"
    f.write_text(yaml.safe_dump_all([_crd("b.example.com"), {"kind": "Namespace"}, None, "text",
                                     _crd("a.example.com")]))
    assert [d["metadata"]["name"] for d in crd_documents(f)] == ["b.example.com", "a.example.com"]


def test_a_file_is_parsed_once_until_it_changes(tmp_path: Path) -> None:
    f = tmp_path / "crds.yaml"
    f.write_text(yaml.safe_dump_all([_crd("one.example.com")]))
    first = crd_documents(f)
    assert crd_documents(f) is first                 # the same parsed documents: not read again
    f.write_text(yaml.safe_dump_all([_crd("one.example.com"), _crd("two.example.com")]))
    os.utime(f, ns=(first_ns := f.stat().st_mtime_ns + 1_000_000, first_ns))
    again = crd_documents(f)
    assert again is not first and [d["metadata"]["name"] for d in again] == ["one.example.com", "two.example.com"]
