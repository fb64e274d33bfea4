"""TLS for one API server, from PEM text the kubeconfig loader has already checked.

Not lightkube's `verify_cluster`: it decodes `-data` fields with non-validating base64 (so
`certificate-authority-data: "%%%%"` becomes an empty CA and a confusing error), reads CA and
key files without a bound, and loads a client key without a passphrase callback, which makes
OpenSSL prompt `Enter PEM pass phrase:` on the terminal in the middle of a plan. Here a
context is built only for https servers (a plain-http server costs no context at all: 300
clusters used to cost 11.5 s of CA-store loading), the default one is built once per process,
and an encrypted key is refused before OpenSSL sees it."""

from __future__ import annotations

import functools
import os
import ssl
import tempfile
from pathlib import Path

from .errors import ConfigError

_ENCRYPTED_MARKERS = ("ENCRYPTED PRIVATE KEY", "Proc-Type: 4,ENCRYPTED")


def _no_passphrase() -> bytes:
    # OpenSSL calls this instead of prompting; no key we accept needs it.
    raise ConfigError("the client key is encrypted")


@functools.cache
def default_context() -> ssl.SSLContext:
    """The system trust store, loaded once per process (contexts are safe to share)."""
    return ssl.create_default_context()


@functools.cache
def unused_context() -> ssl.SSLContext:
    """What an http:// client is given: no CA store is loaded for a connection that has no TLS."""
    return ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)


def encrypted(key_pem: str) -> bool:
    return any(marker in key_pem for marker in _ENCRYPTED_MARKERS)


def context(where: str, ca_pem: str | None, cert_pem: str | None, key_pem: str | None, *,
            insecure: bool) -> ssl.SSLContext:
    """The SSL context for an https server; ConfigError (never an OpenSSL prompt) when the CA
    or the client certificate cannot be used."""
    try:
        if insecure:
            ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
            ctx.check_hostname = False
            ctx.verify_mode = ssl.CERT_NONE
        elif ca_pem is not None:
            ctx = ssl.create_default_context(cadata=ca_pem)
        elif cert_pem is None:
            return default_context()
        else:
            ctx = ssl.create_default_context()
    except (ssl.SSLError, ValueError):
        raise ConfigError(f"{where}: its certificate authority is not a usable PEM certificate") from None
    if cert_pem is not None and key_pem is not None:
        if encrypted(key_pem):
            raise ConfigError(f"{where}: the client key is encrypted (passphrase-protected); a kubeconfig key "
                              "must be usable without a prompt")
        _load_client_certificate(ctx, where, cert_pem, key_pem)
    return ctx


def _load_client_certificate(ctx: ssl.SSLContext, where: str, cert_pem: str, key_pem: str) -> None:
    # The ssl module loads a certificate chain only from files: a private directory that lives
    # for this call only.
    with tempfile.TemporaryDirectory(prefix="modelplane-kube-") as tmp:
        cert, key = Path(tmp) / "client.crt", Path(tmp) / "client.key"
        cert.write_text(cert_pem)
        fd = os.open(key, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as out:
            out.write(key_pem)
        try:
            ctx.load_cert_chain(str(cert), str(key), password=_no_passphrase)
        except ConfigError:
            raise ConfigError(f"{where}: the client key is encrypted (passphrase-protected); a kubeconfig key "
                              "must be usable without a prompt") from None
        except (ssl.SSLError, ValueError, OSError):
            raise ConfigError(f"{where}: its client certificate and key are not a usable PEM pair") from None
