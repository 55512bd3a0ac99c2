"""Fuzz target: bytes from the sandbox -> the proxy's HTTP request-head parser and framing.

Contract under test: the parser returns a RequestHead or raises HttpHeadError, and gives the
same outcome whole and split at any point; a parsed head's target, framing and forwarded
head are values or HttpHeadError; the forwarded head parses back to the same method and
path; the chunked framer consumes at most what it is given or raises HttpHeadError.
"""

import contextlib
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from egress_common import run

from glove.egress import (
    ChunkedFramer,
    HttpHeadError,
    RequestHead,
    RequestHeadParser,
    body_framing,
    forward_head,
    parse_head,
    proxy_target,
)


def _outcome(chunks: list[bytes]) -> object:
    parser = RequestHeadParser()
    try:
        for index, chunk in enumerate(chunks):
            head = parser.feed(chunk)
            if head is not None:
                return head, parser.trailing + b"".join(chunks[index + 1 :])
    except HttpHeadError as exc:
        status = exc.status
    else:
        return None
    assert 400 <= status <= 505
    return ("error", status)


def one_input(data: bytes) -> None:
    """Parse ``data`` whole and split; check every derived value."""
    whole = _outcome([data])
    cut = data[0] % (len(data) + 1) if data else 0
    assert _outcome([data[:cut], data[cut:]]) == whole
    if not isinstance(whole, tuple) or not isinstance(whole[0], RequestHead):
        return
    head, trailing = whole
    try:
        target = proxy_target(head)
        framing = body_framing(head)
    except HttpHeadError:
        return
    if head.method != "CONNECT":
        again = parse_head(forward_head(head, target))
        assert (again.method, again.target) == (head.method, target.path)
    if framing[0] == "chunked":
        with contextlib.suppress(HttpHeadError):
            assert 0 <= ChunkedFramer().feed(trailing) <= len(trailing)


if __name__ == "__main__":
    run("http_head", one_input)
