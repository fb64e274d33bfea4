"""Rendered manifests as files: one object per YAML file, byte-stable across runs."""

from __future__ import annotations

from pathlib import Path

import yaml


class _Dumper(yaml.SafeDumper):
    # Renderers may reuse one dict in two places; anchors (&id001) would make the files
    # depend on object identity and confuse humans and kubectl diffs alike.
    def ignore_aliases(self, data):  # noqa: D102 - PyYAML hook
        return True


def to_yaml(obj: dict) -> str:
    return yaml.dump(obj, Dumper=_Dumper, sort_keys=False, default_flow_style=False,
                     allow_unicode=True, width=1 << 16)


def file_names(objects: list[dict]) -> list[str]:
    """`<kind>-<name>.yaml`; the namespace joins the name only when two namespaces on one
    cluster hold objects of the same kind and name (replica names do not encode it)."""
    base = [f"{o['kind'].lower()}-{o['metadata']['name']}" for o in objects]
    clashes = {b for b in base if base.count(b) > 1}
    names = []
    for b, o in zip(base, objects):
        if b in clashes:
            b = f"{o['kind'].lower()}-{o['metadata'].get('namespace', '')}-{o['metadata']['name']}"
        names.append(b + ".yaml")
    return names


def write_cluster_dirs(out_dir: str | Path, manifests: dict[str, list[dict]]) -> int:
    """Write OUT/<cluster>/<file>; stale YAML from an earlier run in those directories goes."""
    out = Path(out_dir)
    written = 0
    for cluster, objects in manifests.items():
        target = out / cluster
        target.mkdir(parents=True, exist_ok=True)
        names = file_names(objects)
        for stale in sorted(target.glob("*.yaml")):
            if stale.name not in names:
                stale.unlink()
        for name, obj in zip(names, objects):
            (target / name).write_text(to_yaml(obj), encoding="utf-8")
            written += 1
    return written
