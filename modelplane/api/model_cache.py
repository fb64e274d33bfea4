"""ModelCache: a Hugging Face repo at a revision, staged once per cluster (semantics §1.5, §5)."""

from __future__ import annotations

from typing import Annotated, Literal, ClassVar

from pydantic import Field, model_validator

from .common import ApiModel, KindObject, LabelSelector


class AuthSecret(ApiModel):
    name: Annotated[str, Field(min_length=1)]
    key: str = "HF_TOKEN"


class HuggingFace(ApiModel):
    repo: Annotated[str, Field(min_length=1)]
    revision: Annotated[str, Field(min_length=1)] | None = None
    auth_secret: AuthSecret | None = None
    size_gib: Annotated[int, Field(ge=1, le=100000, alias="sizeGiB")]


class ModelCacheSpec(ApiModel):
    source: Literal["HuggingFace"]
    hugging_face: HuggingFace | None = None
    cluster_selector: LabelSelector | None = None

    @model_validator(mode="after")
    def _block(self) -> "ModelCacheSpec":
        if self.hugging_face is None:
            raise ValueError("huggingFace is required when source is HuggingFace (repo, revision, sizeGiB)")
        return self


class ModelCache(KindObject):
    kind: Literal["ModelCache"]
    spec: ModelCacheSpec

    NAMESPACED: ClassVar[bool] = True

    @property
    def revision(self) -> str | None:
        return self.spec.hugging_face.revision if self.spec.hugging_face else None
