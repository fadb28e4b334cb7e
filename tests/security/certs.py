"""A throwaway CA, a server certificate for 127.0.0.1/localhost and client certificates, as PEM files,
made with `cryptography` for the TLS tests."""

from __future__ import annotations

import datetime
import ipaddress
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID


@dataclass(frozen=True)
class Pem:
    cert: Path
    key: Path

    @property
    def combined(self) -> Path:
        """Key and certificate chain in one file: Kafka's ssl.keystore.location for PEM."""
        path = self.cert.with_suffix(".keystore.pem")
        path.write_text(self.key.read_text() + self.cert.read_text())
        return path


def _name(**parts: str) -> x509.Name:
    oids = {"C": NameOID.COUNTRY_NAME, "O": NameOID.ORGANIZATION_NAME, "OU": NameOID.ORGANIZATIONAL_UNIT_NAME,
            "CN": NameOID.COMMON_NAME}
    return x509.Name([x509.NameAttribute(oids[k], v) for k, v in parts.items()])


def _write(directory: Path, stem: str, cert: x509.Certificate, key, password: bytes | None = None) -> Pem:
    encryption = serialization.BestAvailableEncryption(password) if password else serialization.NoEncryption()
    (directory / f"{stem}.crt").write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    (directory / f"{stem}.key").write_bytes(key.private_bytes(serialization.Encoding.PEM,
                                                              serialization.PrivateFormat.PKCS8, encryption))
    return Pem(directory / f"{stem}.crt", directory / f"{stem}.key")


class CertificateAuthority:
    def __init__(self, directory: Path, name: str = "Ebb Test CA"):
        self.directory = directory
        self.key = ec.generate_private_key(ec.SECP256R1())
        now = datetime.datetime.now(datetime.UTC)
        subject = _name(O="Ebb tests", CN=name)
        self.cert = (x509.CertificateBuilder().subject_name(subject).issuer_name(subject)
                     .public_key(self.key.public_key()).serial_number(x509.random_serial_number())
                     .not_valid_before(now - datetime.timedelta(minutes=5))
                     .not_valid_after(now + datetime.timedelta(days=2))
                     .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
                     .sign(self.key, hashes.SHA256()))
        self.pem = _write(directory, "ca", self.cert, self.key)

    def issue(self, stem: str, *, server: bool, password: bytes | None = None, valid_from_days: float = 0,
              valid_days: float = 1, dns_names: tuple[str, ...] = ("localhost",), **subject: str) -> Pem:
        """`valid_from_days`: the validity starts that many days from now (5 minutes earlier); `valid_days`: it
        lasts that long. A server's names: `dns_names` and 127.0.0.1."""
        key = ec.generate_private_key(ec.SECP256R1())
        start = datetime.datetime.now(datetime.UTC) + datetime.timedelta(days=valid_from_days, minutes=-5)
        builder = (x509.CertificateBuilder().subject_name(_name(**subject)).issuer_name(self.cert.subject)
                   .public_key(key.public_key()).serial_number(x509.random_serial_number())
                   .not_valid_before(start)
                   .not_valid_after(start + datetime.timedelta(days=valid_days)))
        if server:
            builder = builder.add_extension(x509.SubjectAlternativeName(
                [x509.DNSName(name) for name in dns_names] + [x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
                critical=False)
        return _write(self.directory, stem, builder.sign(self.key, hashes.SHA256()), key, password)


# The keystore's dynamic configs of ssl_listener_broker's listener (named SSL), as kafka-configs sets them
SSL_KEYSTORE_LOCATION = "listener.name.ssl.ssl.keystore.location"
SSL_KEY_PASSWORD = "listener.name.ssl.ssl.key.password"


def ssl_listener_broker(data_dir: Path, keystore: Path):
    """A broker (not started) with a PLAINTEXT listener and an SSL one (`ssl_port`) on a PEM keystore."""
    from tests.support.broker_process import BrokerProcess, free_port

    process = BrokerProcess(data_dir)
    process.ssl_port = free_port()
    process.overrides.update({
        # SSL first: the broker binds its listeners in order, and is ready once PLAINTEXT answers
        "listeners": f"SSL://127.0.0.1:{process.ssl_port},PLAINTEXT://127.0.0.1:{process.port}",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SSL:SSL",
        "ssl.keystore.type": "PEM", "ssl.keystore.location": str(keystore),
    })
    return process


def rotation_pki(directory: Path) -> CertificateAuthority:
    """A CA and server certificates for keystore rotations: `first`, `second` and `third` share a subject
    and names (the latter two with the key password new-secret), `other` has another subject."""
    ca = CertificateAuthority(directory)
    ca.first = ca.issue("first", server=True, O="Ebb tests", CN="localhost")  # type: ignore[attr-defined]
    for stem in ("second", "third"):
        setattr(ca, stem, ca.issue(stem, server=True, password=b"new-secret", O="Ebb tests", CN="localhost"))
    ca.other = ca.issue("other", server=True, O="Ebb tests", CN="somebody-else")  # type: ignore[attr-defined]
    return ca
