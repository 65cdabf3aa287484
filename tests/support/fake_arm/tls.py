"""A throwaway TLS certificate for a loopback fake: azure-core sends bearer tokens over https only
(BearerTokenCredentialPolicy raises for an http URL: Azure/azure-sdk-for-python#8887), so the fake ARM is served
over TLS with a self-signed certificate for 127.0.0.1, and the clients trust it through REQUESTS_CA_BUNDLE (or
`connection_verify`) like any private certificate authority."""

from __future__ import annotations

import datetime as dt
import ipaddress
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class SelfSigned:
    cert: Path
    key: Path


def make_certificate(folder: Path, common_name: str = "gpuplan fake arm") -> SelfSigned:
    """A fresh key and a one-day certificate for 127.0.0.1 (its own CA), written into `folder`. Two fakes trusted
    through one bundle need two names: OpenSSL looks an issuer up by its name and tries only the first match."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])
    now = dt.datetime.now(dt.timezone.utc)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - dt.timedelta(minutes=5)).not_valid_after(now + dt.timedelta(days=1))
            .add_extension(x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1")),
                                                        x509.DNSName("localhost")]), critical=False)
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .sign(key, hashes.SHA256()))
    folder.mkdir(parents=True, exist_ok=True)
    out = SelfSigned(cert=folder / "arm-cert.pem", key=folder / "arm-key.pem")
    out.cert.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    out.key.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                          serialization.NoEncryption()))
    return out
