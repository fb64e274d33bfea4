"""Shared model plumbing: strict camelCase models, metadata, selectors, label rules."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Annotated, Any, ClassVar, TypeVar

from pydantic import BaseModel, ConfigDict, Field, field_validator
from pydantic.alias_generators import to_camel

API_VERSION = "modelplane.ai/v1alpha1"
RESERVED_PREFIX = "modelplane.ai/"
# Reserved keys a user may set: declarations the program reads, never stamps itself.
# The annotation that vouches an engine image ships NIXL (the prefill-decode-needs-nixl check).
NIXL_ANNOTATION = RESERVED_PREFIX + "nixl"
USER_SETTABLE_ANNOTATIONS = frozenset({NIXL_ANNOTATION})

# Always used with fullmatch: `$` also matches before a trailing newline, which let
# "eu-west\n" pass as a name (and become a directory named so).
_DNS_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")
_DNS_1035_LABEL = re.compile(r"[a-z]([-a-z0-9]*[a-z0-9])?")
_DNS_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
_LABEL_NAME = re.compile(r"([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]")
_LABEL_VALUE = re.compile(r"(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?")
# pydantic `pattern=` strings run on Rust's regex engine, where `$` is the end of the text.
# Gateway API's Hostname: an optional leading "*." then a lowercase DNS subdomain.
GATEWAY_HOSTNAME_PATTERN = r"^(\*\.)?[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$"
# A bare DNS name or IPv4 address (RFC 1123, any case): no scheme, port, path or space.
DNS_NAME_PATTERN = r"^[A-Za-z0-9]([-A-Za-z0-9]*[A-Za-z0-9])?(\.[A-Za-z0-9]([-A-Za-z0-9]*[A-Za-z0-9])?)*$"


# An error quotes the offending value, not a page of it.
QUOTE_MAX = 80


def quoted(value: object) -> str:
    """repr(value), cut to QUOTE_MAX characters: for error messages."""
    text = repr(value)
    return text if len(text) <= QUOTE_MAX else text[:QUOTE_MAX] + "..."


def shortened(text: str) -> str:
    return text if len(text) <= QUOTE_MAX else text[:QUOTE_MAX] + "..."


class ApiModel(BaseModel):
    """Base for every API object: camelCase on the wire, unknown fields rejected."""

    model_config = ConfigDict(
        # Types as strict as the Kubernetes API's: `replicas: "3"`, `replicas: 2.0` or
        # `weight: true` are errors, not silently coerced to 3, 2 and 1.
        strict=True,
        extra="forbid",
        populate_by_name=True,
        alias_generator=to_camel,
        protected_namespaces=(),
        validate_assignment=False,
        # The validator of a kind is built when a document of it is first read, not at import:
        # a fleet without gateways, endpoints or autoscalers never pays for theirs (start-up
        # is a fifth of `plan` on a 1,000-cluster fleet; issue 31).
        defer_build=True,
    )

    def to_manifest(self) -> dict[str, Any]:
        return self.model_dump(by_alias=True, exclude_none=True, mode="json")


T = TypeVar("T")


def _name_of(item: Any) -> object:  # Any: every list-map item has a name, by duck typing
    return item.name


def check_unique(items: list[T], what: str, key: Callable[[T], object] = _name_of) -> list[T]:
    """List-maps keyed by name, as in the reference's XRDs: a duplicate key is an error."""
    names = [key(item) for item in items]
    dupes = sorted({str(n) for n in names if n is not None and names.count(n) > 1})
    if dupes:
        raise ValueError(f"{what} must be unique; {', '.join(dupes)} appears more than once")
    return items


def check_dns_label(value: str, what: str = "name") -> str:
    if len(value) > 63 or not _DNS_LABEL.fullmatch(value):
        raise ValueError(
            f"{what} {quoted(value)} is not a DNS label; use at most 63 lowercase letters, "
            "digits and '-', starting and ending with a letter or digit (e.g. 'qwen-7b')"
        )
    return value


def check_dns1035_label(value: str, what: str, becomes: str) -> str:
    """A DNS-1035 label (what Kubernetes requires of Service names): a DNS label that starts
    with a letter. `becomes` names the objects the value becomes, for the message."""
    if len(value) > 63 or not _DNS_1035_LABEL.fullmatch(value):
        start = re.sub(r"^[^a-z]+", "", value.lower().replace(".", "-").replace("_", "-"))
        example = f"m-{value.lower()}" if value[:1].isdigit() else (start or "model")
        raise ValueError(
            f"{what} {quoted(value)} becomes the name of {becomes}, which Kubernetes requires to be a "
            "DNS-1035 label: at most 63 lowercase letters, digits and '-', starting with a letter and "
            f"ending with a letter or digit; rename it (e.g. {quoted(re.sub(r'[^-a-z0-9]', '-', example)[:63])})"
        )
    return value


def check_dns_subdomain(value: str, what: str = "name") -> str:
    if len(value) > 253 or not _DNS_SUBDOMAIN.fullmatch(value):
        raise ValueError(
            f"{what} {quoted(value)} is not a valid Kubernetes name; use lowercase letters, "
            "digits, '-' and '.', starting and ending with a letter or digit"
        )
    return value


_SECRET_KEY = re.compile(r"[-._a-zA-Z0-9]+")


def check_secret_key(value: str, what: str) -> str:
    """A key of a Secret's (or ConfigMap's) data: kubernetes/apimachinery pkg/util/validation
    `IsConfigMapKey`: at most 253 of letters, digits, '-', '_', '.', and not '.' or '..'."""
    if len(value) > 253 or not _SECRET_KEY.fullmatch(value) or value in (".", ".."):
        raise ValueError(f"{what} {quoted(value)} is not a Secret data key; use at most 253 letters, digits, "
                         "'-', '_' and '.' (e.g. 'apiKey')")
    return value


def check_label_value(value: str, what: str) -> str:
    if len(value) > 63 or not _LABEL_VALUE.fullmatch(value):
        raise ValueError(
            f"{what} {quoted(value)} is not a valid label value; use at most 63 alphanumerics, "
            "'-', '_' or '.', starting and ending alphanumeric"
        )
    return value


def check_qualified_name(key: str) -> None:
    """A label/annotation key: optional DNS-subdomain prefix, '/', name of <= 63 chars."""
    prefix, _, name = key.rpartition("/")
    if prefix and (len(prefix) > 253 or not _DNS_SUBDOMAIN.fullmatch(prefix)):
        raise ValueError(f"key {quoted(key)} has an invalid prefix {quoted(prefix)}; use a DNS subdomain "
                         "like 'example.org'")
    if not name or len(name) > 63 or not _LABEL_NAME.fullmatch(name):
        raise ValueError(
            f"key {quoted(key)} is not a qualified name; the part after '/' must be 1-63 "
            "alphanumerics, '-', '_' or '.', starting and ending alphanumeric"
        )


def check_user_labels(labels: dict[str, str], what: str, *, values_are_labels: bool = True) -> dict[str, str]:
    if len(labels) > 32:
        raise ValueError(f"{what} has {len(labels)} entries; at most 32 are allowed")
    for key, value in labels.items():
        if key.startswith(RESERVED_PREFIX) and (values_are_labels or key not in USER_SETTABLE_ANNOTATIONS):
            raise ValueError(
                f"{what} key {quoted(key)} uses the reserved prefix {RESERVED_PREFIX!r}, which the "
                "program stamps itself; put your label under your own prefix (e.g. 'example.org/team')"
            )
        check_qualified_name(key)
        if values_are_labels:
            check_label_value(value, f"{what} value for {quoted(key)}:")
        if not values_are_labels and len(value) > 8192:
            raise ValueError(f"{what} value for {quoted(key)} is longer than 8192 characters")
    return labels


class ObjectMeta(ApiModel):
    name: str
    namespace: str | None = None
    labels: dict[str, str] = Field(default_factory=dict)
    annotations: dict[str, str] = Field(default_factory=dict)

    @field_validator("name")
    @classmethod
    def _name(cls, value: str) -> str:
        return check_dns_subdomain(value, "metadata.name")

    @field_validator("labels")
    @classmethod
    def _labels(cls, labels: dict[str, str]) -> dict[str, str]:
        # Kubernetes' metadata rules; the reserved prefix is allowed here (cluster labels
        # such as modelplane.ai/region are the selectors' vocabulary).
        for key, value in labels.items():
            check_qualified_name(key)
            check_label_value(value, f"metadata.labels value for {quoted(key)}:")
        return labels

    @field_validator("annotations")
    @classmethod
    def _annotations(cls, annotations: dict[str, str]) -> dict[str, str]:
        for key in annotations:
            check_qualified_name(key)
        return annotations

    @field_validator("namespace")
    @classmethod
    def _namespace(cls, value: str | None) -> str | None:
        return None if value is None else check_dns_label(value, "metadata.namespace")


class LabelledObjectMeta(ObjectMeta):
    """Metadata of an object whose name is stamped as a label value on what it renders (a
    cluster, a cache): at most 63 characters, the limit of a label value."""

    @field_validator("name")
    @classmethod
    def _label_value_name(cls, value: str) -> str:
        if len(value) > 63:
            raise ValueError(f"metadata.name {quoted(value)} is {len(value)} characters long; it becomes a label "
                             "value on the objects rendered for it, and label values hold at most 63 characters")
        return value


class LabelSelector(ApiModel):
    match_labels: dict[str, str] = Field(default_factory=dict)

    def matches(self, labels: dict[str, str]) -> bool:
        return all(labels.get(k) == v for k, v in self.match_labels.items())


class RequiredLabelSelector(LabelSelector):
    """A ModelService entry must say what it selects: matchLabels without a default."""

    match_labels: dict[str, str]


class NameRef(ApiModel):
    name: Annotated[str, Field(min_length=1)]


class SecretDataRef(ApiModel):
    """A Secret in the object's namespace and one key of its data, which the program references by
    name (secretKeyRef) or creates: so both follow the Secret's rules (subclasses set the key's
    default)."""

    name: Annotated[str, Field(min_length=1)]
    key: str

    @field_validator("name")
    @classmethod
    def _secret_name(cls, value: str) -> str:
        return check_dns_subdomain(value, "Secret name")

    @field_validator("key")
    @classmethod
    def _data_key(cls, value: str) -> str:
        return check_secret_key(value, "Secret data key")


class KindObject(ApiModel):
    """Top-level document: apiVersion, kind, metadata; subclasses add spec."""

    api_version: str
    kind: str
    metadata: ObjectMeta

    NAMESPACED: ClassVar[bool] = False

    @field_validator("api_version")
    @classmethod
    def _api_version(cls, value: str) -> str:
        if value != API_VERSION:
            raise ValueError(f"apiVersion {value!r} is not served; use {API_VERSION!r}")
        return value

    @property
    def name(self) -> str:
        return self.metadata.name

    @property
    def namespace(self) -> str | None:
        return self.metadata.namespace

    @property
    def key(self) -> tuple[str, str] | str:
        return (self.metadata.namespace or "default", self.metadata.name) if self.NAMESPACED else self.metadata.name
