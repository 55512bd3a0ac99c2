"""The session journal's events: one JSON object per record, tagged by ``t``.

Encoded as the journal has always written them (``json.dumps`` with sorted keys, compact
separators), so a record decoded and encoded again is the same bytes; an optional member
is absent (``UNSET``), never null, when it was absent.
"""

from __future__ import annotations

import json
from typing import Any, Literal

import msgspec

from glove.evaluate import Outcome
from glove.protocol import JsonObject
from glove.records._outcome import ReceiptOutcome
from glove.records._receipt import Projection
from glove.records.errors import RecordInvalid

State = Literal["created", "preparing", "composed", "running", "finalizing", "terminal"]


class _Event(msgspec.Struct, frozen=True, forbid_unknown_fields=True, kw_only=True, tag_field="t"):
    id: str
    at: int


class Created(_Event, frozen=True, kw_only=True, tag="created"):
    """A new session: its plan (canonical JSON, decoded), the plan's digests and the
    generation of each exposure it reads (absent in records older than exposures)."""

    plan: JsonObject
    sha256: str
    blake3: str
    exposures: dict[str, int] | msgspec.UnsetType = msgspec.UNSET


class StateDetails(msgspec.Struct, frozen=True, forbid_unknown_fields=True, kw_only=True):
    """What a state change adds to the session: ``composed`` its launch binding (and the
    projections to mount), ``running`` its launch time."""

    launch_binding: str | msgspec.UnsetType = msgspec.UNSET
    projections: list[Projection] | msgspec.UnsetType = msgspec.UNSET
    launched_ns: int | msgspec.UnsetType = msgspec.UNSET


class StateChanged(_Event, frozen=True, kw_only=True, tag="state"):
    """A transition; ``details`` only when it adds some."""

    state: State
    details: StateDetails | msgspec.UnsetType = msgspec.UNSET


class Terminal(_Event, frozen=True, kw_only=True, tag="terminal"):
    """The session's terminal envelope is in the receipt journal at ``receipt_seq``; a
    refinement plan's carries its verdict (``evaluation``)."""

    receipt_seq: int
    outcome: ReceiptOutcome
    evaluation: Outcome | msgspec.UnsetType = msgspec.UNSET


class Cleaned(_Event, frozen=True, kw_only=True, tag="cleaned"):
    """The session's data was removed."""


SessionEvent = Created | StateChanged | Terminal | Cleaned

_decoder = msgspec.json.Decoder(SessionEvent)


def decode_event(payload: bytes) -> SessionEvent:
    """One session journal record, strictly.

    Raises:
        RecordInvalid: not JSON, an unknown ``t``, or a member missing, unknown or of the
            wrong type.
    """
    try:
        return _decoder.decode(payload)
    except msgspec.DecodeError as exc:
        raise RecordInvalid(f"the session journal holds a record that is no event: {exc}") from exc


def encode_event(event: SessionEvent) -> bytes:
    """The record's bytes, as the journal has always written them."""
    return dumps_sorted(msgspec.to_builtins(event))


def dumps_sorted(value: Any) -> bytes:
    """``json.dumps`` with sorted keys and compact separators (the journal's encoding)."""
    return json.dumps(value, sort_keys=True, separators=(",", ":")).encode()
