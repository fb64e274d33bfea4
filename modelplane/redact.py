"""What in our inputs is secret, and how to print around it.

One home for three rules every command, the loader and the policy checks share:

* `secret_like(name)`: a field or variable name that holds a credential (HF_TOKEN,
  apiKey, password, ...); `secret_bearing(path)`: a manifest field path whose value is
  never quoted in an error (anything under such a name, under a Secret reference, or a
  URL that may carry user-info);
* `url_secret_problem(url)`: why a URL carries a credential (user-info, or a query
  parameter such as `api_key`), without quoting it;
* `redact_url(url)`: the URL as it may be printed: no user-info, secret query values
  masked. It never raises, whatever the input.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from urllib.parse import parse_qsl, urlsplit

REDACTED = "REDACTED"

# Lower-cased with '-', '_' and '.' removed, a secret-holding name ends in one of these.
_SECRET_SUFFIXES = ("token", "apikey", "password", "secretkey", "clientsecret")
# Field names that hold or reference a credential; their values are never quoted.
_SECRET_FIELDS = ("secret", "credential", "apikey", "token", "password", "kubeconfig")
# Container fields whose strings may carry a credential (--api-key=..., literal env values).
_CONTAINER_FIELDS = frozenset({"env", "args", "command"})
# Fields holding a URL or a repository location, which may carry user-info.
_URL_FIELDS = frozenset({"url", "origin", "repo"})
# Query parameter names (lower-cased, '-' and '_' removed) that carry a credential.
_URL_SECRET_KEYS = frozenset({"key", "apikey", "token", "accesstoken", "authtoken", "password", "secret",
                              "sig", "signature", "clientsecret"})
# A Hugging Face access token (hf_ then 30+ letters and digits).
_HF_TOKEN = re.compile(r"hf_[A-Za-z0-9]{30,}")
# scheme://user[:password]@host: the user-info part, found even where urlsplit gives up.
_USERINFO = re.compile(r"(?P<scheme>[A-Za-z][A-Za-z0-9+.-]*://)(?P<userinfo>[^/?#]*)@")


def _flat(name: str) -> str:
    return re.sub(r"[-_.]", "", name).lower()


def secret_like(name: str) -> bool:
    """HF_TOKEN, hfToken, OPENAI_API_KEY, apiKey, password... (not tokenizer, maxTokens)."""
    return _flat(name).endswith(_SECRET_SUFFIXES)


def secret_bearing(path: Sequence[str | int]) -> bool:
    """Whether a value at this manifest field path must never be quoted: below a field
    that holds or references a credential (credential, apiKey, authSecret, secretRef,
    secretKeyRef, imagePullSecrets...), inside a container's env, args or command, or a
    URL-valued field."""
    names = [_flat(p) for p in path if isinstance(p, str)]
    if any(n.endswith(_SECRET_SUFFIXES) or any(f in n for f in _SECRET_FIELDS) for n in names):
        return True
    if any(p in _CONTAINER_FIELDS for p in path if isinstance(p, str)):
        return True
    return bool(names) and names[-1] in _URL_FIELDS


def url_secret_problem(url: str) -> str | None:
    """Why this URL carries a credential, in words that never quote it; None if it does not."""
    if _USERINFO.search(url):
        return "carries credentials in its user-info part (user:password@)"
    if _HF_TOKEN.search(url):
        return "carries a Hugging Face access token"
    try:
        query = urlsplit(url).query
    except ValueError:
        return None
    for key, _ in parse_qsl(query, keep_blank_values=True):
        if _flat(key) in _URL_SECRET_KEYS:
            return f"carries the query parameter {key!r}, which holds a credential"
    return None


def redact_url(url: str) -> str:
    """`url` as it may be printed: user-info removed, credential query values and Hugging
    Face tokens replaced by REDACTED. Malformed URLs are redacted all the same."""
    text = _USERINFO.sub(lambda m: m.group("scheme"), url)
    text = _HF_TOKEN.sub(REDACTED, text)
    head, sep, query = text.partition("?")
    if not sep:
        return text
    query, hash_sep, fragment = query.partition("#")
    parts = []
    for item in query.split("&"):
        key, eq, _ = item.partition("=")
        parts.append(f"{key}={REDACTED}" if eq and _flat(key) in _URL_SECRET_KEYS else item)
    return head + sep + "&".join(parts) + hash_sep + fragment
