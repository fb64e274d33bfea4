"""Rendered manifests as files: one object per YAML file, byte-stable across runs.

A run replaces the output as a whole or not at all: every cluster's directory is written
into a staging directory inside OUT first and only then swapped into place, so a failure
leaves the previous output as it was (and no staging directory). An index file in OUT
names the cluster directories the last run wrote; a cluster that left the fleet has its
directory removed on the next run, while directories OUT holds for other reasons stay.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path

import yaml

from modelplane.vocabulary import Manifest

from .gitops import CHARTS_DIR, CLOUD_DIR

INDEX = ".modelplane-render.json"
# Subdirectories of a cluster directory that hold the serving stack's files.
SERVING_STACK_DIRS = (CHARTS_DIR, CLOUD_DIR)
STAGING_PREFIX = ".modelplane-render-"


class NoAliasDumper(yaml.SafeDumper):
    # Renderers may reuse one dict in two places; anchors (&id001) would make the files
    # depend on object identity and confuse humans and kubectl diffs alike.
    def ignore_aliases(self, data: object) -> bool:  # noqa: ARG002 - PyYAML hook
        return True


def to_yaml(obj: Manifest) -> str:
    return yaml.dump(obj, Dumper=NoAliasDumper, sort_keys=False, default_flow_style=False,
                     allow_unicode=True, width=1 << 16)


def file_names(objects: Sequence[Manifest]) -> list[str]:
    """`<kind>-<name>.yaml`; the namespace joins the name only when two namespaces on one
    cluster hold objects of the same kind and name (replica names do not encode it)."""
    base = [f"{o['kind'].lower()}-{o['metadata']['name']}" for o in objects]
    clashes = {b for b in base if base.count(b) > 1}
    names = []
    for b, o in zip(base, objects, strict=True):
        if b in clashes:
            b = f"{o['kind'].lower()}-{o['metadata'].get('namespace', '')}-{o['metadata']['name']}"
        names.append(b + ".yaml")
    return names


def _previous_clusters(out: Path) -> set[str]:
    """Cluster directories the last run wrote (nothing when OUT has no readable index)."""
    try:
        data = json.loads((out / INDEX).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return set()
    clusters = data.get("clusters") if isinstance(data, dict) else None
    # Only plain names: an index edited to say "../x" must not make us remove anything else.
    return {c for c in clusters or [] if isinstance(c, str) and c and "/" not in c and c not in (".", "..")}


def _relative(path: str) -> Path:
    """A file path inside a cluster directory: relative, without `..` (ours, but checked)."""
    rel = Path(path)
    if rel.is_absolute() or ".." in rel.parts or not rel.parts:
        raise ValueError(f"not a path inside a cluster directory: {path!r}")
    return rel


def write_cluster_dirs(out_dir: str | Path, manifests: Mapping[str, Sequence[Manifest]],
                       files: Mapping[str, Mapping[str, str]] | None = None) -> int:
    """Write OUT/<cluster>/<file> for every cluster, replacing what the last run wrote; `files`:
    per cluster, other files by relative path (the serving stack's charts: modelplane.render.gitops)."""
    out = Path(out_dir)
    created = not out.exists()
    out.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=STAGING_PREFIX, dir=out))
    done = False
    try:
        written = 0
        for cluster, objects in manifests.items():
            target = staging / cluster
            target.mkdir()
            for name, obj in zip(file_names(objects), objects, strict=True):
                (target / name).write_text(to_yaml(obj), encoding="utf-8")
                written += 1
            for rel, text in sorted((files or {}).get(cluster, {}).items()):
                path = target / _relative(rel)
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_text(text, encoding="utf-8")
                written += 1
        (staging / INDEX).write_text(json.dumps({"clusters": sorted(manifests)}, indent=2) + "\n", encoding="utf-8")
        trash = staging / ".replaced"
        trash.mkdir()
        for cluster in sorted(_previous_clusters(out) - set(manifests)):
            if (out / cluster).is_dir():
                os.replace(out / cluster, trash / cluster)
        for cluster in manifests:
            if (out / cluster).exists():
                os.replace(out / cluster, trash / cluster)
            os.replace(staging / cluster, out / cluster)
        os.replace(staging / INDEX, out / INDEX)
        done = True
        return written
    finally:
        shutil.rmtree(staging, ignore_errors=True)
        if created and not done:
            shutil.rmtree(out, ignore_errors=True)


def write_cluster_files(cluster_dir: str | Path, files: Mapping[str, str]) -> int:
    """The render stack's copy of what `write_cluster_dirs` writes besides the manifests: replace
    the serving stack's subdirectories of one cluster directory (the Kubernetes provider owns the
    rest of it) with `files`. Written to a staging directory first, swapped in per subdirectory."""
    target = Path(cluster_dir)
    target.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=STAGING_PREFIX, dir=target))
    try:
        for rel, text in sorted(files.items()):
            path = staging / _relative(rel)
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8")
        tops = {_relative(rel).parts[0] for rel in files} | set(SERVING_STACK_DIRS)
        for top in sorted(tops):
            if (target / top).exists():
                shutil.rmtree(target / top)
            if (staging / top).exists():
                os.replace(staging / top, target / top)
        return len(files)
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def remove_cluster_files(cluster_dir: str | Path) -> None:
    """Undo `write_cluster_files`: remove the serving stack's subdirectories of one cluster
    directory, and the directory itself once nothing else is in it (the render stack's destroy)."""
    target = Path(cluster_dir)
    for top in SERVING_STACK_DIRS:
        if (target / top).is_dir() and not (target / top).is_symlink():
            shutil.rmtree(target / top)
    # Absent, or the Kubernetes provider's manifests are still in it: either way, leave it.
    with contextlib.suppress(OSError):
        target.rmdir()
