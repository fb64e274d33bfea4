"""The render stack's serving-stack files (the charts to install, the IAM the cluster-autoscaler
needs: what `modelplane render` writes besides the manifests) as a Pulumi dynamic resource.

The files are written when the resource is created or its files change, and removed when it is
deleted, so `pulumi destroy` of a render stack leaves no file behind and `pulumi preview`
writes none (a program that wrote them while it ran did both wrong). The files are not secret:
GitOps output references Secrets and never holds one.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping

import pulumi
from pulumi.dynamic import CreateResult, DiffResult, ReadResult, Resource, ResourceProvider, UpdateResult

from modelplane.json_types import JsonObject
from modelplane.render.output import remove_cluster_files, write_cluster_files


def _digest(props: JsonObject) -> str:
    text = json.dumps({"dir": props.get("dir"), "files": props.get("files")}, sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def _files(props: JsonObject) -> dict[str, str]:
    files = props.get("files") or {}
    assert isinstance(files, dict)
    return {str(k): str(v) for k, v in files.items()}


def _write(props: JsonObject) -> None:
    directory = str(props["dir"])
    try:
        write_cluster_files(directory, _files(props))
    except (OSError, ValueError) as exc:
        # A clean message for Pulumi, not the provider's traceback.
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise RuntimeError(f"cannot write the serving stack's files under {directory}: {reason}") from None


class ServingStackFilesProvider(ResourceProvider):
    def create(self, props: JsonObject) -> CreateResult:
        _write(props)
        return CreateResult(f"files-{_digest(props)}", {**props, "digest": _digest(props)})

    def diff(self, _id: str, olds: JsonObject, news: JsonObject) -> DiffResult:
        changed = [k for k in ("dir", "files") if olds.get(k) != news.get(k)]
        # Another directory is another resource: write the new one before removing the old.
        return DiffResult(changes=bool(changed), replaces=["dir"] if "dir" in changed else [],
                          delete_before_replace=False)

    def update(self, _id: str, _olds: JsonObject, news: JsonObject) -> UpdateResult:
        _write(news)
        return UpdateResult({**news, "digest": _digest(news)})

    def delete(self, _id: str, props: JsonObject) -> None:
        try:
            remove_cluster_files(str(props["dir"]))
        except OSError as exc:
            raise RuntimeError(f"cannot remove the serving stack's files under {props['dir']}: "
                               f"{exc.strerror or exc}") from None

    def read(self, id_: str, props: JsonObject) -> ReadResult:
        return ReadResult(id_, props)


class ServingStackFiles(Resource, module="modelplane", name="ServingStackFiles"):
    """One cluster's serving-stack files under the render directory, written at `pulumi up`."""

    digest: pulumi.Output[str]

    def __init__(self, name: str, directory: str, files: Mapping[str, str],
                 opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__(ServingStackFilesProvider(), name,
                         {"dir": directory, "files": dict(files), "digest": None}, opts)
