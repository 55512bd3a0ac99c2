"""The one header rewrite (``rewrite_request``): a row for every header it removes or rewrites.

Each row is one request field (or a few) and the head the origin gets for it; the refusals
are the fields whose hop-by-hop handling would change what the origin reads from what the
proxy judged.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from glove.egress import (
    HttpHeadError,
    RequestHead,
    body_framing,
    forward_head,
    parse_head,
    proxy_target,
    rewrite_request,
)
from glove.egress._http import HOP_BY_HOP, PROTECTED

LINE = b"POST http://web.example.org/p?q HTTP/1.1\r\n"
HOST = "Host: web.example.org"
CLOSE = "Connection: close"


def _rewrite(fields: bytes, line: bytes = LINE) -> list[str]:
    head = parse_head(line + fields + b"\r\n")
    upstream = rewrite_request(head, proxy_target(head))
    assert upstream.head == forward_head(head, proxy_target(head))
    assert upstream.framing == body_framing(head)
    text = upstream.head.decode("latin-1")
    assert text.endswith("\r\n\r\n")
    return text[: -len("\r\n\r\n")].split("\r\n")


REWRITES = [
    # (what the request carries, the forwarded head's field lines after the request line)
    ("nothing", b"", [HOST, CLOSE]),
    ("an end-to-end field", b"Accept: */*\r\n", [HOST, "Accept: */*", CLOSE]),
    ("Connection", b"Connection: keep-alive\r\n", [HOST, CLOSE]),
    ("Connection: close", b"Connection: close\r\n", [HOST, CLOSE]),
    ("Proxy-Connection", b"Proxy-Connection: keep-alive\r\n", [HOST, CLOSE]),
    ("Keep-Alive", b"Keep-Alive: timeout=5\r\n", [HOST, CLOSE]),
    ("Proxy-Authorization", b"Proxy-Authorization: Basic eDp5\r\n", [HOST, CLOSE]),
    ("Proxy-Authenticate", b"Proxy-Authenticate: Basic\r\n", [HOST, CLOSE]),
    ("TE", b"TE: trailers\r\n", [HOST, CLOSE]),
    ("TE: chunked is not a framing", b"TE: chunked\r\n", [HOST, CLOSE]),
    ("Upgrade", b"Upgrade: h2c\r\n", [HOST, CLOSE]),
    ("HTTP2-Settings", b"HTTP2-Settings: AAMAAABk\r\n", [HOST, CLOSE]),
    ("a field Connection lists", b"Connection: X-Drop\r\nX-Drop: 1\r\nX-Keep: 2\r\n",
     [HOST, "X-Keep: 2", CLOSE]),
    ("Connection listing a hop-by-hop field",
     (b"Connection: Upgrade, TE, Keep-Alive\r\nUpgrade: websocket\r\nTE: trailers\r\n"
      b"Keep-Alive: 1\r\n"), [HOST, CLOSE]),
    ("Connection with empty list elements", b"Connection: , close,,\r\n", [HOST, CLOSE]),
    ("Host naming another host", b"Host: evil.example.org\r\n", [HOST, CLOSE]),
    ("two Host fields", b"Host: a.example.org\r\nHost: b.example.org\r\n", [HOST, CLOSE]),
    ("Content-Length", b"Content-Length: 5\r\n", [HOST, "Content-Length: 5", CLOSE]),
    ("Content-Length with leading zeros", b"Content-Length: 0005\r\n",
     [HOST, "Content-Length: 5", CLOSE]),
    ("Content-Length as a list", b"Content-Length: 5, 5\r\n",
     [HOST, "Content-Length: 5", CLOSE]),
    ("Content-Length twice", b"content-length: 5\r\nContent-Length: 5\r\n",
     [HOST, "Content-Length: 5", CLOSE]),
    ("Transfer-Encoding in upper case", b"Transfer-Encoding: CHUNKED\r\n",
     [HOST, "Transfer-Encoding: chunked", CLOSE]),
    ("fields keep their order around the framing",
     b"A: 1\r\nContent-Length: 2\r\nB: 2\r\n", [HOST, "A: 1", "B: 2", "Content-Length: 2", CLOSE]),
]  # fmt: skip


@pytest.mark.parametrize(("what", "fields", "expected"), REWRITES, ids=[r[0] for r in REWRITES])
def test_every_removed_or_rewritten_header(what: str, fields: bytes, expected: list[str]) -> None:
    """One row: the head the origin gets for this field (after ``POST /p?q HTTP/1.1``)."""
    lines = _rewrite(fields)
    assert lines[0] == "POST /p?q HTTP/1.1", what
    assert lines[1:] == expected, what


@pytest.mark.parametrize(
    ("line", "host"),
    [
        (b"GET http://WEB.Example.ORG./ HTTP/1.1\r\n", "Host: web.example.org"),
        (b"GET http://web.example.org:8080/ HTTP/1.1\r\n", "Host: web.example.org:8080"),
        (b"GET http://web.example.org:80/ HTTP/1.1\r\n", "Host: web.example.org"),
        (b"GET http://[::1]:8080/ HTTP/1.1\r\n", "Host: [::1]:8080"),
        (b"GET http://[0:0::1]/ HTTP/1.1\r\n", "Host: [::1]"),
        (b"GET http://127.0.0.1:81/ HTTP/1.1\r\n", "Host: 127.0.0.1:81"),
    ],
)
def test_host_is_the_judged_authority(line: bytes, host: str) -> None:
    """``Host`` is the host as the rules normalized it (case, trailing dot, IPv6 form)."""
    assert _rewrite(b"Host: x\r\n", line)[1] == host


REFUSED = [
    (b"Connection: Content-Length\r\nContent-Length: 5\r\n", "names a header"),
    (b"Connection: transfer-encoding\r\nTransfer-Encoding: chunked\r\n", "names a header"),
    (b"Connection: Host\r\n", "names a header"),
    (b"Connection: close, HOST\r\n", "names a header"),
    (b"Connection: keep-alive\r\nConnection: Content-Length\r\n", "names a header"),
    (b"Connection: content_length\r\n", "names a header"),
    (b"Connection: Transfer_Encoding\r\n", "names a header"),
    (b"Connection: a b\r\n", "not a token"),
    (b"Connection: Content-Length;q=1\r\n", "not a token"),
    (b"Connection: caf\xe9\r\n", "not a token"),
    (b"Content_Length: 5\r\n", "reads as a framing or routing header"),
    (b"transfer_encoding: chunked\r\n", "reads as a framing or routing header"),
    (b"HOST_: x\r\n", None),  # not a look-alike: kept (see the next test)
    (b"Content-Length: 5\r\nTransfer-Encoding: chunked\r\n", "both"),
    (b"Transfer-Encoding: identity\r\n", "only the chunked"),
    (b"Content-Length: 5\r\nContent-Length: 6\r\n", "bad Content-Length"),
]


@pytest.mark.parametrize(("fields", "why"), [r for r in REFUSED if r[1] is not None])
def test_refused_when_hop_by_hop_handling_would_change_the_request(fields: bytes, why: str) -> None:
    """A Connection option naming a protected field, or a look-alike field, is an error."""
    head = parse_head(LINE + fields + b"\r\n")
    with pytest.raises(HttpHeadError, match=why) as caught:
        rewrite_request(head, proxy_target(head))
    assert caught.value.status in (400, 501)


def test_a_name_that_only_resembles_a_protected_one_is_kept() -> None:
    """``Host_`` is not ``Host`` however it is read: it passes as an end-to-end field."""
    assert _rewrite(b"HOST_: x\r\n")[1:] == [HOST, "HOST_: x", CLOSE]


def test_a_malformed_target_host_is_refused() -> None:
    """A host the rules could not have judged is never written into ``Host``."""
    head = parse_head(b"GET http://exa}ple.org/ HTTP/1.1\r\n\r\n")
    with pytest.raises(HttpHeadError, match="malformed host name"):
        rewrite_request(head, proxy_target(head))


_OTHER_NAMES = ["Accept", "X-A", "Trailer", "Expect", "Content-Type", "TRANSFER-ENCODING", "Host"]
_NAMES = st.sampled_from([*sorted(HOP_BY_HOP | PROTECTED), *_OTHER_NAMES])
_VALUES = st.sampled_from(["5", "0005", "chunked", "close", "keep-alive", "x", "", "5, 5"])


@settings(max_examples=400, deadline=None)
@given(st.lists(st.tuples(_NAMES, _VALUES), max_size=8), st.lists(_NAMES, max_size=3))
def test_what_the_origin_reads_is_what_was_judged(
    fields: list[tuple[str, str]], listed: list[str]
) -> None:
    """Any mix of fields: either refused, or the forwarded head parses back to the same
    method, path and framing, one Host (the target's), no hop-by-hop field but close."""
    raw = "".join(f"{n}: {v}\r\n" for n, v in fields)
    if listed:
        raw += f"Connection: {', '.join(listed)}\r\n"
    head = parse_head(LINE + raw.encode() + b"\r\n")
    try:
        upstream = rewrite_request(head, proxy_target(head))
    except HttpHeadError:
        assert any(n.lower() in PROTECTED for n in listed) or _framing_refused(head)
        return
    again = parse_head(upstream.head)
    assert (again.method, again.target) == ("POST", "/p?q")
    assert body_framing(again) == body_framing(head) == upstream.framing
    assert again.values("host") == ["web.example.org"]
    assert again.values("connection") == ["close"]
    hop = {n.lower() for n, _ in again.headers} & (HOP_BY_HOP - {"connection"})
    assert not hop
    dropped = {n.lower() for n in listed}
    assert not {n.lower() for n, _ in again.headers} & dropped - {"connection"}


def _framing_refused(head: RequestHead) -> bool:
    try:
        body_framing(head)
    except HttpHeadError:
        return True
    return False
