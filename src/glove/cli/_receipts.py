"""``glove receipts public-key|export|verify|consistency``: parse, call the library, print.

``page`` and ``ack`` ask the running ``gloved`` (the controller's cursor over the receipt
journal). ``export`` reads the receipts journal directory offline (no daemon, no HMAC key);
``verify`` and ``consistency`` need only the files named and the log's public key. Every
failure is one line on stderr (and a JSON object on stdout with ``--json``) and one of these
exit codes:

==  ==========================================================================================
0   verified
1   a signature does not verify with the given public key, a witness named did not cosign,
    or the checkpoint carries a signature line of a key not given (``--public-key``,
    ``--witness``): a bundle verifies only with exactly the signatures it was exported with
11  gloved refused the request, or the connection failed (``page``, ``ack``; the code is
    printed)
69  no gloved is running (``page``, ``ack``), as for every ``glove session`` command
64  usage error (a missing or unknown argument)
3   a proof does not hold: inclusion, consistency, or NEW is not an extension of OLD
4   the entry does not match the receipt shown, or the session named, or a --library file
    is none of the receipt's projections
5   an input is malformed: a bundle, a checkpoint, a key
6   an input cannot be read, or a key file is unsafe (symlink, other owner, open to others)
7   the journal holds no receipt of that session
8   the session is not sealed yet: no stored checkpoint covers its final receipt
9   the journal and its checkpoint disagree (a cut tail, a rewrite), or the journal is damaged
10  no consistency proof is available (NEW carries none from OLD's size; pass --journal)
==  ==========================================================================================
"""

from __future__ import annotations

import datetime
import json
import os
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, NotRequired, TypedDict, TypeVar

import typer

from glove.exits import (
    EXIT_RECEIPT_ENTRY,
    EXIT_RECEIPT_LOG,
    EXIT_RECEIPT_MALFORMED,
    EXIT_RECEIPT_NO_PROOF,
    EXIT_RECEIPT_NOT_FOUND,
    EXIT_RECEIPT_NOT_SEALED,
    EXIT_RECEIPT_PROOF,
    EXIT_RECEIPT_SIGNATURE,
    EXIT_RECEIPT_UNREADABLE,
    EXIT_RECEIPTS_REFUSED,
    EXIT_UNAVAILABLE,
    EXIT_USAGE,
)

if TYPE_CHECKING:
    from glove.control import Client
    from glove.journal import SignedCheckpoint, VerifiedReceipt, VerifierKey, WitnessKey

EXIT_BY_ERROR: Final = {
    "SignatureInvalid": EXIT_RECEIPT_SIGNATURE,
    "UnverifiedSignature": EXIT_RECEIPT_SIGNATURE,
    "ProofInvalid": EXIT_RECEIPT_PROOF,
    "EntryMismatch": EXIT_RECEIPT_ENTRY,
    "BundleMalformed": EXIT_RECEIPT_MALFORMED,
    "NoteError": EXIT_RECEIPT_MALFORMED,
    "SigningKeyError": EXIT_RECEIPT_UNREADABLE,
    "SigningKeyUnsafe": EXIT_RECEIPT_UNREADABLE,
    "SessionNotFound": EXIT_RECEIPT_NOT_FOUND,
    "NotSealed": EXIT_RECEIPT_NOT_SEALED,
    "LogMismatch": EXIT_RECEIPT_LOG,
    "NoProof": EXIT_RECEIPT_NO_PROOF,
}
MAX_INPUT_BYTES: Final = 8 * 1024 * 1024 + 1
RECEIPTS_JOURNAL_NAME: Final = "receipts"
T = TypeVar("T")


def default_receipts_journal() -> Path:
    """``$XDG_STATE_HOME/glove/receipts`` (``~/.local/state`` when XDG is unset)."""
    state = os.environ.get("XDG_STATE_HOME")
    base = Path(state) if state and Path(state).is_absolute() else Path.home() / ".local/state"
    return base / "glove" / RECEIPTS_JOURNAL_NAME


class _Failure(Exception):
    """One failure to report: its kind (an error class name) and its one-line message."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind


def register(app: typer.Typer) -> None:
    """Add the ``receipts`` command group to ``app``."""
    group = typer.Typer(
        help="Receipts: page and acknowledge them (gloved); export, verify, prove offline.",
        no_args_is_help=True,
    )
    group.command("page")(page_cmd)
    group.command("ack")(ack_cmd)
    group.command("public-key")(public_key_cmd)
    group.command("export")(export_cmd)
    group.command("verify")(verify_cmd)
    group.command("consistency")(consistency_cmd)
    app.add_typer(group, name="receipts")


def _daemon_call(verb: str, runtime_dir: Path | None, action: Callable[[Client], T]) -> T:
    """``action(client)`` on a connected client; every failure is one line and a code."""
    from glove.control import Client, ControlError, RemoteError
    from glove.control.errors import DaemonUnavailable

    try:
        with Client.for_runtime_dir(runtime_dir) as client:
            return action(client)
    except DaemonUnavailable as exc:
        typer.echo(f"glove receipts {verb}: {exc}", err=True)
        raise typer.Exit(EXIT_UNAVAILABLE) from exc
    except RemoteError as exc:
        message = f"{exc.code}: {exc.message}"
        if exc.code == "invalid_params":  # an option's value gloved cannot take: usage
            typer.echo(f"glove receipts {verb}: {message} (see glove receipts {verb} --help)",
                       err=True)  # fmt: skip
            raise typer.Exit(EXIT_USAGE) from exc
        if exc.code == "method_not_found":
            from glove.cli._status import _no_sessions

            message = _no_sessions(runtime_dir, exc.message)
        typer.echo(f"glove receipts {verb}: {message}", err=True)
        raise typer.Exit(EXIT_RECEIPTS_REFUSED) from exc
    except ControlError as exc:
        typer.echo(f"glove receipts {verb}: {exc}", err=True)
        raise typer.Exit(EXIT_RECEIPTS_REFUSED) from exc


def page_cmd(
    after: int = typer.Option(0, "--after", help="Receipts after this sequence number."),
    limit: int = typer.Option(100, "--limit", min=1, max=1000, help="At most this many."),
    as_json: bool = typer.Option(False, "--json", help="Print the page as JSON."),
    runtime_dir: Path | None = typer.Option(
        None,
        "--runtime-dir",
        help="gloved's runtime directory (default: the one `glove doctor` names).",
    ),
) -> None:
    """A page of terminal receipts from gloved, in order, with the acknowledged position."""
    page = _daemon_call("page", runtime_dir, lambda c: c.receipts_page(after=after, limit=limit))
    if as_json:
        import msgspec

        typer.echo(json.dumps(msgspec.to_builtins(page), sort_keys=True))
        return
    typer.echo(f"{'SEQ':>6}  {'SESSION':<34}  {'OUTCOME':<20}  {'KIND':<10}  CHECKPOINT")
    from glove.cli._status import outcome_text

    for item in page.receipts:
        body = item.receipt
        kind = outcome_text(body.get("outcome"))  # limit, signal: which
        record = item.kind or "-"
        verdict = ((body.get("evaluation") or {}).get("outcome") or {}).get("verdict")
        if record == "refinement" and verdict:
            kind = f"{kind}, {verdict}"  # a refinement envelope's verdict
        typer.echo(
            f"{item.seq:>6}  {item.session_id or '-':<34}  {kind:<20}  "
            f"{record:<10}  {item.checkpoint or '-'}"
        )
    typer.echo(f"acknowledged through {page.acked}; next: --after {page.next_cursor}")


def ack_cmd(
    seq: int = typer.Argument(..., help="The next unacknowledged receipt's sequence number."),
    runtime_dir: Path | None = typer.Option(
        None,
        "--runtime-dir",
        help="gloved's runtime directory (default: the one `glove doctor` names).",
    ),
) -> None:
    """Acknowledge receipt SEQ (in order: exactly the next one)."""
    result = _daemon_call("ack", runtime_dir, lambda c: c.receipts_ack(seq))
    typer.echo(f"acknowledged through {result.acked}")


def _run(verb: str, as_json: bool, action: Callable[[], T]) -> T:
    """Run ``action``; turn every expected failure into one line and its exit code."""
    from glove.journal import JournalError

    try:
        return action()
    except _Failure as exc:
        kind, message = exc.kind, str(exc)
    except JournalError as exc:
        kind, message = type(exc).__name__, str(exc)
    except OSError as exc:
        kind, message = "OSError", f"{exc.filename or 'file'}: {exc.strerror or exc}"
    code = EXIT_BY_ERROR.get(kind)
    if code is None:
        code = EXIT_RECEIPT_UNREADABLE if kind == "OSError" else EXIT_RECEIPT_LOG
    if as_json:
        typer.echo(json.dumps({"verified": False, "error": kind, "message": message}))
    typer.echo(f"glove receipts {verb}: {message}", err=True)
    raise typer.Exit(code)


def _read(path: Path, what: str) -> bytes:
    try:
        with path.open("rb") as handle:
            data = handle.read(MAX_INPUT_BYTES)
    except OSError as exc:
        raise _Failure("OSError", f"cannot read {what} {path}: {exc.strerror}") from exc
    if len(data) >= MAX_INPUT_BYTES:
        raise _Failure("BundleMalformed", f"{what} {path} is larger than any bundle")
    return data


_WITNESS_HELP: Final = (
    "A witness's public key file (C2SP vkey, type 0x04) whose cosignature the checkpoint must "
    "carry; repeat for each witness. Without it, a checkpoint with any cosignature is refused."
)


_PUBLIC_KEY_HELP: Final = (
    "The log's verifier key: a file holding it, or the key text itself (the line `glove setup` "
    "and `glove receipts public-key` print). Default: this machine's log, from the signing key "
    "glove setup made."
)


def _verifier(value: str | None) -> VerifierKey:
    """The verifier key ``--public-key`` names: a file, the key's text, or this machine's."""
    from glove.journal import (
        SigningKeyError,
        load_signing_key,
        parse_verifier_key,
        read_verifier_key_file,
    )

    if value is None:
        return load_signing_key(None).verifier
    if not os.path.lexists(value):
        try:
            return parse_verifier_key(value.strip())
        except SigningKeyError:
            pass  # not key text either: say the file cannot be read
    return read_verifier_key_file(Path(value))


def _witnesses(paths: list[Path] | None) -> list[WitnessKey]:
    from glove.journal import read_witness_key_file

    return [read_witness_key_file(path) for path in paths or ()]


def _load_head(
    path: Path, verifier: VerifierKey, witnesses: list[WitnessKey] | None = None
) -> SignedCheckpoint:
    """A signed checkpoint from a checkpoint file or a bundle, verified with ``verifier``
    and ``witnesses`` (exactly: no other signature line)."""
    from glove.journal import ReceiptError, open_checkpoint, verify_bundle

    data = _read(path, "file")
    keys = witnesses or []
    try:
        if data.lstrip()[:1] == b"{":
            return verify_bundle(data, verifier, witnesses=keys).checkpoint
        return open_checkpoint(data, verifier, witnesses=keys)
    except ReceiptError as exc:
        raise _Failure(type(exc).__name__, f"{path}: {exc}") from exc


def _write_atomically(path: Path, data: bytes) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    try:
        with tmp.open("wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        tmp.replace(path)
    except OSError as exc:
        tmp.unlink(missing_ok=True)
        raise _Failure("OSError", f"cannot write {path}: {exc.strerror}") from exc


def public_key_cmd(
    key: Path | None = typer.Option(
        None,
        "--key",
        "--key-file",
        help="The signing key file (default: the one glove setup made).",
    ),
) -> None:
    """Print the log's verifier key (C2SP signed-note format) for third parties."""
    from glove.journal import load_signing_key

    signing = _run("public-key", False, lambda: load_signing_key(key))
    typer.echo(signing.verifier.text)


def export_cmd(  # noqa: PLR0917 - typer maps each parameter to an option
    session_id: str = typer.Argument(..., help="The session whose final receipt to export."),
    output: Path = typer.Option(..., "-o", "--output", help="Where to write the bundle."),
    journal: Path | None = typer.Option(
        None, "--journal", help="The receipts journal directory (default: the state dir's)."
    ),
    key: Path | None = typer.Option(
        None,
        "--key",
        "--key-file",
        help="The signing key file, to check the stored checkpoint with (default: the one "
        "glove setup made).",
    ),
    since: Path | None = typer.Option(
        None,
        "--since",
        help="An older checkpoint or bundle the recipient holds: embed a consistency proof.",
    ),
    witness: list[Path] | None = typer.Option(None, "--witness", help=_WITNESS_HELP + " (--since)"),
) -> None:
    """Export a self-contained bundle of a session's final receipt, offline."""
    from glove.journal import export_offline, load_signing_key

    def action() -> str:
        verifier = load_signing_key(key).verifier
        witnesses = _witnesses(witness)
        old = _load_head(since, verifier, witnesses).checkpoint if since is not None else None
        where = journal if journal is not None else default_receipts_journal()
        data = export_offline(where, session_id, verifier, since=old)
        _write_atomically(output, data)
        return verifier.name

    origin = _run("export", False, action)
    typer.echo(f"wrote the receipt of session {session_id} (log {origin}) to {output}")


class Cosigned(TypedDict):
    """A witness's cosignature of the bundle's checkpoint, in ``verify``'s report."""

    witness: str
    key_id: str
    time: int


class ConsistentWith(TypedDict):
    """The older tree the bundle's consistency proof extends."""

    tree_size: int
    root: str


class ProjectionVerified(TypedDict):
    """A ``--library`` file that is one of the receipt's projections."""

    alias: object
    target: object
    digest: str
    size: int
    file: str


class VerifyReport(TypedDict):
    """``glove receipts verify --json`` (its keys in this order)."""

    verified: bool
    session_id: str
    origin: str
    tree_size: int
    root: str
    leaf_index: int
    #: The signed receipt as it was signed: arbitrary JSON here (its schema is the receipt's
    #: of the code that signed it, older or newer), printed as it is, never reshaped.
    receipt: dict[str, Any]
    cosigned_by: NotRequired[list[Cosigned]]
    consistent_with: NotRequired[ConsistentWith]
    #: Always present (null: a receipt of earlier code), after the proofs' keys.
    kind: NotRequired[str | None]
    projections_verified: NotRequired[list[ProjectionVerified]]


def _report(verified: VerifiedReceipt, kind: str | None) -> VerifyReport:
    import base64

    head = verified.checkpoint.checkpoint
    report: VerifyReport = {
        "verified": True,
        "session_id": verified.session_id,
        "origin": head.origin,
        "tree_size": head.size,
        "root": base64.b64encode(head.root).decode(),
        "leaf_index": verified.leaf_index,
        "receipt": verified.receipt,
    }
    if verified.checkpoint.cosignatures:
        report["cosigned_by"] = [
            {"witness": c.witness.name, "key_id": f"{c.witness.key_hash:08x}", "time": c.timestamp}
            for c in verified.checkpoint.cosignatures
        ]
    if verified.consistency_from is not None:
        report["consistent_with"] = {
            "tree_size": verified.consistency_from[0],
            "root": base64.b64encode(verified.consistency_from[1]).decode(),
        }
    report["kind"] = kind
    return report


_LIBRARY_HELP: Final = (
    "A file projected into the session (a library bundle's bytes); its SHA-256 and size are "
    "recomputed and must be those of one of the receipt's projections. Repeat for each."
)
#: Largest projected file accepted by --library (glove.library's MAX_BUNDLE_BYTES).
MAX_LIBRARY_FILE_BYTES: Final = 64 * 1024 * 1024


def _file_digest(path: Path) -> tuple[str, int]:
    """``sha256:<hex>`` and size of a regular file (never blocking on a FIFO)."""
    import hashlib
    import stat

    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC)
    except OSError as exc:
        raise _Failure("OSError", f"cannot read --library {path}: {exc.strerror}") from exc
    with os.fdopen(fd, "rb") as handle:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise _Failure("OSError", f"--library {path} is not a regular file")
        digest = hashlib.sha256()
        size = 0
        while chunk := handle.read(1024 * 1024):
            size += len(chunk)
            if size > MAX_LIBRARY_FILE_BYTES:
                raise _Failure("EntryMismatch", f"--library {path} is larger than any bundle")
            digest.update(chunk)
    return "sha256:" + digest.hexdigest(), size


def _check_projections(
    receipt: Mapping[str, object], files: list[Path]
) -> list[ProjectionVerified]:
    """Each file's digest and size, recomputed, against the receipt's projections.

    Raises:
        _Failure: ``EntryMismatch`` for a file that is none of the receipt's projections.
    """
    projections = receipt.get("projections")
    listed = projections if isinstance(projections, list) else []
    checked: list[ProjectionVerified] = []
    for path in files:
        digest, size = _file_digest(path)
        matches = [
            p
            for p in listed
            if isinstance(p, dict) and p.get("digest") == digest and p.get("size") == size
        ]
        if not matches:
            raise _Failure(
                "EntryMismatch",
                f"--library {path} ({digest}, {size} bytes) is not a projection of this "
                f"receipt ({len(listed)} listed)",
            )
        checked.extend(
            {"alias": p.get("alias"), "target": p.get("target"), "digest": digest, "size": size,
             "file": str(path)}
            for p in matches
        )  # fmt: skip
    return checked


def verify_cmd(  # noqa: PLR0917 - typer maps each parameter to an option
    bundle: Path = typer.Argument(..., help="The bundle file."),
    public_key: str | None = typer.Option(None, "--public-key", help=_PUBLIC_KEY_HELP),
    witness: list[Path] | None = typer.Option(None, "--witness", help=_WITNESS_HELP),
    as_json: bool = typer.Option(False, "--json", help="Print the result as JSON."),
    library: list[Path] | None = typer.Option(None, "--library", help=_LIBRARY_HELP),
    kind: str | None = typer.Option(
        None,
        "--kind",
        help="Require this envelope domain: receipt (a resource receipt) or refinement.",
    ),
) -> None:
    """Verify a bundle offline: signature, inclusion proof and entry must all hold.

    The checkpoint must carry exactly the log's signature and one cosignature of each
    --witness: a signature line of any other key is refused (exit 1), never ignored. Each
    --library FILE must hash to one of the receipt's projections (exit 4 otherwise). The
    report's ``kind`` says the entry's envelope domain (``receipt``, ``refinement``, or null
    for a receipt of earlier code); with --kind the entry must be of that one (exit 4).
    """
    from glove.journal import RecordKind, envelope_kind, verify_bundle

    kinds = {"receipt": RecordKind.RECEIPT, "refinement": RecordKind.REFINEMENT}
    if kind is not None and kind not in kinds:
        typer.echo(
            f"glove receipts verify: --kind is receipt or refinement, not {kind!r}", err=True
        )
        raise typer.Exit(EXIT_USAGE)
    checked: list[ProjectionVerified] = []
    found: list[str] = []

    def action() -> VerifiedReceipt:
        verifier = _verifier(public_key)
        witnesses = _witnesses(witness)
        verified = verify_bundle(
            _read(bundle, "bundle"),
            verifier,
            witnesses=witnesses,
            kind=kinds[kind] if kind is not None else None,
        )
        domain = envelope_kind(verified.receipt)  # None: a receipt of earlier code
        found.append(domain.name.lower() if domain is not None else "")
        checked.extend(_check_projections(verified.receipt, library or []))
        return verified

    verified = _run("verify", as_json, action)
    report = _report(verified, found[0] or None)
    if library:
        report["projections_verified"] = checked
    if as_json:
        typer.echo(json.dumps(report, ensure_ascii=False))
        return
    typer.echo(
        f"OK: the receipt of session {report['session_id']} is entry {report['leaf_index']} "
        f"of log {report['origin']} at tree size {report['tree_size']} (root {report['root']})"
    )
    for cosigned in report.get("cosigned_by", ()):
        when = datetime.datetime.fromtimestamp(cosigned["time"], datetime.UTC)
        typer.echo(
            f"  cosigned by witness {cosigned['witness']} ({cosigned['key_id']}) "
            f"at {cosigned['time']} ({when:%Y-%m-%dT%H:%M:%SZ})"
        )
    if "consistent_with" in report:
        old = report["consistent_with"]
        typer.echo(f"  and that tree extends the one of size {old['tree_size']} ({old['root']})")
    if report["kind"] == "refinement":
        outcome = (report["receipt"].get("evaluation") or {}).get("outcome") or {}
        typer.echo(f"  a refinement envelope: verdict {outcome.get('verdict')}")
    for item in report.get("projections_verified", ()):
        typer.echo(
            f"  projection {item['alias']} at {item['target']}: {item['file']} is "
            f"{item['digest']} ({item['size']} bytes)"
        )
    typer.echo(f"  receipt: {json.dumps(report['receipt'], ensure_ascii=False)}")


def _consistency(
    old_path: Path,
    new_path: Path,
    verifier: VerifierKey,
    journal: Path | None,
    witnesses: list[WitnessKey],
) -> tuple[SignedCheckpoint, SignedCheckpoint, str]:
    from glove.journal import consistency_offline, decode_bundle, verify_consistency

    old = _load_head(old_path, verifier, witnesses)
    new = _load_head(new_path, verifier, witnesses)
    if new.size < old.size:
        raise _Failure(
            "ProofInvalid",
            f"NEW covers {new.size} entries, fewer than OLD's {old.size}: it does not extend "
            "OLD (a cut tail, or the files are swapped)",
        )
    if new.size == old.size:
        if new.root != old.root:
            raise _Failure("ProofInvalid", f"two different roots for the tree of size {old.size}")
        return old, new, "the same tree"
    data = _read(new_path, "file")
    evidence = decode_bundle(data).consistency if data.lstrip()[:1] == b"{" else None
    if evidence is not None and evidence.from_size == old.size:
        if evidence.from_root != old.root:
            raise _Failure("ProofInvalid", "NEW's consistency proof starts from another root")
        return old, new, "the consistency proof NEW carries"  # verified by _load_head
    if journal is None:
        raise _Failure(
            "NoProof",
            f"NEW carries no consistency proof from size {old.size}: re-export NEW with "
            "--since OLD, or pass --journal DIR",
        )
    proof = consistency_offline(journal, old.checkpoint, new.checkpoint, verifier)
    verify_consistency(old.size, new.size, old.root, new.root, proof)
    return old, new, f"a consistency proof from the journal {journal}"


def consistency_cmd(  # noqa: PLR0917 - typer maps each parameter to an option
    old: Path = typer.Argument(..., help="The older checkpoint file or bundle."),
    new: Path = typer.Argument(..., help="The newer checkpoint file or bundle."),
    public_key: str | None = typer.Option(None, "--public-key", help=_PUBLIC_KEY_HELP),
    journal: Path | None = typer.Option(
        None, "--journal", help="A receipts journal to compute the proof from (the operator)."
    ),
    witness: list[Path] | None = typer.Option(None, "--witness", help=_WITNESS_HELP),
    as_json: bool = typer.Option(False, "--json", help="Print the result as JSON."),
) -> None:
    """Prove that NEW's tree extends OLD's: same log, nothing removed or changed."""

    def action() -> tuple[SignedCheckpoint, SignedCheckpoint, str]:
        verifier = _verifier(public_key)
        return _consistency(old, new, verifier, journal, _witnesses(witness))

    old_head, new_head, how = _run("consistency", as_json, action)
    if as_json:
        typer.echo(
            json.dumps(
                {
                    "verified": True,
                    "origin": new_head.checkpoint.origin,
                    "old_size": old_head.size,
                    "new_size": new_head.size,
                    "proof": how,
                }
            )
        )
        return
    typer.echo(
        f"OK: the tree of size {new_head.size} extends the tree of size {old_head.size} "
        f"(log {new_head.checkpoint.origin}; by {how})"
    )
