"""ModelEndpoint: a backend a ModelService can route to (semantics §1.8).

Composed endpoints are derived from placed replicas; a hand-written one points at an
OpenAI-compatible SaaS. Both the v0.3.1 form (url, rewritePath) and the newer form
(origin, api, model, credential) are accepted.
"""

from __future__ import annotations

from typing import Annotated, Literal, ClassVar
from urllib.parse import urlsplit

from pydantic import Field, model_validator

from .common import ApiModel, KindObject


class EndpointApi(ApiModel):
    schema_: Literal["OpenAI", "Anthropic"] = Field(default="OpenAI", alias="schema")
    prefix: Annotated[str, Field(pattern=r"^/")] = "/v1"


class SecretRefWithKey(ApiModel):
    name: Annotated[str, Field(min_length=1)]
    key: str = "apiKey"


class ApiKeyCredential(ApiModel):
    secret_ref: SecretRefWithKey


class Credential(ApiModel):
    method: Literal["APIKey"] = "APIKey"
    api_key: ApiKeyCredential


class ModelEndpointSpec(ApiModel):
    url: Annotated[str, Field(min_length=1)] | None = None
    rewrite_path: str | None = None
    origin: str | None = None
    api: EndpointApi | None = None
    model: str | None = None
    credential: Credential | None = None
    credential_ref: SecretRefWithKey | None = None

    @model_validator(mode="after")
    def _form(self) -> "ModelEndpointSpec":
        if bool(self.url) == bool(self.origin):
            raise ValueError("set exactly one of url (with optional rewritePath) or origin (with api, model, credential)")
        target = self.url or self.origin or ""
        parts = urlsplit(target)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"{target!r} is not an http(s) URL with a host (e.g. https://api.together.xyz)")
        try:
            parts.port
        except ValueError:
            raise ValueError(f"{target!r} has a port that is not an integer") from None
        if self.origin and parts.path not in ("", "/"):
            raise ValueError(f"origin {self.origin!r} must be scheme and host only; put the path in api.prefix")
        return self

    @property
    def base_url(self) -> str:
        """Where OpenAI-style `/v1/...` requests are sent."""
        if self.origin:
            return self.origin.rstrip("/") + (self.api.prefix if self.api else "/v1")
        return self.url.rstrip("/")

    @property
    def api_key_secret(self) -> SecretRefWithKey | None:
        if self.credential:
            return self.credential.api_key.secret_ref
        return self.credential_ref


class ModelEndpoint(KindObject):
    kind: Literal["ModelEndpoint"]
    spec: ModelEndpointSpec

    NAMESPACED: ClassVar[bool] = True
