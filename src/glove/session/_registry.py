"""The ``registry`` actor: gloved's sessions, plans, exposures and receipts.

It owns the daemon's durable state: the session journal (every plan and transition), the
receipt journal's transparency log (terminal receipts, checkpoints) and the exposure
registry. The lifecycle of each session, durable at every step::

    created (the plan and both digests are in the journal before the id is returned)
      -> preparing (exposures resolved through their pinned descriptors; a revoked or stale
         generation fails here)
      -> composed (the sandbox spec and its launch binding)
      -> running (the sandbox launched; ``session-<id>`` runs under ``sessions``)
      -> finalizing (drained; resources accounted)
      -> terminal (the receipt is appended and checkpointed, *then* the state is visible)

A failure of one session (a bad exposure, a sandbox the host refuses) is that session's
receipt, never the daemon's crash; a journal that cannot persist is (fail closed: the
service manager restarts the daemon, which recovers). Every session's lifecycle runs as a
task of this actor, and a task that raises crashes the actor (and, one strike at the root,
gloved and every live session), so the lifecycle catches *everything* but the journal:
an unexpected exception in a session's prepare, launch or finalize (a bug) ends that
session with outcome ``internal_error`` (the exception's type name only; the traceback goes
to gloved's log) and the others go on. Only a failed write to one of the registry's own
journals escapes (:class:`_Unpersisted`), and a receipt that cannot be appended.

**Recovery** at start: every session the journal shows alive got no terminal state because
the daemon died; its sandbox died with it (the sandbox's init watches its launcher), so it
gets exactly one honest receipt, outcome ``daemon_lost``, unless the receipt journal
already holds its receipt (the daemon died between the two appends). Journals that do not
verify make the daemon refuse to start.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import logging
import os
import secrets
import shutil
import stat
import time
from collections.abc import Awaitable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final, TypeVar

import msgspec

from glove.actors import Actor, ActorError, ChildSpec, Supervisor
from glove.config import GlovedConfig, GlovePaths
from glove.container import (
    LimitRefused,
    SandboxError,
    SandboxResult,
    SandboxSpec,
    probe_host_limits,
    probe_unix_gate,
    projection_conflict,
)
from glove.container.linux import DEFAULT_WINSIZE
from glove.errors import GloveError
from glove.evaluate import Fixture
from glove.journal import (
    Entry,
    Journal,
    JournalError,
    JournalWriter,
    RecordKind,
    SigningKey,
    TransparencyLog,
)
from glove.library import Library, LibraryError, digest_of, is_bundle_name
from glove.plan import (
    CONTAINER_LIMIT_NAMES,
    ExposurePolicy,
    HarnessPolicy,
    LocalPolicy,
    ValidatedPlan,
    decode_plan,
    host_mechanisms,
    jcs_dumps,
    validate_plan,
)
from glove.session._build import SandboxLaunch, build_session
from glove.session._compose import compose_spec, launch_binding
from glove.session._drain import OutputDrain
from glove.session._evaluation import (
    INFRA_KINDS,
    EvaluatorActor,
    Finished,
    evaluation_entry,
    infra_outcome,
    read_fixture,
    termination_of,
    verdict_of,
)
from glove.session._exposures import ExposureRegistry
from glove.session._faults import fault_point
from glove.session._mediated import (
    AUDIT_NAME,
    SessionTools,
    audit_digest,
    digest_builtins,
    session_tools,
)
from glove.session._projections import SessionProjection, prepare_projections, refusal_code
from glove.session._pty_drain import PtyDrain
from glove.session._receipt import (
    check_envelope,
    envelope_record_kind,
    is_refinement_plan,
    outcome_of,
    terminal_receipt,
)
from glove.session._sandbox import SandboxActor
from glove.session._store import LIVE_STATES, SessionRecord, SessionStore
from glove.session._transcript import recovered_summary
from glove.session._tree import SANDBOX_CHILD, SessionOutcome, run_session
from glove.session._viewers import TerminalHub
from glove.session.errors import (
    ExposureError,
    FixtureRefused,
    ProjectionRefused,
    RecoveryRefused,
    SessionConflict,
    SessionLimit,
    SessionNotFound,
)

_log = logging.getLogger(__name__)

#: The record kinds of terminal envelopes (resource receipts, refinement envelopes).
ENVELOPE_KINDS: Final = frozenset({RecordKind.RECEIPT, RecordKind.REFINEMENT})
#: How ``receipts.page`` names each record kind.
KIND_NAMES: Final = {
    int(RecordKind.DATA): "data",
    int(RecordKind.RECEIPT): "receipt",
    int(RecordKind.REFINEMENT): "refinement",
}

#: Largest page of ``session.list``.
MAX_LIST_PAGE: Final = 500
#: Events a watcher may fall behind before its stream ends.
MAX_WATCH_BACKLOG: Final = 64
#: The plan's name of each container limit (gloved.toml's accept_weaker uses the latter).
PLAN_NAME_OF: Final = {container: plan for plan, container in CONTAINER_LIMIT_NAMES.items()}
PLAN_LIMIT_MAP: Final = {
    "wall_time_s": "wall_time_s",
    "cpu_time_s": "cpu_time_s",
    "memory_bytes": "memory_bytes",
    "pids": "pids",
    "disk_bytes": "disk_bytes",
    "output_bytes": "output_bytes",
}


class SessionView(msgspec.Struct, frozen=True):
    """What ``session.status`` shows of one session; a refinement plan's shows its
    ``evaluation`` (``{"verdict": ..., "reasons": [...]}``) once terminal."""

    session_id: str
    state: str
    harness: str
    created_ns: int
    updated_ns: int
    plan_sha256: str
    plan_blake3: str
    receipt_seq: int | None = None
    outcome: dict[str, Any] | None = None
    launch_binding: str | None = None
    cleaned: bool = False
    #: The plan's terminal: ``pipes`` (``glove session output``) or ``pty`` (``session log``).
    terminal: str = "pipes"
    evaluation: dict[str, Any] | None = None


_T = TypeVar("_T")


class _Unpersisted(Exception):
    """A write to the registry's own journal failed: the one failure that stays fatal.

    ``error`` is the journal's error; the lifecycle re-raises that, which crashes the
    registry (fail closed: the restarted daemon recovers from what was durable).
    """

    def __init__(self, message: str, error: BaseException) -> None:
        super().__init__(message)
        self.error = error


def internal_outcome(exc: BaseException, stage: str) -> dict[str, Any]:
    """The ``internal_error`` outcome of a session whose ``stage`` raised ``exc`` (a bug):
    the exception's type name only, never its message or traceback (gloved's log has them)."""
    return outcome_of(
        None,
        kind="internal_error",
        error=f"{type(exc).__name__} in {stage}; gloved's log has the traceback",
    )


@dataclass
class _Live:
    """What the registry holds for a session that is not terminal yet."""

    stop: asyncio.Event
    task: asyncio.Task[None] | None = None


@dataclass
class _Progress:
    """How far one session's lifecycle got: what its receipt and its cleanup need."""

    stage: str = "prepare"
    drain: OutputDrain | PtyDrain | None = None
    tools: SessionTools | None = None
    binding: str | None = None
    launched_ns: int | None = None
    result: SandboxResult | None = None
    #: A refinement plan's: the fixture (once read), the refusal code if it was refused,
    #: the evaluator, what it finished with, and the code of its failure.
    fixture: Fixture | None = None
    refusal: str | None = None
    evaluator: EvaluatorActor | None = None
    finished: Finished | None = None
    evaluator_error: str | None = None
    #: The child whose failure ended the session tree early (any session's).
    failed_child: str | None = None
    projections: list[SessionProjection] = field(default_factory=list)


def _harness_of(record: SessionRecord) -> str:
    return str(record.plan.get("harness", ""))


async def _durable(step: Awaitable[_T]) -> _T:
    """Await a write to the registry's own journal; a failure is :class:`_Unpersisted`."""
    try:
        return await step
    except (JournalError, ActorError) as exc:
        raise _Unpersisted(str(exc), exc) from exc


async def _release_tools(session_id: str, tools: SessionTools) -> None:
    """Close a session's tools on a failure path (a failure to close is only logged)."""
    try:
        await tools.close()
    except Exception:  # noqa: BLE001 - the session is already failing; keep its first error
        _log.exception("session %s: its tools did not close", session_id)


def _close_all(projections: list[SessionProjection]) -> None:
    """Close every projection (blocking: an unparked tmpfs's close waits for the kernel)."""
    for projection in projections:
        projection.close()


def new_session_id() -> str:
    """A sortable, unguessable session id: UTC time then 64 random bits."""
    return time.strftime("%Y%m%dT%H%M%SZ", time.gmtime()) + "-" + secrets.token_hex(8)


class SessionRegistry(Actor):
    """gloved's session lifecycle (see the module docstring)."""

    def __init__(
        self,
        *,
        config: GlovedConfig,
        paths: GlovePaths,
        hmac_key: bytes,
        signing_key: SigningKey,
        receipts: JournalWriter,
        sessions_journal: JournalWriter,
        sessions: Supervisor,
    ) -> None:
        super().__init__("registry", mailbox_size=1024)
        self.config = config
        self.paths = paths
        self._hmac_key = hmac_key
        self._signing_key = signing_key
        self._receipts_writer = receipts
        self._sessions_writer = sessions_journal
        self._sessions = sessions
        self.log: TransparencyLog | None = None
        self.store: SessionStore | None = None
        self.exposures = ExposureRegistry(
            paths.exposures_file,
            protected_root=config.protected_root,
            own_paths=(paths.config_dir, paths.state_dir, paths.runtime_dir),
            allow_special=tuple(config.exposures.allow_special),
            sockets_gated=probe_unix_gate().mechanism is not None,
        )
        self._live: dict[str, _Live] = {}
        self._watchers: dict[str, set[asyncio.Queue[SessionView | None]]] = {}
        self._mechanisms: dict[str, str | None] = {}
        self.recovered: list[str] = []
        #: Where each receipt record sits (seq -> segment, offset), to page their payloads.
        self._places: dict[int, tuple[int, int]] = {}
        #: PTY sessions' drains and viewers (session.attach and friends).
        self.terminals = TerminalHub()
        #: The library store (``paths.library_dir``), once opened; None when it cannot be
        #: (capabilities then say schema_version 0 and every projection is refused).
        self.library: Library | None = None

    # -- start and recovery -------------------------------------------------------------------

    async def on_start(self) -> None:
        """Attach the journals, replay, recover the sessions the last daemon left alive.

        Raises:
            RecoveryRefused: a journal does not verify.
            LogMismatch: the receipt journal and its checkpoint disagree.
        """
        await self._receipts_writer.started.wait()
        await self._sessions_writer.started.wait()
        self._receipts_writer.add_commit_listener(self._on_receipts_commit)
        self.log = await TransparencyLog.attach(
            Journal(self._receipts_writer), hmac_key=self._hmac_key, signing_key=self._signing_key
        )
        await asyncio.to_thread(self._index_receipts)
        self.store = SessionStore(
            Journal(self._sessions_writer), self._hmac_key, on_shown=self._publish
        )
        await self.store.replay()
        self.exposures.load()
        self.library = await asyncio.to_thread(self._open_library)
        self._mechanisms = host_mechanisms(probe_host_limits())
        for record in list(self.store.sessions.values()):
            if record.state in LIVE_STATES:
                await self._recover(record)
        last = self.log.last_checkpoint
        if self.recovered or self.log.size > (last.size if last is not None else 0):
            # A power cut may have lost the last checkpoint's rename (it has no directory
            # fsync): every receipt is sealed again before anything is served.
            await self.log.checkpoint()

    def _open_library(self) -> Library | None:
        """The library store in gloved's state directory (made owner-only when absent), or
        None when it is unsafe or cannot be made (logged: refused, never repaired)."""
        from glove.config import UnsafePath, ensure_private_dir

        root = self.paths.library_dir
        try:
            ensure_private_dir(root.parent)
            return Library.open(root, create=True)
        except (LibraryError, UnsafePath, OSError) as exc:
            _log.warning("the library store %s is not usable: %s", root, exc)
            return None

    def _library_sizes(self) -> dict[str, int | None] | None:
        """Each entry with a bundle's name by digest: its size if it is a regular file,
        else None (whatever it is, the launch's resolve refuses it with its own code: a
        symlink, a FIFO); None without a usable store."""
        if self.library is None:
            return None
        found: dict[str, int | None] = {}
        try:
            root = self.library.root_fd
            for name in os.listdir(root):  # noqa: PTH208 - a directory descriptor
                if is_bundle_name(name):
                    with contextlib.suppress(FileNotFoundError):
                        info = os.stat(name, dir_fd=root, follow_symlinks=False)
                        found[digest_of(name)] = (
                            info.st_size if stat.S_ISREG(info.st_mode) else None
                        )
        except (LibraryError, OSError) as exc:
            _log.warning("the library store cannot be listed: %s", exc)
        return found

    def _index_receipts(self) -> None:
        from glove.journal import PosixStorage, iter_entries

        path = self._receipts_writer.path
        for entry in iter_entries(PosixStorage(), path, None):
            if entry.kind in ENVELOPE_KINDS:
                self._places.setdefault(entry.seq, entry.place)

    def _on_receipts_commit(self, entries: Sequence[Entry]) -> None:
        for entry in entries:
            if entry.kind in ENVELOPE_KINDS:
                self._places[entry.seq] = entry.place

    async def receipts_page(self, after: int, limit: int) -> dict[str, Any]:
        """A page of receipts after ``after``, each with its decoded payload.

        Raises:
            JournalError: the receipt journal is not running.
        """
        from glove.journal import PosixStorage, read_entry_at

        assert self.log is not None
        page = await self.log.journal.page(after=after, limit=limit)
        path = self._receipts_writer.path

        def read() -> list[dict[str, Any]]:
            out: list[dict[str, Any]] = []
            storage = PosixStorage()
            for receipt in page.receipts:
                place = self._places.get(receipt.seq)
                body: dict[str, Any] = {}
                if place is not None:
                    entry = read_entry_at(storage, path, place[0], place[1], receipt.seq)
                    body = json.loads(entry.payload)
                out.append(
                    {
                        "seq": receipt.seq,
                        "session_id": body.get("session_id"),
                        "checkpoint": receipt.checkpoint,
                        "t_ns": receipt.t_ns,
                        "receipt": body,
                        "kind": KIND_NAMES.get(receipt.kind, str(receipt.kind)),
                    }
                )
            return out

        receipts = await asyncio.to_thread(read)
        return {"receipts": receipts, "next_cursor": page.next_cursor, "acked": page.acked}

    async def receipts_ack(self, seq: int) -> int:
        """Acknowledge exactly the next unacknowledged receipt.

        Raises:
            ReceiptAckError: ``seq`` is not the next one.
        """
        assert self.log is not None
        # An acknowledged receipt may be pruned with its segment: the terminal records
        # written without an fdatasync of their own must be durable first (recovery
        # makes those sessions terminal from the receipts, which are then gone).
        assert self.store is not None
        await self.store.sync()
        return await self.log.journal.ack(seq)

    def _receipt_body(self, seq: int) -> dict[str, Any]:
        """The decoded payload of receipt ``seq`` (blocking: a read of one record)."""
        from glove.journal import PosixStorage, read_entry_at

        place = self._places.get(seq)
        if place is None:
            return {}
        entry = read_entry_at(PosixStorage(), self._receipts_writer.path, place[0], place[1], seq)
        body = json.loads(entry.payload)
        return body if isinstance(body, dict) else {}

    async def _recover(self, record: SessionRecord) -> None:
        """Give a session the last daemon left alive its one terminal state.

        Its receipt may already be in the receipt journal (the daemon died between the two
        appends): then that receipt's outcome is the truth and no second receipt is made.
        Otherwise the outcome is ``daemon_lost``: its sandbox died with the daemon.
        """
        assert self.log is not None
        assert self.store is not None
        was = record.state
        seq = self.log.receipt_seq(record.session_id)
        evaluation: dict[str, Any] | None = None
        if seq is not None:
            body = await asyncio.to_thread(self._receipt_body, seq)
            outcome = body.get("outcome")
            if not isinstance(outcome, dict):
                raise RecoveryRefused(
                    f"receipt {seq} of session {record.session_id} has no outcome: the "
                    "receipt journal and the session journal disagree"
                )
            entry = body.get("evaluation")
            if is_refinement_plan(record.plan):
                if not isinstance(entry, dict) or not isinstance(entry.get("outcome"), dict):
                    raise RecoveryRefused(
                        f"receipt {seq} of refinement session {record.session_id} is no "
                        "refinement envelope: the two journals disagree"
                    )
                evaluation = entry["outcome"]
        else:
            outcome = {
                "kind": "daemon_lost",
                "exit_code": None,
                "signal": None,
                "limit": None,
                "mechanism": None,
                "error": f"gloved stopped while the session was {was}; its sandbox ended with it",
            }
            # What was durable before the crash: the transcript, the audit log's records.
            directory = self.paths.sessions_data / record.session_id
            transcript = None
            audit = None
            try:
                if record.plan.get("terminal") == "pty":
                    transcript = await asyncio.to_thread(recovered_summary, directory)
                audit = digest_builtins(
                    await asyncio.to_thread(audit_digest, directory / AUDIT_NAME)
                )
            except Exception as exc:  # noqa: BLE001 - one session's leftovers never stop gloved starting
                # Its receipt says daemon_lost without these digests (an unreadable file):
                # one session's data must not keep the daemon from starting, again and again.
                _log.error(
                    "session %s: its output could not be digested at recovery (%s); its "
                    "receipt has no transcript or audit digest",
                    record.session_id,
                    type(exc).__name__,
                    exc_info=exc,
                )
                outcome["error"] += f"; its output could not be digested ({type(exc).__name__})"
                transcript = audit = None
            entry = self._lost_evaluation(record, "daemon_lost")
            payload = terminal_receipt(
                session_id=record.session_id,
                plan_sha256=record.sha256,
                plan_blake3=record.blake3,
                launch_binding=record.details.get("launch_binding"),
                result=None,
                outcome=outcome,
                output={},
                created_ns=record.created_ns,
                launched_ns=record.details.get("launched_ns"),
                ended_ns=time.time_ns(),
                audit=audit,
                transcript=transcript,
                evaluation=entry,
            )
            seq = await self._append_terminal(record, payload)
            evaluation = entry["outcome"] if entry is not None else None
        await self.store.terminal(record.session_id, seq, outcome, evaluation)
        self.recovered.append(record.session_id)
        _log.warning(
            "session %s was %s when gloved stopped: receipt %d (%s)",
            record.session_id,
            was,
            seq,
            outcome.get("kind"),
        )

    async def on_stop(self) -> None:
        """Stop every live session (their trees die with ``sessions``), seal, release."""
        for live in self._live.values():
            live.stop.set()
        tasks = [live.task for live in self._live.values() if live.task is not None]
        if tasks:
            await asyncio.wait(tasks, timeout=10.0)
        if self.log is not None:
            with contextlib.suppress(Exception):
                await self.log.checkpoint()
        self.exposures.close()
        if self.library is not None:
            self.library.close()
        for queues in self._watchers.values():
            for queue in queues:
                with contextlib.suppress(asyncio.QueueFull):
                    queue.put_nowait(None)

    # -- views --------------------------------------------------------------------------------

    def _view(self, record: SessionRecord) -> SessionView:
        return SessionView(
            session_id=record.session_id,
            state=record.state,
            harness=str(record.plan.get("harness", "")),
            created_ns=record.created_ns,
            updated_ns=record.state_ns,
            plan_sha256=record.sha256,
            plan_blake3=record.blake3,
            receipt_seq=record.receipt_seq,
            outcome=record.outcome,
            launch_binding=record.details.get("launch_binding"),
            cleaned=record.cleaned,
            terminal=str(record.plan.get("terminal", "pipes")),
            evaluation=record.evaluation,
        )

    def _record(self, session_id: str) -> SessionRecord:
        assert self.store is not None
        record = self.store.sessions.get(session_id)
        if record is None:
            raise SessionNotFound(f"no session {session_id!r}")
        return record

    def _publish(self, record: SessionRecord) -> None:
        view = self._view(record)
        for queue in list(self._watchers.get(record.session_id, ())):
            try:
                queue.put_nowait(view)
            except asyncio.QueueFull:
                self._watchers[record.session_id].discard(queue)  # too slow: its stream ends
        if record.terminal:
            for queue in self._watchers.pop(record.session_id, set()):
                with contextlib.suppress(asyncio.QueueFull):
                    queue.put_nowait(None)

    # -- the public operations (called by the control methods, on the loop) --------------------

    def local_policy(self, *, library: bool = True) -> LocalPolicy:
        """The owner's rules a plan is judged by, now (the library store's listing only
        with ``library``: a plan without projections does not need it)."""
        cfg = self.config
        harnesses = {
            hid: HarnessPolicy(tuple(h.argv), dict(h.env), h.profile)
            for hid, h in cfg.harnesses.items()
        }
        exposures = {
            e.alias: ExposurePolicy(
                generation=e.generation,
                mode=e.mode,
                target=e.target,
                revoked=not self.exposures.is_current(e),
            )
            for e in self.exposures.live()
        }
        limits = msgspec.to_builtins(cfg.limits)
        return LocalPolicy(
            harnesses=harnesses,
            exposures=exposures,
            limits_max={PLAN_LIMIT_MAP[k]: v for k, v in limits.items()},
            mechanisms=self._mechanisms,
            accept_weaker=frozenset(
                "all" if name == "all" else PLAN_NAME_OF[name] for name in cfg.accept_weaker
            ),
            networks=cfg.network.modes(),
            egress_allow=tuple(cfg.network.allow),
            egress_deny=tuple(cfg.network.deny),
            terminals=frozenset({"pipes", "pty"}),
            projections={alias: p.target for alias, p in cfg.projections.items()},
            library=self._library_sizes() if library else None,
        )

    def validate(self, data: bytes) -> ValidatedPlan:
        """Decode and validate a plan against local policy.

        Raises:
            PlanError: every problem, each with its JSON path.
        """
        plan = decode_plan(data)
        return validate_plan(plan, self.local_policy(library=bool(plan.projection_list)))

    def status(self, session_id: str) -> SessionView:
        """One session's view.

        Raises:
            SessionNotFound: no such session.
        """
        return self._view(self._record(session_id))

    def list(
        self, *, state: str | None, after: str | None, limit: int
    ) -> tuple[list[SessionView], str | None]:
        """A page of sessions by id, optionally in one state; the cursor of the next page."""
        assert self.store is not None
        ids = sorted(self.store.sessions)
        if after is not None:
            ids = [i for i in ids if i > after]
        picked: list[SessionView] = []
        for session_id in ids:
            record = self.store.sessions[session_id]
            if state is None or record.state == state:
                picked.append(self._view(record))
                if len(picked) > min(limit, MAX_LIST_PAGE):
                    break
        page = picked[: min(limit, MAX_LIST_PAGE)]
        more = len(picked) > len(page)
        return page, (page[-1].session_id if more and page else None)

    def watch(self, session_id: str) -> asyncio.Queue[SessionView | None]:
        """A queue of the session's views: the current one, then each change; None ends it.

        Raises:
            SessionNotFound: no such session.
        """
        record = self._record(session_id)
        queue: asyncio.Queue[SessionView | None] = asyncio.Queue(MAX_WATCH_BACKLOG)
        queue.put_nowait(self._view(record))
        if record.terminal:
            queue.put_nowait(None)
        else:
            self._watchers.setdefault(session_id, set()).add(queue)
        return queue

    def unwatch(self, session_id: str, queue: asyncio.Queue[SessionView | None]) -> None:
        """Forget a watcher (its stream ended)."""
        self._watchers.get(session_id, set()).discard(queue)

    async def create(self, data: bytes) -> SessionView:
        """Validate the plan, persist the session, start its lifecycle; return its view.

        Raises:
            PlanError: the plan is invalid here.
            SessionLimit: too many sessions are alive.
        """
        assert self.store is not None
        validated = self.validate(data)
        if len(self._live) >= self.config.sessions.max_running:
            raise SessionLimit(
                f"{len(self._live)} sessions are alive; gloved.toml allows "
                f"{self.config.sessions.max_running}"
            )
        session_id = new_session_id()
        generations = {alias: e.generation for alias, e in validated.exposures.items()}
        live = _Live(asyncio.Event())
        self._live[session_id] = live  # the slot is taken before the first await
        try:
            record = await self.store.created(
                session_id,
                json.loads(validated.canonical),
                validated.digests.sha256,
                validated.digests.blake3,
                generations,
            )
        except BaseException:
            self._live.pop(session_id, None)
            raise
        live.task = self.spawn_task(
            self._lifecycle(record, validated), name=f"session-{session_id}"
        )
        return self._view(record)

    def stop_session(self, session_id: str) -> SessionView:
        """Ask a live session to stop (its sandbox is killed); a terminal one is left as is.

        Raises:
            SessionNotFound: no such session.
        """
        record = self._record(session_id)
        live = self._live.get(session_id)
        if live is not None:
            live.stop.set()
        return self._view(record)

    async def cleanup(self, session_id: str) -> SessionView:
        """Remove a terminal session's output (its record and receipt stay).

        Raises:
            SessionNotFound: no such session.
            SessionConflict: it is not terminal yet.
        """
        assert self.store is not None
        record = self._record(session_id)
        if not record.terminal:
            raise SessionConflict(f"session {session_id} is {record.state}: stop it first")
        if not record.cleaned:
            directory = self.paths.sessions_data / session_id
            await asyncio.to_thread(shutil.rmtree, directory, True)
            await self.store.cleaned(session_id)
        return self._view(record)

    # -- the lifecycle ------------------------------------------------------------------------

    async def _prepare(
        self, record: SessionRecord, validated: ValidatedPlan, run: _Progress
    ) -> tuple[SandboxSpec, str, SessionTools | None]:
        """Read a refinement plan's fixture, resolve the exposures and the projections,
        compose the sandbox and its tools; persist each step. The projections (resolved,
        verified, frozen when gloved may) are kept in ``run``: whatever happens they are
        closed at the end.

        Raises:
            FixtureRefused: the fixture cannot be read or decoded (its code is kept in
                ``run.refusal``); nothing is launched.
            ExposureError: an exposure is revoked, stale or gone.
            ProjectionRefused: a projection is refused (its code says why).
            GloveError: the sandbox or the tools cannot be composed (SandboxError too).
            OSError: the host refused a step.
            _Unpersisted: the session journal could not persist a step (fatal).
        """
        await self._move(record, "preparing", durable=False)
        fault_point("prepare", record.session_id, _harness_of(record))
        evaluation = validated.evaluation
        if evaluation is not None:
            fixture = evaluation.fixture
            try:
                run.fixture = await asyncio.to_thread(
                    read_fixture, self.paths.library_dir, fixture.digest, fixture.size
                )
            except FixtureRefused as exc:
                run.refusal = exc.code
                raise
        exposures = []
        binds = []
        for alias, generation in record.exposures.items():
            binds.append(self.exposures.resolve(alias, generation))
            exposure = self.exposures.get(alias)
            assert exposure is not None
            exposures.append(exposure)
            # Its tree again (no FIFO, no socket where nothing gates connect()), off the loop.
            await asyncio.to_thread(self.exposures.contents_check(alias))
        harness = validated.harness
        spec = compose_spec(
            argv=tuple(harness.argv),
            env=dict(harness.env),
            profile=harness.profile,
            binds=binds,
            limits=validated.limits,
            accept_weaker=frozenset(self.config.accept_weaker),
            pty=validated.plan.terminal == "pty",
        )
        for item in validated.projections:
            conflict = projection_conflict(spec, item.target)
            if conflict is not None:
                raise ProjectionRefused(
                    "projection_target_conflict",
                    f"projection {item.alias!r}: its target {conflict}",
                    alias=item.alias,
                )
        run.projections = await asyncio.to_thread(
            prepare_projections, self.library, validated.projections
        )
        mounted = [projection.receipt() for projection in run.projections]
        tools = await session_tools(
            session_id=record.session_id,
            data_dir=self.paths.sessions_data / record.session_id,
            mcp_config=self._mcp_config(_harness_of(record)),
            rules=validated.egress,
            hostname=spec.hostname,
        )
        try:
            if tools is not None:
                spec = tools.apply(spec, proxy=validated.egress is not None)
            binding = launch_binding(spec, record.sha256, record.blake3, exposures, mounted)
            await self._move(record, "composed", {"launch_binding": binding})
        except BaseException:
            if tools is not None:  # nobody else holds them yet: release them here
                await _release_tools(record.session_id, tools)
            raise
        return spec, binding, tools

    def _mcp_config(self, harness_id: str) -> str | None:
        """The harness's MCP configuration, as an absolute path (relative to gloved.toml)."""
        harness = self.config.harnesses.get(harness_id)
        if harness is None or harness.mcp is None:
            return None
        return str(self.paths.gloved_toml.parent / harness.mcp)

    async def _run(
        self, record: SessionRecord, spec: SandboxSpec, run: _Progress
    ) -> tuple[SessionOutcome, int | None]:
        """Run the session tree under ``sessions``; persist ``running`` once it launched.

        A refinement session's tree starts with its ``evaluator``; once the sandbox has its
        result, and before the tree stops, the evaluator takes the rest of the stream and
        finishes (``run.finished``).

        Whatever this raises, the session's tree has ended first (its sandbox killed).

        Raises:
            _Unpersisted: the session journal could not persist a step (fatal).
            Exception: anything a step of the launch raised (a bug: ``internal_error``).
        """
        drain, tools, evaluator = run.drain, run.tools, run.evaluator
        projections = tuple(run.projections)
        assert drain is not None
        live = self._live[record.session_id]
        size = drain.size if isinstance(drain, PtyDrain) else None
        front: list[Actor] = [drain]
        before_stop = None
        if evaluator is not None and isinstance(drain, PtyDrain):
            front.insert(0, evaluator)
            before_stop = functools.partial(self._finish_evaluation, record, run, drain, evaluator)
        tree = build_session(
            record.session_id,
            SandboxLaunch(spec, drain.write, terminal_size=size, projections=projections),
            parts=tools.parts if tools is not None else None,
            front=front,
        )
        launched: asyncio.Future[None] = asyncio.get_running_loop().create_future()

        def started(tree: Supervisor) -> None:
            fault_point("launch", record.session_id, _harness_of(record))
            sandbox = tree.child(SANDBOX_CHILD)
            assert isinstance(sandbox, SandboxActor)
            if tools is not None:
                tools.parts.started(tree)
            if isinstance(drain, PtyDrain):
                drain.follow(sandbox)  # the terminal's input side, once launched

            def mark(_: object) -> None:
                if not launched.done():
                    launched.set_result(None)

            waiter = asyncio.ensure_future(sandbox.launched.wait())
            waiter.add_done_callback(mark)

        running = asyncio.ensure_future(
            run_session(
                tree,
                on_started=started,
                stop=live.stop,
                parent=self._sessions,
                before_stop=before_stop,
            )
        )
        launched_ns: int | None = None
        waits: set[asyncio.Future[Any]] = {launched, running}
        try:
            await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
            if launched.done():
                launched_ns = time.time_ns()
                await self._move(record, "running", {"launched_ns": launched_ns})
            launched.cancel()
            session = await running
        except Exception:
            # The tree must not outlive this lifecycle: stop it, wait for its teardown.
            live.stop.set()
            await asyncio.wait({running})
            if not running.cancelled():
                running.exception()  # retrieved: the error being raised is the one that counts
            raise
        await self._move(record, "finalizing", durable=False)
        return session, launched_ns

    async def _finish_evaluation(
        self, record: SessionRecord, run: _Progress, drain: PtyDrain, evaluator: EvaluatorActor
    ) -> None:
        """The evaluator's evidence, once the stream ended (never raises: a failure is the
        ``evaluator_failed`` infrastructure error of the verdict)."""
        try:
            finished = await evaluator.finish(drain.evicted)
            # Defense in depth: the evaluator saw exactly the bytes the transcript holds.
            seen = drain.digests()["pty"].bytes
            if finished.evidence.bytes_total != seen:
                _log.error(
                    "session %s: the evaluator saw %d bytes of the %d on the terminal",
                    record.session_id,
                    finished.evidence.bytes_total,
                    seen,
                )
                finished = Finished(finished.evidence, complete=False)
            run.finished = finished
        except Exception as exc:  # noqa: BLE001 - the verdict says it; the session ends normally
            _log.error(
                "session %s: the evaluator failed (%s); the verdict is infra_error",
                record.session_id,
                type(exc).__name__,
                exc_info=exc,
            )
            run.evaluator_error = "evaluator_failed"

    def _open_drain(
        self, record: SessionRecord, validated: ValidatedPlan
    ) -> OutputDrain | PtyDrain:
        """The session's output drain (a PTY session's is also its viewers' hub entry)."""
        directory = self.paths.sessions_data / record.session_id
        if validated.plan.terminal != "pty":
            return OutputDrain(directory)
        drain = PtyDrain(
            directory,
            capacity=self.config.terminal.transcript_bytes,
            size=validated.terminal_size or DEFAULT_WINSIZE,
        )
        self.terminals.opened(record.session_id, drain)
        return drain

    async def _drive(
        self, record: SessionRecord, validated: ValidatedPlan, run: _Progress
    ) -> dict[str, Any]:
        """Prepare and run the session; its outcome, whatever happened on the way.

        A refusal the design expects (an exposure, the host, the sandbox) is a
        ``setup_error`` with its reason; anything else is a bug in this session's handling:
        ``internal_error``, logged with its traceback, and the other sessions go on.

        Raises:
            _Unpersisted: the session journal could not persist a step (fatal).
        """
        try:
            run.drain = self._open_drain(record, validated)
            spec, run.binding, run.tools = await self._prepare(record, validated, run)
            run.stage = "launch"
            if run.fixture is not None and isinstance(run.drain, PtyDrain):
                run.evaluator = EvaluatorActor(run.fixture)
                run.drain.add_observer(run.evaluator.observe)
            session, run.launched_ns = await self._run(record, spec, run)
            run.result = session.result
            failure = session.failure
            if failure is not None:
                run.failed_child = session.failed_child or "session"
            if failure is not None and not isinstance(failure, (GloveError, OSError)):
                return self._internal(record.session_id, session.failed_child or "launch", failure)
            if failure is not None and run.result is None:
                return outcome_of(None, error=str(failure), error_code=refusal_code(str(failure)))
            if failure is not None:
                return outcome_of(run.result, error=f"the session failed: {failure!r}")
            error = run.result.error if run.result is not None else None
            return outcome_of(run.result, error_code=refusal_code(error))
        except _Unpersisted:
            raise
        except (ExposureError, SandboxError, LimitRefused, GloveError, OSError) as exc:
            text = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
            code = exc.code if isinstance(exc, ProjectionRefused) else None
            return outcome_of(None, error=text, error_code=code)
        except Exception as exc:  # noqa: BLE001 - one session's bug is its receipt, not gloved's crash
            return self._internal(record.session_id, run.stage, exc)

    def _internal(self, session_id: str, stage: str, exc: BaseException) -> dict[str, Any]:
        """Log ``exc`` with its traceback (gloved's log only); the ``internal_error`` outcome."""
        _log.error(
            "session %s: internal error in %s; the session ends with internal_error",
            session_id,
            stage,
            exc_info=exc,
        )
        return internal_outcome(exc, stage)

    def _evaluation(
        self, validated: ValidatedPlan, run: _Progress, outcome: dict[str, Any]
    ) -> dict[str, Any] | None:
        """A refinement plan's ``evaluation`` entry, judged now that the session ended and
        its resources were accounted (None for a resource plan)."""
        evaluation = validated.evaluation
        if evaluation is None:
            return None
        finished = run.finished
        evidence = finished.evidence if finished is not None else None
        if run.refusal is not None or run.fixture is None:
            code = run.refusal or str(outcome.get("kind") or "fixture_missing")
            return evaluation_entry(
                fixture_digest=evaluation.fixture.digest,
                fixture_size=evaluation.fixture.size,
                refusal=run.refusal,
                termination=None,
                evidence=None,
                outcome=infra_outcome(code),
            )
        infra_error = run.evaluator_error
        failed = run.failed_child
        if infra_error is None and failed is not None and outcome.get("kind") not in INFRA_KINDS:
            # A part of Glove under the run failed (the drain, the evaluator, a tool).
            infra_error = failed.replace("-", "_")[:56] + "_failed"
        termination = termination_of(
            outcome,
            run.result,
            complete=finished is not None and finished.complete,
            infra_error=infra_error,
        )
        return evaluation_entry(
            fixture_digest=evaluation.fixture.digest,
            fixture_size=evaluation.fixture.size,
            refusal=None,
            termination=termination,
            evidence=evidence,
            outcome=verdict_of(termination, evidence, run.fixture),
        )

    def _lost_evaluation(self, record: SessionRecord, code: str) -> dict[str, Any] | None:
        """The ``infra_error`` evaluation of a refinement session that was never judged
        (the daemon was lost, or finalizing failed); None for a resource plan."""
        member = record.plan.get("evaluation")
        if not isinstance(member, dict):
            return None
        fixture = member.get("fixture") or {}
        return evaluation_entry(
            fixture_digest=str(fixture.get("digest")),
            fixture_size=int(fixture.get("size") or 0),
            refusal=None,
            termination=None,
            evidence=None,
            outcome=infra_outcome(code),
        )

    async def _append_terminal(self, record: SessionRecord, payload: dict[str, Any]) -> int:
        """Append the session's terminal envelope as its plan's kind; its sequence number.

        Raises:
            EnvelopeMismatch: the payload is not the envelope its plan needs (a bug).
            JournalError: it could not be made durable (fatal, by design).
        """
        assert self.log is not None
        kind = envelope_record_kind(record.plan)
        check_envelope(record.plan, payload, kind)
        receipt, _ = await self.log.append_receipt(jcs_dumps(payload), kind=kind)
        return receipt.seq

    async def _receipt(
        self,
        record: SessionRecord,
        run: _Progress,
        outcome: dict[str, Any],
        evaluation: dict[str, Any] | None = None,
    ) -> dict[str, Any]:
        """The terminal receipt's payload: the outcome, output and audit digests, counts
        (and, for a refinement plan, its evaluation: a refinement envelope)."""
        output: dict[str, dict[str, Any]] = {}
        if run.drain is not None:
            output = {name: msgspec.to_builtins(d) for name, d in run.drain.digests().items()}
        audit = None
        counts: dict[str, int] = {}
        if run.tools is not None:
            audit = digest_builtins(await asyncio.to_thread(audit_digest, run.tools.audit_path))
            counts = run.tools.counts()
        transcript = run.drain.summary() if isinstance(run.drain, PtyDrain) else None
        return terminal_receipt(
            session_id=record.session_id,
            plan_sha256=record.sha256,
            plan_blake3=record.blake3,
            launch_binding=run.binding,
            result=run.result,
            outcome=outcome,
            output=output,
            created_ns=record.created_ns,
            launched_ns=run.launched_ns,
            ended_ns=time.time_ns(),
            audit=audit,
            counts=counts,
            transcript=transcript,
            evaluation=evaluation,
            projections=[projection.receipt() for projection in run.projections],
        )

    async def _lifecycle(self, record: SessionRecord, validated: ValidatedPlan) -> None:
        """Drive one session from ``created`` to its receipt (see the module docstring).

        Raises:
            JournalError: a step or the receipt could not be persisted (fatal, by design).
            ActorError: a journal writer is gone or overran its deadline (the same).
        """
        assert self.store is not None
        assert self.log is not None
        session_id = record.session_id
        run = _Progress()
        evaluation: dict[str, Any] | None = None
        try:
            outcome = await self._drive(record, validated, run)
            if run.projections:  # the launch closed them; a failure before it did not
                await asyncio.to_thread(_close_all, run.projections)
            run.stage = "finalize"
            if run.tools is not None:
                await run.tools.close()
            fault_point("finalize", session_id, _harness_of(record))
            evaluation = self._evaluation(validated, run, outcome)
            payload = await self._receipt(record, run, outcome, evaluation)
        except _Unpersisted as exc:
            if run.tools is not None:
                await _release_tools(session_id, run.tools)
            raise exc.error from None
        except Exception as exc:  # noqa: BLE001 - one session's bug is its receipt, not gloved's crash
            # finalize failed: a receipt that commits to what is certain (no digests).
            outcome = self._internal(session_id, run.stage, exc)
            evaluation = self._lost_evaluation(record, "internal_error")
            payload = terminal_receipt(
                session_id=session_id,
                plan_sha256=record.sha256,
                plan_blake3=record.blake3,
                launch_binding=run.binding,
                result=None,
                outcome=outcome,
                output={},
                created_ns=record.created_ns,
                launched_ns=run.launched_ns,
                ended_ns=time.time_ns(),
                evaluation=evaluation,
            )
        except BaseException:  # cancelled: the registry is stopping
            if run.tools is not None:
                await _release_tools(session_id, run.tools)
            raise
        # The receipt first, then the terminal state: a receipt that cannot be made durable
        # crashes the registry (fail closed; the restart's recovery gives the session one).
        seq = await self._append_terminal(record, payload)
        fault_point("receipt", session_id, _harness_of(record))
        await self.log.checkpoint()
        fault_point("checkpoint", session_id, _harness_of(record))
        shown = evaluation["outcome"] if evaluation is not None else None
        await self.store.terminal(session_id, seq, outcome, shown)
        self._live.pop(session_id, None)
        self.terminals.ended(session_id)
        self._publish(record)
        fault_point("terminal", session_id, _harness_of(record))

    async def _move(
        self,
        record: SessionRecord,
        state: str,
        details: dict[str, Any] | None = None,
        *,
        durable: bool = True,
    ) -> None:
        """Persist a transition, then show it (``durable=False``: written now, shown by the
        store once the next commit made it durable; for a state recovery treats as the one
        before it).

        Raises:
            _Unpersisted: the session journal could not persist it (fatal).
        """
        assert self.store is not None
        await _durable(self.store.transition(record.session_id, state, details, durable=durable))
        if durable:
            self._publish(record)

    def sandbox_of(self, session_id: str) -> SandboxActor | None:
        """The live sandbox actor of a running session (None when it has none now)."""
        try:
            tree = self._sessions.child(f"session-{session_id}")
            sandbox = tree.child(SANDBOX_CHILD) if isinstance(tree, Supervisor) else None
        except KeyError:
            return None
        return sandbox if isinstance(sandbox, SandboxActor) else None

    # -- exposures and receipts ---------------------------------------------------------------

    async def expose(self, alias: str, path: str, mode: str, target: str | None) -> dict[str, Any]:
        """Create (or re-create, a new generation) an exposure: every check (its contents
        walked off the loop), then the record.

        Raises:
            ExposureError: it cannot be made.
        """
        if mode not in ("ro", "rw"):
            raise ExposureError(f"mode must be ro or rw, not {mode!r}")
        candidate = await asyncio.to_thread(
            functools.partial(self.exposures.inspect, alias, path, mode=mode, target=target)  # type: ignore[arg-type]
        )
        exposure = self.exposures.commit(candidate)
        return {
            "alias": exposure.alias,
            "generation": exposure.generation,
            "mode": exposure.mode,
            "target": exposure.target,
        }

    def revoke(self, alias: str) -> dict[str, Any]:
        """Revoke an exposure.

        Raises:
            ExposureError: no such live exposure.
        """
        exposure = self.exposures.revoke(alias)
        return {"alias": exposure.alias, "generation": exposure.generation, "revoked": True}


def registry_spec(**kwargs: Any) -> ChildSpec:
    """The root child that runs the registry."""
    return ChildSpec("registry", lambda: SessionRegistry(**kwargs))


def sessions_data_dir(paths: GlovePaths, session_id: str) -> Path:
    """Where a session's output files are."""
    return paths.sessions_data / session_id
