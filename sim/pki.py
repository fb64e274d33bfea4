"""Key material for one simulated control plane, made with the openssl command (Debian's
`openssl`, present on the project's machines): the service-account key pair, a bearer token,
and a self-signed serving certificate for webhooks that the API server calls on 127.0.0.1."""

from __future__ import annotations

import secrets
import shutil
import subprocess
from pathlib import Path

from .errors import SimError


def _openssl(args: list[str], cwd: Path) -> None:
    exe = shutil.which("openssl")
    if exe is None:
        raise SimError("the `openssl` command is not on PATH; install it (`apt-get install openssl`) "
                       "so the sim can make its service-account key and webhook certificates")
    proc = subprocess.run([exe, *args], cwd=cwd, capture_output=True, text=True, timeout=60, check=False)
    if proc.returncode != 0:
        raise SimError(f"`openssl {args[0]}` failed in {cwd}: {proc.stderr.strip()[-300:]}")


def service_account_keys(directory: Path) -> tuple[Path, Path]:
    """(private key, public key) that sign and verify service-account tokens."""
    key, pub = directory / "sa.key", directory / "sa.pub"
    _openssl(["genrsa", "-out", key.name, "2048"], directory)
    _openssl(["rsa", "-in", key.name, "-pubout", "-out", pub.name], directory)
    key.chmod(0o600)
    return key, pub


def serving_cert(directory: Path, common_name: str, dns_name: str | None = None) -> tuple[Path, Path]:
    """(tls.crt, tls.key): self-signed, valid for IP 127.0.0.1 (or, given `dns_name`, for that
    name only), for a webhook server on loopback."""
    directory.mkdir(parents=True, exist_ok=True)
    san = f"DNS:{dns_name}" if dns_name else "IP:127.0.0.1"
    _openssl(["req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "tls.key", "-out", "tls.crt",
              "-days", "3650", "-subj", f"/CN={common_name}", "-addext", f"subjectAltName={san}"], directory)
    (directory / "tls.key").chmod(0o600)
    return directory / "tls.crt", directory / "tls.key"


def new_token() -> str:
    return secrets.token_hex(24)
