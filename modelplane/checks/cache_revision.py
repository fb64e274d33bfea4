"""cache-revision-match: an engine must ask for the revision its ModelCache staged
(mission: silent failure 2; modelplane-semantics.md §5, k8s-api-shapes.md §8).

The renderer appends `--revision <staged>` to image-entrypoint engines that pass none, so
those are consistent by construction. What can still disagree: an explicit `--revision`,
and a custom command line that names the repo without one."""

from __future__ import annotations

import re
from collections.abc import Iterable

from .context import CheckContext
from .engine_args import flag_value, served_model
from .findings import MANDATORY, Finding
from .registry import register

POLICY = "cache-revision-match"
# Hugging Face resolves a bare repo id to the default branch, which is `main` on the Hub;
# the renderer stages an unpinned cache as `main` too.
DEFAULT_BRANCH = "main"
# The env var the renderer sets to the staged revision, for custom command lines.
REVISION_ENV = "MODELPLANE_MODEL_REVISION"
_REVISION_REF = re.compile(r"\$(\(|\{)?" + REVISION_ENV + r"(\)|\})?")


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
        pinned = f"spec.huggingFace.revision: {staged}" if staged else "no spec.huggingFace.revision"
        for e, engine in enumerate(dep.spec.template.spec.engines):
            for m, member in enumerate(engine.members):
                container = member.template.spec.engine
                model = served_model(container)
                # A local path (the v0.3.1 `--model=/mnt/models` style) reads files, no ref.
                if model is not None and (model.startswith("/") or model.startswith(".")):
                    continue
                base = f"spec.template.spec.engines[{e}].members[{m}].template.spec.containers[0]"
                flagged = flag_value(container, "--revision")
                if flagged:
                    asked = flagged[0]
                    if _REVISION_REF.fullmatch(asked) or _resolve(asked) == _resolve(staged):
                        continue
                    field = f"{base}.{flagged[1]}[{flagged[2]}]"
                    how = f"--revision {asked}"
                    if staged:
                        fix = (f"change the engine's --revision to {staged} (or to $({REVISION_ENV})), "
                               f"or set spec.huggingFace.revision: {asked} on the cache")
                    else:
                        fix = (f"remove --revision {asked} from the engine's args, or pin the cache with "
                               f"spec.huggingFace.revision: {asked}")
                elif container.command and model == repo:
                    asked, field = None, f"{base}.command"
                    how = "its own command names the repo without --revision"
                    fix = (f"add --revision $({REVISION_ENV}) (the staged revision, set by the program) "
                           f"or --revision {staged or DEFAULT_BRANCH} to the engine's command line")
                    if _resolve(None) == _resolve(staged):
                        continue
                else:
                    continue  # the renderer appends the staged revision
                yield Finding(
                    POLICY, MANDATORY, ctx.ref(dep), field,
                    f"engine {engine.name!r} asks for {_describe(asked)} of {repo} ({how}) but "
                    f"{ctx.ref(cache)} stages {_describe(staged)} ({pinned}): the engine will not find "
                    f"the staged snapshot, so it fails at startup under the HF_HUB_OFFLINE=1 the "
                    f"program sets (with Hub access it would download the whole model again). "
                    f"Fix: {fix}.",
                )
