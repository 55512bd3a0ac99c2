"""A session's driver: the actor that runs one session's lifecycle, first child of its tree.

::

    sessions                  Supervisor one_for_one: one temporary tree per session
    └─ session-<id>           Supervisor one_for_all, intensity 0
       ├─ driver              SessionDriver: prepare, launch, finalize, the receipt's payload
       └─ contained           the contained run (drain, mediation, sandbox), once launched

The registry starts ``session-<id>`` when a session is created and watches it. The driver
prepares (exposures through the registry, projections, tools), starts ``contained`` beside
itself (:func:`~glove.session._tree.run_session`), waits for its end, finalizes and hands
the receipt's payload to the registry (:class:`~glove.session._messages.Finish`), which
appends it, seals it and makes the session terminal; then the driver stops, and its tree
with it (the driver is a *significant* child). Every step the journal must hold is a
:class:`~glove.session._messages.Moved` the registry persists, in order.

A refusal the design expects (an exposure, the host, the sandbox) is the session's
``setup_error``; any other exception in a stage is a bug in this session's handling: its
``internal_error`` receipt, logged with its traceback, and the other sessions go on. An
exception that escapes the driver anyway crashes it; the registry's watch then sees
``session-<id>`` fail and writes the ``internal_error`` receipt from the exit reason, so a
session gets its one receipt by construction. A refused write to the registry's own journal
crashes the registry itself (fail closed).
"""

from __future__ import annotations

import asyncio
import functools
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final

import msgspec

from glove.actors import Actor, ActorError, ChildSpec, Supervisor
from glove.config import GlovedConfig, GlovePaths
from glove.container import (
    LimitRefused,
    SandboxError,
    SandboxResult,
    SandboxSpec,
    projection_conflict,
)
from glove.container.linux import DEFAULT_WINSIZE
from glove.errors import GloveError
from glove.evaluate import Fixture
from glove.library import Library
from glove.plan import ValidatedPlan
from glove.records import (
    EvaluationEntry,
    OutputDigest,
    Projection,
    Receipt,
    ReceiptOutcome,
    State,
    StateDetails,
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
from glove.session._faults import fault_point
from glove.session._mediated import SessionTools, audit_digest, receipt_audit, session_tools
from glove.session._messages import DrainOpened, Finish, Moved, Resolve, ask_registry, deadline_in
from glove.session._projections import SessionProjection, prepare_projections, refusal_code
from glove.session._pty_drain import PtyDrain
from glove.session._receipt import outcome_of, terminal_receipt
from glove.session._sandbox import SandboxActor
from glove.session._store import SessionRecord
from glove.session._tree import SANDBOX_CHILD, SessionOutcome, run_session
from glove.session.errors import ExposureError, FixtureRefused, ProjectionRefused

if TYPE_CHECKING:
    from glove.container import Bind
    from glove.session._exposures import Exposure

_log = logging.getLogger(__name__)

#: The driver's name in its session's tree; the contained run's.
DRIVER_CHILD: Final = "driver"
CONTAINED_CHILD: Final = "contained"
#: A step the registry persists (one session-journal commit) has this long.
STEP_DEADLINE_S: Final = 60.0


def internal_outcome(exc: BaseException, stage: str) -> ReceiptOutcome:
    """The ``internal_error`` outcome of a session whose ``stage`` raised ``exc`` (a bug):
    the exception's type name only, never its message or traceback (gloved's log has them)."""
    return outcome_of(
        None,
        kind="internal_error",
        error=f"{type(exc).__name__} in {stage}; gloved's log has the traceback",
    )


def log_internal(session_id: str, stage: str, exc: BaseException) -> ReceiptOutcome:
    """Log ``exc`` with its traceback (gloved's log only); the ``internal_error`` outcome."""
    _log.error(
        "session %s: internal error in %s; the session ends with internal_error",
        session_id,
        stage,
        exc_info=exc,
    )
    return internal_outcome(exc, stage)


def lost_evaluation(record: SessionRecord, code: str) -> EvaluationEntry | None:
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


def journaled_projections(record: SessionRecord) -> list[Projection] | None:
    """What the durable ``composed`` step says was to be mounted (None before it: then
    nothing of the session was mounted or launched)."""
    return record.projections


def certain_receipt(
    record: SessionRecord,
    outcome: ReceiptOutcome,
    *,
    binding: str | None,
    launched_ns: int | None,
    evaluation: EvaluationEntry | None,
    projections: list[Projection] | None,
) -> Receipt:
    """A receipt that commits only to what is certain (no output or audit digests): a
    session whose finalize failed, or whose driver crashed."""
    return terminal_receipt(
        session_id=record.session_id,
        plan_sha256=record.sha256,
        plan_blake3=record.blake3,
        launch_binding=binding,
        result=None,
        outcome=outcome,
        output={},
        created_ns=record.created_ns,
        launched_ns=launched_ns,
        ended_ns=time.time_ns(),
        evaluation=evaluation,
        projections=projections,
    )


def harness_of(record: SessionRecord) -> str:
    """The plan's harness id."""
    return str(record.plan.get("harness", ""))


@dataclass
class Progress:
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


@dataclass(frozen=True)
class DriverContext:
    """What a driver reads and never changes: gloved's configuration, its paths, the
    library store, and the registry it reports to."""

    config: GlovedConfig
    paths: GlovePaths
    library: Library | None
    registry: Actor


class StopSession(msgspec.Struct, frozen=True):
    """``session.stop`` reached the driver: end the session (its sandbox is killed)."""


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


def session_subtree(driver: Callable[[Supervisor], SessionDriver], session_id: str) -> Supervisor:
    """``session-<id>`` with its driver as first (and significant) child."""
    tree: Supervisor

    def start() -> SessionDriver:
        return driver(tree)

    tree = Supervisor(
        f"session-{session_id}",
        [ChildSpec(DRIVER_CHILD, start, significant=True)],
        strategy="one_for_all",
        intensity=0,
    )
    return tree


class SessionDriver(Actor):
    """One session's lifecycle (see the module docstring)."""

    def __init__(
        self,
        context: DriverContext,
        record: SessionRecord,
        validated: ValidatedPlan,
        tree: Supervisor,
    ) -> None:
        super().__init__(DRIVER_CHILD, mailbox_size=16)
        self._ctx = context
        self._record = record
        self._validated = validated
        self._tree = tree
        self._stop = asyncio.Event()  # the driver's own: run_session's stop
        self.progress = Progress()

    @property
    def session_id(self) -> str:
        """The id of the session this driver runs."""
        return self._record.session_id

    async def on_start(self) -> None:
        """Start the lifecycle, a task of this actor: its end stops the driver."""
        self.spawn_task(self._lifecycle(), name="lifecycle")

    async def handle(self, msg: object) -> object:
        """:class:`StopSession`: end the session early."""
        if not isinstance(msg, StopSession):
            raise TypeError(f"the driver does not handle {type(msg).__name__}")
        self._stop.set()
        return None

    # -- talking to the registry ------------------------------------------------------------

    async def _ask(self, msg: Any) -> Any:
        return await ask_registry(self._ctx.registry, msg, wait=True)

    async def _move(
        self, state: State, details: StateDetails | None = None, *, durable: bool = True
    ) -> None:
        """Have the registry persist a transition (a refused write crashes the registry)."""
        await self._ask(
            Moved(
                deadline=deadline_in(STEP_DEADLINE_S),
                session_id=self.session_id,
                state=state,
                details=details,
                durable=durable,
            )
        )

    # -- the lifecycle ----------------------------------------------------------------------

    async def _lifecycle(self) -> None:
        """Drive the session from ``created`` to its receipt; then stop (and the tree)."""
        record, run = self._record, self.progress
        session_id = record.session_id
        evaluation: EvaluationEntry | None = None
        try:
            outcome = await self._drive(run)
            if run.projections:  # the launch closed them; a failure before it did not
                await self.run_blocking(_close_all, run.projections)
            run.stage = "finalize"
            if run.tools is not None:
                await run.tools.close()
            fault_point("finalize", session_id, harness_of(record))
            evaluation = self._evaluation(run, outcome)
            payload = await self._receipt(run, outcome, evaluation)
        except Exception as exc:  # noqa: BLE001 - one session's bug is its receipt, not gloved's crash
            if run.tools is not None:
                await _release_tools(session_id, run.tools)
            if isinstance(exc, _Fatal):
                raise exc.error from None
            # finalize failed: a receipt that commits to what is certain (no digests).
            outcome = log_internal(session_id, run.stage, exc)
            evaluation = lost_evaluation(record, "internal_error")
            payload = certain_receipt(
                record,
                outcome,
                binding=run.binding,
                launched_ns=run.launched_ns,
                evaluation=evaluation,
                projections=[projection.receipt() for projection in run.projections],
            )
        except BaseException:  # cancelled: the daemon is stopping
            if run.tools is not None:
                await _release_tools(session_id, run.tools)
            raise
        await self._ask(
            Finish(
                deadline=deadline_in(STEP_DEADLINE_S),
                session_id=session_id,
                payload=payload,
                outcome=outcome,
                evaluation=evaluation,
            )
        )
        self.stop()

    async def _drive(self, run: Progress) -> ReceiptOutcome:
        """Prepare and run the session; its outcome, whatever happened on the way.

        Raises:
            _Fatal: the registry refused a step (it has crashed; so does the driver).
        """
        record = self._record
        try:
            run.drain = await self._open_drain()
            spec, run.binding, run.tools = await self._prepare(run)
            run.stage = "launch"
            if run.fixture is not None and isinstance(run.drain, PtyDrain):
                run.evaluator = EvaluatorActor(run.fixture)
                run.drain.add_observer(run.evaluator.observe)
            session, run.launched_ns = await self._run(spec, run)
            run.result = session.result
            failure = session.failure
            if failure is not None:
                run.failed_child = session.failed_child or "session"
            if failure is not None and not isinstance(failure, (GloveError, OSError)):
                return log_internal(record.session_id, session.failed_child or "launch", failure)
            if failure is not None and run.result is None:
                return outcome_of(None, error=str(failure), error_code=refusal_code(str(failure)))
            if failure is not None:
                return outcome_of(run.result, error=f"the session failed: {failure!r}")
            error = run.result.error if run.result is not None else None
            return outcome_of(run.result, error_code=refusal_code(error))
        except _Fatal:
            raise
        except (ExposureError, SandboxError, LimitRefused, GloveError, OSError) as exc:
            text = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
            code = exc.code if isinstance(exc, ProjectionRefused) else None
            return outcome_of(None, error=text, error_code=code)
        except Exception as exc:  # noqa: BLE001 - one session's bug is its receipt, not gloved's crash
            return log_internal(record.session_id, run.stage, exc)

    async def _step(
        self, state: State, details: StateDetails | None = None, *, durable: bool = True
    ) -> None:
        try:
            await self._move(state, details, durable=durable)
        except Exception as exc:
            raise _Fatal(exc) from exc

    async def _open_drain(self) -> OutputDrain | PtyDrain:
        """The session's output drain (a PTY session's is also its viewers' hub entry)."""
        directory = self._ctx.paths.sessions_data / self.session_id
        if self._validated.plan.terminal != "pty":
            return OutputDrain(directory)
        drain = PtyDrain(
            directory,
            capacity=self._ctx.config.terminal.transcript_bytes,
            size=self._validated.terminal_size or DEFAULT_WINSIZE,
        )
        try:
            await self._ask(
                DrainOpened(deadline=deadline_in(), session_id=self.session_id, drain=drain)
            )
        except Exception as exc:
            raise _Fatal(exc) from exc
        return drain

    async def _resolve(self) -> tuple[list[Bind], list[Exposure], list[Callable[[], None]]]:
        try:
            reply = await self._ask(Resolve(deadline=deadline_in(), session_id=self.session_id))
        except ActorError as exc:  # the registry is gone (a refusal is the session's)
            raise _Fatal(exc) from exc
        binds, exposures, checks = reply
        return binds, exposures, checks

    async def _prepare(self, run: Progress) -> tuple[SandboxSpec, str, SessionTools | None]:
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
            _Fatal: the registry could not persist a step.
        """
        record, validated, paths = self._record, self._validated, self._ctx.paths
        await self._step("preparing", durable=False)
        fault_point("prepare", record.session_id, harness_of(record))
        evaluation = validated.evaluation
        if evaluation is not None:
            fixture = evaluation.fixture
            try:
                run.fixture = await self.run_blocking(
                    read_fixture, paths.library_dir, fixture.digest, fixture.size
                )
            except FixtureRefused as exc:
                run.refusal = exc.code
                raise
        binds, exposures, checks = await self._resolve()
        for check in checks:
            # Its tree again (no FIFO, no socket where nothing gates connect()), off the loop.
            await self.run_blocking(check)
        harness = validated.harness
        spec = compose_spec(
            argv=tuple(harness.argv),
            env=dict(harness.env),
            profile=harness.profile,
            binds=binds,
            limits=validated.limits,
            accept_weaker=frozenset(self._ctx.config.accept_weaker),
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
        if validated.projections:  # without any, no thread hop (nor a thread) for nothing
            run.projections = await self.run_blocking(
                prepare_projections, self._ctx.library, validated.projections
            )
        mounted = [projection.receipt() for projection in run.projections]
        tools = await session_tools(
            session_id=record.session_id,
            data_dir=paths.sessions_data / record.session_id,
            mcp_config=self._mcp_config(harness_of(record)),
            rules=validated.egress,
            hostname=spec.hostname,
        )
        try:
            if tools is not None:
                spec = tools.apply(spec, proxy=validated.egress is not None)
            binding = launch_binding(spec, record.sha256, record.blake3, exposures, mounted)
            # The projections are durable before the launch: a recovered receipt lists them.
            composed = StateDetails(
                launch_binding=binding, projections=mounted if mounted else msgspec.UNSET
            )
            await self._step("composed", composed)
        except BaseException:
            if tools is not None:  # nobody else holds them yet: release them here
                await _release_tools(record.session_id, tools)
            raise
        return spec, binding, tools

    def _mcp_config(self, harness_id: str) -> str | None:
        """The harness's MCP configuration, as an absolute path (relative to gloved.toml)."""
        harness = self._ctx.config.harnesses.get(harness_id)
        if harness is None or harness.mcp is None:
            return None
        return str(self._ctx.paths.gloved_toml.parent / harness.mcp)

    async def _run(self, spec: SandboxSpec, run: Progress) -> tuple[SessionOutcome, int | None]:
        """Run the contained tree beside the driver; persist ``running`` once it launched.

        A refinement session's tree starts with its ``evaluator``; once the sandbox has its
        result, and before the tree stops, the evaluator takes the rest of the stream and
        finishes (``run.finished``).

        Whatever this raises, the contained tree has ended first (its sandbox killed).

        Raises:
            _Fatal: the registry could not persist a step.
            Exception: anything a step of the launch raised (a bug: ``internal_error``).
        """
        record = self._record
        drain, tools, evaluator = run.drain, run.tools, run.evaluator
        projections = tuple(run.projections)
        assert drain is not None
        size = drain.size if isinstance(drain, PtyDrain) else None
        front: list[Actor] = [drain]
        before_stop = None
        if evaluator is not None and isinstance(drain, PtyDrain):
            front.insert(0, evaluator)
            before_stop = functools.partial(self._finish_evaluation, run, drain, evaluator)
        tree = build_session(
            record.session_id,
            SandboxLaunch(spec, drain.write, terminal_size=size, projections=projections),
            parts=tools.parts if tools is not None else None,
            front=front,
            name=CONTAINED_CHILD,
        )

        def started(tree: Supervisor) -> None:
            fault_point("launch", record.session_id, harness_of(record))
            sandbox = tree.child(SANDBOX_CHILD)
            assert isinstance(sandbox, SandboxActor)
            if tools is not None:
                tools.parts.started(tree)
            if isinstance(drain, PtyDrain):
                drain.follow(sandbox)  # the terminal's input side, once launched

        async def contained() -> SessionOutcome | Exception:
            # An exception of the launch is the lifecycle's to judge (internal_error in
            # launch), not a crash of the driver (which an owned task raising would be).
            try:
                return await run_session(
                    tree,
                    on_started=started,
                    stop=self._stop,
                    parent=self._tree,
                    before_stop=before_stop,
                )
            except Exception as exc:  # noqa: BLE001 - handed to the lifecycle, raised there
                return exc

        running = self.spawn_task(contained(), name=CONTAINED_CHILD)
        launched_ns: int | None = None
        try:
            if await self._launched(tree, running):
                launched_ns = time.time_ns()
                await self._step("running", StateDetails(launched_ns=launched_ns))
            session = await running
        except Exception:
            # The tree must not outlive this lifecycle: stop it, wait for its teardown.
            self._stop.set()
            await asyncio.wait({running})
            raise
        if isinstance(session, Exception):
            raise session  # the launch failed; run_session has already ended the tree
        await self._step("finalizing", durable=False)
        return session, launched_ns

    async def _launched(self, tree: Supervisor, running: asyncio.Task[Any]) -> bool:
        """Wait until the contained tree's sandbox launched (True) or the run ended first
        (False): the supervisor's own start, then the sandbox's."""
        waiter = self.spawn_task(tree.started.wait(), name="contained-started")
        try:
            await asyncio.wait({waiter, running}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            waiter.cancel()
        if running.done() or not tree.started.is_set():
            return False
        sandbox = tree.child(SANDBOX_CHILD)
        assert isinstance(sandbox, SandboxActor)
        waiter = self.spawn_task(sandbox.started.wait(), name="launched")
        try:
            await asyncio.wait({waiter, running}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            waiter.cancel()
        return sandbox.started.is_set()

    async def _finish_evaluation(
        self, run: Progress, drain: PtyDrain, evaluator: EvaluatorActor
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
                    self.session_id,
                    finished.evidence.bytes_total,
                    seen,
                )
                finished = Finished(finished.evidence, complete=False)
            run.finished = finished
        except Exception as exc:  # noqa: BLE001 - the verdict says it; the session ends normally
            _log.error(
                "session %s: the evaluator failed (%s); the verdict is infra_error",
                self.session_id,
                type(exc).__name__,
                exc_info=exc,
            )
            run.evaluator_error = "evaluator_failed"

    def _evaluation(self, run: Progress, outcome: ReceiptOutcome) -> EvaluationEntry | None:
        """A refinement plan's ``evaluation`` entry, judged now that the session ended and
        its resources were accounted (None for a resource plan)."""
        evaluation = self._validated.evaluation
        if evaluation is None:
            return None
        finished = run.finished
        evidence = finished.evidence if finished is not None else None
        if run.refusal is not None or run.fixture is None:
            code = run.refusal or outcome.kind
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
        if infra_error is None and failed is not None and outcome.kind not in INFRA_KINDS:
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

    async def _receipt(
        self, run: Progress, outcome: ReceiptOutcome, evaluation: EvaluationEntry | None
    ) -> Receipt:
        """The terminal receipt's payload: the outcome, output and audit digests, counts
        (and, for a refinement plan, its evaluation: a refinement envelope)."""
        record = self._record
        output: dict[str, OutputDigest] = {}
        if run.drain is not None:
            output = {
                name: OutputDigest(bytes=d.bytes, sha256=d.sha256)
                for name, d in run.drain.digests().items()
            }
        audit = None
        counts: dict[str, int] = {}
        if run.tools is not None:
            audit = receipt_audit(await self.run_blocking(audit_digest, run.tools.audit_path))
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


class _Fatal(Exception):
    """The registry refused a step of this session (its journal could not persist it, or it
    is gone): the driver ends with ``error``, and writes no receipt of its own."""

    def __init__(self, error: BaseException) -> None:
        super().__init__(str(error))
        self.error = error
