"""The ``registry`` actor: gloved's sessions, plans, exposures and receipts.

It owns the daemon's durable state: the session journal (every plan and transition), the
receipt journal's transparency log (terminal receipts, checkpoints) and the exposure
registry. It takes one message at a time (``_messages.py``): the control methods ask it,
each session's driver reports to it, and nothing else touches that state, so no two
requests interleave. The lifecycle of each session, durable at every step::

    created (the plan and both digests are in the journal before the id is returned)
      -> preparing (exposures resolved through their pinned descriptors; a revoked or stale
         generation fails here)
      -> composed (the sandbox spec and its launch binding)
      -> running (the sandbox launched; ``session-<id>/contained`` runs under ``sessions``)
      -> finalizing (drained; resources accounted)
      -> terminal (the receipt is appended and checkpointed, *then* the state is visible)

The work of each step runs in the session's driver (``_driver.py``), the first child of
``session-<id>`` under ``sessions``, never in this actor's handler: the registry persists
what the driver reports (:class:`~glove.session._messages.Moved`), appends the receipt it
hands over (:class:`~glove.session._messages.Finish`), and watches ``session-<id>``: a
driver that crashes before its receipt gives its session the ``internal_error`` receipt
from its exit reason (:class:`~glove.session._messages.SessionExited`). A failure of one
session is that session's receipt, never the daemon's crash; a journal that cannot persist
is (fail closed: the service manager restarts the daemon, which recovers, see
``_recovery.py``). Journals that do not verify make the daemon refuse to start.

A request's refusal (no such session, an invalid plan) is its reply
(:class:`~glove.session._messages.Refused`); only the progress of a session and the receipts
it ends with may crash the registry, and only when the journal refuses them. Slow parts of
a request (a cleanup's files removed, an exposure's tree walked, a receipts page read) run
in this actor's tasks off its mailbox and come back as a message of its own or a
:class:`~glove.actors.Deferred` reply, so ``session.status`` never waits behind them.

So does the wait for durability. A session's record (``created``, a ``Moved`` step, its
receipt and checkpoint) is written in the order the messages come, and each record is
applied and shown only once durable, as before; but the handler returns as soon as the
write is under way and a task of the registry waits for the fdatasync and replies
(:meth:`SessionRegistry._deferred`). The steps of many sessions then share one group
commit (and their receipts one checkpoint) instead of queueing behind each other's syncs.
Each session has at most one step in flight (its driver waits for each reply); what must
not overtake a session's step waits for it: the ``internal_error`` receipt of a crashed
driver (:class:`_Live` ``.step``), and an acknowledgement of receipts (every receipt being
finished has its terminal record written first). A task whose write the journal refuses
crashes the registry, as the handler did (fail closed).
"""

from __future__ import annotations

import asyncio
import builtins
import contextlib
import functools
import json
import logging
import os
import secrets
import shutil
import stat
import time
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

import msgspec

from glove.actors import Actor as _Actor
from glove.actors import (
    ActorDead,
    ActorError,
    Busy,
    ChildFailed,
    ChildSpec,
    Deferred,
    Supervisor,
)
from glove.config import GlovedConfig, GlovePaths
from glove.container import probe_host_limits, probe_unix_gate
from glove.journal import (
    Journal,
    JournalWriter,
    LogAppend,
    LogExport,
    LogHead,
    LogReceiptOf,
    LogRefused,
    LogSeal,
    SigningKey,
    TransparencyLogActor,
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
    validate_plan,
)
from glove.records import EvaluationEntry, Receipt, ReceiptOutcome, encode_receipt
from glove.session import _messages as m
from glove.session._driver import (
    CONTAINED_CHILD,
    DriverContext,
    SessionDriver,
    StopSession,
    certain_receipt,
    harness_of,
    internal_outcome,
    journaled_projections,
    lost_evaluation,
    session_subtree,
)
from glove.session._exposures import ExposureRegistry
from glove.session._faults import fault_point
from glove.session._messages import ask_registry, deadline_in
from glove.session._receipt import check_envelope, envelope_record_kind
from glove.session._receipt_index import ReceiptIndex, ReceiptPage
from glove.session._recovery import recovered_receipt
from glove.session._sandbox import SandboxActor
from glove.session._store import LIVE_STATES, SessionRecord, SessionStore
from glove.session._terminals import TerminalDesk
from glove.session._tree import SANDBOX_CHILD
from glove.session._viewers import TerminalHub
from glove.session._views import ExposureView, SessionView, Watchers, WatchQueue, view_of
from glove.session.errors import (
    ExposureError,
    SessionConflict,
    SessionLimit,
    SessionNotFound,
)

__all__ = ["MAX_LIST_PAGE", "SessionRegistry", "SessionView", "registry_spec"]

_log = logging.getLogger(__name__)

#: Largest page of ``session.list``.
MAX_LIST_PAGE: Final = 500
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
#: How long the news of a session tree's end may wait in the mailbox (it is never dropped
#: in practice: the registry's own handlers are short).
EXIT_NEWS_S: Final = 3600.0
#: A request to the transparency log (an append waits for its group commit).
LOG_TIMEOUT_S: Final = 60.0


#: The messages whose failure crashes the registry: a session's progress and its receipt.
_FATAL_ON_FAILURE: Final = (m.Moved, m.DrainOpened, m.Finish, m.SessionExited)


class DriverEnded(Exception):
    """A session's driver ended before it handed over the session's receipt."""


@dataclass
class _Live:
    """What the registry holds for a session that is not terminal yet."""

    driver: SessionDriver | None = None
    #: session.stop came before the driver existed: it starts stopped.
    stop_requested: bool = False
    #: The session's step being made durable (its ``created``, a ``Moved``, its receipt).
    step: asyncio.Task[None] | None = None


def new_session_id() -> str:
    """A sortable, unguessable session id: UTC time then 64 random bits."""
    return time.strftime("%Y%m%dT%H%M%SZ", time.gmtime()) + "-" + secrets.token_hex(8)


def _root_cause(reason: BaseException | None) -> BaseException:
    """The exception a session tree's failure comes from (its driver's, normally)."""
    cause: BaseException | None = reason
    while isinstance(cause, ChildFailed) and cause.cause is not None:
        cause = cause.cause
    if cause is None or isinstance(cause, (ChildFailed, asyncio.CancelledError)):
        return DriverEnded("the driver ended before the session's receipt")
    return cause


class SessionRegistry(_Actor):
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
        receipt_log: TransparencyLogActor,
    ) -> None:
        super().__init__("registry", mailbox_size=1024)
        self.config = config
        self.paths = paths
        self._hmac_key = hmac_key
        self._signing_key = signing_key
        self._receipts_writer = receipts
        self._sessions_writer = sessions_journal
        self._sessions = sessions
        #: The transparency log over ``receipts`` (an actor: appends, seals, bundles).
        self._receipt_log = receipt_log
        self._receipts = Journal(receipts)
        self.store: SessionStore | None = None
        self.exposures = ExposureRegistry(
            paths.exposures_file,
            protected_root=config.protected_root,
            own_paths=(paths.config_dir, paths.state_dir, paths.runtime_dir),
            allow_special=tuple(config.exposures.allow_special),
            sockets_gated=probe_unix_gate().mechanism is not None,
        )
        self._live: dict[str, _Live] = {}
        #: Receipts being appended, sealed and made terminal (``_on_finish``'s tasks).
        self._finishing: set[asyncio.Task[None]] = set()
        self._watchers = Watchers()
        self._mechanisms: dict[str, str | None] = {}
        self.recovered: list[str] = []
        #: Where each receipt record sits, to page their payloads.
        self._index = ReceiptIndex(receipts.path)
        #: PTY sessions' drains and viewers (session.attach and friends).
        self.terminals = TerminalHub()
        #: The library store (``paths.library_dir``), once opened; None when it cannot be
        #: (capabilities then say schema_version 0 and every projection is refused).
        self.library: Library | None = None
        self._handlers: dict[type, Callable[[Any], Coroutine[Any, Any, object]]] = {
            m.Validate: self._on_validate,
            m.Create: self._on_create,
            m.Status: self._on_status,
            m.List: self._on_list,
            m.Watch: self._on_watch,
            m.Unwatch: self._on_unwatch,
            m.Stop: self._on_stop_session,
            m.Cleanup: self._on_cleanup,
            m.Cleaned: self._on_cleaned,
            m.ReceiptsPage: self._on_receipts_page,
            m.ReceiptsAck: self._on_receipts_ack,
            m.ReceiptsExport: self._on_receipts_export,
            m.Expose: self._on_expose,
            m.Exposed: self._on_exposed,
            m.Revoke: self._on_revoke,
            m.Exposures: self._on_exposures,
            m.Resolve: self._on_resolve,
            m.Moved: self._on_moved,
            m.DrainOpened: self._on_drain_opened,
            m.Finish: self._on_finish,
            m.SessionExited: self._on_session_exited,
            **TerminalDesk(
                lambda: self.store.sessions if self.store is not None else None,
                self.terminals,
                lambda session_id: self.paths.sessions_data / session_id,
                self.sandbox_of,
            ).handlers(),
        }

    # -- start and stop ---------------------------------------------------------------------

    async def on_start(self) -> None:
        """Attach the journals, replay, recover the sessions the last daemon left alive.

        Raises:
            RecoveryRefused: a journal does not verify.
            LogMismatch: the receipt journal and its checkpoint disagree.
        """
        await self._receipts_writer.started.wait()
        await self._sessions_writer.started.wait()
        await self._receipt_log.started.wait()
        self._receipts_writer.add_commit_listener(self._index.on_commit)
        await self.run_blocking(self._index.scan)
        self.store = SessionStore(
            Journal(self._sessions_writer), self._hmac_key, on_shown=self._watchers.publish
        )
        await self.store.replay()
        self.exposures.load()
        self.library = await self.run_blocking(self._open_library)
        self._mechanisms = host_mechanisms(probe_host_limits())
        for record in list(self.store.sessions.values()):
            if record.state in LIVE_STATES:
                await self._recover(record)
        size, sealed = await self._log_ask(LogHead())
        if self.recovered or size > sealed:
            # A power cut may have lost the last checkpoint's rename (it has no directory
            # fsync): every receipt is sealed again before anything is served.
            await self._log_ask(LogSeal())

    async def _log_ask(self, msg: object) -> Any:
        """Ask the transparency log (under the deadline of the message being handled).

        Raises:
            Exception: what the log refused (:class:`LogRefused`), or its crash.
        """
        reply = await self._receipt_log.ask(msg, timeout=LOG_TIMEOUT_S, wait=True)
        if isinstance(reply, LogRefused):
            raise reply.error
        return reply

    async def _recover(self, record: SessionRecord) -> None:
        assert self.store is not None
        seq, outcome, evaluation = await recovered_receipt(
            record,
            seq=await self._log_ask(LogReceiptOf(record.session_id)),
            index=self._index,
            sessions_data=self.paths.sessions_data,
            append=self._append_terminal,
        )
        was = record.state
        await self.store.terminal(record.session_id, seq, outcome, evaluation)
        self.recovered.append(record.session_id)
        _log.warning(
            "session %s was %s when gloved stopped: receipt %d (%s)",
            record.session_id,
            was,
            seq,
            outcome.kind,
        )

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

    async def on_stop(self) -> None:
        """Seal and release; the live sessions' trees die with ``sessions`` (their
        receipts are the next start's recovery)."""
        with contextlib.suppress(Exception):
            await self._log_ask(LogSeal())
        self.exposures.close()
        if self.library is not None:
            self.library.close()
        self._watchers.end_all()

    # -- one message at a time ----------------------------------------------------------------

    async def handle(self, msg: object) -> object:
        """Handle one :data:`~glove.session._messages.RegistryMessage`.

        A request's failure is its :class:`~glove.session._messages.Refused` reply; a
        session's progress that the journal refuses crashes the registry (fail closed).

        Raises:
            JournalError, ActorError: a progress step or a receipt could not be persisted.
            TypeError: not a registry message (a bug).
        """
        handler = self._handlers.get(type(msg))
        if handler is None:
            raise TypeError(f"the registry does not handle {type(msg).__name__}")
        if isinstance(msg, _FATAL_ON_FAILURE):
            return await handler(msg)
        try:
            return await handler(msg)
        except Exception as exc:  # noqa: BLE001 - a request's failure is its asker's, never the registry's
            return m.Refused(exc)

    # -- views --------------------------------------------------------------------------------

    def _record(self, session_id: str) -> SessionRecord:
        assert self.store is not None
        record = self.store.sessions.get(session_id)
        if record is None:
            raise SessionNotFound(f"no session {session_id!r}")
        return record

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

    def _validate(self, data: bytes) -> ValidatedPlan:
        plan = decode_plan(data)
        return validate_plan(plan, self.local_policy(library=bool(plan.projection_list)))

    def sandbox_of(self, session_id: str) -> SandboxActor | None:
        """The live sandbox actor of a running session (None when it has none now)."""
        try:
            tree = self._sessions.child(f"session-{session_id}")
            contained = tree.child(CONTAINED_CHILD) if isinstance(tree, Supervisor) else None
            sandbox = contained.child(SANDBOX_CHILD) if isinstance(contained, Supervisor) else None
        except KeyError:
            return None
        return sandbox if isinstance(sandbox, SandboxActor) else None

    # -- requests -----------------------------------------------------------------------------

    async def _on_validate(self, msg: m.Validate) -> ValidatedPlan:
        return self._validate(msg.data)

    async def _on_create(self, msg: m.Create) -> object:
        assert self.store is not None
        validated = self._validate(msg.data)
        if len(self._live) >= self.config.sessions.max_running:
            raise SessionLimit(
                f"{len(self._live)} sessions are alive; gloved.toml allows "
                f"{self.config.sessions.max_running}"
            )
        session_id = new_session_id()
        generations = {alias: e.generation for alias, e in validated.exposures.items()}
        live = _Live()
        self._live[session_id] = live
        store = self.store

        async def persist() -> object:
            # A refused write is this request's refusal (a full journal), as before.
            try:
                record = await store.created(
                    session_id,
                    json.loads(validated.canonical),
                    validated.digests.sha256,
                    validated.digests.blake3,
                    generations,
                )
                self._start_session(record, validated, live)
            except Exception as exc:  # noqa: BLE001 - the asker's refusal
                self._live.pop(session_id, None)
                return m.Refused(exc)
            except BaseException:
                self._live.pop(session_id, None)
                raise
            return view_of(record)

        return self._deferred(persist, f"create-{session_id}", live)

    def _start_session(self, record: SessionRecord, validated: ValidatedPlan, live: _Live) -> None:
        """Start ``session-<id>`` (its driver first) under ``sessions`` and watch it."""
        context = DriverContext(self.config, self.paths, self.library, self)
        session_id = record.session_id

        def driver(tree: Supervisor) -> SessionDriver:
            made = SessionDriver(context, record, validated, tree)
            live.driver = made
            if live.stop_requested:
                made.tell(StopSession())
            return made

        tree = session_subtree(driver, session_id)
        self._sessions.start_child(ChildSpec(tree.name, lambda: tree, restart="temporary"))
        self._sessions.watch(tree.name, functools.partial(self._session_exited, session_id))

    def _session_exited(self, session_id: str, reason: BaseException | None) -> None:
        """The watch on ``session-<id>``: tell the registry (a loop callback)."""
        if self.state in ("stopping", "stopped", "crashed"):
            return
        news = m.SessionExited(
            deadline=asyncio.get_running_loop().time() + EXIT_NEWS_S,
            session_id=session_id,
            reason=reason,
        )
        try:
            self.tell(news, timeout=EXIT_NEWS_S)
        except Busy:
            self.spawn_task(self.send(news, timeout=EXIT_NEWS_S), name="exit-news")
        except ActorDead:
            pass

    async def _on_status(self, msg: m.Status) -> SessionView:
        return view_of(self._record(msg.session_id))

    async def _on_list(self, msg: m.List) -> tuple[list[SessionView], str | None]:
        assert self.store is not None
        limit = min(msg.limit, MAX_LIST_PAGE)
        ids = sorted(self.store.sessions)
        if msg.after is not None:
            ids = [i for i in ids if i > msg.after]
        picked: list[SessionView] = []
        for session_id in ids:
            record = self.store.sessions[session_id]
            if msg.state is None or record.state == msg.state:
                picked.append(view_of(record))
                if len(picked) > limit:
                    break
        page = picked[:limit]
        more = len(picked) > len(page)
        return page, (page[-1].session_id if more and page else None)

    async def _on_watch(self, msg: m.Watch) -> WatchQueue:
        return self._watchers.add(self._record(msg.session_id))

    async def _on_unwatch(self, msg: m.Unwatch) -> None:
        self._watchers.discard(msg.session_id, msg.queue)

    async def _on_stop_session(self, msg: m.Stop) -> SessionView:
        record = self._record(msg.session_id)
        live = self._live.get(msg.session_id)
        if live is not None:
            if live.driver is None:
                live.stop_requested = True
            else:
                with contextlib.suppress(ActorDead, Busy):  # it is ending, or told already
                    live.driver.tell(StopSession())
        return view_of(record)

    async def _on_cleanup(self, msg: m.Cleanup) -> object:
        record = self._record(msg.session_id)
        if not record.terminal:
            raise SessionConflict(f"session {msg.session_id} is {record.state}: stop it first")
        if record.cleaned:
            return view_of(record)
        directory = self.paths.sessions_data / msg.session_id

        async def remove() -> object:
            await asyncio.to_thread(shutil.rmtree, directory, True)
            return await self._follow_up(
                m.Cleaned(deadline=msg.deadline, session_id=msg.session_id)
            )

        return Deferred(self.spawn_task(remove(), name=f"cleanup-{msg.session_id}"))

    async def _follow_up(self, msg: m.Message) -> object:
        """Ask the registry its own follow-up from one of its tasks: the reply, or the
        refusal (a task of this actor that raised would crash it)."""
        try:
            timeout = max(msg.deadline - asyncio.get_running_loop().time(), 0.0)
            return await self.ask(msg, timeout=timeout, wait=True)
        except ActorError as exc:
            return m.Refused(exc)

    async def _on_cleaned(self, msg: m.Cleaned) -> SessionView:
        assert self.store is not None
        record = self._record(msg.session_id)
        if not record.cleaned:
            await self.store.cleaned(msg.session_id)
        return view_of(record)

    async def _on_receipts_page(self, msg: m.ReceiptsPage) -> object:
        page = await self._receipts.page(after=msg.after, limit=msg.limit)

        async def read() -> object:
            try:
                rows = await asyncio.to_thread(self._index.rows, page.receipts)
            except Exception as exc:  # noqa: BLE001 - the asker's error, as before
                return m.Refused(exc)
            return ReceiptPage(rows, page.next_cursor, page.acked)

        return Deferred(self.spawn_task(read(), name="receipts-page"))

    async def _on_receipts_ack(self, msg: m.ReceiptsAck) -> int:
        assert self.store is not None
        # An acknowledged receipt may be pruned with its segment: the terminal records
        # written without an fdatasync of their own must be durable first (recovery
        # makes those sessions terminal from the receipts, which are then gone), and a
        # receipt still being finished must have its terminal record written first.
        if self._finishing:
            await asyncio.wait(set(self._finishing))
        await self.store.sync()
        return await self._receipts.ack(msg.seq)

    async def _on_receipts_export(self, msg: m.ReceiptsExport) -> bytes:
        return await self._log_ask(LogExport(msg.session_id))  # type: ignore[no-any-return]

    async def _on_expose(self, msg: m.Expose) -> object:
        if msg.mode not in ("ro", "rw"):
            raise ExposureError(f"mode must be ro or rw, not {msg.mode!r}")
        inspect = functools.partial(
            self.exposures.inspect,
            msg.alias,
            msg.path,
            mode=msg.mode,  # type: ignore[arg-type]
            target=msg.target,
        )

        async def check() -> object:
            try:
                candidate = await asyncio.to_thread(inspect)
            except Exception as exc:  # noqa: BLE001 - the asker's refusal
                return m.Refused(exc)
            return await self._follow_up(m.Exposed(deadline=msg.deadline, candidate=candidate))

        return Deferred(self.spawn_task(check(), name=f"expose-{msg.alias}"))

    async def _on_exposed(self, msg: m.Exposed) -> ExposureView:
        exposure = self.exposures.commit(msg.candidate)
        return ExposureView(
            alias=exposure.alias,
            generation=exposure.generation,
            mode=exposure.mode,
            target=exposure.target,
        )

    async def _on_revoke(self, msg: m.Revoke) -> ExposureView:
        exposure = self.exposures.revoke(msg.alias)
        current = self.exposures.get(msg.alias)
        return ExposureView(
            alias=exposure.alias,
            generation=exposure.generation,
            mode=current.mode if current is not None else "",
            target=current.target if current is not None else "",
            revoked=True,
        )

    async def _on_exposures(self, _msg: m.Exposures) -> list[Any]:
        return list(self.exposures.live())

    # -- a session's progress -----------------------------------------------------------------

    async def _on_resolve(self, msg: m.Resolve) -> tuple[list[Any], list[Any], list[Any]]:
        record = self._record(msg.session_id)
        binds, exposures, checks = [], [], []
        for alias, generation in record.exposures.items():
            binds.append(self.exposures.resolve(alias, generation))
            exposure = self.exposures.get(alias)
            assert exposure is not None
            exposures.append(exposure)
            checks.append(self.exposures.contents_check(alias))
        return binds, exposures, checks

    def _deferred(
        self, work: Callable[[], Awaitable[object]], name: str, live: _Live | None
    ) -> Deferred:
        """Run ``work`` (a session's step) in a task of the registry and reply with its
        result. Tasks start in the order they are made, so the records are written in the
        order the messages came.

        The task is the session's ``live.step`` until it ends. It outlives an asker that
        gave up (a step half done is never abandoned), and an exception out of it crashes
        the registry (a refused durable write: fail closed).
        """
        reply: asyncio.Future[object] = asyncio.get_running_loop().create_future()
        reply.add_done_callback(_retrieved)

        async def run() -> None:
            try:
                result = await work()
            except asyncio.CancelledError:
                if not reply.done():
                    reply.set_exception(ActorDead(self.name, "stopped while handling it"))
                raise
            except BaseException as exc:
                if not reply.done():
                    reply.set_exception(exc)
                raise
            if not reply.done():
                reply.set_result(result)

        task = self.spawn_task(run(), name=name)
        if live is not None:
            live.step = task
        return Deferred(reply)

    async def _on_moved(self, msg: m.Moved) -> object:
        """Persist a transition, then show it (``durable=False``: written now, shown by the
        store once the next commit made it durable; for a state recovery treats as the one
        before it). The wait for its fdatasync is a task's (:meth:`_deferred`)."""
        assert self.store is not None
        session_id = msg.session_id
        record = self._record(session_id)
        store = self.store

        async def persist() -> None:
            await store.transition(session_id, msg.state, msg.details, durable=msg.durable)
            if msg.durable:
                self._watchers.publish(record)

        return self._deferred(persist, f"step-{session_id}", self._live.get(session_id))

    async def _on_drain_opened(self, msg: m.DrainOpened) -> None:
        self.terminals.opened(msg.session_id, msg.drain)

    async def _on_finish(self, msg: m.Finish) -> object:
        """Append the receipt, seal it, make the session terminal: in a task (the receipts
        of sessions that end together share a checkpoint)."""
        record = self._record(msg.session_id)
        live = self._live.get(msg.session_id) or _Live()
        finishing = functools.partial(
            self._terminal, record, msg.payload, msg.outcome, msg.evaluation
        )
        deferred = self._deferred(finishing, f"finish-{msg.session_id}", live)
        assert live.step is not None
        self._finishing.add(live.step)
        live.step.add_done_callback(self._finishing.discard)
        return deferred

    async def _on_session_exited(self, msg: m.SessionExited) -> None:
        """``session-<id>`` ended; one that ended before its receipt (its driver crashed)
        gets the ``internal_error`` receipt from the exit reason."""
        live = self._live.get(msg.session_id)
        if live is not None and live.step is not None and not live.step.done():
            # Its last step (or its receipt) is being made durable: after it, never before.
            await asyncio.wait({live.step})
            live = self._live.get(msg.session_id)
        if live is None:
            return  # it handed over its receipt: a normal end
        record = self._record(msg.session_id)
        cause = _root_cause(msg.reason)
        stage = live.driver.progress.stage if live.driver is not None else "prepare"
        _log.error(
            "session %s: internal error in %s (its driver crashed); the session ends with "
            "internal_error",
            msg.session_id,
            stage,
            exc_info=cause,
        )
        outcome = internal_outcome(cause, stage)
        evaluation = lost_evaluation(record, "internal_error")
        if live.driver is not None:
            await self._release(live.driver)
        payload = certain_receipt(
            record,
            outcome,
            binding=record.launch_binding,
            launched_ns=record.launched_ns,
            evaluation=evaluation,
            projections=journaled_projections(record),
        )
        await self._terminal(record, payload, outcome, evaluation)

    async def _release(self, driver: SessionDriver) -> None:
        """What a crashed driver held and nobody else closes: its projections."""
        projections = list(driver.progress.projections)
        if projections:

            def close() -> None:
                for projection in projections:
                    with contextlib.suppress(Exception):
                        projection.close()

            await asyncio.to_thread(close)

    async def _append_terminal(self, record: SessionRecord, payload: Receipt) -> int:
        """Append the session's terminal envelope as its plan's kind; its sequence number.

        Raises:
            EnvelopeMismatch: the payload is not the envelope its plan needs (a bug).
            JournalError: it could not be made durable (fatal, by design).
        """
        kind = envelope_record_kind(record.plan)
        check_envelope(record.plan, payload, kind)
        return await self._log_ask(LogAppend(encode_receipt(payload), kind))  # type: ignore[no-any-return]

    async def _terminal(
        self,
        record: SessionRecord,
        payload: Receipt,
        outcome: ReceiptOutcome,
        evaluation: EvaluationEntry | None,
    ) -> None:
        """The receipt first, then the terminal state: a receipt that cannot be made
        durable crashes the registry (fail closed; the restart's recovery gives the session
        one)."""
        assert self.store is not None
        session_id = record.session_id
        seq = await self._log_ask(LogReceiptOf(session_id))
        if seq is None:
            seq = await self._append_terminal(record, payload)
        fault_point("receipt", session_id, harness_of(record))
        await self._log_ask(LogSeal())
        fault_point("checkpoint", session_id, harness_of(record))
        shown = evaluation.outcome if evaluation is not None else None
        await self.store.terminal(session_id, seq, outcome, shown)
        self._live.pop(session_id, None)
        self.terminals.ended(session_id)
        self._watchers.publish(record)
        fault_point("terminal", session_id, harness_of(record))

    # -- asking it (the control methods, tests) ------------------------------------------------

    async def _request(self, msg: m.Message) -> Any:
        return await ask_registry(self, msg)

    async def validate(self, data: bytes) -> ValidatedPlan:
        """Decode and validate a plan against local policy.

        Raises:
            PlanError: every problem, each with its JSON path.
        """
        return await self._request(m.Validate(deadline=deadline_in(), data=data))  # type: ignore[no-any-return]

    async def create(self, data: bytes) -> SessionView:
        """Validate the plan, persist the session, start its driver; return its view.

        Raises:
            PlanError: the plan is invalid here.
            SessionLimit: too many sessions are alive.
        """
        return await self._request(m.Create(deadline=deadline_in(), data=data))  # type: ignore[no-any-return]

    async def status(self, session_id: str) -> SessionView:
        """One session's view.

        Raises:
            SessionNotFound: no such session.
        """
        return await self._request(m.Status(deadline=deadline_in(), session_id=session_id))  # type: ignore[no-any-return]

    async def list(
        self, *, state: str | None, after: str | None, limit: int
    ) -> tuple[list[SessionView], str | None]:
        """A page of sessions by id, optionally in one state; the cursor of the next page."""
        msg = m.List(deadline=deadline_in(), state=state, after=after, limit=limit)
        return await self._request(msg)  # type: ignore[no-any-return]

    async def watch(self, session_id: str) -> WatchQueue:
        """A queue of the session's views: the current one, then each change; None ends it.

        Raises:
            SessionNotFound: no such session.
        """
        return await self._request(m.Watch(deadline=deadline_in(), session_id=session_id))  # type: ignore[no-any-return]

    def unwatch(self, session_id: str, queue: WatchQueue) -> None:
        """Forget a watcher (its stream ended); nothing to do once the registry stopped."""
        with contextlib.suppress(ActorError):
            self.tell(m.Unwatch(deadline=deadline_in(), session_id=session_id, queue=queue))

    async def stop_session(self, session_id: str) -> SessionView:
        """Ask a live session to stop (its sandbox is killed); a terminal one is left as is.

        Raises:
            SessionNotFound: no such session.
        """
        return await self._request(m.Stop(deadline=deadline_in(), session_id=session_id))  # type: ignore[no-any-return]

    async def cleanup(self, session_id: str) -> SessionView:
        """Remove a terminal session's output (its record and receipt stay).

        Raises:
            SessionNotFound: no such session.
            SessionConflict: it is not terminal yet.
        """
        return await self._request(m.Cleanup(deadline=deadline_in(), session_id=session_id))  # type: ignore[no-any-return]

    async def receipts_page(self, after: int, limit: int) -> ReceiptPage:
        """A page of receipts after ``after``, each with its decoded payload.

        Raises:
            JournalError: the receipt journal is not running.
        """
        msg = m.ReceiptsPage(deadline=deadline_in(), after=after, limit=limit)
        return await self._request(msg)  # type: ignore[no-any-return]

    async def receipts_ack(self, seq: int) -> int:
        """Acknowledge exactly the next unacknowledged receipt.

        Raises:
            ReceiptAckError: ``seq`` is not the next one.
        """
        return await self._request(m.ReceiptsAck(deadline=deadline_in(), seq=seq))  # type: ignore[no-any-return]

    async def export_bundle(self, session_id: str) -> bytes:
        """The bundle of the session's final receipt.

        Raises:
            ReceiptError, JournalError: it cannot be made.
        """
        msg = m.ReceiptsExport(deadline=deadline_in(), session_id=session_id)
        return await self._request(msg)  # type: ignore[no-any-return]

    async def expose(self, alias: str, path: str, mode: str, target: str | None) -> ExposureView:
        """Create (or re-create, a new generation) an exposure: every check (its contents
        walked off the registry), then the record.

        Raises:
            ExposureError: it cannot be made.
        """
        msg = m.Expose(deadline=deadline_in(), alias=alias, path=path, mode=mode, target=target)
        return await self._request(msg)  # type: ignore[no-any-return]

    async def revoke(self, alias: str) -> ExposureView:
        """Revoke an exposure; the reply also names its mode and target.

        Raises:
            ExposureError: no such live exposure.
        """
        return await self._request(m.Revoke(deadline=deadline_in(), alias=alias))  # type: ignore[no-any-return]

    async def live_exposures(self) -> builtins.list[Any]:
        """Every live exposure."""
        return await self._request(m.Exposures(deadline=deadline_in()))  # type: ignore[no-any-return]


def _retrieved(future: asyncio.Future[object]) -> None:
    """Mark a reply's exception seen (its asker may have given up; the registry's crash
    already carries it)."""
    if not future.cancelled():
        future.exception()


def registry_spec(**kwargs: Any) -> ChildSpec:
    """The root child that runs the registry."""
    return ChildSpec("registry", lambda: SessionRegistry(**kwargs))


def sessions_data_dir(paths: GlovePaths, session_id: str) -> Path:
    """Where a session's output files are."""
    return paths.sessions_data / session_id
