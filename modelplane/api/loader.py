"""Load reference-style YAML manifests into a validated Fleet, all or nothing."""

from __future__ import annotations

import os
import types
import typing
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ValidationError
from pydantic_core import ErrorDetails

from modelplane.gcpause import gc_paused
from modelplane.limits import MAX_MANIFEST_FILE_BYTES, MAX_MANIFEST_FILES, MAX_MANIFEST_TOTAL_BYTES
from modelplane.redact import secret_bearing
from modelplane.suggest import did_you_mean
from modelplane.words import counted

from .common import API_VERSION, KindObject, quoted, shortened
from .fleet import Fleet
from .inference_class import InferenceClass
from .inference_cluster import InferenceCluster
from .inference_gateway import InferenceGateway
from .kubernetes_versions import version_issues
from .model_cache import ModelCache
from .model_deployment import ModelDeployment
from .model_endpoint import ModelEndpoint
from .model_service import ModelService
from .placement_policy import FLEET_BUDGET_API_VERSION, FleetBudget
from .replica_autoscaler import ReplicaAutoscaler, target_problems
from .yaml_reader import YamlInputError, read_documents

MANIFEST_SUFFIXES = (".yaml", ".yml")

KINDS: dict[str, type[KindObject]] = {
    m.__name__: m
    for m in (InferenceClass, InferenceCluster, InferenceGateway, ModelCache,
              ModelDeployment, ModelService, ModelEndpoint, FleetBudget, ReplicaAutoscaler)
}


@dataclass(frozen=True)
class ManifestIssue:
    file: str
    index: int
    kind: str
    name: str
    path: str
    message: str
    line: int | None = None   # 1-based line in the file, where known

    def __str__(self) -> str:
        what = f"{self.kind} {self.name}".strip()
        if not what and not self.path:
            # About the file or directory itself, or its YAML: "fleet.yaml, line 5: ..." (the document
            # only when the file holds several), "examples/x: no such file or directory".
            where = self.file + (f", document {self.index}" if self.index else "") + (
                f", line {self.line}" if self.line else "")
            return f"{where}: {self.message}"
        where = f"{self.file}, document {self.index}" + (f", line {self.line}" if self.line else "")
        field = f" at {self.path}" if self.path else ""
        return f"{where} ({what or 'document'}){field}: {self.message}"


class ManifestError(ValueError):
    """One or more manifests are invalid; nothing from the set may be applied."""

    def __init__(self, issues: list[ManifestIssue]) -> None:
        self.issues = issues
        lines = [f"{counted(len(issues), 'problem')} in the manifests; nothing was applied:"]
        lines += [f"  - {i}" for i in issues]
        super().__init__("\n".join(lines))


def _file_issue(file: str, message: str, index: int = 0, line: int | None = None) -> ManifestIssue:
    return ManifestIssue(file, index, "", "", "", message, line)


def is_manifest_file(name: str) -> bool:
    """`.yaml` and `.yml` in any letter case: `fleet.YAML` is a manifest too."""
    return name.lower().endswith(MANIFEST_SUFFIXES)


def manifest_files(root: Path) -> tuple[list[Path], list[ManifestIssue]]:
    """Every manifest file below `root` (symlinks followed, each directory once), sorted,
    and an issue for every directory that cannot be listed: a skipped directory would
    silently drop its manifests."""
    issues: list[ManifestIssue] = []
    files: list[Path] = []
    seen: set[str] = set()

    def unreadable(error: OSError) -> None:
        issues.append(_file_issue(str(error.filename or root), f"cannot list this directory: "
                                  f"{error.strerror or error}; fix its permissions or move it out of "
                                  "the manifest directory"))

    for dirpath, dirnames, filenames in os.walk(root, onerror=unreadable, followlinks=True):
        seen.add(os.path.realpath(dirpath))
        dirnames[:] = sorted(d for d in dirnames if os.path.realpath(os.path.join(dirpath, d)) not in seen)
        files.extend(Path(dirpath, f) for f in filenames if is_manifest_file(f))
    return sorted(files), issues


def _read_text(file: Path, budget: int) -> tuple[str, int]:
    """The file as text, within `budget` bytes; ManifestError naming the file otherwise."""
    limit = min(MAX_MANIFEST_FILE_BYTES, budget)
    try:
        with open(file, "rb") as fh:
            data = fh.read(limit + 1)
    except OSError as exc:
        raise ManifestError([_file_issue(str(file), f"cannot read this file: {exc.strerror or exc}")]) from None
    if len(data) > limit:
        what = (f"larger than {limit} bytes" if limit == MAX_MANIFEST_FILE_BYTES
                else f"past the {MAX_MANIFEST_TOTAL_BYTES} bytes all manifest files may hold together")
        raise ManifestError([_file_issue(str(file), f"{what} (see modelplane/limits.py); split the fleet or "
                                         "remove what is not a manifest")])
    return _decode_utf8(data, str(file)), len(data)


def _decode_utf8(data: bytes, source: str) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        column = exc.start - (data.rfind(b"\n", 0, exc.start) + 1) + 1
        raise ManifestError([_file_issue(source, f"not UTF-8 text: byte 0x{data[exc.start]:02x} at column "
                                         f"{column} cannot be decoded; save the file as UTF-8", line=line)]) from None


def load_manifests(path: str | Path) -> Fleet:
    with gc_paused():
        return _load_manifests(Path(path))


def _load_manifests(root: Path) -> Fleet:
    issues: list[ManifestIssue] = []
    if root.is_dir():
        files, issues = manifest_files(root)
        if not files and not issues:
            raise ManifestError([_file_issue(str(root), "no .yaml or .yml files in this directory")])
        if len(files) > MAX_MANIFEST_FILES:
            raise ManifestError([_file_issue(str(root), f"{len(files)} manifest files; at most "
                                             f"{MAX_MANIFEST_FILES} are read (see modelplane/limits.py)")])
    elif root.is_file():
        files = [root]
    elif root.exists():
        raise ManifestError([_file_issue(str(root), "not a regular file or a directory")])
    else:
        raise ManifestError([_file_issue(str(root), "no such file or directory")])
    docs: list[tuple[str, int, object]] = []
    budget = MAX_MANIFEST_TOTAL_BYTES
    for file in files:
        try:
            text, size = _read_text(file, budget)
            budget -= size
            docs.extend(_parse(text, str(file)))
        except ManifestError as exc:
            issues.extend(exc.issues)
    return _build(docs, issues)


def _parse(text: str, source: str) -> list[tuple[str, int, object]]:
    try:
        return [(source, d.index, d.value) for d in read_documents(text) if d.value is not None]
    except YamlInputError as exc:
        raise ManifestError([_file_issue(source, exc.message, exc.index, exc.line)]) from None


def load_manifest_text(text: str, source: str = "<string>") -> Fleet:
    with gc_paused():
        return _build(_parse(text, source), [])


def load_manifest_bytes(data: bytes, source: str) -> Fleet:
    """Manifests read from a stream (`plan -` reads stdin): bounded and decoded as one file is.
    `data` may be one byte longer than a file may be, which says it was cut."""
    if len(data) > MAX_MANIFEST_FILE_BYTES:
        raise ManifestError([_file_issue(source, f"larger than {MAX_MANIFEST_FILE_BYTES} bytes (see "
                                         "modelplane/limits.py); split the fleet into files in a directory")])
    if not data.strip():
        raise ManifestError([_file_issue(source, "no manifests: the input is empty")])
    return load_manifest_text(_decode_utf8(data, source), source)


def load_documents(documents: list[dict[str, Any]], source: str = "<inputs>") -> Fleet:
    with gc_paused():
        return _build([(source, i, d) for i, d in enumerate(documents)], [])


def _build(docs: list[tuple[str, int, object]], issues: list[ManifestIssue]) -> Fleet:
    fleet = Fleet()
    for file, index, doc in docs:
        obj = _validate(file, index, doc, issues)
        if obj is None:
            continue
        if fleet.contains(obj):
            issues.append(ManifestIssue(file, index, obj.kind, _display(obj), "metadata.name",
                                        f"duplicate: already defined in {fleet.source_of(obj)}; rename one of them"))
            continue
        fleet.add(obj, f"{file}#{index}")
    if not issues:
        issues.extend(_cross_reference(fleet))
    if issues:
        raise ManifestError(issues)
    return fleet.sort()


def _display(obj: KindObject) -> str:
    return f"{obj.metadata.namespace}/{obj.name}" if obj.NAMESPACED else obj.name


def _validate(file: str, index: int, doc: object, issues: list[ManifestIssue]) -> KindObject | None:
    if not isinstance(doc, dict):
        issues.append(ManifestIssue(file, index, "", "", "",
                                    "a manifest must be a mapping with apiVersion, kind, metadata, spec"))
        return None
    kind = shortened(str(doc.get("kind", "")))
    raw_meta = doc.get("metadata")
    meta: dict[str, Any] = raw_meta if isinstance(raw_meta, dict) else {}
    name = shortened(str(meta.get("name", "")))
    api_version = doc.get("apiVersion")
    model = KINDS.get(kind)
    served = getattr(model, "SERVED_API_VERSION", API_VERSION)  # our own kinds have their own group
    if api_version != served and model is not None and api_version in (API_VERSION, FLEET_BUDGET_API_VERSION):
        issues.append(ManifestIssue(file, index, kind, name, "apiVersion",
                                    f"{kind} is served as {served!r}, not {quoted(api_version)}; use {served!r}"))
        return None
    if api_version not in (API_VERSION, FLEET_BUDGET_API_VERSION):
        hint = ("secrets come from Pulumi config (see README), not manifests" if kind == "Secret"
                else f"only {API_VERSION} kinds (and our {FLEET_BUDGET_API_VERSION} FleetBudget and "
                     "ReplicaAutoscaler) belong in the manifest directory")
        issues.append(ManifestIssue(file, index, kind, name, "apiVersion",
                                    f"{quoted(api_version)} is not a Modelplane resource; {hint}"))
        return None
    if model is None:
        why = ("ModelReplica is composed by the scheduler, never written by hand; remove it"
               if kind == "ModelReplica" else f"unknown kind; use one of {', '.join(sorted(KINDS))}")
        issues.append(ManifestIssue(file, index, kind, name, "kind", why))
        return None
    if model.NAMESPACED and meta.get("namespace") is None:
        doc = {**doc, "metadata": {**meta, "namespace": "default"}}
    if not model.NAMESPACED and meta.get("namespace") is not None:
        issues.append(ManifestIssue(file, index, kind, name, "metadata.namespace",
                                    f"{kind} is cluster-scoped; remove metadata.namespace"))
        return None
    try:
        return model.model_validate(doc)
    except ValidationError as exc:
        namespace = shortened(str(meta.get("namespace") or "default"))
        display = f"{namespace}/{name}" if model.NAMESPACED else name
        for err in exc.errors():
            loc = err["loc"]
            issues.append(ManifestIssue(file, index, kind, display, _path(loc),
                                        _message(model, err, secret=secret_bearing(loc))))
        return None


def _path(loc: tuple[str | int, ...]) -> str:
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


# pydantic's "an object was expected here" error types.
_OBJECT_EXPECTED = {"model_type", "model_attributes_type", "dict_type"}


def _message(model: type[BaseModel], err: ErrorDetails, *, secret: bool) -> str:
    """What is wrong and the fix. At a secret-bearing path (modelplane.redact) the input
    is never quoted; elsewhere it is, shortened."""
    kind, msg, loc = err["type"], err["msg"], err["loc"]
    got = err.get("input")
    if kind == "extra_forbidden":
        allowed = _fields_at(model, loc[:-1])
        hint = f"; fields allowed here: {', '.join(allowed)}" if allowed else ""
        return f"unknown field {quoted(loc[-1])}{hint}"
    if kind == "missing":
        return f"required field {quoted(loc[-1])} is missing; add it here"
    if kind == "value_error":
        return msg.removeprefix("Value error, ")
    if secret:
        if kind in _OBJECT_EXPECTED and isinstance(got, (str, int, float)):
            fields = _fields_at(model, loc)
            shape = "{" + ", ".join(f"{f}: ..." for f in fields) + "}" if fields else "an object"
            return (f"a plain value is not allowed here (it is not shown): this field names a Kubernetes "
                    f"Secret and never holds the secret itself. Fix: store the value in a Secret and "
                    f"reference it here as {shape}")
        return f"{msg} (the value is not shown: this field may hold a credential)"
    if isinstance(got, (str, int, float, bool)):
        return f"{msg} (got {quoted(got)})"
    return msg


def _fields_at(model: type[BaseModel], loc: tuple[str | int, ...]) -> list[str]:
    """Walk the model's annotations along an error location to list the valid field names there."""
    current: object = model
    for part in loc:
        current = _unwrap(current)
        if isinstance(part, int):
            continue  # list element: _unwrap already stepped into the item type
        if not (isinstance(current, type) and issubclass(current, BaseModel)):
            return []
        field = next((f for n, f in current.model_fields.items() if (f.alias or n) == part or n == part), None)
        if field is None:
            return []
        current = field.annotation
    current = _unwrap(current)
    if isinstance(current, type) and issubclass(current, BaseModel):
        return sorted(f.alias or n for n, f in current.model_fields.items())
    return []


def _unwrap(tp: object) -> object:
    for _ in range(6):
        origin = typing.get_origin(tp)
        if origin is typing.Annotated:
            tp = typing.get_args(tp)[0]
        elif origin in (typing.Union, types.UnionType):
            tp = next(a for a in typing.get_args(tp) if a is not type(None))
        elif origin in (list, tuple):
            tp = typing.get_args(tp)[0]
        elif origin is dict:
            tp = typing.get_args(tp)[1]
        else:
            break
    return tp


def _cross_reference(fleet: Fleet) -> list[ManifestIssue]:
    issues: list[ManifestIssue] = []

    def issue(obj: KindObject, path: str, message: str) -> None:
        file, _, index = fleet.source_of(obj).rpartition("#")
        issues.append(ManifestIssue(file, int(index or 0), obj.kind, _display(obj), path, message))

    for cluster in fleet.clusters.values():
        for i, pool in enumerate(cluster.spec.node_pools):
            if pool.class_name and pool.class_name not in fleet.classes:
                known = ", ".join(fleet.classes) or "none defined"
                issue(cluster, f"spec.nodePools[{i}].className",
                      f"InferenceClass {pool.class_name!r} does not exist (known: {known})"
                      f"{did_you_mean(pool.class_name, fleet.classes)}; add it or fix the name")
    for budget in fleet.budgets.values():
        for path, message in budget.unknown_device_classes(fleet.classes.values()):
            issue(budget, path, message)
    for gateway in fleet.gateways.values():
        name = gateway.spec.cluster_name
        if name and name not in fleet.clusters:
            issue(gateway, "spec.clusterName",
                  f"InferenceCluster {name!r} does not exist (known: {', '.join(fleet.clusters) or 'none defined'})"
                  f"{did_you_mean(name, fleet.clusters)}; the gateway runs on that cluster, so define it or fix "
                  "the name")
    if len(fleet.gateways) > 1:
        gateway = next(iter(fleet.gateways.values()))
        issue(gateway, "metadata.name",
              f"{len(fleet.gateways)} InferenceGateways ({', '.join(fleet.gateways)}); this program deploys one "
              "control-plane gateway, so keep only the one to deploy")
    for dep in fleet.deployments.values():
        spec = dep.spec.template.spec
        if spec.model_cache_ref and fleet.cache_for(dep) is None:
            ref = spec.model_cache_ref.name
            same = [n for ns, n in fleet.caches if ns == dep.metadata.namespace]
            issue(dep, "spec.template.spec.modelCacheRef.name",
                  f"ModelCache {dep.metadata.namespace}/{ref} does not exist (in namespace {dep.metadata.namespace}: "
                  f"{', '.join(sorted(same)) or 'none'}){did_you_mean(ref, same)}; "
                  "define it in the same namespace or remove modelCacheRef")
        issues.extend(_cel_issues(fleet, dep))
    for cluster, path, message in version_issues(fleet):
        issue(cluster, path, message)
    sources = {key: fleet.source_of(scaler) for key, scaler in fleet.autoscalers.items()}
    for scaler, path, message in target_problems(fleet.autoscalers, fleet.deployments, sources):
        issue(scaler, path, message)
    return issues


def _cel_issues(fleet: Fleet, dep: ModelDeployment) -> list[ManifestIssue]:
    # Deferred: importing modelplane.cel (cel-python, lark and its grammar) costs ~0.16 s, which
    # loading manifests and planning without a selector to compile need not pay.
    from modelplane.cel import CelError, compile_selector

    out = []
    file, _, index = fleet.source_of(dep).rpartition("#")
    for e, engine in enumerate(dep.engines):
        for m, member in enumerate(engine.members):
            for r, request in enumerate(member.requests):
                for s, selector in enumerate(request.selectors):
                    try:
                        compile_selector(selector.cel)
                    except CelError as exc:
                        path = (f"spec.template.spec.engines[{e}].members[{m}].nodeSelector"
                                f".devices[{r}].selectors[{s}].cel")
                        out.append(ManifestIssue(
                            file, int(index or 0), dep.kind, _display(dep), path,
                            f"engine {engine.name!r} member {member.role} request {request.name!r}: {exc}"))
    return out
