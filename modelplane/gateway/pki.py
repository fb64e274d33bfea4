"""Certificates for the data path, made with the `cryptography` library (no openssl, no
hand-written ASN.1): the fleet's hop CA, the server certificate of each workload gateway,
the control plane's client certificate, and a self-signed edge certificate on request.

Pure: returns PEM text. Private keys are EC P-256 (small, fast handshakes); whoever holds
a `KeyPair` holds a secret: the Pulumi provider keeps `key_pem` a Pulumi secret, the local
stack writes it 0600 into its own directory, and nothing here prints or logs it.
"""
from __future__ import annotations

import datetime
import ipaddress
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

Usage = Literal["server", "client"]
CA_DAYS = 3650
LEAF_DAYS = 825      # the longest leaf lifetime clients such as Apple's still accept
BACKDATE = datetime.timedelta(minutes=5)   # tolerate clocks a little behind


@dataclass(frozen=True)
class KeyPair:
    cert_pem: str
    key_pem: str = field(repr=False)   # a secret: never in a repr, a log or an error

    def __str__(self) -> str:
        return f"KeyPair({subject_of(self.cert_pem)})"


def _key() -> ec.EllipticCurvePrivateKey:
    return ec.generate_private_key(ec.SECP256R1())


def _key_pem(key: ec.EllipticCurvePrivateKey) -> str:
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             serialization.NoEncryption()).decode()


def _name(common_name: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.ORGANIZATION_NAME, "modelplane"),
                      x509.NameAttribute(NameOID.COMMON_NAME, common_name[:64])])


def _sans(names: Sequence[str]) -> list[x509.GeneralName]:
    out: list[x509.GeneralName] = []
    for n in names:
        try:
            out.append(x509.IPAddress(ipaddress.ip_address(n)))
        except ValueError:
            out.append(x509.DNSName(n))
    return out


def _builder(subject: x509.Name, issuer: x509.Name, key: ec.EllipticCurvePrivateKey, days: int,
             now: datetime.datetime | None) -> x509.CertificateBuilder:
    start = (now or datetime.datetime.now(datetime.UTC)) - BACKDATE
    return (x509.CertificateBuilder().subject_name(subject).issuer_name(issuer).public_key(key.public_key())
            .serial_number(x509.random_serial_number()).not_valid_before(start)
            .not_valid_after(start + datetime.timedelta(days=days)))


def new_ca(common_name: str = "modelplane hop CA", days: int = CA_DAYS,
           now: datetime.datetime | None = None) -> KeyPair:
    """A CA that only signs the data path's certificates (path length 0)."""
    key = _key()
    name = _name(common_name)
    cert = (_builder(name, name, key, days, now)
            .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
            .add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=True, crl_sign=True,
                                         content_commitment=False, key_encipherment=False, data_encipherment=False,
                                         key_agreement=False, encipher_only=False, decipher_only=False), critical=True)
            .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
            .sign(key, hashes.SHA256()))
    return KeyPair(cert.public_bytes(serialization.Encoding.PEM).decode(), _key_pem(key))


def issue(ca: KeyPair, common_name: str, usage: Usage, names: Sequence[str] = (), days: int = LEAF_DAYS,
          now: datetime.datetime | None = None) -> KeyPair:
    """A leaf certificate signed by `ca`: `server` (names become its SANs, which clients
    verify) or `client` (what a workload gateway demands of the control plane)."""
    ca_cert = x509.load_pem_x509_certificate(ca.cert_pem.encode())
    ca_key = serialization.load_pem_private_key(ca.key_pem.encode(), password=None)
    if not isinstance(ca_key, ec.EllipticCurvePrivateKey):
        raise ValueError("the CA's key is not an EC key made by modelplane.gateway.pki")
    key = _key()
    eku = ExtendedKeyUsageOID.SERVER_AUTH if usage == "server" else ExtendedKeyUsageOID.CLIENT_AUTH
    builder = (_builder(_name(common_name), ca_cert.subject, key, days, now)
               .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
               .add_extension(x509.KeyUsage(digital_signature=True, key_encipherment=False, key_cert_sign=False,
                                            crl_sign=False, content_commitment=False, data_encipherment=False,
                                            key_agreement=False, encipher_only=False, decipher_only=False),
                              critical=True)
               .add_extension(x509.ExtendedKeyUsage([eku]), critical=False)
               .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()),
                              critical=False))
    sans = list(names) or ([common_name] if usage == "server" else [])
    if sans:
        builder = builder.add_extension(x509.SubjectAlternativeName(_sans(sans)), critical=False)
    cert = builder.sign(ca_key, hashes.SHA256())
    return KeyPair(cert.public_bytes(serialization.Encoding.PEM).decode(), _key_pem(key))


def self_signed(names: Sequence[str], days: int = LEAF_DAYS, now: datetime.datetime | None = None) -> KeyPair:
    """An edge certificate nobody vouches for (kind, sim, render and demo, on request):
    clients must be told to trust this very certificate."""
    key = _key()
    name = _name(f"{names[0]} (self-signed)" if names else "modelplane (self-signed)")
    cert = (_builder(name, name, key, days, now)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
            .add_extension(x509.SubjectAlternativeName(_sans(list(names) or ["localhost"])), critical=False)
            .sign(key, hashes.SHA256()))
    return KeyPair(cert.public_bytes(serialization.Encoding.PEM).decode(), _key_pem(key))


def subject_of(cert_pem: str) -> str:
    return x509.load_pem_x509_certificate(cert_pem.encode()).subject.rfc4514_string()


def sans_of(cert_pem: str) -> list[str]:
    cert = x509.load_pem_x509_certificate(cert_pem.encode())
    try:
        ext = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    except x509.ExtensionNotFound:
        return []
    return [str(v) for v in ext.get_values_for_type(x509.DNSName)] + \
        [str(v) for v in ext.get_values_for_type(x509.IPAddress)]
