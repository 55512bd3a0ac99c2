"""Fixtures for the egress tests: a test CA, audit sinks, in-process channel hand-over."""

from __future__ import annotations

import asyncio
import datetime as dt
import ipaddress
import socket
import ssl
from collections.abc import AsyncIterator, Callable, Iterator, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from glove.actors import running
from glove.audit import AuditUnavailable
from glove.egress import EgressProxy, ProxyLimits, RuleSet, StaticResolver

from ._netns import open_dir

#: Names the test certificate covers (all resolve to host loopback in these tests).
TEST_NAMES = ("web.test", "git.test", "pypi.test", "ssh.test", "other.test", "evil.test")


@dataclass(frozen=True)
class LocalCA:
    """A certificate authority made for one test session, and a leaf for TEST_NAMES."""

    ca_file: Path
    cert_file: Path
    key_file: Path

    def server_context(self) -> ssl.SSLContext:
        """A TLS server context presenting the leaf."""
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(self.cert_file, self.key_file)
        return context

    def client_context(self) -> ssl.SSLContext:
        """A TLS client context trusting only the test CA."""
        return ssl.create_default_context(cafile=str(self.ca_file))


def _name(common: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common)])


@pytest.fixture(scope="session")
def test_ca() -> Iterator[LocalCA]:
    """Generate a CA and a leaf certificate for the test names and 127.0.0.1.

    The files sit in a world-readable directory: the unprivileged user's clients read the CA.
    """
    with open_dir("egress-ca-") as directory:
        yield _make_ca(directory)


def _make_ca(directory: Path) -> LocalCA:
    now = dt.datetime.now(dt.UTC)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_cert = (
        x509.CertificateBuilder()
        .subject_name(_name("glove egress test CA"))
        .issuer_name(_name("glove egress test CA"))
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(hours=1))
        .not_valid_after(now + dt.timedelta(days=2))
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                key_cert_sign=True,
                crl_sign=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(
            x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()), critical=False
        )
        .sign(ca_key, hashes.SHA256())
    )
    key = ec.generate_private_key(ec.SECP256R1())
    names: list[x509.GeneralName] = [x509.DNSName(n) for n in TEST_NAMES]
    names.append(x509.IPAddress(ipaddress.ip_address("127.0.0.1")))
    leaf = (
        x509.CertificateBuilder()
        .subject_name(_name("web.test"))
        .issuer_name(ca_cert.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(hours=1))
        .not_valid_after(now + dt.timedelta(days=2))
        .add_extension(x509.SubjectAlternativeName(names), critical=False)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(
            x509.ExtendedKeyUsage([x509.oid.ExtendedKeyUsageOID.SERVER_AUTH]), critical=False
        )
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()),
            critical=False,
        )
        .sign(ca_key, hashes.SHA256())
    )
    ca_file, cert_file, key_file = (
        directory / "ca.pem",
        directory / "leaf.pem",
        directory / "leaf.key",
    )
    ca_file.write_bytes(ca_cert.public_bytes(serialization.Encoding.PEM))
    cert_file.write_bytes(leaf.public_bytes(serialization.Encoding.PEM))
    key_file.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    for path in (ca_file, cert_file, key_file):
        path.chmod(0o644)  # the unprivileged test user's clients read the CA
    return LocalCA(ca_file, cert_file, key_file)


@dataclass
class ListSink:
    """An audit sink that keeps records in memory; ``gate`` can hold every append."""

    records: list[dict[str, object]] = field(default_factory=list)
    gate: asyncio.Event | None = None
    fail: bool = False
    appending: asyncio.Event = field(default_factory=asyncio.Event)
    """Set when an append has begun (it may still wait on the gate)."""

    async def append(self, record: Mapping[str, object]) -> object:
        """Keep ``record`` (after the gate opens), or fail like a dead audit log."""
        self.appending.set()
        if self.gate is not None:
            await self.gate.wait()
        if self.fail:
            raise AuditUnavailable("the test audit log is down")
        self.records.append(dict(record))
        return len(self.records)

    def kinds(self) -> list[tuple[object, object]]:
        """``(kind, decision)`` of every record, in order."""
        return [(r["kind"], r.get("decision")) for r in self.records]


async def until(predicate: Callable[[], bool], timeout: float = 10.0) -> None:
    """Wait until ``predicate()`` holds (the proxy finishes a record after the peer's EOF)."""
    async with asyncio.timeout(timeout):
        while not predicate():
            await asyncio.sleep(0.01)


class Handover:
    """Plays the sandbox's helper in-process: makes TCP connections, sends them by fd."""

    def __init__(self) -> None:
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.host_end, self.guest_end = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)

    def hand(self, kind: bytes) -> socket.socket:
        """A client socket whose accepted peer was sent to the proxy as ``kind``."""
        client = socket.create_connection(self.listener.getsockname())
        accepted, _ = self.listener.accept()
        with accepted:
            socket.send_fds(self.guest_end, [kind], [accepted.fileno()])
        return client

    async def open(self, kind: bytes = b"h") -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        """An asyncio stream to the proxy through a ``kind`` hand-over."""
        return await asyncio.open_connection(sock=self.hand(kind))

    def close(self) -> None:
        """Close the listener and both ends (the proxy closes the host end it owned)."""
        self.listener.close()
        self.guest_end.close()
        self.host_end.close()


@pytest.fixture
def handover() -> Iterator[Handover]:
    """An in-process stand-in for the helper."""
    hand = Handover()
    yield hand
    hand.close()


@asynccontextmanager
async def serving(
    handover: Handover,
    allow: list[str],
    deny: list[str] | None = None,
    *,
    sink: ListSink | None = None,
    names: Mapping[str, list[str]] | None = None,
    limits: ProxyLimits | None = None,
) -> AsyncIterator[tuple[EgressProxy, ListSink]]:
    """A running proxy on the hand-over's channel, resolving ``names`` statically."""
    audit = sink if sink is not None else ListSink()
    table = {name: ["127.0.0.1"] for name in TEST_NAMES}
    table.update(names or {})
    proxy = EgressProxy(
        handover.host_end,
        RuleSet.load(allow, deny or []),
        audit,
        session="test-session",
        resolver=StaticResolver(table),
        limits=limits,
    )
    async with running(proxy):
        yield proxy, audit
    assert proxy.exit_reason is None, proxy.exit_reason
