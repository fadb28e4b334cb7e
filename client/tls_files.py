"""PEM key material into an `ssl.SSLContext`, from files or from inline text, as Kafka's PEM
keystores and truststores give it. Used by the broker's listeners and by the client alike; errors
are the `ssl` module's (OSError, ssl.SSLError) so each caller can name its own property."""

from __future__ import annotations

import os
import ssl
import tempfile


def load_key_pair(context: ssl.SSLContext, *, location: str = "", chain: str = "", key: str = "",
                  password: str = "") -> None:
    """A private key and its certificate chain: one PEM file holding both, or the two as PEM text."""
    if location:
        context.load_cert_chain(location, password=password or None)
        return
    with tempfile.TemporaryDirectory() as directory:  # ssl loads key material from files only
        path = os.path.join(directory, "keystore.pem")
        with open(os.open(path, os.O_WRONLY | os.O_CREAT, 0o600), "w") as out:
            out.write(f"{key.strip()}\n{chain.strip()}\n")
        context.load_cert_chain(path, password=password or None)


def load_cas(context: ssl.SSLContext, *, location: str = "", pem: str = "") -> None:
    """The certificate authorities a peer's certificate must chain to: a PEM file or PEM text."""
    if location:
        context.load_verify_locations(cafile=location)
    else:
        context.load_verify_locations(cadata=pem)
