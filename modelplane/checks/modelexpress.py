"""modelexpress-server / modelexpress-image: `--load-format modelexpress` needs the
ModelExpress loader in the engine image and a ModelExpress server, which only Dynamo
clusters with a cache have
(k8s-api-shapes.md §5.3: the `modelexpress` package must be installed in the image)."""

from __future__ import annotations

from collections.abc import Iterable

from modelplane.api import ModelDeployment
from modelplane.scheduler import candidate_clusters
from modelplane.vocabulary import ANNOTATION_MODELEXPRESS

from .context import CheckContext
from .engine_args import flag_value
from .findings import ADVISORY, MANDATORY, Finding
from .registry import register

POLICY_SERVER = "modelexpress-server"
POLICY_IMAGE = "modelexpress-image"


def _opted_in(*notes: dict[str, str] | None) -> bool:
    return any(str((n or {}).get(ANNOTATION_MODELEXPRESS, "")).lower() == "true" for n in notes)


def _uses(ctx: CheckContext) -> Iterable[tuple[ModelDeployment, str, bool, bool, str | None, bool]]:
    """(deployment, engine name, cached, on Dynamo, field of the flag or None, opted in) per member."""
    candidates = candidate_clusters(ctx.fleet)
    for key, dep in ctx.fleet.deployments.items():
        cached = dep.spec.template.spec.model_cache_ref is not None
        dynamo = any(ctx.fleet.clusters[c].spec.stack == "Dynamo" for c in candidates.get(key, []))
        for e, engine in enumerate(dep.spec.template.spec.engines):
            for m, member in enumerate(engine.members):
                flagged = flag_value(member.template.spec.engine, "--load-format")
                field = None
                if flagged and flagged[0] == "modelexpress":
                    field = (f"spec.template.spec.engines[{e}].members[{m}].template.spec.containers[0]."
                             f"{flagged[1]}[{flagged[2]}]")
                opted = _opted_in(dep.metadata.annotations, member.template.metadata.annotations)
                yield dep, engine.name, cached, dynamo, field, opted


@register(POLICY_SERVER, MANDATORY, "--load-format modelexpress needs a ModelExpress server: a Dynamo cluster "
          "and a ModelCache")
def check_server(ctx: CheckContext) -> Iterable[Finding]:
    for dep, engine, cached, dynamo, field, _ in _uses(ctx):
        if field is not None and not (cached and dynamo):
            why = "it references no ModelCache" if not cached else "none of its clusters runs stack Dynamo"
            yield Finding(POLICY_SERVER, MANDATORY, ctx.ref(dep), field,
                          f"engine {engine!r} loads with --load-format modelexpress but {why}, so no ModelExpress "
                          "server is deployed for it and the loader has nothing to talk to. Fix: drop the flag, or "
                          "reference a ModelCache and select a Dynamo cluster.")


@register(POLICY_IMAGE, ADVISORY, "--load-format modelexpress needs an image that ships the ModelExpress loader: "
          "vouch for it with the modelplane.ai/modelexpress annotation")
def check_image(ctx: CheckContext) -> Iterable[Finding]:
    seen: set[tuple[str, str]] = set()
    for dep, engine, cached, dynamo, field, opted in _uses(ctx):
        if field is not None and cached and dynamo and not opted:
            yield Finding(POLICY_IMAGE, ADVISORY, ctx.ref(dep), field,
                          f"engine {engine!r} asks for --load-format modelexpress; stock vLLM images do not ship "
                          "the modelexpress loader package, and an engine without it fails at startup. Fix: vouch "
                          f"for the image with metadata.annotations {{{ANNOTATION_MODELEXPRESS}: \"true\"}} once "
                          "it ships the loader (the program then also appends the flag itself).")
        elif opted and not (cached and dynamo) and (ctx.ref(dep), "annotation") not in seen:
            seen.add((ctx.ref(dep), "annotation"))
            yield Finding(POLICY_IMAGE, ADVISORY, ctx.ref(dep), "metadata.annotations",
                          f"{ANNOTATION_MODELEXPRESS}: \"true\" has no effect: ModelExpress is only wired on "
                          "Dynamo clusters for deployments with a ModelCache.")
