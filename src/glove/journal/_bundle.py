"""Receipt bundles: one JSON file a third party verifies offline with a public key (sans-IO).

A bundle holds a signed checkpoint, one entry of the log (the receipt's exact bytes), the
inclusion proof that ties the entry to the checkpoint's root, the receipt decoded for a
person, and optionally a consistency proof from an older checkpoint the recipient holds::

    {
      "format": "glove-receipt-bundle/v1",
      "session_id": "...",
      "receipt": {...},                   the entry, decoded (must equal it exactly)
      "checkpoint": "origin\\nsize\\nroot\\n\\n— name sig\\n",
      "tree_size": N,                     the checkpoint's size (must equal it)
      "leaf_index": I,                    the entry's position, 0-based
      "leaf": "base64 of the entry bytes",
      "inclusion_proof": ["base64", ...], RFC 9162 §2.1.3, bottom to top
      "consistency": {"from_size": M, "from_root": "base64", "proof": ["base64", ...]}
    }

The decoder is strict: at most :data:`MAX_BUNDLE_BYTES`, strict JSON (no duplicate keys),
no unknown or missing fields, exact types, canonical base64, and **canonical bytes**: the file
must be exactly what :func:`encode_bundle` writes for its content. So no byte of a bundle can
change without the bundle failing (an edit that keeps the meaning, such as ``1e5`` for
``1E5`` or re-indenting, is refused too: a bundle is evidence, not a document to edit).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final, NotRequired, TypedDict

from glove.journal._checkpoint import MAX_TREE_SIZE, SignedCheckpoint, open_checkpoint
from glove.journal._codec import MAX_PAYLOAD_BYTES, RecordKind
from glove.journal._keys import VerifierKey, b64decode_canonical, b64encode
from glove.journal._merkle import (
    HASH_BYTES,
    MAX_PROOF_HASHES,
    leaf_hash,
    verify_consistency,
    verify_inclusion,
)
from glove.journal._witness import WitnessKey
from glove.journal.errors import (
    BundleMalformed,
    EntryMismatch,
    ProofInvalid,
    ReceiptPayloadInvalid,
)
from glove.protocol import dumps_compact, dumps_pretty, loads_strict

BUNDLE_FORMAT: Final = "glove-receipt-bundle/v1"
#: The envelope domain of each receipt record kind: the entry's ``receipt`` member. The
#: record's HMAC domain (``glove/receipt/v1``, ``glove/refinement/v1``) is the journal's;
#: this one is inside the entry, so the Merkle leaf, and with it every checkpoint
#: signature, covers it: an entry of one domain never verifies as the other.
RESOURCE_ENVELOPE: Final = "glove-session/v1"
REFINEMENT_ENVELOPE: Final = "glove-refinement/v1"
ENVELOPE_DOMAINS: Final[dict[RecordKind, str]] = {
    RecordKind.RECEIPT: RESOURCE_ENVELOPE,
    RecordKind.REFINEMENT: REFINEMENT_ENVELOPE,
}
MAX_BUNDLE_BYTES: Final = 8 * 1024 * 1024
"""Largest bundle accepted: a 1 MiB entry in base64, the same decoded, and the rest."""
MAX_SESSION_ID_BYTES: Final = 256
_REQUIRED: Final = (
    "format",
    "session_id",
    "receipt",
    "checkpoint",
    "tree_size",
    "leaf_index",
    "leaf",
    "inclusion_proof",
)
_OPTIONAL: Final = ("consistency",)
_CONSISTENCY_FIELDS: Final = ("from_size", "from_root", "proof")


@dataclass(frozen=True, slots=True)
class ConsistencyEvidence:
    """A consistency proof from an older tree head (``from_size``, ``from_root``)."""

    from_size: int
    from_root: bytes
    proof: tuple[bytes, ...]


@dataclass(frozen=True, slots=True)
class ReceiptBundle:
    """A decoded bundle (not yet verified)."""

    session_id: str
    #: Any receipt payload ever signed, as it is (journal sits below glove.records, and a
    #: bundle exported by any version must verify): free-form JSON on purpose.
    receipt: dict[str, Any]
    checkpoint: str
    tree_size: int
    leaf_index: int
    leaf: bytes
    inclusion_proof: tuple[bytes, ...]
    consistency: ConsistencyEvidence | None = None


@dataclass(frozen=True, slots=True)
class VerifiedReceipt:
    """What a verified bundle proves: this receipt is entry ``leaf_index`` of the log whose
    signed checkpoint (origin, size, root) is ``checkpoint``."""

    session_id: str
    receipt: dict[str, Any]  # the verified payload as signed (see ReceiptBundle.receipt)
    leaf_index: int
    checkpoint: SignedCheckpoint
    consistency_from: tuple[int, bytes] | None = None


def parse_receipt_payload(payload: bytes) -> dict[str, Any]:
    """Decode a receipt payload: a strict JSON object with a non-empty string ``session_id``.

    Raises:
        ReceiptPayloadInvalid: anything else.
    """
    if len(payload) > MAX_PAYLOAD_BYTES:
        raise ReceiptPayloadInvalid(f"a receipt is at most {MAX_PAYLOAD_BYTES} bytes")
    value = loads_strict(payload, ReceiptPayloadInvalid)
    if not isinstance(value, dict):
        raise ReceiptPayloadInvalid("a receipt is a JSON object")
    session_id = value.get("session_id")
    if not isinstance(session_id, str) or not session_id:
        raise ReceiptPayloadInvalid("a receipt carries a non-empty string session_id")
    if len(session_id.encode("utf-8", "surrogatepass")) > MAX_SESSION_ID_BYTES:
        raise ReceiptPayloadInvalid(f"a session_id is at most {MAX_SESSION_ID_BYTES} bytes")
    return value


def envelope_kind(entry: Mapping[str, object]) -> RecordKind | None:
    """The record kind whose envelope domain ``entry`` carries, or None for neither."""
    domain = entry.get("receipt")
    for kind, name in ENVELOPE_DOMAINS.items():
        if domain == name:
            return kind
    return None


def check_envelope_domain(entry: Mapping[str, object], kind: RecordKind) -> None:
    """Refuse an entry that is not of ``kind``'s envelope domain.

    Raises:
        EntryMismatch: the entry's ``receipt`` member is another domain's, or none.
        ValueError: ``kind`` has no envelope domain (DATA, SEAL).
    """
    want = ENVELOPE_DOMAINS.get(kind)
    if want is None:
        raise ValueError(f"record kind {kind!r} has no envelope domain")
    got = entry.get("receipt")
    if got != want:
        raise EntryMismatch(
            f"the entry is of envelope domain {got!r}, not {want!r} ({kind.name.lower()})"
        )


def _hashes_json(hashes: tuple[bytes, ...]) -> list[str]:
    return [b64encode(h) for h in hashes]


class _Consistency(TypedDict):
    from_size: int
    from_root: str
    proof: list[str]


class _BundleDocument(TypedDict):
    """A bundle as written (``BUNDLE_FORMAT``); ``receipt`` is the signed payload as it is."""

    format: str
    session_id: str
    receipt: Mapping[str, object]
    checkpoint: str
    tree_size: int
    leaf_index: int
    leaf: str
    inclusion_proof: list[str]
    consistency: NotRequired[_Consistency]


def encode_bundle(bundle: ReceiptBundle) -> bytes:
    """The canonical bytes of ``bundle`` (two-space indented JSON, UTF-8, final newline)."""
    doc: _BundleDocument = {
        "format": BUNDLE_FORMAT,
        "session_id": bundle.session_id,
        "receipt": bundle.receipt,
        "checkpoint": bundle.checkpoint,
        "tree_size": bundle.tree_size,
        "leaf_index": bundle.leaf_index,
        "leaf": b64encode(bundle.leaf),
        "inclusion_proof": _hashes_json(bundle.inclusion_proof),
    }
    if bundle.consistency is not None:
        doc["consistency"] = {
            "from_size": bundle.consistency.from_size,
            "from_root": b64encode(bundle.consistency.from_root),
            "proof": _hashes_json(bundle.consistency.proof),
        }
    return dumps_pretty(doc).encode("utf-8")


def _int(doc: Mapping[str, object], name: str, low: int) -> int:
    value = doc[name]
    if type(value) is not int or not low <= value <= MAX_TREE_SIZE:
        raise BundleMalformed(f"{name} must be an integer from {low} to {MAX_TREE_SIZE}")
    return value


def _str(doc: Mapping[str, object], name: str) -> str:
    value = doc[name]
    if not isinstance(value, str):
        raise BundleMalformed(f"{name} must be a string")
    return value


def _hash_list(value: Any, name: str) -> tuple[bytes, ...]:
    if not isinstance(value, list) or len(value) > MAX_PROOF_HASHES:
        raise BundleMalformed(f"{name} must be a list of at most {MAX_PROOF_HASHES} hashes")
    out = []
    for item in value:
        if not isinstance(item, str):
            raise BundleMalformed(f"{name} holds a non-string")
        raw = b64decode_canonical(item, f"a hash in {name}", BundleMalformed)
        if len(raw) != HASH_BYTES:
            raise BundleMalformed(f"a hash in {name} is {len(raw)} bytes, not {HASH_BYTES}")
        out.append(raw)
    return tuple(out)


def _fields(doc: Any, required: tuple[str, ...], optional: tuple[str, ...], where: str) -> None:
    if not isinstance(doc, dict):
        raise BundleMalformed(f"{where} must be a JSON object")
    unknown = sorted(set(doc) - set(required) - set(optional))
    if unknown:
        raise BundleMalformed(f"{where} has unknown field {unknown[0]!r}")
    missing = [name for name in required if name not in doc]
    if missing:
        raise BundleMalformed(f"{where} lacks the field {missing[0]!r}")


def decode_bundle(data: bytes) -> ReceiptBundle:
    """Decode a bundle strictly (see the module docstring); nothing is verified yet.

    Raises:
        BundleMalformed: it is not a canonical, well-formed bundle.
    """
    if len(data) > MAX_BUNDLE_BYTES:
        raise BundleMalformed(f"a bundle is at most {MAX_BUNDLE_BYTES} bytes")
    doc = loads_strict(data, BundleMalformed)
    _fields(doc, _REQUIRED, _OPTIONAL, "the bundle")
    if doc["format"] != BUNDLE_FORMAT:
        raise BundleMalformed(f"format is not {BUNDLE_FORMAT!r}")
    leaf = b64decode_canonical(_str(doc, "leaf"), "leaf", BundleMalformed)
    if len(leaf) > MAX_PAYLOAD_BYTES:
        raise BundleMalformed(f"leaf is over {MAX_PAYLOAD_BYTES} bytes")
    receipt = doc["receipt"]
    if not isinstance(receipt, dict):
        raise BundleMalformed("receipt must be a JSON object")
    consistency = None
    if "consistency" in doc:
        part = doc["consistency"]
        _fields(part, _CONSISTENCY_FIELDS, (), "consistency")
        root = b64decode_canonical(_str(part, "from_root"), "from_root", BundleMalformed)
        if len(root) != HASH_BYTES:
            raise BundleMalformed(f"from_root is {len(root)} bytes, not {HASH_BYTES}")
        consistency = ConsistencyEvidence(
            _int(part, "from_size", 1), root, _hash_list(part["proof"], "consistency.proof")
        )
    bundle = ReceiptBundle(
        session_id=_str(doc, "session_id"),
        receipt=receipt,
        checkpoint=_str(doc, "checkpoint"),
        tree_size=_int(doc, "tree_size", 1),
        leaf_index=_int(doc, "leaf_index", 0),
        leaf=leaf,
        inclusion_proof=_hash_list(doc["inclusion_proof"], "inclusion_proof"),
        consistency=consistency,
    )
    if encode_bundle(bundle) != data:
        raise BundleMalformed("the bundle is not in canonical form (it was edited or re-encoded)")
    return bundle


def verify_bundle(
    data: bytes | ReceiptBundle,
    verifier: VerifierKey,
    *,
    witnesses: Sequence[WitnessKey] = (),
    kind: RecordKind | None = None,
) -> VerifiedReceipt:
    """Verify a bundle offline: the signature, the proofs and the entry must all hold.

    The checkpoint must carry exactly the log's signature and one cosignature of each of
    ``witnesses``: a line of any other key is refused, never ignored. With ``kind``
    (RECEIPT or REFINEMENT) the entry must also be of that kind's envelope domain
    (:data:`ENVELOPE_DOMAINS`): a resource receipt never verifies as a refinement
    envelope, nor the reverse.

    Raises:
        BundleMalformed: not a well-formed canonical bundle.
        NoteError: the checkpoint is malformed, not canonical, or of another origin.
        UnverifiedSignature: the checkpoint carries a signature line of no key given.
        SignatureInvalid: the checkpoint is not signed by ``verifier``'s key, or a witness
            named did not cosign it.
        SigningKeyError: two of the keys given share a name and key hash.
        ProofInvalid: the tree size, the inclusion proof or the consistency proof fails.
        EntryMismatch: the entry is not the receipt shown, or not of the session named.
    """
    bundle = decode_bundle(data) if isinstance(data, bytes) else data
    signed = open_checkpoint(bundle.checkpoint, verifier, witnesses=witnesses)
    if bundle.tree_size != signed.size:
        raise ProofInvalid(
            f"tree_size {bundle.tree_size} is not the checkpoint's size {signed.size}"
        )
    verify_inclusion(
        bundle.leaf_index,
        signed.size,
        leaf_hash(bundle.leaf),
        bundle.inclusion_proof,
        signed.root,
    )
    since = None
    if bundle.consistency is not None:
        evidence = bundle.consistency
        verify_consistency(
            evidence.from_size, signed.size, evidence.from_root, signed.root, evidence.proof
        )
        since = (evidence.from_size, evidence.from_root)
    try:
        entry = parse_receipt_payload(bundle.leaf)
    except ReceiptPayloadInvalid as exc:
        raise EntryMismatch(f"the entry is not a receipt: {exc}") from exc
    if dumps_compact(entry) != dumps_compact(bundle.receipt):
        raise EntryMismatch("the receipt shown is not the entry the proof covers")
    if entry["session_id"] != bundle.session_id:
        raise EntryMismatch(
            f"the entry is a receipt of session {entry['session_id']!r}, not {bundle.session_id!r}"
        )
    if kind is not None:
        check_envelope_domain(entry, kind)
    return VerifiedReceipt(bundle.session_id, entry, bundle.leaf_index, signed, since)
