"""Fuzz target: bytes from the sandbox -> the proxy's SOCKS5 server-side parser.

Contract under test: feeding returns a Socks5Greeting, a Socks5Request or None, or raises
Socks5Error (whose reply code is None or an RFC 1928 code); the outcome is the same whole
and one byte at a time; a request's port is 0..65535 and its host at most 255 characters.
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from egress_common import run

from glove.egress import Socks5Error, Socks5Greeting, Socks5Parser, Socks5Request


def _outcome(data: bytes, step: int) -> object:
    parser = Socks5Parser()
    events: list[object] = []
    try:
        for index in range(0, max(len(data), 1), step):
            event = parser.feed(data[index : index + step])
            while event is not None:
                assert isinstance(event, Socks5Greeting | Socks5Request)
                events.append(event)
                if isinstance(event, Socks5Request):
                    assert 0 <= event.port <= 65535
                    assert len(event.host) <= 255
                    return events, parser.trailing + data[index + step :]
                event = parser.feed(b"")
    except Socks5Error as exc:
        code, message = exc.reply_code, str(exc)
    else:
        return events, None
    assert code is None or 1 <= code <= 8
    return "error", message


def one_input(data: bytes) -> None:
    """Parse ``data`` whole and byte by byte; the outcomes must agree."""
    assert _outcome(data, max(len(data), 1)) == _outcome(data, 1)


if __name__ == "__main__":
    run("socks5", one_input)
