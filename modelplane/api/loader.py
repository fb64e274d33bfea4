"""Load reference-style YAML manifests into a validated Fleet, all or nothing."""

from __future__ import annotations

import types
import typing
from dataclasses import dataclass
from pathlib import Path

import yaml
from pydantic import BaseModel, ValidationError

from .common import API_VERSION, KindObject
from .fleet import Fleet
from .inference_class import InferenceClass
from .inference_cluster import InferenceCluster
from .inference_gateway import InferenceGateway
from .model_cache import ModelCache
from .model_deployment import ModelDeployment
from .model_endpoint import ModelEndpoint
from .model_service import ModelService

KINDS: dict[str, type[KindObject]] = {
    m.__name__: m
    for m in (InferenceClass, InferenceCluster, InferenceGateway, ModelCache,
              ModelDeployment, ModelService, ModelEndpoint)
}


@dataclass(frozen=True)
class ManifestIssue:
    file: str
    index: int
    kind: str
    name: str
    path: str
    message: str

    def __str__(self) -> str:
        where = f"{self.file}, document {self.index}"
        what = f"{self.kind} {self.name}".strip() or "document"
        field = f" at {self.path}" if self.path else ""
        return f"{where} ({what}){field}: {self.message}"


class ManifestError(ValueError):
    """One or more manifests are invalid; nothing from the set may be applied."""

    def __init__(self, issues: list[ManifestIssue]):
        self.issues = issues
        lines = [f"{len(issues)} invalid manifest field(s); nothing was applied:"] + [f"  - {i}" for i in issues]
        super().__init__("\n".join(lines))


def load_manifests(path: str | Path) -> Fleet:
    root = Path(path)
    if root.is_dir():
        files = sorted(p for p in root.rglob("*") if p.suffix in (".yaml", ".yml") and p.is_file())
        if not files:
            raise ManifestError([ManifestIssue(str(root), 0, "", "", "", "no .yaml or .yml files in this directory")])
    elif root.is_file():
        files = [root]
    else:
        raise ManifestError([ManifestIssue(str(root), 0, "", "", "", "no such file or directory")])
    docs: list[tuple[str, int, object]] = []
    issues: list[ManifestIssue] = []
    for file in files:
        try:
            for index, doc in enumerate(yaml.safe_load_all(file.read_text())):
                if doc is not None:
                    docs.append((str(file), index, doc))
        except yaml.YAMLError as exc:
            issues.append(ManifestIssue(str(file), 0, "", "", "", f"not valid YAML: {exc}"))
    return _build(docs, issues)


def load_manifest_text(text: str, source: str = "<string>") -> Fleet:
    try:
        docs = [(source, i, d) for i, d in enumerate(yaml.safe_load_all(text)) if d is not None]
    except yaml.YAMLError as exc:
        raise ManifestError([ManifestIssue(source, 0, "", "", "", f"not valid YAML: {exc}")]) from None
    return _build(docs, [])


def load_documents(documents: list[dict], source: str = "<inputs>") -> Fleet:
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
        issues.append(ManifestIssue(file, index, "", "", "", "a manifest must be a mapping with apiVersion, kind, metadata, spec"))
        return None
    kind = str(doc.get("kind", ""))
    meta = doc.get("metadata") if isinstance(doc.get("metadata"), dict) else {}
    name = str(meta.get("name", ""))
    api_version = doc.get("apiVersion")
    if api_version != API_VERSION:
        hint = ("secrets come from Pulumi config (see README), not manifests" if kind == "Secret"
                else f"only {API_VERSION} kinds belong in the manifest directory")
        issues.append(ManifestIssue(file, index, kind, name, "apiVersion",
                                    f"{api_version!r} is not a Modelplane resource; {hint}"))
        return None
    model = KINDS.get(kind)
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
        display = f"{meta.get('namespace') or 'default'}/{name}" if model.NAMESPACED else name
        for err in exc.errors():
            issues.append(ManifestIssue(file, index, kind, display, _path(err["loc"]), _message(model, err)))
        return None


def _path(loc: tuple) -> str:
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


def _message(model: type[BaseModel], err: dict) -> str:
    kind, msg = err["type"], err["msg"]
    got = err.get("input")
    if kind == "extra_forbidden":
        allowed = _fields_at(model, err["loc"][:-1])
        hint = f"; fields allowed here: {', '.join(allowed)}" if allowed else ""
        return f"unknown field {err['loc'][-1]!r}{hint}"
    if kind == "missing":
        return f"required field {err['loc'][-1]!r} is missing; add it here"
    if kind == "value_error":
        return msg.removeprefix("Value error, ")
    if isinstance(got, (str, int, float, bool)) and not isinstance(got, dict):
        return f"{msg} (got {got!r})"
    return msg


def _fields_at(model: type[BaseModel], loc: tuple) -> list[str]:
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
                      f"InferenceClass {pool.class_name!r} does not exist (known: {known}); add it or fix the name")
    for gateway in fleet.gateways.values():
        name = gateway.spec.cluster_name
        if name and name not in fleet.clusters:
            issue(gateway, "spec.clusterName",
                  f"InferenceCluster {name!r} does not exist (known: {', '.join(fleet.clusters) or 'none defined'}); "
                  "the gateway runs on that cluster, so define it or fix the name")
    if len(fleet.gateways) > 1:
        gateway = next(iter(fleet.gateways.values()))
        issue(gateway, "metadata.name",
              f"{len(fleet.gateways)} InferenceGateways ({', '.join(fleet.gateways)}); this program deploys one "
              "control-plane gateway, so keep only the one to deploy")
    for dep in fleet.deployments.values():
        spec = dep.spec.template.spec
        if spec.model_cache_ref and fleet.cache_for(dep) is None:
            issue(dep, "spec.template.spec.modelCacheRef.name",
                  f"ModelCache {dep.metadata.namespace}/{spec.model_cache_ref.name} does not exist; "
                  "define it in the same namespace or remove modelCacheRef")
        issues.extend(_cel_issues(fleet, dep))
    return issues


def _cel_issues(fleet: Fleet, dep: ModelDeployment) -> list[ManifestIssue]:
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
                            f"engine {engine.name!r} member {member.role} request {request.name!r}: "
                            f"invalid CEL selector: {exc}"))
    return out
