"""A kubeconfig to the server and credentials of one context.

lightkube does the kubeconfig semantics: its typed models (`Cluster`, `Context`, `User`,
`UserExec`, converted by msgspec strictly, so `insecure-skip-tls-verify: "false"` or
`token: 12345` is an error naming the field instead of a truthy string or a silently dropped
token), `KubeConfig.get` picks the context, `SingleConfig.abs_file` resolves files relative to
the kubeconfig. Around it, our bounds: the file is read as a regular file of at most
MAX_KUBECONFIG_BYTES, must be UTF-8, and its YAML goes through the manifests' bounded reader
(depth, alias expansion, duplicate keys); token files are read bounded and checked; exec
plugins run through modelplane.kube.plugin; `-data` fields are strict base64 of PEM text.
Every error names the kubeconfig and the field, and never quotes a value."""

from __future__ import annotations

import base64
import binascii
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import msgspec
from lightkube.config.kubeconfig import KubeConfig, SingleConfig
from lightkube.config.models import Cluster, Context, User, UserExec
from lightkube.core.exceptions import ConfigError as LightkubeConfigError

from modelplane.api.yaml_reader import YamlInputError, read_documents
from modelplane.json_types import JsonObject, JsonValue
from modelplane.limits import MAX_KUBECONFIG_BYTES, MAX_PEM_FILE_BYTES, MAX_TOKEN_FILE_BYTES
from modelplane.redact import outside_text, redact_url
from modelplane.urls import header_safe, url_problem

from .errors import ConfigError
from .files import read_bounded, shown
from .plugin import run_plugin
from .proxy import proxy_problem

DEFAULT_TIMEOUT_S = 30.0
_PEM = "-----BEGIN "
# The extension whose value client-go passes an exec plugin as spec.cluster.config.
EXEC_EXTENSION = "client.authentication.k8s.io/exec"
INTERACTIVE_MODES = ("Never", "IfAvailable", "Always")


# The kubeconfig fields lightkube's models do not have, which client-go acts on
# (tools/clientcmd/api/v1/types.go): msgspec would drop them without a word, so a cluster reachable
# only through its proxy would read unreachable. Each is honoured here or refused naming it.
class NamedExtension(msgspec.Struct):
    name: str
    extension: Any = None


class ClusterEntry(Cluster):
    server: str = ""          # not lightkube's default of http://localhost:8080: client-go refuses none
    tls_server_name: str | None = msgspec.field(name="tls-server-name", default=None)
    proxy_url: str | None = msgspec.field(name="proxy-url", default=None)
    disable_compression: bool = msgspec.field(name="disable-compression", default=False)
    extensions: list[NamedExtension] | None = None


class ExecEntry(UserExec):
    provideClusterInfo: bool = False             # noqa: N815 - the kubeconfig's name
    interactiveMode: str | None = None           # noqa: N815 - the kubeconfig's name


class UserEntry(User):
    exec: ExecEntry | None = None
    impersonate: str | None = msgspec.field(name="as", default=None)
    impersonate_uid: str | None = msgspec.field(name="as-uid", default=None)
    impersonate_groups: list[str] | None = msgspec.field(name="as-groups", default=None)
    impersonate_extra: dict[str, list[str]] | None = msgspec.field(name="as-user-extra", default=None)
    extensions: list[NamedExtension] | None = None


_SECTIONS: tuple[tuple[str, str, type[Any]], ...] = (
    ("clusters", "cluster", ClusterEntry), ("contexts", "context", Context), ("users", "user", UserEntry))


@dataclass(frozen=True)
class KubeAccess:
    """Where a cluster's API server is and how to authenticate, checked: `token` is one line of
    visible ASCII (it goes into a header), PEM fields are PEM text."""

    server: str
    token: str | None = None
    ca_pem: str | None = None
    cert_pem: str | None = None
    key_pem: str | None = None
    insecure: bool = False
    source: str = ""                          # the kubeconfig, as messages name it
    tls_server_name: str | None = None        # SNI and the name the certificate is checked for
    proxy: str | None = None                  # the cluster's proxy-url (None: the environment's, Go's rules)
    disable_compression: bool = False

    def __repr__(self) -> str:                # never print credentials
        return f"KubeAccess(server={redact_url(self.server)!r})"

    @property
    def secrets(self) -> tuple[str, ...]:
        """What no message may contain (masked by modelplane.redact.outside_text)."""
        return tuple(s for s in (self.token, self.key_pem, self.proxy) if s)


def _field(section: str, index: int, name: str, key: str, detail: str = "") -> str:
    label = outside_text(name, limit=60)
    return f"{section}[{index}] ({label!r}).{key}{detail}"


def _validation_path(exc: msgspec.ValidationError) -> tuple[str, str]:
    """(path below the entry, what is wrong) from msgspec's message, e.g. "Expected `bool`, got
    `str` - at `$.insecure-skip-tls-verify`" (msgspec never quotes the value)."""
    text = str(exc)
    what, sep, at = text.rpartition(" - at `")
    if not sep:
        return "", text
    return at.rstrip("`").removeprefix("$"), what


def _typed(config: JsonValue, where: str, path: Path) -> KubeConfig:
    if not isinstance(config, dict):
        raise ConfigError(f"kubeconfig {where} is not a kubeconfig (expected a mapping with clusters, contexts "
                          "and users)")
    parsed: dict[str, JsonObject] = {}
    for section, key, model in _SECTIONS:
        entries = config.get(section)
        if entries is None:
            entries = []
        if not isinstance(entries, list):
            raise ConfigError(f"kubeconfig {where}: {section} must be a list of {{name: ..., {key}: ...}}")
        out: JsonObject = {}
        for i, entry in enumerate(entries):
            if not isinstance(entry, dict) or not isinstance(entry.get("name"), str) or not entry["name"]:
                raise ConfigError(f"kubeconfig {where}: {section}[{i}] needs a name (a non-empty string) and a {key}")
            name = entry["name"]
            if name in out:
                raise ConfigError(f"kubeconfig {where}: {section}[{i}]: a second entry named "
                                  f"{outside_text(name, limit=60)!r}; names must be unique")
            body = entry.get(key)
            if body is None and section == "users":
                body = {}
            try:
                out[name] = msgspec.convert(body, model)
            except msgspec.ValidationError as exc:
                at, what = _validation_path(exc)
                raise ConfigError(f"kubeconfig {where}: {_field(section, i, name, key, at)}: {what}") from None
        parsed[section] = out
    current = config.get("current-context")
    if current is not None and not isinstance(current, str):
        raise ConfigError(f"kubeconfig {where}: current-context must be a string")
    return KubeConfig(clusters=parsed["clusters"], contexts=parsed["contexts"], users=parsed["users"],
                      current_context=current or None, fname=path)


def _select(config: KubeConfig, context: str | None, where: str) -> SingleConfig:
    name = context or config.current_context
    if not name:
        raise ConfigError(f"kubeconfig {where} has no current-context; name one")
    shown_name = outside_text(name, limit=60)
    ctx = config.contexts.get(name)
    if ctx is None:
        raise ConfigError(f"kubeconfig {where}: no context named {shown_name!r}")
    if ctx.cluster not in config.clusters:
        raise ConfigError(f"kubeconfig {where}: context {shown_name!r} names the cluster "
                          f"{outside_text(ctx.cluster, limit=60)!r}, which is not in clusters")
    if ctx.user and ctx.user not in config.users:
        raise ConfigError(f"kubeconfig {where}: context {shown_name!r} names the user "
                          f"{outside_text(ctx.user, limit=60)!r}, which is not in users")
    try:
        single = config.get(name)
    except (LightkubeConfigError, KeyError):
        raise ConfigError(f"kubeconfig {where}: context {shown_name!r} cannot be used") from None
    assert single is not None
    return single


def _pem_data(value: str, field: str, where: str) -> str:
    try:
        raw = base64.b64decode(value.replace("\n", "").replace("\r", "").replace(" ", ""), validate=True)
        text = raw.decode("ascii")
    except (binascii.Error, ValueError):
        raise ConfigError(f"kubeconfig {where}: {field} is not base64-encoded PEM text") from None
    if _PEM not in text:
        raise ConfigError(f"kubeconfig {where}: {field} decodes to something that is not PEM text "
                          "(-----BEGIN ...)")
    return text


def _pem_file(single: SingleConfig, path: str, field: str, where: str) -> str:
    full = Path(single.abs_file(Path(path).expanduser()))
    data = read_bounded(full, field, f"kubeconfig {where}", MAX_PEM_FILE_BYTES)
    try:
        text = data.decode("ascii")
    except UnicodeDecodeError:
        raise ConfigError(f"kubeconfig {where}: {field} {shown(full)} is not PEM text") from None
    if _PEM not in text:
        raise ConfigError(f"kubeconfig {where}: {field} {shown(full)} is not PEM text (-----BEGIN ...)")
    return text


def _pem(single: SingleConfig, data: str | None, path: str | None, field: str, where: str) -> str | None:
    if data:
        return _pem_data(data, f"{field}-data", where)
    if path:
        return _pem_file(single, path, field, where)
    return None


def _token_file(single: SingleConfig, path: str, where: str) -> str:
    full = Path(single.abs_file(Path(path).expanduser()))
    data = read_bounded(full, "tokenFile", f"kubeconfig {where}", MAX_TOKEN_FILE_BYTES)
    try:
        token = data.decode("ascii").strip()       # client-go trims the file's whitespace too
    except UnicodeDecodeError:
        raise ConfigError(f"kubeconfig {where}: tokenFile {shown(full)} is not a token (not ASCII text)") from None
    if not header_safe(token):
        raise ConfigError(f"kubeconfig {where}: tokenFile {shown(full)} is not a token (it must hold one line "
                          "of visible characters; this one is empty or holds several lines, spaces or "
                          "control characters)")
    return token


def _credential(single: SingleConfig, where: str, timeout: float, access: KubeAccess) -> str | None:
    user = single.user or User()
    label = f"users[{outside_text(single.context.user or '', limit=60)!r}].user"
    if user.auth_provider is not None:
        raise ConfigError(f"kubeconfig {where}: {label}.auth-provider is not supported (client-go removed the "
                          "gcp and azure providers); use an exec credential plugin")
    if user.username is not None or user.password is not None:
        raise ConfigError(f"kubeconfig {where}: {label}.username/password (basic authentication) is not "
                          "supported: Kubernetes removed it in 1.19; use a token or a client certificate")
    if user.token is not None:
        if not header_safe(user.token):
            raise ConfigError(f"kubeconfig {where}: {label}.token is not a token (it must be one line of visible "
                              "characters; a YAML block scalar, `token: |`, adds a newline at its end: write the "
                              "token on one line)")
        return user.token
    if user.token_file is not None:
        return _token_file(single, user.token_file, where)
    if user.exec is not None:
        provide = isinstance(user.exec, ExecEntry) and user.exec.provideClusterInfo
        token = run_plugin(user.exec, f"kubeconfig {where}", timeout,
                           cluster=_exec_cluster(single, access) if provide else None)
        if not header_safe(token):
            raise ConfigError(f"kubeconfig {where}: the credential plugin printed a status.token that is not one "
                              "line of visible characters")
        return token
    return None


def _server(single: SingleConfig, where: str) -> str:
    name = outside_text(single.context.cluster, limit=60)
    server = single.cluster.server
    if not server:
        # lightkube would dial http://localhost:8080 with the token; client-go refuses
        # (tools/clientcmd/validation.go validateClusterInfo: "no server found for cluster").
        raise ConfigError(f"kubeconfig {where}: cluster {name!r} has no server (clusters[].cluster.server); "
                          "set it to the API server's https://host[:port]")
    return check_server(server, f"kubeconfig {where}: the server of cluster {name!r}")


def check_server(server: str, what: str) -> str:
    """`server` if a request may be sent to it (http(s), a valid host, a port 1..65535, no
    user-info, query or fragment, at most 2048 visible characters); ConfigError naming `what`
    otherwise. Checked before any request: a port above 65535 used to wrap modulo 65536."""
    if len(server) > 2048 or not header_safe(server):
        raise ConfigError(f"{what} is not a usable URL (expected https://host[:port])")
    if redact_url(server) != server or "@" in server.split("://", 1)[-1].split("/", 1)[0]:
        raise ConfigError(f"{what} carries credentials in its URL; put them in users[] instead")
    problem = url_problem(server)
    if problem is not None:
        raise ConfigError(f"{what} {'is ' if problem.startswith('not ') else ''}{problem} (expected "
                          "https://host[:port])")
    parts = urlsplit(server)
    if parts.query or parts.fragment or server.endswith(("?", "#")):
        raise ConfigError(f"{what} has a query or fragment; an API server URL is scheme://host[:port][/path]")
    return server


def _cluster_options(single: SingleConfig, where: str) -> tuple[str | None, str | None, bool]:
    """(tls-server-name, proxy-url, disable-compression) of the selected cluster, checked."""
    cluster = single.cluster
    if not isinstance(cluster, ClusterEntry):
        return None, None, False
    label = f"kubeconfig {where}: clusters[{outside_text(single.context.cluster, limit=60)!r}].cluster"
    name = cluster.tls_server_name or None
    if name is not None and (len(name) > 253 or not header_safe(name) or url_problem(f"https://{name}") is not None
                             or ":" in name):
        raise ConfigError(f"{label}.tls-server-name is not a host name")
    proxy = cluster.proxy_url or None
    if proxy is not None:
        problem = proxy_problem(proxy)
        if problem is not None:
            raise ConfigError(f"{label}.proxy-url {problem}")
    return name, proxy, cluster.disable_compression


def _exec_cluster(single: SingleConfig, access: KubeAccess) -> JsonObject:
    """What client-go gives an exec plugin as ExecCredential spec.cluster when the plugin asks
    for it (`provideClusterInfo: true`; rest/exec.go ConfigToExecCluster, pkg/apis/
    clientauthentication/v1 Cluster): the server, its TLS settings, the proxy and the cluster's
    `client.authentication.k8s.io/exec` extension as `config`."""
    out: JsonObject = {"server": access.server}
    if access.tls_server_name:
        out["tls-server-name"] = access.tls_server_name
    if access.insecure:
        out["insecure-skip-tls-verify"] = True
    if access.ca_pem:
        out["certificate-authority-data"] = base64.b64encode(access.ca_pem.encode()).decode()
    if access.proxy:
        out["proxy-url"] = access.proxy
    if access.disable_compression:
        out["disable-compression"] = True
    cluster = single.cluster
    for ext in (cluster.extensions or []) if isinstance(cluster, ClusterEntry) else []:
        if ext.name == EXEC_EXTENSION:
            out["config"] = ext.extension
    return out


def _refuse_unsupported(user: User, label: str, where: str) -> None:
    """User fields client-go acts on that this client cannot honour: refused, never dropped."""
    if not isinstance(user, UserEntry):
        return
    for field_name, value in (("as", user.impersonate), ("as-uid", user.impersonate_uid),
                              ("as-groups", user.impersonate_groups), ("as-user-extra", user.impersonate_extra)):
        if value:
            raise ConfigError(f"kubeconfig {where}: {label}.{field_name} (impersonation) is not supported: the "
                              "requests would be made as the credential's own user, not the one named; remove it")
    mode = user.exec.interactiveMode if user.exec is not None else None
    if mode is not None and mode not in INTERACTIVE_MODES:
        raise ConfigError(f"kubeconfig {where}: {label}.exec.interactiveMode must be one of "
                          f"{', '.join(INTERACTIVE_MODES)}")
    if mode == "Always":
        # client-go: "exec plugin cannot support interactive mode: standard input is not a terminal".
        raise ConfigError(f"kubeconfig {where}: {label}.exec.interactiveMode is Always, but the credential plugin "
                          "runs without a terminal here; use a plugin that needs no prompt (Never or IfAvailable)")


def load_kubeconfig(path: Path | str, context: str | None = None, timeout: float = DEFAULT_TIMEOUT_S) -> KubeAccess:
    """The checked server and credentials of a kubeconfig's current context (or `context`);
    ConfigError naming the file and the field otherwise. An exec plugin runs within `timeout`."""
    path = Path(path).expanduser()
    where = shown(path)
    data = read_bounded(path, "kubeconfig", "", MAX_KUBECONFIG_BYTES)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise ConfigError(f"kubeconfig {where} is not UTF-8 text (byte 0x{data[exc.start]:02x} on line {line})"
                          ) from None
    try:
        documents = [d for d in read_documents(text) if d.value is not None]
    except YamlInputError as exc:
        at = f" line {exc.line}" if exc.line else ""
        raise ConfigError(f"kubeconfig {where}{at}: {exc.message}") from None
    if len(documents) != 1:
        raise ConfigError(f"kubeconfig {where} holds {len(documents)} YAML documents; a kubeconfig is one")
    config = _typed(documents[0].value, where, path)
    single = _select(config, context, where)
    server = _server(single, where)
    user = single.user or User()
    _refuse_unsupported(user, f"users[{outside_text(single.context.user or '', limit=60)!r}].user", where)
    tls_name, proxy, no_compression = _cluster_options(single, where)
    ca = _pem(single, single.cluster.certificate_auth_data, single.cluster.certificate_auth,
              "certificate-authority", where)
    if ca is not None and single.cluster.insecure:
        # client-go transport/transport.go TLSConfigFor: "specifying a root certificates file
        # with the insecure flag is not allowed" (kubectl refuses the pair).
        raise ConfigError(f"kubeconfig {where}: cluster {outside_text(single.context.cluster, limit=60)!r} sets "
                          "both insecure-skip-tls-verify: true and a certificate-authority, which would turn "
                          "verification off; remove insecure-skip-tls-verify")
    cert = _pem(single, user.client_cert_data, user.client_cert, "client-certificate", where)
    key = _pem(single, user.client_key_data, user.client_key, "client-key", where)
    if (cert is None) != (key is None):
        raise ConfigError(f"kubeconfig {where}: a client certificate needs its key, and a key its certificate")
    access = KubeAccess(server, None, ca, cert, key, single.cluster.insecure, where, tls_name, proxy,
                        no_compression)
    token = _credential(single, where, timeout, access)
    return replace(access, token=token)
