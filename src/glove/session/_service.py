"""gloved's session service: its children in the root tree and its control methods.

::

    gloved            (rest_for_one, intensity 0)
    ├─ loop-lag
    ├─ receipts       JournalWriter: the receipt journal
    ├─ receipt-log    TransparencyLogActor: its Merkle tree, signed checkpoints, bundles
    ├─ session-journal JournalWriter: plans and transitions
    ├─ sessions       Supervisor one_for_one: one temporary session-<id> tree per session
    ├─ registry       SessionRegistry: one message at a time; lifecycle, recovery, exposures
    └─ control        ControlServer

:func:`load_service` reads ``gloved.toml`` and the keys made by ``glove setup``; without
them gloved still serves ``health``, ``diag.tree`` and ``capabilities`` (which then says
the lifecycle is not operational, and why). With a ``[remote_backend]`` the runtime is the
construction-only remote one (docs/remote.md): nothing is launched and every lifecycle
method answers ``method_not_found``.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

import msgspec

from glove.actors import ChildSpec, Supervisor
from glove.config import (
    GlovedConfig,
    GlovePaths,
    glove_paths,
    load_gloved_config,
    read_private_file,
)
from glove.container import LIMIT_NAMES, limit_support, probe_host_limits
from glove.control import Composition
from glove.errors import GloveError
from glove.journal import JournalKind, JournalWriter, SigningKey, TransparencyLogActor
from glove.protocol import PROTOCOL_VERSION, Capabilities, unavailable_capabilities
from glove.protocol.control import UNAVAILABLE
from glove.session._registry import SessionRegistry

_log = logging.getLogger(__name__)

SCHEMA_VERSION: Final = 1
#: Lifecycle methods: present only when the constructed runtime is operational.
LIFECYCLE_METHODS: Final = (
    "exposure.create",
    "exposure.list",
    "exposure.revoke",
    "plan.validate",
    "receipts.ack",
    "receipts.export",
    "receipts.page",
    "session.attach",
    "session.cleanup",
    "session.create",
    "session.detach",
    "session.input",
    "session.list",
    "session.resize",
    "session.signal",
    "session.status",
    "session.stop",
    "session.watch",
)


@dataclass
class SessionService:
    """What gloved composes for sessions (or why it cannot)."""

    paths: GlovePaths
    config: GlovedConfig | None = None
    hmac_key: bytes | None = None
    signing_key: SigningKey | None = None
    reason: str | None = None
    remote: Any = None
    registry: SessionRegistry | None = field(default=None, init=False)

    @property
    def operational(self) -> bool:
        """Whether sessions can run here (the Linux runtime is constructed)."""
        return self.config is not None and self.remote is None and self.reason is None

    def lifecycle_operational(self) -> bool:
        """Whether the lifecycle methods are offered now: operational, registry running."""
        registry = self.registry
        return self.operational and registry is not None and registry.store is not None

    def composition(self) -> Composition:
        """What gloved runs for this service (its root children, methods, capabilities)."""
        from glove.session._methods import SessionMethods

        children = self.children()
        methods = SessionMethods(lambda: self.registry)
        return Composition(
            children=children,
            register=methods.register,
            operational=self.lifecycle_operational,
            capabilities=self.capabilities,
        )

    def children(self) -> list[ChildSpec]:
        """The root children the session service adds, in start order (before control)."""
        if not self.operational:
            return []
        assert self.config is not None
        assert self.hmac_key is not None
        assert self.signing_key is not None
        receipts = JournalWriter(
            self.paths.receipts_journal, self.hmac_key, kind=JournalKind.RECEIPTS, name="receipts"
        )
        journal = JournalWriter(
            self.paths.sessions_journal,
            self.hmac_key,
            kind=JournalKind.PLAN,
            name="session-journal",
        )
        receipt_log = TransparencyLogActor(
            receipts, hmac_key=self.hmac_key, signing_key=self.signing_key
        )
        sessions = Supervisor("sessions", strategy="one_for_one", intensity=0)
        self.registry = SessionRegistry(
            config=self.config,
            paths=self.paths,
            hmac_key=self.hmac_key,
            signing_key=self.signing_key,
            receipts=receipts,
            sessions_journal=journal,
            sessions=sessions,
            receipt_log=receipt_log,
        )
        registry = self.registry
        return [
            ChildSpec("receipts", lambda: receipts),
            ChildSpec("receipt-log", lambda: receipt_log),
            ChildSpec("session-journal", lambda: journal),
            ChildSpec("sessions", lambda: sessions),
            ChildSpec("registry", lambda: registry),
        ]

    def capabilities(self) -> Capabilities:
        """The capability report for this construction."""
        if self.remote is not None:
            caps = msgspec.to_builtins(self.remote.capabilities())
            return Capabilities(
                schema_version=int(caps.get("schema_version", 0)),
                protocol=PROTOCOL_VERSION,
                lifecycle_operational=False,
                runtimes=[],
                limits=dict.fromkeys(LIMIT_NAMES, UNAVAILABLE),
                networks=[],
                terminals=[],
                reason="the remote_linux_container backend is construction-only",
                backend=str(caps.get("backend", "remote_linux_container")),
            )
        if not self.operational:
            return msgspec.structs.replace(unavailable_capabilities(), reason=self.reason)
        support = limit_support(probe_host_limits())
        limits = {name: item.mechanism or UNAVAILABLE for name, item in support.items()}
        registry = self.registry
        library_built = registry is not None and registry.library is not None
        return Capabilities(
            # 1 only once both the Linux runtime and the library store were constructed.
            schema_version=SCHEMA_VERSION if library_built else 0,
            protocol=PROTOCOL_VERSION,
            lifecycle_operational=self.lifecycle_operational(),
            runtimes=["linux"],
            limits=limits,
            networks=sorted(self.config.network.modes()) if self.config is not None else [],
            terminals=["pipes", "pty"],
            reason=self.reason,
        )


def load_service(
    paths: GlovePaths | None = None, config_path: Path | None = None
) -> SessionService:
    """Read what sessions need; a missing setup is a reason, an invalid one an error.

    Raises:
        GlovedConfigError: gloved.toml exists but is invalid (gloved must not start).
        GloveError: the keys exist but are unsafe or malformed, or the remote backend's
            section is invalid.
    """
    from glove.journal import load_signing_key

    where = paths or glove_paths()
    config_file = config_path or where.gloved_toml
    if not config_file.exists():
        return SessionService(where, reason=f"{config_file} does not exist: run `glove setup`")
    config = load_gloved_config(config_file)
    if config.remote_backend is not None:
        from glove.remote import RemoteBackendConfig, compose_remote_runtime

        try:
            section = msgspec.convert(config.remote_backend, RemoteBackendConfig)
        except msgspec.ValidationError as exc:
            raise GloveError(f"{config_file}: [remote_backend]: {exc}") from exc
        remote = compose_remote_runtime(
            section, where.runtime_dir, local_materialization=False, apple_container=False
        )
        return SessionService(where, config=config, remote=remote)
    raw = read_private_file(where.hmac_key, 1024).strip()
    try:
        key = bytes.fromhex(raw.decode())
    except (UnicodeDecodeError, ValueError) as exc:
        raise GloveError(f"{where.hmac_key} is not 64 hex digits") from exc
    signing = load_signing_key(where.signing_key)
    return SessionService(where, config=config, hmac_key=key, signing_key=signing)
