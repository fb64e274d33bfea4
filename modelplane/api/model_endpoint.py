"""ModelEndpoint: a backend a ModelService can route to (semantics §1.8).

Composed endpoints are derived from placed replicas; a hand-written one points at an
OpenAI-compatible SaaS. Both the v0.3.1 form (url, rewritePath) and the newer form
(origin, api, model, credential) are accepted.
"""

from __future__ import annotations

from typing import Annotated, ClassVar, Literal
from urllib.parse import urlsplit

from pydantic import Field, field_validator, model_validator

from modelplane.redact import redact_url, url_secret_problem

from .common import ApiModel, KindObject, SecretDataRef, quoted


class EndpointApi(ApiModel):
    schema_: Literal["OpenAI", "Anthropic"] = Field(default="OpenAI", alias="schema")
    prefix: Annotated[str, Field(pattern=r"^/")] = "/v1"


class SecretRefWithKey(SecretDataRef):
    """The program names the gateway's egress Secret `egress.<namespace>.<name>` after it and
    reads `key` from it (modelplane.render.gateway)."""

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

    @field_validator("url", "origin")
    @classmethod
    def _no_credentials(cls, value: str | None) -> str | None:
        problem = url_secret_problem(value) if value else None
        if problem:
            # Refused for every command (plan, render, lint, demo), not only flagged by lint:
            # a key in a URL is printed and logged wherever the URL is.
            raise ValueError(f"the URL {problem} (not shown). Fix: remove it from the URL and reference a "
                             "Secret with spec.credential.apiKey.secretRef {name, key}")
        return value

    @model_validator(mode="after")
    def _form(self) -> ModelEndpointSpec:
        if bool(self.url) == bool(self.origin):
            raise ValueError("set exactly one of url (with optional rewritePath) or origin (with api, model, "
                             "credential)")
        field = "url" if self.url else "origin"
        target = self.url or self.origin or ""
        shown = redact_url(target)
        try:
            parts = urlsplit(target)
            _ = parts.port   # raises ValueError for a port that is not a number
        except ValueError:
            raise ValueError(f"spec.{field} {quoted(shown)} is not a valid URL (check the host and the port); "
                             "e.g. https://api.together.xyz") from None
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"spec.{field} {quoted(shown)} is not an http(s) URL with a host "
                             "(e.g. https://api.together.xyz)")
        if self.origin and parts.path not in ("", "/"):
            raise ValueError(f"spec.origin {quoted(shown)} must be scheme and host only; put the path in api.prefix")
        return self

    @property
    def base_url(self) -> str:
        """Where OpenAI-style `/v1/...` requests are sent."""
        if self.origin:
            return self.origin.rstrip("/") + (self.api.prefix if self.api else "/v1")
        return (self.url or "").rstrip("/")

    @property
    def api_key_secret(self) -> SecretRefWithKey | None:
        if self.credential:
            return self.credential.api_key.secret_ref
        return self.credential_ref


class ModelEndpoint(KindObject):
    kind: Literal["ModelEndpoint"]
    spec: ModelEndpointSpec

    NAMESPACED: ClassVar[bool] = True
