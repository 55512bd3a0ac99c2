"""The typed calls' result Structs are the session service's results, field by field: the
same names, types and defaults, and a server value converts to the client's strictly."""

from __future__ import annotations

import typing

import msgspec
import pytest

from glove import control
from glove.cli._status import CapabilitiesJson, SessionStatusJson
from glove.control import (
    Acked,
    AttachEvent,
    AttachModes,
    Exposure,
    PlanVerdict,
    ReceiptPage,
    ReceiptRow,
    SessionPage,
    SessionStatus,
)
from glove.control._results import SessionState, SignalName
from glove.protocol import Capabilities
from glove.session import _attach as server_attach
from glove.session import _methods as server
from glove.session._escape import TerminalModes
from glove.session._receipt_index import ReceiptPage as ServerReceiptPage
from glove.session._receipt_index import ReceiptRow as ServerReceiptRow
from glove.session._registry import SessionView
from glove.session._store import State
from glove.session._views import ExposureView

_TERMINAL = ("InputResult", "ResizeResult", "SignalResult", "DetachResult")
_EVENTS = ("Attached", "Output", "Gap", "Role", "Ended")
PAIRS: list[tuple[type[msgspec.Struct], type[msgspec.Struct]]] = [
    (SessionStatus, SessionView),
    (SessionPage, server.SessionPage),
    (PlanVerdict, server.PlanVerdict),
    (Exposure, ExposureView),
    (ReceiptRow, ServerReceiptRow),
    (ReceiptPage, ServerReceiptPage),
    (Acked, server.Acked),
    (AttachModes, TerminalModes),
    *((getattr(control, name), getattr(server_attach, name)) for name in _TERMINAL + _EVENTS),
]


def _fields(kind: type[msgspec.Struct]) -> list[tuple[str, str, object]]:
    return [(f.name, f.encode_name, f.default) for f in msgspec.structs.fields(kind)]


def _encoding(kind: type[msgspec.Struct]) -> tuple[object, ...]:
    """What decides how a Struct is encoded: what the CLI prints of one is what gloved sent."""
    config = kind.__struct_config__
    return (config.omit_defaults, config.tag_field, config.tag)


@pytest.mark.parametrize(("client", "server"), PAIRS, ids=lambda k: k.__name__)
def test_each_result_has_its_servers_fields(
    client: type[msgspec.Struct], server: type[msgspec.Struct]
) -> None:
    """Same field names in the same order, with the same defaults, encoded the same way."""
    assert _fields(client) == _fields(server)
    assert _encoding(client) == _encoding(server)
    assert client.__struct_config__.forbid_unknown_fields


def test_the_attach_events_and_the_signals_are_the_servers() -> None:
    """The attach stream's union has the server's members, by tag; the signals are its."""
    tags = [kind.__struct_config__.tag for kind in typing.get_args(AttachEvent)]
    assert tags == [
        kind.__struct_config__.tag for kind in typing.get_args(server_attach.AttachEvent)
    ]
    assert typing.get_args(SignalName) == typing.get_args(server_attach.SignalName)


def test_the_session_states_are_the_stores() -> None:
    """The states a SessionStatus takes are the registry's."""
    assert SessionState == State


def test_a_server_view_converts_strictly_and_a_wrong_one_is_refused() -> None:
    """A SessionView as gloved encodes it decodes as a SessionStatus with the same values;
    an unknown field or a wrong type is refused."""
    view = SessionView(
        session_id="s-1",
        state="terminal",
        harness="ok",
        created_ns=1,
        updated_ns=2,
        plan_sha256="a" * 64,
        plan_blake3="b" * 64,
        receipt_seq=3,
        outcome={"kind": "exited", "exit_code": 0},
    )
    wire = msgspec.to_builtins(view)
    status = msgspec.convert(wire, SessionStatus)
    assert msgspec.to_builtins(status) == wire
    with pytest.raises(msgspec.ValidationError):
        msgspec.convert({**wire, "surprise": 1}, SessionStatus)
    with pytest.raises(msgspec.ValidationError):
        msgspec.convert({**wire, "state": "gone"}, SessionStatus)
    with pytest.raises(msgspec.ValidationError):
        msgspec.convert({**wire, "created_ns": "1"}, SessionStatus)


def test_attach_events_as_gloved_sends_them_decode_to_the_union() -> None:
    """Each event the server encodes decodes as the client's member of the same tag, with
    the same values (bytes from base64, modes from TerminalModes)."""
    events = [
        server_attach.Attached(
            viewer=1, writer=True, offset=0, start=0, end=5, evicted=0, rows=24, cols=80,
            modes=TerminalModes(on=(1049,), keypad=True), live=True,
        ),
        server_attach.Output(offset=0, data=b"\x00hi\xff", end=4),
        server_attach.Gap(offset=4, until=9, evicted=5),
        server_attach.Role(writer=False, by=2),
        server_attach.Ended(offset=9, reason="detached"),
    ]  # fmt: skip
    for event in events:
        wire = msgspec.json.decode(msgspec.json.encode(event))
        mine = msgspec.convert(wire, AttachEvent)
        assert type(mine).__name__ == type(event).__name__
        assert msgspec.json.decode(msgspec.json.encode(mine)) == wire


@pytest.mark.parametrize(
    ("typed", "struct"),
    [(SessionStatusJson, SessionStatus), (CapabilitiesJson, Capabilities)],
    ids=lambda k: k.__name__,
)
def test_the_one_call_commands_read_the_typed_results_fields(typed: type, struct: type) -> None:
    """``call_once``'s JSON, typed for ``glove session status`` and ``glove capabilities``,
    has each field of the typed clients' Struct, in order, and every one required (gloved
    sends every field of these two)."""
    assert list(typing.get_type_hints(typed)) == [f.name for f in msgspec.structs.fields(struct)]
    assert typed.__required_keys__ == frozenset(typing.get_type_hints(typed))  # type: ignore[attr-defined]
