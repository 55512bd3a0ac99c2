"""The table of attack requests the smuggling tests send through the HTTP proxy.

Every row is a request an attacker in the sandbox could send, and what must come of it:
either the origin receives exactly one request, the one the proxy judged (``judged``:
method, ``Host``, body, the fields it must and must not see), or the proxy refuses it with
``status`` and a reason the reply and the audit record both carry, and nothing complete
reaches the origin. ``{port}`` is the origin's port and ``{path}`` the attack's own path
(``/a/NAME``), by which the origin's log is matched to the attack.

The rules the table assumes: ``web.test:{port}+read-only``, ``pypi.test:{port}`` and
``127.0.0.1:{port}`` (both names resolve to 127.0.0.1, which that rule lists).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ._logging_origin import Received

#: What a smuggler hides after (or inside) the judged request: a write nobody judged, for
#: a host no rule names.
SMUGGLED = b"POST /smuggled HTTP/1.1\r\nHost: evil.test\r\nContent-Length: 0\r\n\r\n"
SMUGGLED_LENGTH = str(len(SMUGGLED)).encode()
SMUGGLED_CHUNK = b"%x\r\n" % len(SMUGGLED) + SMUGGLED + b"\r\n0\r\n\r\n"
#: The hosts of the rules (read-only and full).
RO = b"web.test:{port}"
RW = b"pypi.test:{port}"

CONNECTION_NAMES = "names a header the request's framing or routing depends on"


def rules(port: int) -> list[str]:
    """The allow rules the table assumes."""
    return [f"web.test:{port}+read-only", f"pypi.test:{port}", f"127.0.0.1:{port}"]


@dataclass(frozen=True)
class Judged:
    """What the origin must receive: exactly one request like this, nothing else.

    Attributes:
        method: the request method.
        host: the one ``Host`` value (``{port}`` filled in).
        body: the body, de-chunked.
        fields: ``(name, [values])`` the origin must see exactly (lowercase names).
        absent: lowercase names the origin must not see.
        trailers: the trailer fields, in order.
    """

    method: str
    host: str = "web.test:{port}"
    body: bytes = b""
    fields: tuple[tuple[str, list[str]], ...] = ()
    absent: tuple[str, ...] = ()
    trailers: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True)
class Attack:
    """One row: the bytes, then either ``judged`` (forwarded) or ``status`` and ``reason``."""

    name: str
    parts: tuple[bytes, ...]
    status: int = 200
    reason: str = ""
    judged: Judged | None = None
    expect_continue: bool = False
    rule: str = field(default="")
    """For refusals by the rules: the rule the reply and the record name."""

    @property
    def path(self) -> str:
        """The attack's own request path."""
        return f"/a/{self.name}"

    def render(self, port: int) -> list[bytes]:
        """The parts with the port and the path filled in."""
        return [
            p.replace(b"{port}", str(port).encode()).replace(b"{path}", self.path.encode())
            for p in self.parts
        ]


def _get(host: bytes, fields: bytes = b"", body: bytes = b"", method: bytes = b"GET") -> bytes:
    return method + b" http://" + host + b"{path} HTTP/1.1\r\n" + fields + b"\r\n" + body


def _post(fields: bytes = b"", body: bytes = b"") -> bytes:
    return _get(RW, fields, body, method=b"POST")


def _chunked(*fields: bytes) -> bytes:
    return b"Transfer-Encoding: chunked\r\n" + b"".join(fields)


HELLO_CHUNKED = b"5\r\nhello\r\n0\r\n\r\n"

REFUSED: tuple[Attack, ...] = (
    # The reproduction: Connection names Content-Length; the body is a second request.
    Attack(
        "connection-names-content-length",
        (_get(RO, b"Connection: Content-Length\r\nContent-Length: " + SMUGGLED_LENGTH + b"\r\n",
              SMUGGLED),),
        400, CONNECTION_NAMES,
    ),
    Attack(
        "connection-names-content-length-post",
        (_post(b"Connection: close, Content-Length\r\nContent-Length: " + SMUGGLED_LENGTH
               + b"\r\n", SMUGGLED),),
        400, CONNECTION_NAMES,
    ),
    Attack(
        "connection-names-transfer-encoding",
        (_post(_chunked(b"Connection: Transfer-Encoding\r\n"), SMUGGLED_CHUNK),),
        400, CONNECTION_NAMES,
    ),
    Attack(
        "connection-names-host",
        (_get(RO, b"Host: evil.test\r\nConnection: Host\r\n"),),
        400, CONNECTION_NAMES,
    ),
    Attack(
        "connection-names-content-length-upper-case",
        (_post(b"Connection: keep-alive, CONTENT-LENGTH\r\nContent-Length: " + SMUGGLED_LENGTH
               + b"\r\n", SMUGGLED),),
        400, CONNECTION_NAMES,
    ),
    Attack(
        "connection-names-content-length-with-underscore",
        (_post(b"Connection: content_length\r\nContent-Length: " + SMUGGLED_LENGTH + b"\r\n",
               SMUGGLED),),
        400, CONNECTION_NAMES,
    ),
    Attack(
        "connection-option-not-a-token",
        (_post(b"Connection: Content-Length;x\r\nContent-Length: 5\r\n", b"hello"),),
        400, "a Connection option is not a token",
    ),
    Attack(
        "content-length-twice-differing",
        (_post(b"Content-Length: 5\r\nContent-Length: " + SMUGGLED_LENGTH + b"\r\n",
               b"hello" + SMUGGLED),),
        400, "bad Content-Length",
    ),
    Attack(
        "content-length-and-transfer-encoding",
        (_post(_chunked(b"Content-Length: 5\r\n"), b"hello" + SMUGGLED_CHUNK),),
        400, "both Content-Length and Transfer-Encoding",
    ),
    Attack(
        "content-length-signed",
        (_post(b"Content-Length: +5\r\n", b"hello"),),
        400, "bad Content-Length",
    ),
    Attack(
        "content-length-look-alike",
        (_post(b"Content_Length: " + SMUGGLED_LENGTH + b"\r\n", SMUGGLED),),
        400, "reads as a framing or routing header",
    ),
    Attack(
        "transfer-encoding-look-alike",
        (_post(b"Transfer_Encoding: chunked\r\nContent-Length: 5\r\n", b"hello" + SMUGGLED),),
        400, "reads as a framing or routing header",
    ),
    Attack(
        "transfer-encoding-identity",
        (_post(b"Transfer-Encoding: identity\r\n", b"hello"),),
        501, "only the chunked transfer coding",
    ),
    Attack(
        "transfer-encoding-twice",
        (_post(_chunked(b"Transfer-Encoding: chunked\r\n"), HELLO_CHUNKED),),
        501, "only the chunked transfer coding",
    ),
    Attack(
        "transfer-encoding-gzip-chunked",
        (_post(b"Transfer-Encoding: gzip, chunked\r\n", HELLO_CHUNKED),),
        501, "only the chunked transfer coding",
    ),
    Attack(
        "chunked-on-http-1-0",
        (b"POST http://" + RW + b"{path} HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n"
         + HELLO_CHUNKED,),
        400, "chunked on HTTP/1.0",
    ),
    Attack(
        "obs-fold",
        (_post(b"X-Folded: a\r\n b\r\nContent-Length: 5\r\n", b"hello"),),
        400, "obsolete line folding",
    ),
    Attack(
        "obs-fold-hides-transfer-encoding",
        (_post(b"Content-Length: 5\r\nX-Folded: a\r\n Transfer-Encoding: chunked\r\n",
               b"hello"),),
        400, "obsolete line folding",
    ),
    Attack(
        "bare-lf-head",
        (b"POST http://" + RW + b"{path} HTTP/1.1\nContent-Length: 5\n\nhello",),
        400, "bare CR or LF",
    ),
    Attack(
        "bare-lf-hides-a-field",
        (_post(b"X-A: a\nContent-Length: " + SMUGGLED_LENGTH + b"\r\n", SMUGGLED),),
        400, "bare CR or LF",
    ),
    Attack(
        "bare-cr-hides-a-field",
        (_post(b"X-A: a\rContent-Length: " + SMUGGLED_LENGTH + b"\r\n", SMUGGLED),),
        400, "bare CR or LF",
    ),
    Attack(
        "space-before-colon",
        (_post(b"Content-Length : " + SMUGGLED_LENGTH + b"\r\n", SMUGGLED),),
        400, "whitespace before the colon",
    ),
    Attack(
        "chunk-lines-end-in-bare-lf",
        (_post(_chunked(), b"5\nhello\n0\n\n" + SMUGGLED),),
        400, "does not end in CRLF",
    ),
    Attack(
        "chunk-size-over-31-bits",
        (_post(_chunked(), b"100000005\r\nhello\r\n0\r\n\r\n"),),
        400, "a chunk larger than",
    ),
    Attack(
        "chunk-size-with-whitespace",
        (_post(_chunked(), b"5 ;a=b\r\nhello\r\n0\r\n\r\n"),),
        400, "bad chunk size or extension",
    ),
    Attack(
        "chunk-data-longer-than-its-size",
        (_post(_chunked(), b"3\r\nhello\r\n0\r\n\r\n"),),
        400, "chunk data longer than its size",
    ),
    Attack(
        "trailer-content-length",
        (_post(_chunked(), b"5\r\nhello\r\n0\r\nContent-Length: 40\r\n\r\n" + SMUGGLED),),
        400, "a trailer field that frames",
    ),
    Attack(
        "trailer-host",
        (_post(_chunked(), b"5\r\nhello\r\n0\r\nHost: evil.test\r\n\r\n"),),
        400, "a trailer field that frames",
    ),
    Attack(
        "trailer-obs-fold",
        (_post(_chunked(), b"5\r\nhello\r\n0\r\nX-T: a\r\n b\r\n\r\n"),),
        400, "obsolete line folding",
    ),
    Attack(
        "connect-with-content-length",
        (b"CONNECT 127.0.0.1:{port} HTTP/1.1\r\nContent-Length: 5\r\n\r\nhello",),
        400, "a CONNECT request with a body",
    ),
    Attack(
        "connect-chunked",
        (b"CONNECT 127.0.0.1:{port} HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n"
         + HELLO_CHUNKED,),
        400, "a CONNECT request with a body",
    ),
    # Read-only: a body under GET is where an origin that ignores it reads a second request.
    Attack(
        "read-only-get-with-a-body",
        (_get(RO, b"Content-Length: " + SMUGGLED_LENGTH + b"\r\n", SMUGGLED),),
        403, "read-only: a body is refused", rule="allow web.test:{port}+read-only",
    ),
    Attack(
        "read-only-get-chunked",
        (_get(RO, _chunked(), SMUGGLED_CHUNK),),
        403, "read-only: a body is refused", rule="allow web.test:{port}+read-only",
    ),
    Attack(
        "read-only-post",
        (_get(RO, b"Content-Length: 5\r\n", b"hello", method=b"POST"),),
        403, "read-only: method refused", rule="allow web.test:{port}+read-only",
    ),
    Attack(
        "read-only-lower-case-method",
        (_get(RO, method=b"get"),),
        403, "read-only: method refused", rule="allow web.test:{port}+read-only",
    ),
)  # fmt: skip

_CLOSE = ("connection", ["close"])

FORWARDED: tuple[Attack, ...] = (
    Attack("plain-get", (_get(RO),), judged=Judged("GET", fields=(_CLOSE,))),
    Attack(
        "pipelined-after-a-get",
        (_get(RO) + SMUGGLED,),
        judged=Judged("GET", fields=(_CLOSE, ("content-length", []))),
    ),
    Attack(
        "pipelined-after-a-body",
        (_post(b"Content-Length: 5\r\n", b"hello" + SMUGGLED),),
        judged=Judged("POST", "pypi.test:{port}", b"hello", (("content-length", ["5"]),)),
    ),
    Attack(
        "pipelined-after-a-chunked-body",
        (_post(_chunked(), HELLO_CHUNKED + SMUGGLED),),
        judged=Judged("POST", "pypi.test:{port}", b"hello", (("transfer-encoding", ["chunked"]),)),
    ),
    Attack(
        "chunked-with-trailers",
        (_post(_chunked(b"Trailer: X-Checksum\r\n"),
               b"5\r\nhello\r\n6\r\n world\r\n0\r\nX-Checksum: 1a2b\r\n\r\n" + SMUGGLED),),
        judged=Judged("POST", "pypi.test:{port}", b"hello world",
                      (("trailer", ["X-Checksum"]),), trailers=(("x-checksum", "1a2b"),)),
    ),
    Attack(
        "chunk-extensions",
        (_post(_chunked(), b'5;name=value;q="a \\" b"\r\nhello\r\n0\r\n\r\n' + SMUGGLED),),
        judged=Judged("POST", "pypi.test:{port}", b"hello"),
    ),
    Attack(
        "transfer-encoding-upper-case",
        (_post(b"Transfer-Encoding: CHUNKED\r\n", HELLO_CHUNKED + SMUGGLED),),
        judged=Judged("POST", "pypi.test:{port}", b"hello", (("transfer-encoding", ["chunked"]),)),
    ),
    Attack(
        "content-length-repeated",
        (_post(b"Content-Length: 5\r\ncontent-length: 5\r\n", b"hello" + SMUGGLED),),
        judged=Judged("POST", "pypi.test:{port}", b"hello", (("content-length", ["5"]),)),
    ),
    Attack(
        "content-length-list",
        (_post(b"Content-Length: 5, 5\r\n", b"hello" + SMUGGLED),),
        judged=Judged("POST", "pypi.test:{port}", b"hello", (("content-length", ["5"]),)),
    ),
    Attack(
        "content-length-leading-zeros",
        (_post(b"Content-Length: 0005\r\n", b"hello" + SMUGGLED),),
        judged=Judged("POST", "pypi.test:{port}", b"hello", (("content-length", ["5"]),)),
    ),
    # TE is the response-coding field, not Transfer-Encoding: no body is framed by it.
    Attack(
        "te-chunked-is-not-a-framing",
        (_post(b"TE: chunked\r\n", SMUGGLED_CHUNK),),
        judged=Judged("POST", "pypi.test:{port}", b"", absent=("te", "transfer-encoding")),
    ),
    Attack(
        "expect-100-continue",
        (_post(b"Expect: 100-continue\r\nContent-Length: 5\r\n"), b"hello"),
        expect_continue=True,
        judged=Judged("POST", "pypi.test:{port}", b"hello", (("expect", ["100-continue"]),)),
    ),
    Attack(
        "expect-100-continue-then-a-pipelined-request",
        (_post(b"Expect: 100-continue\r\nContent-Length: 5\r\n"), b"hello" + SMUGGLED),
        expect_continue=True,
        judged=Judged("POST", "pypi.test:{port}", b"hello"),
    ),
    Attack(
        "absolute-form-against-host",
        (_get(RO, b"Host: evil.test\r\n"),),
        judged=Judged("GET"),
    ),
    Attack(
        "two-host-fields",
        (_get(RO, b"Host: evil.test\r\nHost: other.test\r\n"),),
        judged=Judged("GET"),
    ),
    Attack(
        "host-case-and-trailing-dot",
        (b"GET http://WEB.Test.:{port}{path} HTTP/1.1\r\nHost: WEB.Test.\r\n\r\n",),
        judged=Judged("GET"),
    ),
    Attack(
        "upgrade-to-h2c",
        (_get(RO, b"Connection: Upgrade, HTTP2-Settings\r\nUpgrade: h2c\r\n"
                  b"HTTP2-Settings: AAMAAABkAARAAAAAAAIAAAAA\r\n"),),
        judged=Judged("GET", fields=(_CLOSE,), absent=("upgrade", "http2-settings")),
    ),
    Attack(
        "hop-by-hop-fields",
        (_get(RO, b"Connection: keep-alive, TE, X-Drop\r\nKeep-Alive: timeout=5\r\n"
                  b"Proxy-Connection: keep-alive\r\nProxy-Authorization: Basic eDp5\r\n"
                  b"TE: trailers\r\nX-Drop: 1\r\nX-Keep: 2\r\n"),),
        judged=Judged("GET", fields=(_CLOSE, ("x-keep", ["2"])),
                      absent=("keep-alive", "proxy-connection", "proxy-authorization", "te",
                              "x-drop")),
    ),
    Attack(
        "http-1-0-keep-alive-pipelined",
        (b"GET http://" + RO + b"{path} HTTP/1.0\r\nConnection: keep-alive\r\n\r\n" + SMUGGLED,),
        judged=Judged("GET", fields=(_CLOSE,)),
    ),
    Attack(
        "leading-empty-line",
        (b"\r\n" + _get(RO),),
        judged=Judged("GET"),
    ),
)  # fmt: skip

ATTACKS: tuple[Attack, ...] = REFUSED + FORWARDED


def check_reply(attack: Attack, port: int, reply: bytes) -> None:
    """The sandbox got the origin's answer (forwarded) or the refusal with its reason."""
    if attack.expect_continue and attack.judged is not None:
        interim, _, reply = reply.partition(b"\r\n\r\n")
        assert interim == b"HTTP/1.1 100 Continue", (attack.name, interim)
    head, _, body = reply.partition(b"\r\n\r\n")
    status = head.split(b"\r\n", 1)[0]
    assert status.startswith(b"HTTP/1.1 %d " % attack.status), (attack.name, reply)
    if attack.judged is not None:
        assert body.startswith(f"origin saw {attack.judged.method} {attack.path}".encode())
        return
    assert attack.reason.encode() in body, (attack.name, body)
    if attack.rule:
        rule = attack.rule.replace("{port}", str(port))
        assert f'rule="{rule}"'.encode() in head, (attack.name, head)


def check_origin(attack: Attack, port: int, connections: list[Received]) -> None:
    """Forwarded: one connection holding exactly the judged request; refused: none."""
    mine = [c for c in connections if c.marker == attack.path]
    if attack.judged is None:
        assert mine == [], (attack.name, [c.raw for c in mine])
        return
    assert len(mine) == 1, (attack.name, len(mine))
    (seen,) = mine
    assert seen.error is None, (attack.name, seen.error, seen.raw)
    assert len(seen.requests) == 1, (attack.name, [r.target for r in seen.requests], seen.raw)
    (request,) = seen.requests
    judged = attack.judged
    assert (request.method, request.target) == (judged.method, attack.path), attack.name
    assert request.values("host") == [judged.host.replace("{port}", str(port))], (
        attack.name,
        request.headers,
    )
    assert request.body == judged.body, (attack.name, request.body)
    assert request.values("connection") == ["close"], (attack.name, request.headers)
    for name, values in judged.fields:
        assert request.values(name) == values, (attack.name, name, request.headers)
    for name in judged.absent:
        assert request.values(name) == [], (attack.name, name, request.headers)
    assert request.trailers == list(judged.trailers), (attack.name, request.trailers)


def check_records(
    attack: Attack, port: int, decision: dict[str, object], end: dict[str, object] | None
) -> None:
    """Forwarded: an allow record and an end record; refused: a deny record with the reason."""
    assert decision["kind"] == "egress", decision
    assert decision["proto"] in ("http", "connect"), decision
    if attack.judged is not None:
        assert decision["decision"] == "allow", (attack.name, decision)
        assert end is not None, attack.name
        assert end["conn"] == decision["conn"], (attack.name, end)
        assert end["outcome"] == "closed", (attack.name, end)
        return
    assert decision["decision"] == "deny", (attack.name, decision)
    assert attack.reason in str(decision["reason"]), (attack.name, decision)
    assert decision["bytes_up"] == 0, decision
    if attack.rule:
        assert decision["rule"] == attack.rule.replace("{port}", str(port)), decision
