"""The HTTP/1.1 request-head parser and body framing: whole, byte by byte, split anywhere."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from glove.egress import (
    ChunkedFramer,
    HttpHeadError,
    RequestHead,
    RequestHeadParser,
    body_framing,
    error_response,
    forward_head,
    parse_head,
    proxy_target,
)
from glove.egress._http import MAX_REQUEST_HEAD_BYTES, MAX_REQUEST_HEADERS

GOOD = [
    b"GET http://example.org/ HTTP/1.1\r\nHost: example.org\r\n\r\n",
    b"CONNECT example.org:443 HTTP/1.1\r\nHost: example.org:443\r\nUser-Agent: curl/8\r\n\r\n",
    b"\r\nPOST http://[::1]:8080/a?b=c HTTP/1.0\r\nContent-Length: 3\r\n\r\n",
    b"HEAD http://h.example.org HTTP/1.1\r\nX-Empty:\r\nX-Tab:\tv\t\r\n\r\n",
    b"OPTIONS http://h.example.org/?q HTTP/1.1\r\nX-Latin: caf\xe9\r\n\r\n",
]
BAD = [
    (b"GET http://e.org/ HTTP/1.1\nHost: e.org\r\n\r\n", "bare CR or LF"),
    (b"GET http://e.org/ HTTP/1.1\r\nHost : e.org\r\n\r\n", "whitespace before the colon"),
    (b"GET http://e.org/ HTTP/1.1\r\nA: b\r\n folded\r\n\r\n", "line folding"),
    (b"GET http://e.org/ HTTP/1.1\r\nA: b\x00c\r\n\r\n", "control character"),
    (b"GET  http://e.org/ HTTP/1.1\r\n\r\n", "METHOD SP TARGET"),
    (b"GET http://e.org/ HTTP/2.0\r\n\r\n", "only HTTP/1.1"),
    (b"G(T http://e.org/ HTTP/1.1\r\n\r\n", "bad method"),
    (b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03", "bad method"),
    (b"GET http://e.org/\x7f HTTP/1.1\r\n\r\n", "bad request target"),
    (b"\r\n\r\n\r\n\r\n\r\nGET http://e.org/ HTTP/1.1\r\n\r\n", "no request line"),
    (b"GET http://e.org/ HTTP/1.1\r\n: v\r\n\r\n", "bad header field name"),
]


def _feed_whole(data: bytes) -> tuple[RequestHead | None, bytes]:
    parser = RequestHeadParser()
    return parser.feed(data), parser.trailing


def _feed_bytewise(data: bytes) -> tuple[RequestHead | None, bytes]:
    parser = RequestHeadParser()
    head = None
    for index in range(len(data)):
        head = parser.feed(data[index : index + 1])
        if head is not None:
            # The rest goes in the same way a socket would deliver it after the head.
            return head, parser.trailing + data[index + 1 :]
    return head, parser.trailing


@pytest.mark.parametrize("data", GOOD)
def test_good_heads_parse_the_same_whole_and_byte_by_byte(data: bytes) -> None:
    """Every valid head gives the same head and trailing bytes however it is delivered."""
    whole = _feed_whole(data + b"BODY")
    bytewise = _feed_bytewise(data + b"BODY")
    assert whole[0] is not None
    assert whole == bytewise
    assert whole[1] == b"BODY"


@pytest.mark.parametrize(("data", "why"), BAD)
def test_bad_heads_fail_whole_and_byte_by_byte(data: bytes, why: str) -> None:
    """Every invalid head raises the same typed error however it is delivered."""
    with pytest.raises(HttpHeadError, match=why):
        _feed_whole(data)
    with pytest.raises(HttpHeadError, match=why):
        _feed_bytewise(data)


def test_parsed_fields() -> None:
    """Method, target, version and headers come out as sent, values trimmed."""
    head = parse_head(b"POST http://e.org/x HTTP/1.1\r\nA:  1 \r\nB:\r\na: 2\r\n\r\n")
    assert (head.method, head.target, head.version) == ("POST", "http://e.org/x", "HTTP/1.1")
    assert head.headers == (("A", "1"), ("B", ""), ("a", "2"))
    assert head.values("a") == ["1", "2"]


def test_head_cap_is_checked_before_the_buffer_grows() -> None:
    """A head that never ends fails at the cap, holding no more than the cap."""
    parser = RequestHeadParser(max_head_bytes=1024)
    parser.feed(b"GET http://e.org/ HTTP/1.1\r\n")
    filler = b"X-Filler: " + b"a" * 50 + b"\r\n"
    for _ in range(15):
        parser.feed(filler)
    with pytest.raises(HttpHeadError, match="larger than 1024") as info:
        parser.feed(filler * 4)
    assert info.value.status == 431
    assert len(parser._buffer) <= 1024


def test_default_cap_and_a_head_just_under_it() -> None:
    """A head of exactly the cap parses; one byte more is refused."""
    start = b"GET http://e.org/ HTTP/1.1\r\nX: "
    fill = MAX_REQUEST_HEAD_BYTES - len(start) - 4
    assert _feed_whole(start + b"a" * fill + b"\r\n\r\n")[0] is not None
    with pytest.raises(HttpHeadError):
        _feed_whole(start + b"a" * (fill + 1) + b"\r\n\r\n")


def test_long_target_and_many_headers_have_their_own_status() -> None:
    """Named caps give 414 for the target and 431 for the header count."""
    with pytest.raises(HttpHeadError) as info:
        parse_head(b"GET http://e.org/" + b"a" * 9000 + b" HTTP/1.1\r\n\r\n")
    assert info.value.status == 414
    many = b"".join(b"H%d: v\r\n" % i for i in range(129))
    with pytest.raises(HttpHeadError) as info:
        parse_head(b"GET http://e.org/ HTTP/1.1\r\n" + many + b"\r\n")
    assert info.value.status == 431


def test_a_forwarded_head_always_fits_the_caps() -> None:
    """The most headers and bytes a sandbox may send still forward as a head within the caps."""
    fields = b"".join(b"H%d: v\r\n" % i for i in range(MAX_REQUEST_HEADERS))
    head = b"GET http://e.org HTTP/1.1\r\n" + fields + b"\r\n"
    parsed = RequestHeadParser().feed(head)
    assert parsed is not None
    assert (
        len(parse_head(forward_head(parsed, proxy_target(parsed))).headers)
        == MAX_REQUEST_HEADERS + 2
    )
    with pytest.raises(HttpHeadError, match="header fields"):
        RequestHeadParser().feed(b"GET http://e.org HTTP/1.1\r\nX: y\r\n" + fields + b"\r\n")


@pytest.mark.parametrize(
    ("target", "expected"),
    [
        ("http://Example.org/a?b", ("Example.org", 80, "/a?b")),
        ("http://e.org", ("e.org", 80, "/")),
        ("http://e.org?x", ("e.org", 80, "/?x")),
        ("HTTP://e.org:8080/", ("e.org", 8080, "/")),
        ("http://[::1]:81/p", ("::1", 81, "/p")),
    ],
)
def test_absolute_targets(target: str, expected: tuple[str, int, str]) -> None:
    """Absolute-form targets give host, port (default 80) and an origin-form path."""
    head = parse_head(f"GET {target} HTTP/1.1\r\n\r\n".encode())
    got = proxy_target(head)
    assert (got.host, got.port, got.path) == expected


@pytest.mark.parametrize(
    ("line", "why"),
    [
        ("GET / HTTP/1.1", "not a proxy request"),
        ("GET https://e.org/ HTTP/1.1", "use CONNECT"),
        ("GET ftp://e.org/ HTTP/1.1", "only http://"),
        ("GET http://u:p@e.org/ HTTP/1.1", "credentials"),
        ("GET http://e.org/#frag HTTP/1.1", "fragment"),
        ("GET http://e.org:99999/ HTTP/1.1", "bad port"),
        ("CONNECT e.org HTTP/1.1", "needs a port"),
        ("CONNECT :443 HTTP/1.1", "empty host"),
        ("CONNECT [::1:443 HTTP/1.1", "unclosed"),
    ],
)
def test_unusable_targets(line: str, why: str) -> None:
    """Targets a forward proxy must not serve are typed errors."""
    with pytest.raises(HttpHeadError, match=why):
        proxy_target(parse_head(f"{line}\r\n\r\n".encode()))


@pytest.mark.parametrize(
    ("headers", "framing"),
    [
        (b"", ("none", 0)),
        (b"Content-Length: 12\r\n", ("length", 12)),
        (b"Content-Length: 5, 5\r\nContent-Length: 5\r\n", ("length", 5)),
        (b"Transfer-Encoding: Chunked\r\n", ("chunked", 0)),
    ],
)
def test_body_framing(headers: bytes, framing: tuple[str, int]) -> None:
    """Content-Length, chunked, or no body."""
    head = parse_head(b"POST http://e.org/ HTTP/1.1\r\n" + headers + b"\r\n")
    assert body_framing(head) == framing


@pytest.mark.parametrize(
    ("headers", "why"),
    [
        (b"Content-Length: 5\r\nTransfer-Encoding: chunked\r\n", "both"),
        (b"Transfer-Encoding: gzip, chunked\r\n", "only the chunked"),
        (b"Transfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n", "only the chunked"),
        (b"Content-Length: 5\r\nContent-Length: 6\r\n", "bad Content-Length"),
        (b"Content-Length: -1\r\n", "bad Content-Length"),
        (b"Content-Length: 0x10\r\n", "bad Content-Length"),
        (b"Content-Length: 1234567890123456789\r\n", "too large"),
    ],
)
def test_smuggling_shapes_are_refused(headers: bytes, why: str) -> None:
    """Framings two parties could read differently are refused."""
    head = parse_head(b"POST http://e.org/ HTTP/1.1\r\n" + headers + b"\r\n")
    with pytest.raises(HttpHeadError, match=why):
        body_framing(head)


def test_chunked_on_http_1_0_is_refused() -> None:
    """HTTP/1.0 has no chunked coding."""
    head = parse_head(b"POST http://e.org/ HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n")
    with pytest.raises(HttpHeadError, match=r"HTTP/1\.0"):
        body_framing(head)


CHUNKED = b"5;ext=1\r\nhello\r\n10\r\n" + b"x" * 16 + b"\r\n0\r\nX-Checksum: t\r\n\r\n"


def test_chunked_framer_finds_the_end_whole_and_byte_by_byte() -> None:
    """The body ends after the last chunk and trailers; what follows is not counted."""
    framer = ChunkedFramer()
    assert framer.feed(CHUNKED + b"GET http://evil/") == len(CHUNKED)
    assert framer.done
    framer = ChunkedFramer()
    used = 0
    for index in range(len(CHUNKED) + 5):
        used += framer.feed((CHUNKED + b"extra")[index : index + 1])
    assert used == len(CHUNKED)
    assert framer.done


@pytest.mark.parametrize(
    "body",
    [b"z\r\n", b"5\r\nhelloX\r\n", b"5\nhello\r\n", b"\r\n", b"5 \r\n", b"1" * 16 + b"\r\n"],
)
def test_chunked_framer_refuses_malformed_chunks(body: bytes) -> None:
    """Bad sizes, data longer than its size and bare LFs are typed errors."""
    with pytest.raises(HttpHeadError):
        ChunkedFramer().feed(body + b"0\r\n\r\n")


def test_chunk_line_cap() -> None:
    """A chunk-size line that never ends fails at its cap."""
    framer = ChunkedFramer()
    framer.feed(b"5;" + b"e" * 1000)
    with pytest.raises(HttpHeadError, match="cap"):
        framer.feed(b"e" * 4000)


def test_the_framer_lets_lines_through_only_once_complete_and_checked() -> None:
    """Fed one byte at a time, a size line comes out only with its LF, the last chunk and
    the trailers only with the final CRLF, and everything together is the body verbatim."""
    framer = ChunkedFramer()
    body = CHUNKED
    out: list[bytes] = []
    for index in range(len(body)):
        out.append(framer.forward(body[index : index + 1]))
    assert b"".join(out) == body
    assert framer.done
    assert out[: len(b"5;ext=1\r")] == [b""] * len(b"5;ext=1\r")
    assert out[len(b"5;ext=1\r")] == b"5;ext=1\r\n"
    last = body.index(b"0\r\nX-Checksum")
    assert all(chunk == b"" for chunk in out[last:-1])
    assert out[-1] == b"0\r\nX-Checksum: t\r\n\r\n"
    assert framer.forward(b"GET http://evil/ HTTP/1.1\r\n\r\n") == b""


@pytest.mark.parametrize(
    ("tail", "why"),
    [
        (b"0\r\nContent-Length: 5\r\n\r\n", "trailer field"),
        (b"0\r\ntransfer_encoding: chunked\r\n\r\n", "trailer field"),
        (b"0\r\nHost: evil\r\n\r\n", "trailer field"),
        (b"0\r\nConnection: close\r\n\r\n", "trailer field"),
        (b"0\r\nTrailer: X\r\n\r\n", "trailer field"),
        (b"0\r\nX: a\r\n b\r\n\r\n", "line folding"),
        (b"80000000\r\n", "a chunk larger than"),
        (b"5 ;a\r\nhello\r\n", "bad chunk size or extension"),
        (b"5;a b\r\nhello\r\n", "bad chunk size or extension"),
        (b"5;a=\x01\r\nhello\r\n", "bad chunk size or extension"),
        (b'5;a="x\r\nhello\r\n', "bad chunk size or extension"),
    ],
)
def test_the_framer_refuses_what_a_parser_could_read_otherwise(tail: bytes, why: str) -> None:
    """Forbidden trailers, oversized chunks and malformed extensions are errors, and nothing
    of the bad line (or of the body's end) was let through before."""
    framer = ChunkedFramer()
    assert framer.forward(b"5\r\nhello\r\n") == b"5\r\nhello\r\n"
    let_through = b""
    with pytest.raises(HttpHeadError, match=why):  # noqa: PT012 - fed byte by byte until it fails
        for index in range(len(tail)):
            let_through += framer.forward(tail[index : index + 1])
    assert let_through == b""


def test_chunk_extensions_of_the_grammar_pass() -> None:
    """Extensions as RFC 9112 writes them (token, token=token, token=quoted-string) pass."""
    body = b'5;a;b=c;d="e \\" f"\r\nhello\r\n7fffffff;x=1\r\n'
    assert ChunkedFramer().forward(body) == body


def test_a_bare_lf_in_the_head_is_refused_as_it_arrives() -> None:
    """A head in LF line endings never ends in CRLF CRLF: it is refused at its first LF."""
    parser = RequestHeadParser()
    assert parser.feed(b"GET http://e.org/ HTTP/1.1\r") is None  # a CR may get its LF
    with pytest.raises(HttpHeadError, match="bare CR or LF"):
        parser.feed(b"\nHost: e.org\n")
    with pytest.raises(HttpHeadError, match="bare CR or LF"):
        RequestHeadParser().feed(b"GET http://e.org/ HTTP/1.1\rHost: e.org")


def test_a_bare_lf_in_the_body_is_not_the_heads_business() -> None:
    """Only the head is checked: bytes after it (a body) may hold any byte."""
    parser = RequestHeadParser()
    head = parser.feed(b"POST http://e.org/ HTTP/1.1\r\nContent-Length: 3\r\n\r\na\nb")
    assert head is not None
    assert parser.trailing == b"a\nb"


def test_forward_head_rewrites_for_the_origin() -> None:
    """Origin form, one Host naming the checked authority, no hop-by-hop, Connection close."""
    head = parse_head(
        b"GET http://real.example.org:8080/p?q HTTP/1.1\r\n"
        b"Host: other.example.org\r\nProxy-Authorization: x\r\nConnection: keep-alive, X-Drop\r\n"
        b"X-Drop: 1\r\nKeep-Alive: 5\r\nAccept: */*\r\nHost: third\r\n\r\n"
    )
    text = forward_head(head, proxy_target(head)).decode()
    assert text == (
        "GET /p?q HTTP/1.1\r\nHost: real.example.org:8080\r\nAccept: */*\r\n"
        "Connection: close\r\n\r\n"
    )


def test_error_response_names_the_rule_and_closes() -> None:
    """A refusal is a complete response with the rule in a header."""
    reply = error_response(403, "GET a.example.org:80 refused", rule="deny a.example.org")
    head, _, body = reply.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 403 Forbidden\r\n")
    assert b'X-Glove-Egress: denied; rule="deny a.example.org"' in head
    assert b"Connection: close" in head
    assert body == b"glove egress: GET a.example.org:80 refused\n"
    assert b"Content-Length: %d" % len(body) in head


@settings(max_examples=300, deadline=None)
@given(st.sampled_from(GOOD + [data for data, _ in BAD]), st.lists(st.integers(0, 200), max_size=6))
def test_any_split_gives_the_same_result(data: bytes, cuts: list[int]) -> None:
    """Splitting the input at arbitrary points never changes the outcome."""

    def outcome(chunks: list[bytes]) -> object:
        parser = RequestHeadParser()
        try:
            for index, chunk in enumerate(chunks):
                head = parser.feed(chunk)
                if head is not None:
                    return head, parser.trailing + b"".join(chunks[index + 1 :])
        except HttpHeadError as exc:
            return type(exc), exc.status
        return None

    points = sorted({min(c, len(data)) for c in cuts})
    chunks = [data[a:b] for a, b in zip([0, *points], [*points, len(data)], strict=True)]
    assert outcome(chunks) == outcome([data])
