"""What makes a URL one we may send a request to, and a value one we may put in a header: the
rules `split` (its service URL, its API key) and the Kubernetes client (a kubeconfig's server, a
Prometheus url, a token) share, checked before any request. httpx accepts a port of 70000 and
an empty host; a socket then connects somewhere else or nowhere (a port above 65535 wrapped
modulo 65536 and delivered a bearer token to another local port)."""

from __future__ import annotations

import ipaddress
import re

import httpx

from modelplane.redact import outside_text, redact_url

# DNS names as httpx encodes them (IDNA).
_HOST = re.compile(r"[A-Za-z0-9_](?:[A-Za-z0-9_.-]*[A-Za-z0-9_])?")
MAX_PORT = 65535


def url_problem(url: str) -> str | None:
    """Why `url` cannot be requested (scheme http or https, a valid host, a port 1..65535), in
    words that never quote its user-info; None when it can."""
    if not url.startswith(("http://", "https://")):
        return "not an http(s) URL"
    try:
        parsed = httpx.URL(url)
    except (httpx.InvalidURL, ValueError) as e:
        return f"not a valid URL ({outside_text(redact_url(str(e)), 200)})"
    host = parsed.raw_host.decode("ascii", "replace")
    if not host:
        return "has no host"
    if not _HOST.fullmatch(host) and not is_ip(host):
        return "has an invalid host name"
    if parsed.port is not None and not 0 < parsed.port <= MAX_PORT:
        return f"has an invalid port ({parsed.port}; a port is 1..{MAX_PORT})"
    return None


def header_safe(value: str) -> bool:
    """Visible ASCII only: what an HTTP header value (`Bearer <token>`) may carry."""
    return bool(value) and all("!" <= c <= "~" for c in value)


def is_ip(host: str) -> bool:
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return False
    return True


def is_loopback(host: str) -> bool:
    """localhost, or an address of the loopback network (127.0.0.0/8, ::1): Go's net/http
    never sends a request to one through a proxy from the environment."""
    if host.lower().rstrip(".") == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


__all__ = ["MAX_PORT", "header_safe", "is_ip", "is_loopback", "url_problem"]
