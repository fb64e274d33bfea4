"""prefill-decode-needs-nixl: PrefillDecode engines crash at startup with "NIXL is not
available" unless their image ships NIXL (mission: silent failure 3; k8s-api-shapes.md §7.1)."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping

from modelplane.api.common import NIXL_ANNOTATION

from .context import CheckContext
from .findings import MANDATORY, Finding
from .registry import register
from .tables import NIXL_EXCLUDED_TAG, NIXL_IMAGES

POLICY = "prefill-decode-needs-nixl"
_VERSION = re.compile(r"^v?(\d+)\.(\d+)(?:\.(\d+))?")


def split_image(image: str) -> tuple[str, str | None]:
    """(normalised repository, tag or None). Digests are dropped: they name no version."""
    ref = image.split("@", 1)[0]
    last = ref.rsplit("/", 1)[-1]
    repo, tag = (ref.rsplit(":", 1) if ":" in last else (ref, None))
    for prefix in ("docker.io/", "index.docker.io/", "registry-1.docker.io/"):
        if repo.startswith(prefix):
            repo = repo[len(prefix):]
    if repo.startswith("library/"):
        repo = repo[len("library/"):]
    return repo, tag


def _version(text: str) -> tuple[int, int, int] | None:
    m = _VERSION.match(text)
    return (int(m.group(1)), int(m.group(2)), int(m.group(3) or 0)) if m else None


def image_problem(image: str, table: Mapping[str, str]) -> str | None:
    """Why an image is not known to ship NIXL, or None when it is."""
    repo, tag = split_image(image)
    minimum = table.get(repo)
    if minimum is None:
        known = ", ".join(f"{r} >= v{v}" for r, v in sorted(table.items()))
        return f"image {image!r} is not in the table of images known to ship NIXL ({known})"
    have = _version(tag) if tag is not None else None
    if tag is None or have is None:
        what = f"is tagged {tag!r}, which names no version" if tag else "has no version tag"
        return (f"image {image!r} {what}, so it cannot be checked against v{minimum}, the "
                f"first {repo} tag known to ship NIXL")
    if NIXL_EXCLUDED_TAG.search(tag):
        return f"image {image!r} is a ROCm build, and ROCm builds of {repo} ship no NIXL"
    want = _version(minimum)
    if want is None:
        # A configured `images` entry whose first tag names no version: say so, do not crash.
        return (f"image {image!r} cannot be checked: the table of images known to ship NIXL gives "
                f"{repo} from {minimum!r}, which names no version")
    if have < want:
        return f"image {image!r} predates v{minimum}, the first {repo} tag known to ship NIXL"
    return None


def _annotated(*maps: Mapping[str, str]) -> bool:
    return any(str(m.get(NIXL_ANNOTATION, "")).lower() == "true" for m in maps)


@register(POLICY, MANDATORY, "PrefillDecode engines must run an image known to ship NIXL "
          "or be annotated modelplane.ai/nixl: \"true\"")
def check(ctx: CheckContext) -> Iterable[Finding]:
    table = {**NIXL_IMAGES, **(ctx.option(POLICY, "images") or {})}
    for dep in ctx.fleet.deployments.values():
        spec = dep.spec.template.spec
        if spec.mode != "PrefillDecode":
            continue
        for e, engine in enumerate(spec.engines):
            for m, member in enumerate(engine.members):
                if _annotated(dep.metadata.annotations, member.template.metadata.annotations):
                    continue
                image = member.template.spec.engine.image
                problem = image_problem(image, table)
                if problem is None:
                    continue
                first = next(iter(NIXL_IMAGES.items()))
                yield Finding(
                    POLICY, MANDATORY, ctx.ref(dep),
                    f"spec.template.spec.engines[{e}].members[{m}].template.spec.containers[0].image",
                    f"{engine.phase or 'PrefillDecode'} engine {engine.name!r}: {problem}; the "
                    f"NixlConnector KV transfer will crash it at startup with \"RuntimeError: NIXL "
                    f"is not available\". Fix: use {first[0]}:v{first[1]} or newer, or, if this "
                    f"image does ship NIXL (python3 -c \"from nixl._api import nixl_agent\" "
                    f"succeeds in it), annotate the ModelDeployment with "
                    f"metadata.annotations: {{{NIXL_ANNOTATION}: \"true\"}}.",
                )
