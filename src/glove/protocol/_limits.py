"""The control protocol's numbers and shapes, importable without its codec (no msgspec).

:mod:`glove.protocol.control` re-exports every name; they live here so the CLI's one-shot
client (:mod:`glove.control._oneshot`) and the control errors can read them without
loading msgspec (issue 22, docs/decisions/0049).
"""

from __future__ import annotations

from typing import Final

PROTOCOL_VERSION: Final = 1
#: The largest request frame accepted. A plan (at most 64 KiB) fits inside ``params`` with
#: room for its envelope; strict JSON decoding runs on the daemon's event loop, so the cap
#: bounds how long one frame can hold the loop (about 5 ms for a 256 KiB frame, 5x plain
#: ``json.loads``, measured in ``benchmarks/control``).
CONTROL_MAX_REQUEST_BYTES: Final = 256 * 1024
#: The largest response or event frame the server sends (a ``diag.tree`` of many sessions).
CONTROL_MAX_RESPONSE_BYTES: Final = 1024 * 1024
#: The largest control frame of either direction (what a reader of both must accept).
CONTROL_MAX_FRAME_BYTES: Final = CONTROL_MAX_RESPONSE_BYTES
#: A frame must complete this long after its first byte (slowloris).
CONTROL_READ_DEADLINE_S: Final = 5.0
#: A connection with nothing in flight is closed after this long without a frame.
CONTROL_IDLE_DEADLINE_S: Final = 300.0
#: A new connection must have sent a complete ``hello`` this long after it was accepted.
CONTROL_HELLO_DEADLINE_S: Final = 5.0
#: Request ids are positive and exactly representable as a JSON number in every language.
MAX_REQUEST_ID: Final = 2**53 - 1
MAX_METHOD_CHARS: Final = 64
#: The longest deadline a request may ask for (each method also has its own maximum).
MAX_DEADLINE_MS: Final = 24 * 3600 * 1000
#: Error messages longer than this are cut (a message may quote a peer's input).
MAX_ERROR_MESSAGE_CHARS: Final = 1024
#: The longest ``path`` reported in an ``invalid_params`` error.
MAX_ERROR_PATH_CHARS: Final = 256
MAX_SECRET_CHARS: Final = 256
MAX_CLIENT_NAME_CHARS: Final = 128
#: The shape of an error code: stable, lowercase, snake_case.
ERROR_CODE_PATTERN: Final = r"^[a-z][a-z0-9_]{0,63}$"
