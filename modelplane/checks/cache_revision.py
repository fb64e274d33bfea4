"""cache-revision-match: an engine must ask for the revision its ModelCache staged
(mission: silent failure 2; modelplane-semantics.md §5, k8s-api-shapes.md §8)."""

from __future__ import annotations

from typing import Iterable

from .context import CheckContext
from .engine_args import flag_value, served_model
from .findings import MANDATORY, Finding
from .registry import register

POLICY = "cache-revision-match"
# Hugging Face resolves a bare repo id to the default branch, which is `main` on the Hub;
# both sides written as "main" or left out land on the same ref.
DEFAULT_BRANCH = "main"


def _resolve(revision: str | None) -> str:
    return DEFAULT_BRANCH if revision in (None, DEFAULT_BRANCH) else revision


def _describe(revision: str | None) -> str:
    return "the default branch" if revision is None else f"revision {revision!r}"


@register(POLICY, MANDATORY, "An engine serving a cached model must ask for the revision the cache staged")
def check(ctx: CheckContext) -> Iterable[Finding]:
    for dep in ctx.fleet.deployments.values():
        cache = ctx.fleet.cache_for(dep)
        if cache is None or cache.spec.hugging_face is None:
            continue
        repo = cache.spec.hugging_face.repo
        staged = cache.spec.hugging_face.revision
        for e, engine in enumerate(dep.spec.template.spec.engines):
            for m, member in enumerate(engine.members):
                container = member.template.spec.engine
                model = served_model(container)
                # A local path (the v0.3.1 `--model=/mnt/models` style) reads files, no ref.
                if model is not None and (model.startswith("/") or model.startswith(".")):
                    continue
                if model is not None and model != repo:
                    continue
                flagged = flag_value(container, "--revision")
                asked = flagged[0] if flagged else None
                if _resolve(asked) == _resolve(staged):
                    continue
                base = f"spec.template.spec.engines[{e}].members[{m}].template.spec.containers[0]"
                field = f"{base}.{flagged[1]}[{flagged[2]}]" if flagged else f"{base}.args"
                how = f"--revision {asked}" if asked else "no --revision"
                pinned = (f"spec.huggingFace.revision: {staged}" if staged
                          else "no spec.huggingFace.revision")
                if staged:
                    fix = f"add --revision {staged} to the engine's args"
                    if asked:
                        fix = f"change the engine's --revision to {staged}"
                    fix += f", or set spec.huggingFace.revision: {asked} on the cache" if asked else ""
                else:
                    fix = (f"remove --revision {asked} from the engine's args, or pin the cache with "
                           f"spec.huggingFace.revision: {asked}")
                yield Finding(
                    POLICY, MANDATORY, ctx.ref(dep), field,
                    f"engine {engine.name!r} asks for {_describe(asked)} of {repo} ({how}) but "
                    f"{ctx.ref(cache)} stages {_describe(staged)} ({pinned}): the "
                    f"engine will not find the staged snapshot and will download the whole model "
                    f"again. Fix: {fix}.",
                )
