"""A TLS listener's key material changed at runtime (KIP-226), as Kafka's SslFactory reconfigures it.

`listener.name.<listener>.ssl.keystore.location` and the other keys Kafka's SslConfigs lists as
reconfigurable, set per broker with its listener's prefix, build a new `ssl.SSLContext` for the
listener: validated first (it loads, its certificate is valid now and keeps the subject and all the
subject alternative names of the one in force, as Kafka demands by default; on the inter-broker
listener old and new complete handshakes both ways, as Kafka's SslEngineValidator), then handed to new
connections by the listener's SNI callback, which every handshake runs (with or without SNI), and for
the inter-broker listener to this broker's new connections to the others (their ClientSecurity).
Connections already open keep the key material they were made with. Whenever this broker's dynamic
configs are altered, a keystore or truststore file changed on disk is reloaded too (Kafka's
reloadUpdatedFilesWithoutConfigChange): rotating a certificate in place is an alter of the same location.
"""

from __future__ import annotations

import asyncio
import itertools
import os
import re
import ssl
import tempfile
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

import structlog

from broker.security.inter_broker import client_context
from broker.security.listener_security import SecuritySettingError
from broker.security.passwords import is_password
from broker.security.tls import TlsListener, TlsSettingError, principal_of, tls_listener
from client.security import ClientSecurity

log = structlog.get_logger("dynamic_tls")

# Kafka's SslConfigs.RECONFIGURABLE_CONFIGS that a PEM store has; the two store passwords are in Kafka's
# list too, but PEM stores have none (Kafka refuses them with ssl.keystore.type=PEM as well).
RELOADABLE = ("ssl.keystore.type", "ssl.keystore.location", "ssl.keystore.certificate.chain", "ssl.keystore.key",
              "ssl.key.password", "ssl.truststore.type", "ssl.truststore.location", "ssl.truststore.certificates")
STORE_PASSWORDS = ("ssl.keystore.password", "ssl.truststore.password")
_TRUSTSTORE = ("ssl.truststore.type", "ssl.truststore.location", "ssl.truststore.certificates")
_LISTENER_KEY = re.compile(r"listener\.name\.([^.]*)\.(.+)")


class TlsReloadError(ValueError):
    """New TLS key material refused; the message says why, as Kafka's SslFactory does."""


def listener_key(key: str) -> tuple[str, str] | None:
    """(listener, base config) of `listener.name.<listener>.<config>`, else None."""
    match = _LISTENER_KEY.fullmatch(key)
    return (match.group(1), match.group(2)) if match else None


def is_tls_key(key: str) -> bool:
    """A key this module rules on: any listener-prefixed one, and the SSL store keys without a prefix."""
    return listener_key(key) is not None or key in RELOADABLE or key in STORE_PASSWORDS


def redacted(configs: Mapping[str, str]) -> dict[str, str]:
    """For the log: passwords and private keys hidden."""
    return {key: "[hidden]" if is_password(key) else value for key, value in configs.items()}


def check_keys(keys: Iterable[str], tls_listeners: Iterable[str], *, per_broker: bool,
               listeners: Iterable[str] = ()) -> None:
    """Kafka's DynamicBrokerConfig.validateConfigs for the listener and security keys among `keys`: an
    SSL store key without a listener prefix, a listener key at the cluster-wide level. And, where Kafka
    4.3 stores a value it does not apply (a listener's SASL settings, its client auth, a listener it
    does not have), Ebb refuses it by name: any listener key but the reloadable TLS ones of a TLS
    listener of this broker."""
    keys = sorted(keys)
    bare = [k for k in keys if k in RELOADABLE or k in STORE_PASSWORDS]
    if bare:
        raise TlsReloadError("These security configs can be dynamically updated only per-listener using the "
                             f"listener prefix: [{', '.join(bare)}]")
    prefixed = [k for k in keys if listener_key(k)]
    if prefixed and not per_broker:
        raise TlsReloadError("Cannot update these configs at default cluster level, broker id must be "
                             f"specified: [{', '.join(prefixed)}]")
    names = {name.lower(): name for name in tls_listeners}
    existing = {name.lower() for name in listeners} | set(names)
    for key in prefixed:
        listener, base = listener_key(key)  # type: ignore[misc]
        if listener not in existing:  # Kafka stores it for a listener it may get later; Ebb adds none at runtime
            raise TlsReloadError(f"{key}: this broker has no listener {listener}; Ebb cannot add listeners at "
                                 "runtime, so it stores nothing for one")
        if base in STORE_PASSWORDS:
            raise TlsReloadError(f"{key}: PEM keystores and truststores have no store password (Ebb reads PEM "
                                 "only; the private key's password is ssl.key.password)")
        if base not in RELOADABLE:  # Kafka 4.3 stores these without applying them to the listener it has
            raise TlsReloadError(f"Cannot update these configs dynamically: [{key}] (of a listener, only its "
                                 "TLS key material changes at runtime; set the others in server.properties)")
        if listener not in names:
            raise TlsReloadError(f"{key}: {listener} is not a TLS listener of this broker (its TLS listeners: "
                                 f"{', '.join(sorted(names.values())) or 'none'})")


@dataclass(frozen=True)
class _Material:
    """What one build of a listener's context read: its settings, files' change times and certificate."""

    settings: tuple[tuple[str, str], ...]
    mtimes: tuple[int | None, ...]  # the files' change times (ns): a file rewritten in place is reloaded
    subject: str
    alt_names: frozenset
    listener: TlsListener
    generation: int  # builds are numbered: one built later is never replaced by one built earlier
    client: ssl.SSLContext | None = None  # the inter-broker listener's: for connections to the other brokers
    probe: ssl.SSLContext | None = None  # `client` without the host name check, for the handshake checks


def _settings(props: Mapping[str, str], name: str) -> tuple[tuple[str, str], ...]:
    prefix = f"listener.name.{name.lower()}."
    return tuple((key, props.get(prefix + key, props.get(key, "")).strip()) for key in RELOADABLE)


def _mtimes(settings: tuple[tuple[str, str], ...]) -> tuple[int | None, ...]:
    times: list[int | None] = []
    for key, value in settings:
        if key.endswith(".location") and value:
            try:
                times.append(os.stat(value).st_mtime_ns)
            except OSError:
                times.append(None)
    return tuple(times)


def _certificate(settings: Mapping[str, str]) -> dict:
    """The keystore's (first) certificate, decoded as the ssl module does for a peer's."""
    location = settings["ssl.keystore.location"]
    if location:
        return ssl._ssl._test_decode_cert(location)  # type: ignore[attr-defined]  # the one PEM decoder ssl has
    with tempfile.NamedTemporaryFile("w", suffix=".pem") as out:
        out.write(settings["ssl.keystore.certificate.chain"])
        out.flush()
        return ssl._ssl._test_decode_cert(out.name)  # type: ignore[attr-defined]


_GENERATIONS = itertools.count(1)


def _build(props: Mapping[str, str], name: str, inter_broker: bool = False, in_force: bool = False) -> _Material:
    """Load the listener's key material (blocking: files; run in the I/O pool); for the inter-broker
    listener its client side too. A new certificate outside its validity period is refused."""
    generation = next(_GENERATIONS)
    settings = _settings(props, name)
    mtimes = _mtimes(settings)
    try:
        listener = tls_listener(props, name)
        certificate = _certificate(dict(settings))
        client = client_context(props, name) if inter_broker else None
        probe = client_context(props, name, verify_hostname=False) if inter_broker else None
    except (TlsSettingError, SecuritySettingError, OSError, ssl.SSLError) as exc:
        raise TlsReloadError(str(exc)) from None
    now = time.time()
    not_before, not_after = (ssl.cert_time_to_seconds(certificate[key]) for key in ("notBefore", "notAfter"))
    if not in_force and not not_before <= now <= not_after:
        raise TlsReloadError(f"the keystore's certificate is not valid now (valid from {certificate['notBefore']} "
                             f"until {certificate['notAfter']})")
    return _Material(settings, mtimes, principal_of(certificate) or "",
                     frozenset(certificate.get("subjectAltName", ())), listener, generation, client, probe)


def handshake(client: ssl.SSLContext, server: ssl.SSLContext,
              server_hostname: str | None = None) -> tuple[ssl.SSLObject, ssl.SSLObject]:
    """One TLS handshake in memory between the two contexts: the (client, server) ends after it;
    ssl.SSLError if either side refuses."""
    bios = [(ssl.MemoryBIO(), ssl.MemoryBIO()) for _ in range(2)]  # (incoming, outgoing) of each end
    ends = (client.wrap_bio(*bios[0], server_hostname=server_hostname), server.wrap_bio(*bios[1], server_side=True))
    done = [False, False]
    for _ in range(16):  # TLS 1.2 and 1.3 need far fewer round trips
        for index, end in enumerate(ends):
            if not done[index]:
                try:
                    end.do_handshake()
                    done[index] = True
                except ssl.SSLWantReadError:
                    pass
            bios[1 - index][0].write(bios[index][1].read())  # what this end sent reaches the other
        if all(done):
            return ends
    raise ssl.SSLError("the handshake did not complete")


def validate_handshakes(old: _Material, new: _Material) -> None:
    """Kafka's SslEngineValidator for the inter-broker listener (blocking: run in the I/O pool): the
    old server accepts the new client and the new server the old client, so brokers that have not
    rotated yet and this one keep reaching each other."""
    if old.probe is None or new.probe is None:
        return
    for client, server in ((new.probe, old.listener.context), (old.probe, new.listener.context)):
        try:
            handshake(client, server)
        except ssl.SSLError as exc:
            raise TlsReloadError(f"Validation of dynamic config update of SSLFactory failed: {exc}") from None


class _LiveListener:
    """The context new connections of one TLS listener get; the listener's first context stays the one
    the server was made with and hands over to the newest in its SNI callback."""

    def __init__(self, name: str, first: TlsListener) -> None:
        self.name = name
        self.material: _Material | None = None  # None until load(): the certificate is read off the loop
        self.context = first.context
        first.context.sni_callback = self._pick

    def _pick(self, connection, _server_name, context) -> None:
        if self.context is not context:
            connection.context = self.context

    def compatible(self, new: _Material) -> None:
        """Kafka's SslFactory checks (unless ssl.allow.dn.changes or ssl.allow.san.changes, static settings
        as in Kafka, say otherwise)."""
        old = self.material
        if old is None:
            return
        if old.listener.client_auth == "none" and any(
                a != b for (key, a), (_, b) in zip(old.settings, new.settings, strict=True) if key in _TRUSTSTORE):
            raise TlsReloadError("Cannot add SSL truststore to an existing listener for which no truststore was "
                                 f"configured (listener {self.name} does not ask for client certificates)")
        if new.subject.lower() != old.subject.lower() and not old.listener.allow_dn_changes:
            raise TlsReloadError(f"Keystore DistinguishedName does not match:  existing={{DN={old.subject[5:]}}}, "
                                 f"new={{DN={new.subject[5:]}}}")
        if not old.alt_names <= new.alt_names and not old.listener.allow_san_changes:  # names added: fine
            raise TlsReloadError(f"Keystore SubjectAltNames do not match:  existing={{SAN={sorted(old.alt_names)}}}, "
                                 f"new={{SAN={sorted(new.alt_names)}}}")


class ListenerTlsReloader:
    """Every TLS listener's key material in force, rebuilt when its dynamic settings or files change."""

    def __init__(self, tls_listeners: Mapping[str, TlsListener], static: Mapping[str, str] | None = None,
                 inter_broker: tuple[str, ClientSecurity] | None = None) -> None:
        """`static`: the properties the listeners were made with; `inter_broker`: the inter-broker listener
        and the security of this broker's connections to the others, whose context follows the listener's."""
        self.listeners = {name: _LiveListener(name, listener) for name, listener in tls_listeners.items()}
        self.static = dict(static or {})
        self.inter_broker = inter_broker if inter_broker is not None and inter_broker[0] in self.listeners else None
        self.lock = asyncio.Lock()  # one rebuild at a time: a newer one never loses to an older

    def _builds_client(self, name: str) -> bool:
        return self.inter_broker is not None and self.inter_broker[0] == name

    async def prepare(self, props: Mapping[str, str], names: Iterable[str] | None = None) -> dict[str, _Material]:
        """The listeners (all, or `names`) whose settings in `props` differ from those in force, or whose
        files changed on disk, rebuilt and checked; TlsReloadError for the first refused."""
        loop = asyncio.get_running_loop()
        ready = {}
        for name in (self.listeners if names is None else names):
            live = self.listeners[name]
            settings = _settings(props, name)
            if live.material is not None and live.material.settings == settings and \
                    await loop.run_in_executor(None, _mtimes, settings) == live.material.mtimes:
                continue
            new = await loop.run_in_executor(None, _build, dict(props), name, self._builds_client(name))
            try:
                live.compatible(new)
                if live.material is not None:
                    await loop.run_in_executor(None, validate_handshakes, live.material, new)
            except TlsReloadError as exc:
                raise TlsReloadError(f"listener {name}: {exc}") from None
            ready[name] = new
        return ready

    def apply(self, ready: Mapping[str, _Material]) -> None:
        for name, material in ready.items():
            live = self.listeners[name]
            if live.material is not None and live.material.generation > material.generation:
                continue  # a reload applied key material built after this (an alter's, awaiting its write)
            changed = live.material is not None
            live.material, live.context = material, material.listener.context
            if material.client is not None and self.inter_broker is not None:
                self.inter_broker[1].ssl_context = material.client  # new connections to other brokers
            if changed:
                log.info("TLS key material reloaded: new connections get it", listener=name,
                         subject=material.subject)

    async def check(self, props: Mapping[str, str]) -> dict[str, _Material]:
        """`prepare` for an alter: a listener whose settings change and cannot be loaded refuses it; one
        whose files alone changed on disk and cannot be loaded keeps what is in force (logged), as in
        Kafka, where that reload happens after the alter succeeded."""
        async with self.lock:
            ready = {}
            for name, live in self.listeners.items():
                try:
                    await self._in_force(name)  # what a change is compared with
                except TlsReloadError as exc:
                    if _settings(props, name) != _settings(self.static, name):
                        raise TlsReloadError(f"listener {name}: the key material in force cannot be read to check "
                                             f"the change against ({exc})") from None
                    continue  # unchanged: the properties file's stays served
                try:
                    ready.update(await self.prepare(props, [name]))
                except TlsReloadError as exc:
                    if live.material is None or live.material.settings != _settings(props, name):
                        raise
                    log.error("TLS key material not reloaded", listener=name, error=str(exc))
            return ready

    async def reload(self, props: Mapping[str, str]) -> None:
        """Bring every listener to `props` and its files; what cannot be loaded is logged and the
        listener keeps the key material in force (a change written past our checks, a broken file)."""
        async with self.lock:
            for name in self.listeners:
                try:
                    self.apply(await self.prepare(props, [name]))
                except TlsReloadError as exc:
                    log.error("TLS key material not reloaded", listener=name, error=str(exc))
                    if self.listeners[name].material is None:  # at start-up: the properties file's is served
                        try:
                            await self._in_force(name)
                        except TlsReloadError as failed:
                            log.error("TLS key material in force unreadable", listener=name, error=str(failed))

    async def _in_force(self, name: str) -> None:
        """The key material of a listener still serving the properties file's (its first load failed),
        read so that changes are checked against it; TlsReloadError if it no longer loads."""
        live = self.listeners[name]
        if live.material is None:
            live.material = await asyncio.get_running_loop().run_in_executor(
                None, _build, self.static, name, self._builds_client(name), True)
