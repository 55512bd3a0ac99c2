"""``glove eval ab|verify|report``: A/B runs of a base and a candidate skill through gloved,
a bundle a third party checks offline, and its report as one HTML page.

``ab`` adds the skills and fixtures to the library, commits the decision rule and the
seeded order (``plan.json`` in the bundle, and its digests on stderr) before the first
run, runs every scheduled session through gloved and reports ``glove.evaluate``'s A/B
statistics. ``verify`` needs no daemon: every envelope, inclusion proof and checkpoint,
every verdict re-run from the raw transcript, and the report recomputed. Exit codes
(``glove.exits``):

==  ==========================================================================================
0   done (``verify``: everything holds)
1   ``verify``: the bundle does not hold (the first difference is named)
2   refused: a fixture, a file, gloved, the bundle directory
64  usage error
69  gloved is not running
==  ==========================================================================================
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, NoReturn, TypedDict

import typer

from glove.exits import EXIT_EVAL_MISMATCH, EXIT_EVAL_REFUSED, EXIT_UNAVAILABLE, EXIT_USAGE

if TYPE_CHECKING:
    from glove.control import Client
    from glove.evaluate import ABReport, DecisionRule, Fixture, ScheduledRun

#: The bundle's format and its files.
BUNDLE_FORMAT: Final = "glove-eval-bundle/v1"
PLAN_FILE: Final = "plan.json"
RULE_FILE: Final = "decision-rule.json"
REPORT_FILE: Final = "report.json"
RUNS_FILE: Final = "runs.json"
PUBLIC_KEY_FILE: Final = "public.key"
#: The limits of every session of an A/B run but its wall time (the fixture's, plus slack).
LIMITS: Final = {
    "cpu_time_s": 60,
    "memory_bytes": 536870912,
    "pids": 128,
    "disk_bytes": 67108864,
    "output_bytes": 1048576,
}
WALL_SLACK_S: Final = 10


#: The report (``glove.evaluate.ABReport`` as JSON, with the decision and the order's
#: digest) and the run plan as a bundle holds them: JSON read back from files a third party
#: hands over, so anything at all until checked (a missing or mistyped member is a
#: ``KeyError`` or ``TypeError``, which ``verify`` and ``report`` name a malformed bundle).
BundleJson = dict[str, Any]


class Added(TypedDict):
    """A file added to the library: its digest and size (a skill, a fixture)."""

    digest: str
    size: int


class RunDone(TypedDict):
    """One finished session of the schedule, as ``runs.json`` lists it."""

    fixture: int
    run: int
    arm: str
    session_id: str
    verdict: str


class RunPlan(TypedDict):
    """``plan.json``: what the run commits to before its first session."""

    format: str
    harness: str
    alias: str
    skills: dict[str, Added]
    fixtures: list[Added]
    limits: dict[str, int]
    decision_rule_digest: str
    order_digest: str
    #: The schedule, ``ScheduledRun`` as JSON.
    order: list[dict[str, object]]


class _Mismatch(Exception):
    """``glove eval verify``: one way the bundle does not hold."""


def register(app: typer.Typer) -> None:
    """Add the ``eval`` command group to ``app``."""
    group = typer.Typer(
        help="A/B runs of a skill through gloved; verify and report them offline.",
        no_args_is_help=True,
    )
    group.command("ab")(ab_cmd)
    group.command("verify")(verify_cmd)
    group.command("report")(report_cmd)
    app.add_typer(group, name="eval")


def _fail(verb: str, message: str, code: int = EXIT_EVAL_REFUSED) -> NoReturn:
    typer.echo(f"glove eval {verb}: {message}", err=True)
    raise typer.Exit(code)


def _read_file(verb: str, path: Path, limit: int = 64 * 1024 * 1024) -> bytes:
    try:
        with path.open("rb") as handle:
            data = handle.read(limit + 1)
    except OSError as exc:
        _fail(verb, f"cannot read {path}: {exc.strerror}")
    if len(data) > limit:
        _fail(verb, f"{path} is larger than {limit} bytes")
    return data


def _fixture(verb: str, path: Path, data: bytes) -> Fixture:
    from glove.evaluate import FixtureError, decode_fixture

    try:
        return decode_fixture(data)
    except FixtureError as exc:
        _fail(verb, f"{path} is not a fixture: {exc}")


def _add(paths: list[Path]) -> list[Added]:
    """Add each file to the owner's library; ``{"digest", "size"}`` of each, in order."""
    from glove.cli._library import _open
    from glove.library import LibraryError

    library = _open("add", create=True, as_json=False)
    assert library is not None
    added: list[Added] = []
    with library:
        for path in paths:
            try:
                bundle = library.add(path)
            except LibraryError as exc:
                _fail("ab", f"the library refused {path}: {exc} ({exc.code})")
            added.append({"digest": bundle.digest, "size": bundle.size})
    return added


def _session_plan(harness: str, alias: str, skill: Added, fixture: Added, wall_s: int) -> str:
    return json.dumps(
        {
            "version": 1,
            "harness": harness,
            "exposures": [],
            "limits": {"wall_time_s": wall_s, **LIMITS},
            "network": "none",
            "terminal": "pty",
            "projections": [{"alias": alias, **skill}],
            "evaluation": {"kind": "refinement-eval-v1", "fixture": fixture},
        }
    )


def _write(path: Path, data: bytes) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    with tmp.open("wb") as handle:
        handle.write(data)
        handle.flush()
        os.fsync(handle.fileno())
    tmp.replace(path)


def _run_one(client: Client, plan: str) -> tuple[str, str]:
    """Create one session and watch it to its end; its id and verdict."""
    session_id = client.session_create(plan).session_id
    last = None
    for view in client.session_watch(session_id):
        last = view
    evaluation = (last.evaluation if last is not None else None) or {}
    verdict = evaluation.get("verdict")
    return session_id, verdict if isinstance(verdict, str) else "infra_error"


def _report_of(rule: DecisionRule, verdicts: dict[tuple[int, str], list[str]]) -> ABReport:
    from glove.evaluate import FixtureRuns, ab_report, decision_rule_digest

    runs = [
        FixtureRuns(
            fixture=digest,
            base=tuple(verdicts[(index, "base")]),  # type: ignore[arg-type]
            candidate=tuple(verdicts[(index, "candidate")]),  # type: ignore[arg-type]
        )
        for index, digest in enumerate(rule.fixtures)
    ]
    return ab_report(runs, seed=rule.seed, decision_rule_digest=decision_rule_digest(rule))


def _report_json(rule: DecisionRule, report: ABReport, order_digest: str) -> BundleJson:
    import msgspec

    from glove.evaluate import decide

    shown: BundleJson = msgspec.to_builtins(report)
    shown["decision"] = msgspec.to_builtins(decide(rule, report))
    shown["order_digest"] = order_digest
    return shown


def ab_cmd(  # noqa: PLR0917 - typer maps each parameter to an option
    harness: str = typer.Option(..., "--harness", help="The gloved.toml harness to run."),
    alias: str = typer.Option(..., "--alias", help="The projection alias the skill is at."),
    base: Path = typer.Option(..., "--base", help="The base skill file."),
    candidate: Path = typer.Option(..., "--candidate", help="The candidate skill file."),
    fixture: list[Path] = typer.Option(..., "--fixture", help="A fixture file; repeat."),
    runs: int = typer.Option(..., "--runs", help="Paired runs per fixture per arm (K)."),
    seed: int = typer.Option(0, "--seed", help="The seed of the order and the bootstrap."),
    as_json: bool = typer.Option(False, "--json", help="Print the report as JSON."),
    bundle: Path | None = typer.Option(None, "--bundle", help="Write a verifiable bundle here."),
    runtime_dir: Path | None = typer.Option(None, "--runtime-dir", help="gloved's runtime dir."),
) -> None:
    """Run K paired sessions per fixture per arm through gloved and compare the arms."""
    import msgspec

    from glove.evaluate import (
        MAX_RUNS_PER_ARM,
        MAX_SEED,
        DecisionRule,
        decision_rule_digest,
        interleaved_order,
        order_digest,
    )

    if not 1 <= runs <= MAX_RUNS_PER_ARM:
        _fail("ab", f"--runs is 1..{MAX_RUNS_PER_ARM}, got {runs}", EXIT_USAGE)
    if not 0 <= seed <= MAX_SEED:
        _fail("ab", f"--seed is 0..{MAX_SEED}, got {seed}", EXIT_USAGE)
    if len(set(fixture)) != len(fixture):
        _fail("ab", "a --fixture is named twice", EXIT_USAGE)
    decoded = [_fixture("ab", path, _read_file("ab", path)) for path in fixture]
    added = _add([base, candidate, *fixture])
    skills = {"base": added[0], "candidate": added[1]}
    fixtures = added[2:]
    if len({item["digest"] for item in fixtures}) != len(fixtures):
        _fail("ab", "two --fixture files hold the same bytes", EXIT_USAGE)
    rule = DecisionRule(
        fixtures=tuple(item["digest"] for item in fixtures),
        base=skills["base"]["digest"],
        candidate=skills["candidate"]["digest"],
        runs_per_arm=runs,
        seed=seed,
    )
    rule_digest = decision_rule_digest(rule)
    order = interleaved_order(len(fixtures), runs, seed)
    schedule_digest = order_digest(order)
    run_plan: RunPlan = {
        "format": BUNDLE_FORMAT,
        "harness": harness,
        "alias": alias,
        "skills": skills,
        "fixtures": fixtures,
        "limits": LIMITS,
        "decision_rule_digest": rule_digest,
        "order_digest": schedule_digest,
        "order": msgspec.to_builtins(order),
    }
    staging = None
    if bundle is not None:
        staging = _start_bundle(bundle, [base, candidate, *fixture], added, rule, run_plan)
    try:
        _ab_runs(rule, run_plan, order, fixture, decoded, runtime_dir, bundle, staging, as_json)
    except BaseException:
        if bundle is not None and staging is not None:
            _abandon_bundle(bundle, staging)
        raise


def _ab_runs(  # noqa: PLR0917 - the run's parts
    rule: DecisionRule,
    run_plan: RunPlan,
    order: tuple[ScheduledRun, ...],
    fixture: list[Path],
    decoded: list[Fixture],
    runtime_dir: Path | None,
    bundle: Path | None,
    staging: Path | None,
    as_json: bool,
) -> None:
    """Run the committed schedule, report, and publish the bundle (``staging`` renamed to
    ``bundle``) once everything is in it."""
    from glove.evaluate import decision_rule_bytes

    rule_digest = run_plan["decision_rule_digest"]
    schedule_digest = run_plan["order_digest"]
    harness, alias, skills, fixtures = (
        run_plan["harness"], run_plan["alias"], run_plan["skills"], run_plan["fixtures"]
    )  # fmt: skip
    runs = rule.runs_per_arm
    typer.echo(
        f"glove eval ab: committed decision rule {rule_digest}, order {schedule_digest} "
        f"({len(order)} sessions)",
        err=True,
    )
    if bundle is None:
        typer.echo(f"glove eval ab: decision rule {decision_rule_bytes(rule).decode()}", err=True)
    done = _run_all(harness, alias, skills, fixtures, decoded, order, runtime_dir)
    verdicts: dict[tuple[int, str], list[str]] = {
        (index, arm): [""] * runs for index in range(len(fixtures)) for arm in skills
    }
    for item in done:
        verdicts[(item["fixture"], item["arm"])][item["run"]] = item["verdict"]
    report = _report_of(rule, verdicts)
    shown = _report_json(rule, report, schedule_digest)
    if bundle is not None and staging is not None:
        _finish_bundle(staging, done, shown)
        _publish_bundle(staging, bundle)
    if as_json:
        typer.echo(json.dumps(shown))
        return
    typer.echo(_text(shown, fixture))


def _run_all(  # noqa: PLR0917 - the run's parts
    harness: str,
    alias: str,
    skills: dict[str, Added],
    fixtures: list[Added],
    decoded: list[Fixture],
    order: tuple[ScheduledRun, ...],
    runtime_dir: Path | None,
) -> list[RunDone]:
    """Every scheduled session, in order, with a progress line on stderr."""
    from glove.control import Client, ControlError, RemoteError
    from glove.control.errors import DaemonUnavailable

    done: list[RunDone] = []
    tty = sys.stderr.isatty()
    try:
        with Client.for_runtime_dir(runtime_dir) as client:
            for number, item in enumerate(order, 1):
                wall_s = -(-decoded[item.fixture].max_wall_ms // 1000) + WALL_SLACK_S
                plan = _session_plan(
                    harness, alias, skills[item.arm], fixtures[item.fixture], wall_s
                )
                session_id, verdict = _run_one(client, plan)
                done.append(
                    {"fixture": item.fixture, "run": item.run, "arm": item.arm,
                     "session_id": session_id, "verdict": verdict}
                )  # fmt: skip
                line = (
                    f"glove eval ab: {number}/{len(order)} fixture {item.fixture + 1} run "
                    f"{item.run + 1} {item.arm}: {verdict}"
                )
                sys.stderr.write(f"\r\x1b[K{line}" if tty else line + "\n")
                sys.stderr.flush()
    except DaemonUnavailable as exc:
        _fail("ab", str(exc), EXIT_UNAVAILABLE)
    except RemoteError as exc:
        _fail("ab", f"gloved refused a session: {exc.code}: {exc.message}")
    except ControlError as exc:
        _fail("ab", str(exc))
    if tty:
        sys.stderr.write("\n")
    return done


def _fmt(value: float | None) -> str:
    return "n/a" if value is None else f"{value:+.3f}"


def _text(shown: BundleJson, names: list[Path]) -> str:
    lines: list[str] = []

    def block(title: str, part: BundleJson) -> None:
        arms = part["arms"]
        diff = part["difference"]
        lines.append(title)
        for arm in ("base", "candidate"):
            a = arms[arm]
            curve = " ".join(f"{v:.2f}" for v in a["pass_hat_k"])
            lines.append(
                f"  {arm:<9} pass {a['pass']}/{a['runs']}  invalid {a['invalid']}  "
                f"infra_error {a['infra_error']}  pass^k {curve}"
            )
        low, high = diff["ci95"]
        lines.append(
            f"  difference (candidate - base) {diff['estimate']:+.3f}, 95% CI "
            f"[{low:+.3f}, {high:+.3f}] ({diff['method']}); McNemar exact p "
            f"{part['mcnemar_p']:.4f}; MDE {_fmt(part['mde'])}"
        )
        if part["attrition_warning"]:
            lines.append(
                f"  warning: attrition differs by {part['attrition_difference']:+.3f} between "
                "the arms (more than 5 points): the comparison may measure broken evidence"
            )

    for path, item in zip(names, shown["fixtures"], strict=True):
        block(f"fixture {path} ({item['fixture']})", item["comparison"])
    block("overall", shown)
    if shown["bootstrap"] is not None:
        low, high = shown["bootstrap"]["ci95"]
        lines.append(f"  clustered bootstrap 95% CI [{low:+.3f}, {high:+.3f}]")
    decision = shown["decision"]
    lines.append(
        f"decision: {decision['decision']} ({', '.join(decision['reasons'])}); rule "
        f"{shown['decision_rule_digest']}"
    )
    return "\n".join(lines)


# -- the bundle -----------------------------------------------------------------------------


def _start_bundle(
    bundle: Path,
    files: list[Path],
    added: list[Added],
    rule: DecisionRule,
    run_plan: RunPlan,
) -> Path:
    """The bundle with the library files, the rule and the run plan, before any run (the
    commitment), in a staging directory beside ``bundle`` (``.NAME.incomplete-*``): only a
    finished bundle is ever named ``bundle`` (:func:`_publish_bundle`). The staging path.
    """
    import shutil
    import tempfile

    from glove.evaluate import decision_rule_bytes
    from glove.journal import load_signing_key

    try:
        if bundle.is_symlink() or (bundle.exists() and not bundle.is_dir()):
            _fail("ab", f"--bundle {bundle} exists and is not a directory", EXIT_USAGE)
        if bundle.is_dir() and any(bundle.iterdir()):
            _fail("ab", f"--bundle {bundle} is not empty", EXIT_USAGE)
        bundle.parent.mkdir(parents=True, exist_ok=True)
        out = Path(tempfile.mkdtemp(prefix=f".{bundle.name}.incomplete-", dir=bundle.parent))
    except OSError as exc:
        _fail("ab", f"cannot write the bundle {bundle}: {exc}")
    try:
        (out / "library").mkdir()
        (out / "runs").mkdir()
        for path, item in zip(files, added, strict=True):
            shutil.copyfile(path, out / "library" / ("sha256-" + item["digest"][7:]))
        _write(out / RULE_FILE, decision_rule_bytes(rule))
        _write(out / PLAN_FILE, json.dumps(run_plan, indent=2).encode())
        _write(out / PUBLIC_KEY_FILE, (load_signing_key(None).verifier.text + "\n").encode())
    except BaseException as exc:
        shutil.rmtree(out, ignore_errors=True)
        if isinstance(exc, OSError):
            _fail("ab", f"cannot write the bundle {bundle}: {exc}")
        raise
    return out


def _publish_bundle(staging: Path, bundle: Path) -> None:
    """Give the finished bundle its name: one ``rename`` (over an empty directory too)."""
    mask = os.umask(0)
    os.umask(mask)
    try:
        staging.chmod(0o777 & ~mask)
        staging.rename(bundle)
    except OSError as exc:
        _fail("ab", f"cannot name the finished bundle {bundle}: {exc}")


def _abandon_bundle(bundle: Path, staging: Path) -> None:
    """The run did not finish: remove the staging directory; nothing is named ``bundle``
    (once published, the bundle stays)."""
    import shutil

    if not staging.exists():
        return
    shutil.rmtree(staging, ignore_errors=True)
    typer.echo(
        f"glove eval ab: the run did not finish: no bundle was written at {bundle}", err=True
    )


def _transcript(session_id: str, length: int) -> bytes:
    """The raw PTY stream of a finished session from its transcript ring (it must not
    have evicted any byte: the ring then holds offset ``o`` at position ``o``)."""
    from glove.config import glove_paths

    ring = glove_paths().sessions_data / session_id / "transcript.ring"
    with ring.open("rb") as handle:
        return handle.read(length)


def _finish_bundle(out: Path, done: list[RunDone], shown: BundleJson) -> None:
    """Each run's receipt bundle and raw transcript, the runs, the report."""
    from glove.config import glove_paths
    from glove.journal import ReceiptError, export_offline, load_signing_key, verify_bundle

    verifier = load_signing_key(None).verifier
    journal = glove_paths().receipts_journal
    runs: list[dict[str, object]] = []
    try:
        for number, item in enumerate(done):
            session_id = item["session_id"]
            data = export_offline(journal, session_id, verifier)
            receipt = verify_bundle(data, verifier).receipt
            length = receipt["output"]["pty"]["bytes"]
            stem = f"{number:05d}-{session_id}"
            _write(out / "runs" / f"{stem}.receipt.json", data)
            _write(out / "runs" / f"{stem}.transcript", _transcript(session_id, length))
            runs.append({**item, "receipt": f"runs/{stem}.receipt.json",
                         "transcript": f"runs/{stem}.transcript"})  # fmt: skip
        _write(out / RUNS_FILE, json.dumps(runs, indent=2).encode())
        _write(out / REPORT_FILE, json.dumps(shown, indent=2).encode())
    except (OSError, ReceiptError, KeyError, TypeError) as exc:
        _fail("ab", f"cannot write the bundle {out}: {exc}")


def _load(out: Path, name: str) -> Any:
    try:
        return json.loads((out / name).read_bytes())
    except (OSError, ValueError) as exc:
        raise _Mismatch(f"{name}: {exc}") from exc


def _run_file(out: Path, name: object) -> bytes:
    """A file ``runs/NAME`` of the bundle (nothing outside ``runs/``: no ``..``, no other
    directory, no symlink)."""
    parts = Path(name).parts if isinstance(name, str) else ()
    if len(parts) != 2 or parts[0] != "runs" or parts[1] in {".", ".."}:
        raise _Mismatch(f"{RUNS_FILE} names {name!r}, not a file of runs/")
    path = out / "runs" / parts[1]
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
        with os.fdopen(fd, "rb") as handle:
            return handle.read()
    except OSError as exc:
        raise _Mismatch(f"{name}: {exc.strerror}") from exc


def _library_file(out: Path, digest: object) -> bytes:
    import hashlib

    if not isinstance(digest, str) or not digest.startswith("sha256:") or len(digest) != 71:
        raise _Mismatch(f"not a digest: {digest!r}")
    path = out / "library" / ("sha256-" + digest[7:])
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise _Mismatch(f"library file {path.name}: {exc.strerror}") from exc
    if "sha256:" + hashlib.sha256(data).hexdigest() != digest:
        raise _Mismatch(f"library file {path.name} does not hash to its name")
    return data


def _verify(out: Path, public_key: str) -> BundleJson:  # noqa: PLR0912, PLR0915
    """Everything ``glove eval verify`` checks; the report recomputed.

    Raises:
        _Mismatch: the first thing that does not hold.
    """
    import hashlib

    import msgspec

    from glove.cli._receipts import _verifier
    from glove.evaluate import Evidence as EvidenceType
    from glove.evaluate import Outcome as OutcomeType
    from glove.evaluate import (
        Termination,
        decision_rule_digest,
        decode_decision_rule,
        decode_fixture,
        encode_outcome,
        evaluate_stream,
        interleaved_order,
        judge,
        order_digest,
    )
    from glove.journal import ReceiptError, verify_bundle

    try:
        verifier = _verifier(public_key)
    except ReceiptError as exc:
        raise _Mismatch(f"--public-key: {exc}") from exc
    plan = _load(out, PLAN_FILE)
    try:
        rule = decode_decision_rule((out / RULE_FILE).read_bytes())
    except (OSError, ValueError) as exc:
        raise _Mismatch(f"{RULE_FILE}: {exc}") from exc
    digest = decision_rule_digest(rule)
    if plan.get("decision_rule_digest") != digest:
        raise _Mismatch(f"{PLAN_FILE} names another decision rule than {RULE_FILE}")
    order = interleaved_order(len(rule.fixtures), rule.runs_per_arm, rule.seed)
    if order_digest(order) != plan.get("order_digest"):
        raise _Mismatch("the recorded order is not the rule's seeded order")
    skills = {"base": rule.base, "candidate": rule.candidate}
    for arm, skill in skills.items():
        _library_file(out, skill)
        if plan["skills"][arm]["digest"] != skill:
            raise _Mismatch(f"{PLAN_FILE}: the {arm} skill is not the rule's")
    fixtures = [decode_fixture(_library_file(out, item)) for item in rule.fixtures]
    runs = _load(out, RUNS_FILE)
    if not isinstance(runs, list) or len(runs) != len(order):
        raise _Mismatch(f"{RUNS_FILE} holds {len(runs)} runs, the order {len(order)}")
    verdicts: dict[tuple[int, str], list[str]] = {
        (index, arm): [""] * rule.runs_per_arm for index in range(len(fixtures)) for arm in skills
    }
    for number, (item, scheduled) in enumerate(zip(runs, order, strict=True)):
        where = f"run {number + 1} ({item.get('session_id')})"
        if (item["fixture"], item["run"], item["arm"]) != (
            scheduled.fixture, scheduled.run, scheduled.arm,
        ):  # fmt: skip
            raise _Mismatch(f"{where} is not the order's session {number + 1}")
        try:
            verified = verify_bundle(_run_file(out, item["receipt"]), verifier)
        except ReceiptError as exc:
            raise _Mismatch(f"{where}: the envelope does not verify: {exc}") from exc
        envelope = verified.receipt
        if verified.session_id != item["session_id"]:
            raise _Mismatch(f"{where}: the envelope is of session {verified.session_id}")
        evaluation = envelope.get("evaluation") or {}
        fixture_digest = rule.fixtures[item["fixture"]]
        if evaluation.get("fixture", {}).get("digest") != fixture_digest:
            raise _Mismatch(f"{where}: the envelope names another fixture")
        projected = [p.get("digest") for p in envelope.get("projections") or []]
        if projected != [skills[item["arm"]]]:
            raise _Mismatch(f"{where}: the envelope projected {projected}, not the {item['arm']}")
        stream = _run_file(out, item["transcript"])
        recorded = evaluation.get("evidence")
        if recorded is None or recorded.get("bytes_evicted"):
            raise _Mismatch(f"{where}: no complete evidence to re-run")
        if "sha256:" + hashlib.sha256(stream).hexdigest() != envelope["output"]["pty"]["sha256"]:
            raise _Mismatch(f"{where}: the transcript is not the stream the envelope names")
        evidence = evaluate_stream(fixtures[item["fixture"]], [stream])
        if msgspec.json.encode(evidence) != msgspec.json.encode(
            msgspec.convert(recorded, EvidenceType)
        ):
            raise _Mismatch(f"{where}: the evidence re-run from the transcript differs")
        termination = msgspec.convert(evaluation["termination"], Termination)
        outcome = judge(termination, evidence, fixtures[item["fixture"]])
        if encode_outcome(outcome) != encode_outcome(
            msgspec.convert(evaluation["outcome"], OutcomeType)
        ):
            raise _Mismatch(f"{where}: the verdict re-run from the transcript differs")
        if outcome.verdict != item["verdict"]:
            raise _Mismatch(
                f"{where}: {RUNS_FILE} says {item['verdict']}, the run {outcome.verdict}"
            )
        verdicts[(item["fixture"], item["arm"])][item["run"]] = outcome.verdict
    report = _report_of(rule, verdicts)
    shown = _report_json(rule, report, order_digest(order))
    if _load(out, REPORT_FILE) != json.loads(json.dumps(shown)):
        raise _Mismatch(f"{REPORT_FILE} is not the report of the verdicts")
    return shown


def verify_cmd(
    out: Path = typer.Argument(..., help="The bundle directory glove eval ab --bundle wrote."),
    public_key: str = typer.Option(
        ..., "--public-key", help="The log's verifier key (file or text)."
    ),
    as_json: bool = typer.Option(False, "--json", help="Print the recomputed report as JSON."),
) -> None:
    """Check an A/B bundle offline: envelopes, proofs, verdicts re-run, report recomputed."""
    from glove.errors import GloveError

    if not out.is_dir():
        _fail("verify", f"{out} is not a bundle directory", EXIT_USAGE)
    try:
        shown = _verify(out, public_key)
    except _Mismatch as exc:
        _fail("verify", f"FAILED: {exc}", EXIT_EVAL_MISMATCH)
    except (GloveError, KeyError, TypeError, ValueError) as exc:
        _fail(
            "verify", f"FAILED: malformed bundle: {type(exc).__name__}: {exc}", EXIT_EVAL_MISMATCH
        )
    if as_json:
        typer.echo(json.dumps(shown))
        return
    runs = shown["arms"]["base"]["runs"] + shown["arms"]["candidate"]["runs"]
    typer.echo(
        f"OK: {runs} envelopes verified, every verdict re-run from its transcript, the report "
        f"recomputed (rule {shown['decision_rule_digest']})"
    )


# -- the HTML report ------------------------------------------------------------------------


def report_cmd(
    out: Path = typer.Argument(..., help="The bundle directory glove eval ab --bundle wrote."),
    html: Path = typer.Option(..., "--html", help="The HTML file to write."),
) -> None:
    """Write one self-contained HTML page of the bundle's report (differences drawn)."""
    try:
        shown = _load(out, REPORT_FILE)
        plan = _load(out, PLAN_FILE)
    except _Mismatch as exc:
        _fail("report", str(exc))
    try:
        _write(html, render_html(shown, plan).encode())
    except (OSError, KeyError, TypeError, ValueError) as exc:
        _fail("report", f"cannot write {html}: {exc}")
    typer.echo(f"wrote {html}")


def _x(value: float, left: int, width: int) -> float:
    """Where a difference in -1..1 falls on the axis."""
    return left + (max(-1.0, min(1.0, value)) + 1) / 2 * width


def render_html(shown: BundleJson, plan: BundleJson) -> str:
    """The page: a table of the figures and an SVG forest plot of every interval."""
    from html import escape

    rows = [(f"fixture {i + 1}", item["fixture"], item["comparison"])
            for i, item in enumerate(shown["fixtures"])]  # fmt: skip
    rows.append(("overall", shown["decision_rule_digest"] or "", shown))
    left, width, step = 140, 520, 34
    height = step * len(rows) + 50
    svg = [
        (
            f'<svg xmlns="http://www.w3.org/2000/svg" id="forest" width="{left + width + 40}" '
            f'height="{height}" role="img" aria-label="paired differences with 95% intervals">'
        ),
        (
            f'<line class="zero" x1="{_x(0, left, width)}" y1="10" x2="{_x(0, left, width)}" '
            f'y2="{height - 30}" stroke="#888" stroke-dasharray="4 3"/>'
        ),
    ]
    svg.extend(
        f'<text x="{_x(tick, left, width)}" y="{height - 10}" text-anchor="middle" '
        f'font-size="11">{tick:+.1f}</text>'
        for tick in (-1.0, -0.5, 0.0, 0.5, 1.0)
    )
    for index, (label, name, part) in enumerate(rows):
        y = 30 + index * step
        diff = part["difference"]
        low, high = diff["ci95"]
        svg.append(
            f'<g class="interval" data-label="{escape(label)}" data-estimate="{diff["estimate"]}" '
            f'data-low="{low}" data-high="{high}"><title>{escape(name)}</title>'
            f'<text x="{left - 10}" y="{y + 4}" text-anchor="end" font-size="12">'
            f"{escape(label)}</text>"
            f'<line x1="{_x(low, left, width):.1f}" y1="{y}" x2="{_x(high, left, width):.1f}" '
            f'y2="{y}" stroke="#246" stroke-width="2"/>'
            f'<circle cx="{_x(diff["estimate"], left, width):.1f}" cy="{y}" r="5" fill="#c33"/>'
            "</g>"
        )
    svg.append("</svg>")
    table = [
        (
            "<table><tr><th>set</th><th>base pass</th><th>candidate pass</th>"
            "<th>difference</th><th>95% CI</th><th>McNemar p</th><th>MDE</th>"
            "<th>attrition base / candidate</th></tr>"
        )
    ]
    for label, _name, part in rows:
        arms = part["arms"]
        diff = part["difference"]
        low, high = diff["ci95"]
        warn = " (warning: attrition differs)" if part["attrition_warning"] else ""
        table.append(
            f"<tr><td>{escape(label)}</td>"
            f"<td>{arms['base']['pass']}/{arms['base']['runs']}</td>"
            f"<td>{arms['candidate']['pass']}/{arms['candidate']['runs']}</td>"
            f"<td>{diff['estimate']:+.3f}</td><td>[{low:+.3f}, {high:+.3f}]</td>"
            f"<td>{part['mcnemar_p']:.4f}</td><td>{_fmt(part['mde'])}</td>"
            f"<td>{arms['base']['attrition']:.3f} / {arms['candidate']['attrition']:.3f}"
            f"{warn}</td></tr>"
        )
    table.append("</table>")
    decision = shown.get("decision", {})
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        "<title>glove eval ab report</title><style>body{font-family:sans-serif;margin:2em}"
        "td,th{padding:2px 8px;border-bottom:1px solid #ddd}</style></head><body>"
        "<h1>A/B report: candidate minus base</h1>"
        f"<p>harness {escape(str(plan.get('harness')))}, alias "
        f"{escape(str(plan.get('alias')))}; decision rule "
        f'<code id="rule">{escape(str(shown["decision_rule_digest"]))}</code>; interval '
        f"{escape(shown['difference']['method'])} (95%); decision "
        f'<b id="decision">{escape(str(decision.get("decision")))}</b></p>'
        + "".join(svg)
        + "".join(table)
        + "</body></html>\n"
    )
