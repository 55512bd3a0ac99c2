"""The typed calls' result Structs are the session service's results, field by field: the
same names, types and defaults, and a server value converts to the client's strictly."""

from __future__ import annotations

import msgspec
import pytest

from glove.control import Exposure, PlanVerdict, SessionPage, SessionStatus
from glove.control._results import SessionState
from glove.session._methods import ExposureView
from glove.session._methods import PlanVerdict as ServerPlanVerdict
from glove.session._methods import SessionPage as ServerSessionPage
from glove.session._registry import SessionView
from glove.session._store import State

PAIRS = [
    (SessionStatus, SessionView),
    (SessionPage, ServerSessionPage),
    (PlanVerdict, ServerPlanVerdict),
    (Exposure, ExposureView),
]


def _fields(kind: type[msgspec.Struct]) -> list[tuple[str, object]]:
    return [(f.name, f.default) for f in msgspec.structs.fields(kind)]


@pytest.mark.parametrize(("client", "server"), PAIRS, ids=lambda k: k.__name__)
def test_each_result_has_its_servers_fields(
    client: type[msgspec.Struct], server: type[msgspec.Struct]
) -> None:
    """Same field names in the same order, with the same defaults."""
    assert _fields(client) == _fields(server)


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
