"""ModelCache: a Hugging Face repo at a revision, staged once per cluster (semantics §1.5, §5)."""

from __future__ import annotations

import re
from typing import Annotated, ClassVar, Literal

from pydantic import Field, field_validator, model_validator

from modelplane.redact import url_secret_problem

from .common import ApiModel, KindObject, LabelledObjectMeta, LabelSelector, SecretDataRef

# A Hugging Face repo id, `name` or `namespace/name` (huggingface_hub's validate_repo_id:
# letters, digits, '-', '_', '.', at most 96 characters a part, no '--' or '..').
_REPO_PART = r"[A-Za-z0-9_](?:[A-Za-z0-9_.-]{0,94}[A-Za-z0-9_])?"
_REPO_ID = re.compile(rf"(?:{_REPO_PART}/)?{_REPO_PART}")
_REPO_FIX = ("use the repo id `hf download` takes, e.g. Qwen/Qwen3-0.6B, and put a token for a gated "
             "repo in a Secret referenced by huggingFace.authSecret {name, key: HF_TOKEN}")


class AuthSecret(SecretDataRef):
    """The Hugging Face token's Secret; the staging Job reads `key` from it (modelplane.render.cache)."""

    key: str = "HF_TOKEN"


class HuggingFace(ApiModel):
    repo: Annotated[str, Field(min_length=1)]
    revision: Annotated[str, Field(min_length=1)] | None = None
    auth_secret: AuthSecret | None = None
    size_gib: Annotated[int, Field(ge=1, le=100000, alias="sizeGiB")]

    @field_validator("repo")
    @classmethod
    def _repo(cls, value: str) -> str:
        # Never quote the value: a token pasted here must not reach any output.
        problem = url_secret_problem(value)
        if problem:
            raise ValueError(f"huggingFace.repo {problem} (not shown); never put a token in the repo: "
                             f"{_REPO_FIX}")
        if "://" in value or value.startswith(("huggingface.co/", "hf.co/")):
            raise ValueError(f"huggingFace.repo is a URL (not shown); {_REPO_FIX}")
        if not _REPO_ID.fullmatch(value) or "--" in value or ".." in value:
            raise ValueError("huggingFace.repo is not a Hugging Face repo id (not shown): one or two parts "
                             "of letters, digits, '-', '_' and '.' separated by '/'; " + _REPO_FIX)
        return value


class ModelCacheSpec(ApiModel):
    source: Literal["HuggingFace"]
    hugging_face: HuggingFace | None = None
    cluster_selector: LabelSelector | None = None
    # The image the staging Job runs `hf download` in and engine pods wait in; it must carry the
    # `hf` CLI (huggingface_hub >= 0.34) and /bin/sh. Default: modelplane.render.cache.STAGING_IMAGE.
    staging_image: Annotated[str, Field(min_length=1, max_length=512)] | None = None

    @model_validator(mode="after")
    def _block(self) -> ModelCacheSpec:
        if self.hugging_face is None:
            raise ValueError("huggingFace is required when source is HuggingFace (repo, revision, sizeGiB)")
        return self


class ModelCache(KindObject):
    kind: Literal["ModelCache"]
    metadata: LabelledObjectMeta      # stamped as modelplane.ai/modelcache on its PVC and Job
    spec: ModelCacheSpec

    NAMESPACED: ClassVar[bool] = True

    @property
    def revision(self) -> str | None:
        return self.spec.hugging_face.revision if self.spec.hugging_face else None
