"""Fuzz target: bytes from the sandbox -> the proxy's HTTP request-head parser and framing.

Contract under test: the parser returns a RequestHead or raises HttpHeadError, and gives the
same outcome whole and split at any point; a parsed head's target, framing and rewritten
head are values or HttpHeadError; the rewritten head parses back to the same method and
path, with the framing the proxy counted, one Host and no hop-by-hop field but
``Connection: close``; the chunked framer consumes at most what it is given and lets
through only a prefix of it, or raises HttpHeadError.
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
    parse_head,
    proxy_target,
    rewrite_request,
)
from glove.egress._http import HOP_BY_HOP


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
        try:
            upstream = rewrite_request(head, target)
        except HttpHeadError:
            return
        again = parse_head(upstream.head)
        assert (again.method, again.target) == (head.method, target.path)
        assert body_framing(again) == upstream.framing == framing
        assert len(again.values("host")) == 1
        assert again.values("connection") == ["close"]
        assert not [n for n, _ in again.headers if n.lower() in HOP_BY_HOP - {"connection"}]
    if framing[0] == "chunked":
        with contextlib.suppress(HttpHeadError):
            assert 0 <= ChunkedFramer().feed(trailing) <= len(trailing)
        with contextlib.suppress(HttpHeadError):
            assert trailing.startswith(ChunkedFramer().forward(trailing))


if __name__ == "__main__":
    run("http_head", one_input)
