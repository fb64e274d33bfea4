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


# ---------------------------------------------------------------- the outside-text boundary
#
# Everything that came from outside the program (an API server's body or error, a pod's
# message, a credential plugin's output, a kubeconfig value, a health record read back from
# a file or the state) passes through `outside_text` before it is printed or stored: what a
# terminal would interpret is removed, the length is capped, and credentials are masked.

MAX_OUTSIDE_TEXT = 300           # characters of outside text in one message
# Terminal escape sequences (CSI ... final byte, OSC ... BEL/ST, and two-byte ESC X): removed whole.
_ESCAPES = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)?|\x1b[@-_]?|\x9b[0-?]*[ -/]*[@-~]")
# C0 and C1 control characters, DEL, line and paragraph separators, and the invisible
# formatting characters that reorder or hide text (bidi overrides, zero-width characters).
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\u061c\u200b-\u200f\u2028-\u202e\u2060-\u2069\ufeff]+")
# A header that carries a credential, echoed by a server ("Authorization: Bearer ..."), in
# HTTP, JSON or Python-repr form: its value goes, to the end of the line.
_HEADERS = re.compile(r"(?i)(?P<name>\b(?:proxy-)?authorization|\bcookie|\bset-cookie|\bx-api-key|\bapi-key|"
                      r"\bx-auth-token)(?P<sep>[\"']?\s*+[:=]\s*+)(?!REDACTED(?:\s|$))[^\r\n]*")
# An authentication scheme followed by its credential, anywhere.
_SCHEMES = re.compile(r"(?i)\b(?P<scheme>bearer|basic|negotiate)(?P<sep>\s+)[A-Za-z0-9._~+/=-]{4,}")
# key=value or "key": "value" where the key names a credential (token, password, secret...).
# A YAML block-scalar indicator (`token: |`, `key: >-`) is not the value: the value is the indented
# line after it (masked), and our own messages that name such a block stay readable.
_SECRET_PAIRS = re.compile(r"(?i)(?P<key>[\"']?[\w.-]*(?:token|password|passwd|secret|api[-_]?key|credential)"
                           r"[\"']?)(?P<sep>\s*[:=]\s*[\"']?)"
                           r"(?P<value>[|>][-+]?[ \t]*\r?\n[ \t]+[^\s\"',;&}\]]+"
                           r"|(?![|>][-+]?(?:[\s`'\"]|$))[^\s\"',;&}\]]+)")
_BLANKS = re.compile(r"\s{2,}")


def outside_text(value: object, limit: int = MAX_OUTSIDE_TEXT, secrets: Sequence[str] = ()) -> str:
    """`value` (text from outside) as it may be printed or stored: `secrets` (credentials we
    hold, e.g. the token we sent) and every header or field that carries a credential
    masked, URL user-info removed, control characters and terminal escapes stripped, runs
    of blanks collapsed, and at most `limit` characters (cut with an ellipsis). Never raises;
    idempotent."""
    text = value if isinstance(value, str) else _text_of(value)
    text = text[:limit * 8 + 64]                 # bound the work before any pattern runs
    for secret in secrets:
        if secret and len(secret) >= 4:
            text = text.replace(secret, REDACTED)
    text = _HEADERS.sub(lambda m: f"{m.group('name')}{m.group('sep')}{REDACTED}", text)
    text = _SCHEMES.sub(lambda m: f"{m.group('scheme')}{m.group('sep')}{REDACTED}", text)
    text = _SECRET_PAIRS.sub(lambda m: m.group("key") + m.group("sep") + REDACTED, text)
    text = _USERINFO.sub(lambda m: m.group("scheme"), text)
    text = _HF_TOKEN.sub(REDACTED, text)
    text = _ESCAPES.sub("", text)
    text = _CONTROL.sub(" ", text)
    text = _BLANKS.sub(" ", text).strip()
    if len(text) > limit:
        text = text[:max(limit - 1, 0)].rstrip() + "…"
    return text


def _text_of(value: object) -> str:
    try:
        return str(value)
    except Exception:  # noqa: BLE001 - any object's __str__ may fail; the boundary never raises
        return f"<{type(value).__name__}>"
