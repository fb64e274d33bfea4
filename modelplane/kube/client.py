"""Requests to one API server, every answer bounded: in time (a deadline for all the requests
of one read, checked between every chunk of every body, so a server that drips a byte at a
time cannot stretch it), in bytes (MAX_ANSWER_BYTES per response after decompression: gzip
and deflate are inflated here with a bound, never by the HTTP library; MAX_CLUSTER_READ_BYTES
for everything one client reads), and in depth and type (msgspec decodes straight into the
shapes the caller names). Redirects are never followed. The HTTP stack is lightkube's (httpx2,
with lightkube's BearerAuth); the kubeconfig side is modelplane.kube.config.
"""

from __future__ import annotations

import functools
import os
import sys
import threading
import time
import zlib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any, NoReturn

import httpx2
import msgspec
from lightkube.config.client_adapter import BearerAuth

from modelplane.json_types import JsonObject, JsonValue
from modelplane.limits import MAX_ANSWER_BYTES, MAX_CLUSTER_READ_BYTES
from modelplane.redact import outside_text, redact_url

from . import tls
from .config import DEFAULT_TIMEOUT_S, KubeAccess, check_server, load_kubeconfig
from .errors import BadAnswer, ConfigError, KubeError, NoAnswer
from .proxy import environment_proxy, proxy_problem

PAGE_SIZE = 500                    # objects per list request (the API server pages with `continue`)
MAX_CONTINUE_CHARS = 8192          # a `continue` token is ~100 characters
_TLS_REFUSALS = ("CERTIFICATE_VERIFY_FAILED", "WRONG_VERSION_NUMBER", "certificate verify failed",
                 "hostname mismatch", "IP address mismatch")


class _ListMeta(msgspec.Struct):
    continue_: str | None = msgspec.field(name="continue", default=None)


@functools.cache
def _list_of(item: Any) -> Any:
    return msgspec.defstruct(f"{getattr(item, '__name__', 'Any')}List",
                             [("items", list[item] | None, None), ("metadata", _ListMeta | None, None)])


@dataclass(frozen=True)
class Answer:
    """An API server's answer, its body read within the bounds."""

    status_code: int
    content: bytes | bytearray
    what: str                      # "GET /api/v1/nodes on https://...", for messages

    @property
    def text(self) -> str:
        return self.content.decode("utf-8", errors="replace")

    def json(self) -> JsonValue:
        return decode(self.content, Any, self.what)


def decode(content: bytes | bytearray, shape: Any, what: str) -> JsonValue:
    """`content` decoded as JSON of `shape` (a msgspec type); BadAnswer naming the first field
    of the wrong type, a depth past the interpreter's recursion limit, or text that is not JSON
    (NaN and Infinity are not JSON). Never quotes the content."""
    try:
        return msgspec.json.decode(content, type=shape)
    except RecursionError:
        raise BadAnswer(f"{what}: the answer nests arrays or objects deeper than {sys.getrecursionlimit()} levels; "
                        "it was not read") from None
    except msgspec.ValidationError as exc:
        raise BadAnswer(f"{what}: the answer does not have the shape Kubernetes gives it "
                        f"({outside_text(exc, limit=200)})") from None
    except msgspec.DecodeError:
        raise BadAnswer(f"{what}: the answer is not JSON") from None


class KubeClient:
    """Requests to one API server. Every failure raises one of modelplane.kube.errors
    (ConfigError, NoAnswer, BadAnswer), or `error` when a subclass sets it (the sim's SimError).
    `cancel`, when set, makes any read in progress stop at its next chunk."""

    error: type[Exception] | None = None

    def __init__(self, server: str, token: str | None = None, ca_file: Path | None = None,
                 timeout: float = DEFAULT_TIMEOUT_S, *, access: KubeAccess | None = None,
                 cancel: threading.Event | None = None) -> None:
        if access is None:
            ca = ca_file.read_text() if ca_file else None
            access = KubeAccess(server, token, ca, insecure=ca_file is None)
        self.access = access
        self.server = redact_url(access.server)
        self.timeout = timeout
        self.cancel = cancel
        self.spent = 0                 # bytes read so far, decompressed
        self._spending = threading.Lock()   # requests may run on several threads at once
        https = access.server.startswith("https://")
        try:
            # Nothing is sent to a server whose URL would connect elsewhere (a port past 65535).
            check_server(access.server, f"the server {self.server}")
            proxy = self._proxy(access)
            verify = (tls.context(f"kubeconfig {access.source or self.server}", access.ca_pem, access.cert_pem,
                                  access.key_pem, insecure=access.insecure) if https else tls.unused_context())
        except ConfigError as exc:
            self._raise(ConfigError, str(exc))
        # tls-server-name: the name sent (SNI) and the one the certificate is checked for.
        self._extensions = {"sni_hostname": access.tls_server_name} if https and access.tls_server_name else None
        auth = BearerAuth(access.token) if access.token else None
        self.http = httpx2.Client(base_url=access.server, verify=verify, auth=auth, timeout=timeout,
                                  follow_redirects=False, trust_env=False, proxy=proxy,
                                  headers={"Accept": "application/json", "Accept-Encoding":
                                           "identity" if access.disable_compression else "gzip, deflate"})

    @staticmethod
    def _proxy(access: KubeAccess) -> str | None:
        """The kubeconfig's proxy-url, else the environment's by Go's rules (modelplane.kube.proxy)."""
        if access.proxy:
            return access.proxy
        found = environment_proxy(access.server, os.environ)
        if found is None:
            return None
        variable, proxy = found
        problem = proxy_problem(proxy)
        if problem is not None:
            raise ConfigError(f"the proxy in the environment variable {variable} {problem}")
        return proxy

    @classmethod
    def from_kubeconfig(cls, path: Path | str, context: str | None = None, timeout: float = DEFAULT_TIMEOUT_S,
                        *, cancel: threading.Event | None = None) -> KubeClient:
        """A client for the current (or named) context of a kubeconfig."""
        try:
            access = load_kubeconfig(path, context, timeout)
        except ConfigError as exc:
            if cls.error is not None:
                raise cls.error(str(exc)) from None
            raise
        return cls(access.server, timeout=timeout, access=access, cancel=cancel)

    def _raise(self, kind: type[KubeError], message: str) -> NoReturn:
        raise (self.error or kind)(message) from None

    def close(self) -> None:
        self.http.close()

    def __enter__(self) -> KubeClient:
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self.close()

    # ------------------------------------------------------------------ requests

    def _outside(self, text: object, limit: int = 200) -> str:
        return outside_text(text, limit=limit, secrets=self.access.secrets)

    def request(self, method: str, path: str, body: JsonObject | None = None,
                params: Mapping[str, str] | None = None, timeout: float | None = None, *,
                deadline: float | None = None, limit: int | None = None,
                headers: Mapping[str, str] | None = None) -> Answer:
        """One request; its whole answer read before `deadline` (time.monotonic()), or within
        `timeout` (default: the client's), and at most `limit` bytes after decompression
        (default and ceiling: MAX_ANSWER_BYTES). `headers` add to or replace the client's
        (`Accept: text/plain` for a pod's /metrics through the API server's proxy)."""
        if deadline is None:
            deadline = time.monotonic() + (self.timeout if timeout is None else timeout)
        what = f"{method} {self._outside(path, 120)} on {self.server}"
        left = deadline - time.monotonic()
        if left <= 0:
            self._raise(NoAnswer, f"the API server at {self.server} did not answer {method} "
                                  f"{self._outside(path, 120)} in time")
        try:
            request = self.http.build_request(method, path, json=body, params=params, timeout=httpx2.Timeout(left),
                                              headers=dict(headers) if headers else None,
                                              extensions=self._extensions)
            response = self.http.send(request, stream=True)
            try:
                content = self._body(response, what, deadline, limit)
            finally:
                response.close()
        except httpx2.TimeoutException:
            self._raise(NoAnswer, f"the API server at {self.server} did not answer {method} "
                                  f"{self._outside(path, 120)} in time")
        except httpx2.HTTPError as exc:
            text = self._outside(f"{type(exc).__name__}: {exc}")
            if isinstance(exc, httpx2.ConnectError) and any(r in str(exc) for r in _TLS_REFUSALS):
                self._raise(BadAnswer, f"the API server at {self.server} could not be trusted: {text} (check the "
                                       "kubeconfig's certificate-authority)")
            self._raise(NoAnswer, f"the API server at {self.server} did not answer {method} "
                                  f"{self._outside(path, 120)}: {text}")
        return Answer(response.status_code, content, what)

    def _body(self, response: httpx2.Response, what: str, deadline: float, bound: int | None = None) -> bytearray:
        encoding = response.headers.get("content-encoding", "identity").strip().lower()
        if encoding in ("", "identity"):
            inflate = None
        elif encoding in ("gzip", "x-gzip"):
            inflate = zlib.decompressobj(16 + zlib.MAX_WBITS)
        elif encoding == "deflate":
            inflate = zlib.decompressobj()
        else:
            self._raise(BadAnswer, f"{what}: the answer is encoded as {self._outside(encoding, 40)!r}, which was "
                                   "not asked for")
        answer = min(MAX_ANSWER_BYTES, bound if bound is not None else MAX_ANSWER_BYTES)
        limit = min(answer, MAX_CLUSTER_READ_BYTES - self.spent)
        too_large = (f"{what}: the answer is larger than {limit} bytes" if limit == answer else
                     f"{what}: the answers of this cluster together exceed {MAX_CLUSTER_READ_BYTES} bytes")
        out = bytearray()
        try:
            for chunk in response.iter_raw():      # each network read as it comes: no chunker waiting for 64 KiB
                if self.cancel is not None and self.cancel.is_set():
                    self._raise(NoAnswer, f"{what}: the read was abandoned at its deadline")
                if time.monotonic() > deadline:
                    self._raise(NoAnswer, f"{what}: the answer did not finish in time")
                if inflate is None:
                    out += chunk
                else:
                    pending = chunk
                    while pending and len(out) <= limit:
                        out += inflate.decompress(pending, limit + 1 - len(out))
                        pending = inflate.unconsumed_tail
                if len(out) > limit:
                    self._raise(BadAnswer, too_large)
            if inflate is not None:
                out += inflate.flush()
        except zlib.error:
            self._raise(BadAnswer, f"{what}: the answer's {encoding} encoding is corrupt")
        if len(out) > limit:
            self._raise(BadAnswer, too_large)
        with self._spending:
            self.spent += len(out)
        return out          # a bytearray: no second copy of a large answer (msgspec reads it as is)

    def _check(self, answer: Answer) -> None:
        code = answer.status_code
        if code == 200:
            return
        detail = self._status_message(answer)
        if 300 <= code < 400:
            self._raise(BadAnswer, f"{answer.what}: redirected (HTTP {code}); redirects are not followed")
        if code in (401, 403):
            self._raise(BadAnswer, f"{answer.what}: HTTP {code}, the credentials were refused{detail}")
        if code >= 500:
            self._raise(NoAnswer, f"{answer.what}: HTTP {code}, the API server is failing{detail}")
        self._raise(BadAnswer, f"{answer.what}: HTTP {code}{detail}")

    def _status_message(self, answer: Answer) -> str:
        """The Kubernetes Status message of an error answer, or the start of its text, as outside text."""
        try:
            status = msgspec.json.decode(answer.content[:65536])
        except (msgspec.DecodeError, RecursionError):
            status = None
        message = status.get("message") if isinstance(status, dict) else None
        text = self._outside(message if isinstance(message, str) else answer.content[:1024].decode(
            "utf-8", errors="replace"))
        return f": {text}" if text else ""

    def get(self, path: str, params: Mapping[str, str] | None = None, timeout: float | None = None, *,
            deadline: float | None = None) -> JsonObject:
        """The decoded answer of a GET, a JSON object."""
        body = self._get(path, params, timeout, deadline, Any)
        if not isinstance(body, dict):
            self._raise(BadAnswer, f"GET {self._outside(path, 120)} on {self.server}: the answer is not a JSON object")
        return body

    def _get(self, path: str, params: Mapping[str, str] | None, timeout: float | None, deadline: float | None,
             shape: Any) -> Any:
        answer = self.request("GET", path, params=params, timeout=timeout, deadline=deadline)
        self._check(answer)
        try:
            return decode(answer.content, shape, answer.what)
        except BadAnswer as exc:
            self._raise(BadAnswer, str(exc))

    def items(self, path: str, params: Mapping[str, str] | None = None) -> list[JsonObject]:
        return self.list_all(path, params)

    def list_all(self, path: str, params: Mapping[str, str] | None = None, deadline: float | None = None,
                 shape: Any = Any) -> list[JsonObject]:
        """Every object of a list, page by page, before `deadline` (default: the client's
        timeout from now); each item decoded as `shape` (a msgspec Struct: only its fields are
        kept, and a field of the wrong type is a BadAnswer), returned as plain JSON objects."""
        if deadline is None:
            deadline = time.monotonic() + self.timeout
        out: list[Any] = []
        query = {**(params or {}), "limit": str(PAGE_SIZE)}
        while True:
            page = self._get(path, query, None, deadline, _list_of(shape))
            items = page.items or []
            if shape is not Any:
                items = msgspec.to_builtins(items)
            elif not all(isinstance(i, dict) for i in items):
                self._raise(BadAnswer, f"GET {self._outside(path, 120)} on {self.server}: an item of the list is "
                                       "not a JSON object")
            out.extend(items)
            token = page.metadata.continue_ if page.metadata is not None else None
            if not token:
                return out
            if len(token) > MAX_CONTINUE_CHARS:
                self._raise(BadAnswer, f"GET {self._outside(path, 120)} on {self.server}: the list's continue "
                                       f"token is longer than {MAX_CONTINUE_CHARS} characters")
            query["continue"] = token
