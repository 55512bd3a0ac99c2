"""What a gloved session gets mediated: its tools (the harness's MCP mediation) and its
network (the plan's egress), both audited in the session's own log, and that log's digest.

A harness in ``gloved.toml`` may name an MCP configuration (``mcp = "agent.toml"``, the
same file ``glove run --config`` takes: upstreams and policy). Its sessions then get the
``mcp`` mediation and the agent channel in their tree, exactly as ``glove run`` does, with
one change: the audit log is the session's own, ``sessions-data/<id>/audit.log`` (every
record carries the session id as its run id), so the terminal receipt can commit to the
digest of every decision the session's tool calls and connections got. A plan whose
network is ``proxy`` gets the ``egress`` proxy with the narrowed rules, its records in the
same log.
"""

from __future__ import annotations

import asyncio
import hashlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Final

import msgspec

from glove.container import Bind, Protected, SandboxSpec
from glove.records import AuditDigest as ReceiptAudit
from glove.session._build import SessionDescription, SessionParts, open_session

if TYPE_CHECKING:
    from glove.egress import RuleSet
    from glove.mcp import Mediation

#: The session's audit log, in its data directory.
AUDIT_NAME: Final = "audit.log"
#: Rotated audit files protected beside the log.
PROTECTED_ROTATIONS: Final = 16


class AuditDigest(msgspec.Struct, frozen=True):
    """The session's audit log as the receipt commits to it: the concatenation of its files,
    oldest first (``audit.log.N`` ... ``audit.log.1``, then ``audit.log``)."""

    records: int
    bytes: int
    sha256: str
    files: int = 1


@dataclass
class SessionTools:
    """What one session's tools and network add to its tree and sandbox."""

    parts: SessionParts
    audit_path: Path
    protected: tuple[Protected, ...] = field(default=())

    @property
    def mediation(self) -> Mediation | None:
        """The harness's mediation, when it names an MCP configuration."""
        return self.parts.mediation

    def apply(self, spec: SandboxSpec, *, proxy: bool) -> SandboxSpec:
        """``spec`` with the guest parts: the helper as command, its binds, env and fd."""
        guest = self.parts.guest(spec.argv)
        assert guest is not None  # session_tools makes parts only for tools or a network
        binds = tuple(Bind(source=src, target=dst, mode="ro") for src, dst in guest.binds)
        return msgspec.structs.replace(
            spec,
            argv=guest.argv,
            binds=(*spec.binds, *binds),
            env={**spec.env, **guest.env},
            pass_fds={**spec.pass_fds, **guest.pass_fds},
            network="proxy" if proxy else spec.network,
            protected=(*spec.protected, *self.protected),
        )

    async def close(self) -> None:
        """Close the channel ends and remove the guest directory."""
        await self.parts.close()

    def counts(self) -> dict[str, int]:
        """What the mediation and the proxy counted (for the receipt)."""
        out: dict[str, int] = {}
        mediator = self.mediation.mediator if self.mediation is not None else None
        if mediator is not None:
            out["tool_calls_denied"] = int(mediator.denied)
        proxy = self.parts.proxy
        if proxy is not None:
            out["egress_allowed"] = int(proxy.stats.allowed)
            out["egress_denied"] = int(proxy.stats.denied + proxy.stats.dns_refused)
        return out


def _audit_protected(path: Path) -> tuple[Protected, ...]:
    return (
        Protected(str(path), "the session's audit log"),
        Protected(f"{path}.lock", "the session's audit log lock"),
        *(
            Protected(f"{path}.{n}", "a rotated audit log")
            for n in range(1, PROTECTED_ROTATIONS + 1)
        ),
    )


async def session_tools(
    *,
    session_id: str,
    data_dir: Path,
    mcp_config: str | None,
    rules: RuleSet | None,
    hostname: str,
) -> SessionTools | None:
    """Describe the session's mediation (when the harness names an MCP configuration) and
    its egress (when the plan's network is ``proxy``), and open its parts
    (:func:`glove.session.open_session`); None when the session has neither.

    Raises:
        GloveError: the MCP configuration or its policy is invalid.
        OSError: the guest directory or the channel cannot be made.
    """
    if mcp_config is None and rules is None:
        return None
    await asyncio.to_thread(data_dir.mkdir, mode=0o700, parents=True, exist_ok=True)
    audit_path = data_dir / AUDIT_NAME
    protected = _audit_protected(audit_path)
    config = None
    if mcp_config is not None:
        from glove.mcp import load_config, mediator_protected

        config = load_config(mcp_config)
        protected = (*protected, *mediator_protected(mcp_config, config))
        config = msgspec.structs.replace(config, audit=str(audit_path))
    description = SessionDescription(
        session_id, mcp=config, rules=rules, hostname=hostname, audit_path=str(audit_path)
    )
    return SessionTools(await open_session(description), audit_path, protected)


def audit_digest(path: Path) -> AuditDigest | None:
    """The count, size and SHA-256 of the session's audit log (blocking), or None.

    A long session's log rotates (``audit.log.1`` is the newest rotated file): the digest
    covers every file still there, oldest first, so the receipt commits to each decision
    kept. Only whole records count: after a crash a last line without its newline was never
    acknowledged (the log cuts it when it is next opened), so it is not committed to.
    """
    rotated = [
        path.with_name(f"{path.name}.{n}")
        for n in range(PROTECTED_ROTATIONS, 0, -1)
        if path.with_name(f"{path.name}.{n}").exists()
    ]
    files = [*rotated, path] if path.exists() else rotated
    if not files:
        return None
    digest = hashlib.sha256()
    records = size = 0
    for index, file in enumerate(files):
        try:
            data = file.read_bytes()
        except FileNotFoundError:
            continue
        if index == len(files) - 1:
            data = data[: data.rfind(b"\n") + 1]
        digest.update(data)
        records += data.count(b"\n")
        size += len(data)
    return AuditDigest(
        records=records, bytes=size, sha256="sha256:" + digest.hexdigest(), files=len(files)
    )


def receipt_audit(digest: AuditDigest | None) -> ReceiptAudit | None:
    """The receipt's ``audit`` value."""
    if digest is None:
        return None
    return ReceiptAudit(
        records=digest.records, bytes=digest.bytes, sha256=digest.sha256, files=digest.files
    )
