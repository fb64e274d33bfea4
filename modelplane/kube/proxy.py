"""Which proxy a request to an API server goes through, as client-go decides it.

* A kubeconfig cluster's `proxy-url` applies to every request to it (client-go
  tools/clientcmd/client_config.go: `clientConfig.Proxy = http.ProxyURL(u)`), loopback
  servers included; its scheme is http, https or socks5 (tools/clientcmd/helpers.go
  `parseProxyURL`). We speak http and https proxies; socks5 is refused naming the field.
* Otherwise the environment's, by Go's rules (client-go transport/cache.go uses
  `http.ProxyFromEnvironment`, which is golang.org/x/net http/httpproxy): HTTPS_PROXY for an
  https server and HTTP_PROXY for an http one (upper case first, then lower), a value without
  a scheme taken as http://; never for `localhost` or a loopback address; not for a host
  NO_PROXY names (`*`, an IP, a CIDR, a domain and its subdomains, each with an optional port);
  HTTP_PROXY is ignored under CGI (REQUEST_METHOD set).

httpx's own reading of the environment (trust_env) does proxy loopback servers and does not
know CIDRs, so the client is built with trust_env off and the proxy this module picks.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Mapping
from urllib.parse import urlsplit

from modelplane.urls import is_loopback, url_problem

PROXY_SCHEMES = ("http", "https")           # what httpx speaks without an extra package
_DEFAULT_PORTS = {"http": "80", "https": "443"}


def proxy_problem(url: str) -> str | None:
    """Why a proxy URL cannot be used, naming no credential; None when it can."""
    scheme = url.split("://", 1)[0].lower() if "://" in url else ""
    if scheme in ("socks5", "socks5h"):
        return "is a socks5 proxy, which this client does not speak; use an http or https proxy"
    if scheme not in PROXY_SCHEMES:
        return "must be an http or https URL (client-go also takes socks5, which this client does not speak)"
    return url_problem(url)


def _env(environ: Mapping[str, str], *names: str) -> tuple[str, str]:
    """(the first of `names` set, its value), or ("", "")."""
    return next(((n, environ[n]) for n in names if environ.get(n)), ("", ""))


def _host_port(url: str) -> tuple[str, str]:
    parts = urlsplit(url)
    host = (parts.hostname or "").lower().rstrip(".")
    try:
        port = str(parts.port) if parts.port is not None else _DEFAULT_PORTS.get(parts.scheme, "")
    except ValueError:
        port = ""
    return host, port


def _bypassed(host: str, port: str, no_proxy: str) -> bool:
    try:
        ip = ipaddress.ip_address(host)
    except ValueError:
        ip = None
    for raw in no_proxy.split(","):
        entry = raw.strip().lower()
        if not entry:
            continue
        if entry == "*":
            return True
        if "/" in entry:
            try:
                if ip is not None and ip in ipaddress.ip_network(entry, strict=False):
                    return True
            except ValueError:
                pass
            continue
        name, want = entry, ""
        if entry.startswith("["):
            name, _, rest = entry[1:].partition("]")
            want = rest.removeprefix(":")
        elif entry.count(":") == 1:
            name, want = entry.split(":")
        if want and want != port:
            continue
        try:
            listed = ipaddress.ip_address(name)
        except ValueError:
            listed = None
        if listed is not None:                    # an IP entry matches that IP only
            if ip == listed:
                return True
            continue
        # foo.com: itself and its subdomains; .foo.com and *.foo.com: its subdomains only.
        exact = not name.startswith((".", "*."))
        domain = name.removeprefix("*").lstrip(".")
        if (exact and host == domain) or host.endswith("." + domain):
            return True
    return False


def environment_proxy(server: str, environ: Mapping[str, str]) -> tuple[str, str] | None:
    """(the variable, the proxy) Go's ProxyFromEnvironment picks for requests to `server`, or None."""
    host, port = _host_port(server)
    if not host or is_loopback(host):
        return None
    scheme = server.split("://", 1)[0].lower()
    if scheme == "https":
        variable, proxy = _env(environ, "HTTPS_PROXY", "https_proxy")
    else:
        if environ.get("REQUEST_METHOD"):
            return None
        variable, proxy = _env(environ, "HTTP_PROXY", "http_proxy")
    if not proxy or _bypassed(host, port, _env(environ, "NO_PROXY", "no_proxy")[1]):
        return None
    return variable, proxy if "://" in proxy else f"http://{proxy}"


__all__ = ["PROXY_SCHEMES", "environment_proxy", "proxy_problem"]
