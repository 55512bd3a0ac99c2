"""A server frame decoded without msgspec: the same verdicts as ``decode_server_frame``.

The CLI's one-shot client (:mod:`glove.control._oneshot`) reads one reply and prints its
result as JSON; loading msgspec for that costs more than the rest of the command
(docs/decisions/0049). :func:`decode_reply` takes the same two steps as
:func:`glove.protocol.control.decode_server_frame` (strict JSON, then the envelope's shape)
and accepts and refuses exactly the payloads it does: ``tests/protocol/test_reply.py`` holds
the two to the same verdict on every vector and on generated frames, so they cannot drift.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, Final

from glove.protocol._json import loads_strict
from glove.protocol._limits import ERROR_CODE_PATTERN, MAX_REQUEST_ID
from glove.protocol.errors import DuplicateKey, MalformedFrame

_ERROR_CODE: Final = re.compile(ERROR_CODE_PATTERN)
_RESPONSE_KEYS: Final = frozenset({"id", "result", "error"})
_EVENT_KEYS: Final = frozenset({"id", "event"})
_ERROR_KEYS: Final = frozenset({"code", "message", "data"})
_SERVER_FRAME_KEYS: Final = frozenset({"result", "error", "event"})


class ReplyError:
    """The ``error`` of a response: its code, message and data (as ``ErrorBody`` holds)."""

    __slots__ = ("code", "data", "message")

    def __init__(self, code: str, message: str, data: Any) -> None:
        self.code = code
        self.message = message
        self.data = data


class Reply:
    """One server frame: a response (``result`` or ``error``) or, if ``is_event``, an event
    (its value in ``result``)."""

    __slots__ = ("error", "id", "is_event", "result")

    def __init__(self, id: int, result: Any, error: ReplyError | None, is_event: bool) -> None:  # noqa: A002 - the wire's name
        self.id = id
        self.result = result
        self.error = error
        self.is_event = is_event


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _unknown(obj: Mapping[str, object], allowed: frozenset[str], what: str) -> None:
    extra = sorted(obj.keys() - allowed)
    if extra:
        raise MalformedFrame(f"malformed {what}: unknown field {extra[0]!r}")


def _error_body(value: object) -> ReplyError | None:
    if value is None:
        return None
    if not isinstance(value, dict):
        raise MalformedFrame("malformed reply: error is not an object")
    _unknown(value, _ERROR_KEYS, "reply")
    code, message = value.get("code"), value.get("message")
    if not isinstance(code, str) or not isinstance(message, str):
        raise MalformedFrame("malformed reply: error needs a string code and message")
    if _ERROR_CODE.match(code) is None:
        raise MalformedFrame(f"malformed reply: error code {code[:64]!r}")
    return ReplyError(code, message, value.get("data"))


def decode_reply(payload: bytes) -> Reply:
    """Decode what a server sent: a response (result or error) or a stream event.

    Raises:
        DuplicateKey: a key repeated in one object.
        MalformedFrame: not strict JSON, or not exactly one of ``result``/``error``/``event``
            with an ``id`` of the right type (and nothing else).
    """
    obj = loads_strict(payload, MalformedFrame, duplicate_error=DuplicateKey)
    if not isinstance(obj, dict):
        raise MalformedFrame("malformed reply: expected a JSON object")
    present = _SERVER_FRAME_KEYS & obj.keys()
    if len(present) != 1:
        raise MalformedFrame(
            "malformed reply: exactly one of result, error and event must be present, "
            f"found {sorted(present) or 'none'}"
        )
    frame_id = obj.get("id")
    if "event" in present:
        _unknown(obj, _EVENT_KEYS, "event")
        if not _is_int(frame_id) or not 1 <= frame_id <= MAX_REQUEST_ID:  # type: ignore[operator]
            raise MalformedFrame("malformed event: id must be a request id")
        return Reply(frame_id, obj["event"], None, is_event=True)  # type: ignore[arg-type]
    _unknown(obj, _RESPONSE_KEYS, "reply")
    if not _is_int(frame_id):
        raise MalformedFrame("malformed reply: id must be an integer")
    return Reply(frame_id, obj.get("result"), _error_body(obj.get("error")), is_event=False)  # type: ignore[arg-type]
