"""The SOCKS5 parser, the ClientHello SNI reader and the DNS codec (sans-IO)."""

from __future__ import annotations

import ipaddress
import ssl
import struct

import pytest

from glove.egress import (
    ClientHelloParser,
    DnsFrameReader,
    DnsMessageError,
    Socks5Error,
    Socks5Greeting,
    Socks5Parser,
    Socks5Request,
    TlsHelloError,
    encode_answer,
    encode_error,
    encode_query,
    parse_answer,
    parse_query,
)
from glove.egress._dns import RCODE_NXDOMAIN, TYPE_A, TYPE_AAAA, encode_formerr, frame
from glove.egress._socks5 import REPLY_ADDRESS_TYPE_NOT_SUPPORTED, reply

# -- SOCKS5 ----------------------------------------------------------------------------------

GREETING = b"\x05\x02\x00\x02"
REQUESTS = {
    b"\x05\x01\x00\x03\x0bexample.org\x01\xbb": (1, 3, "example.org", 443),
    b"\x05\x01\x00\x01\x7f\x00\x00\x01\x00\x50": (1, 1, "127.0.0.1", 80),
    b"\x05\x01\x00\x04" + bytes(15) + b"\x01\x00\x16": (1, 4, "::1", 22),
    b"\x05\x03\x00\x01\x00\x00\x00\x00\x00\x00": (3, 1, "0.0.0.0", 0),
}


def _socks_events(data: bytes, step: int) -> tuple[list[object], bytes]:
    parser = Socks5Parser()
    events: list[object] = []
    for index in range(0, len(data), step):
        event = parser.feed(data[index : index + step])
        while event is not None:
            events.append(event)
            if isinstance(event, Socks5Request):
                return events, parser.trailing + data[index + step :]
            event = parser.feed(b"")
    return events, b""


@pytest.mark.parametrize(("request_bytes", "expected"), list(REQUESTS.items()))
@pytest.mark.parametrize("step", [1, 2, 7, 1000])
def test_socks5_parses_whole_and_byte_by_byte(
    request_bytes: bytes, expected: tuple[int, int, str, int], step: int
) -> None:
    """Greeting then request, in any chunking; bytes after the request are kept."""
    events, trailing = _socks_events(GREETING + request_bytes + b"tail", step)
    assert events[0] == Socks5Greeting(frozenset({0, 2}))
    request = events[1]
    assert isinstance(request, Socks5Request)
    assert (request.command, request.address_type, request.host, request.port) == expected
    assert trailing == b"tail"


@pytest.mark.parametrize("step", [1, 300, 100000])
def test_socks5_data_after_a_long_request_is_trailing_in_any_chunking(step: int) -> None:
    """A 255-byte name followed by early tunnel data parses the same however it arrives."""
    data = GREETING + b"\x05\x01\x00\x03\xff" + b"a" * 255 + b"\x00\x50" + b"z" * 600
    events, trailing = _socks_events(data, step)
    assert isinstance(events[1], Socks5Request)
    assert events[1].host == "a" * 255
    assert trailing == b"z" * 600


def test_socks5_method_selection() -> None:
    """No-auth is chosen when offered; otherwise "no acceptable method"."""
    assert Socks5Greeting(frozenset({0})).reply == b"\x05\x00"
    assert Socks5Greeting(frozenset({2})).reply == b"\x05\xff"


@pytest.mark.parametrize(
    ("data", "why", "code"),
    [
        (b"\x04\x01\x00\x50", "not SOCKS5", None),
        (b"\x05\x00", "offers no method", None),
        (GREETING + b"\x04\x01\x00\x01", "bad version", None),
        (GREETING + b"\x05\x01\x01\x01", "reserved byte", 1),
        (GREETING + b"\x05\x01\x00\x09", "address type 9", REPLY_ADDRESS_TYPE_NOT_SUPPORTED),
        (GREETING + b"\x05\x01\x00\x03\x00\x00\x50", "empty domain", 1),
    ],
)
def test_socks5_malformed(data: bytes, why: str, code: int | None) -> None:
    """Each malformed message is a Socks5Error carrying the reply to send (if any)."""
    for step in (1, len(data)):
        with pytest.raises(Socks5Error, match=why) as info:
            _socks_events(data, step)
        assert info.value.reply_code == code


def test_socks5_reply_never_carries_the_host_address() -> None:
    """The bound address in every reply is 0.0.0.0:0."""
    assert reply(2) == b"\x05\x02\x00\x01\x00\x00\x00\x00\x00\x00"


# -- TLS ClientHello -----------------------------------------------------------------------


def client_hello(server_name: str | None) -> bytes:
    """The first flight of a real TLS client (Python's ssl) for ``server_name``."""
    context = ssl.create_default_context()
    context.check_hostname = server_name is not None
    if server_name is None:
        context.verify_mode = ssl.CERT_NONE
    incoming, outgoing = ssl.MemoryBIO(), ssl.MemoryBIO()
    tls = context.wrap_bio(incoming, outgoing, server_hostname=server_name)
    with pytest.raises(ssl.SSLWantReadError):
        tls.do_handshake()
    return outgoing.read()


def _records(hello: bytes, size: int) -> bytes:
    """Re-split the hello's handshake bytes into records of ``size`` bytes."""
    assert hello[0] == 22
    body = hello[5:]
    out = b""
    for index in range(0, len(body), size):
        chunk = body[index : index + size]
        out += b"\x16\x03\x01" + struct.pack(">H", len(chunk)) + chunk
    return out


@pytest.mark.parametrize("step", [1, 13, 100000])
def test_sni_of_a_real_client_hello(step: int) -> None:
    """The server name of a real ClientHello, fed in any chunking."""
    data = client_hello("Git.Example.ORG")
    parser = ClientHelloParser()
    hello = None
    for index in range(0, len(data), step):
        hello = parser.feed(data[index : index + step])
        if hello is not None:
            break
    assert hello is not None
    assert hello.server_name == "git.example.org"
    assert not hello.encrypted
    assert hello.size == len(data)


def test_a_hello_spread_over_several_records() -> None:
    """A ClientHello split across TLS records (as large post-quantum hellos are) is read."""
    data = _records(client_hello("a.example.org"), 50)
    hello = ClientHelloParser().feed(data)
    assert hello is not None
    assert hello.server_name == "a.example.org"


def test_a_hello_without_sni() -> None:
    """A client that sends no server_name gives None (an SNI rule then refuses)."""
    hello = ClientHelloParser().feed(client_hello(None))
    assert hello is not None
    assert hello.server_name is None


def _with_extension(hello: bytes, kind: int, data: bytes) -> bytes:
    """Append one extension to a single-record ClientHello, fixing every length."""
    body = bytearray(hello[9:])
    pos = 2 + 32
    pos += 1 + body[pos]
    pos += 2 + int.from_bytes(body[pos : pos + 2], "big")
    pos += 1 + body[pos]
    ext_len = int.from_bytes(body[pos : pos + 2], "big")
    extension = struct.pack(">HH", kind, len(data)) + data
    body[pos : pos + 2] = struct.pack(">H", ext_len + len(extension))
    body += extension
    handshake = b"\x01" + len(body).to_bytes(3, "big") + bytes(body)
    return b"\x16\x03\x01" + struct.pack(">H", len(handshake)) + handshake


def test_encrypted_client_hello_is_reported() -> None:
    """A hello with encrypted_client_hello says so: its outer SNI is not the destination."""
    hello = ClientHelloParser().feed(
        _with_extension(client_hello("public.example.org"), 0xFE0D, b"x")
    )
    assert hello is not None
    assert hello.encrypted


def test_duplicate_extensions_are_refused() -> None:
    """Two server_name extensions are malformed (RFC 8446 section 4.2)."""
    sni = b"\x00\x0a\x00\x00\x07evil.io"
    with pytest.raises(TlsHelloError, match="duplicate"):
        ClientHelloParser().feed(_with_extension(client_hello("good.example.org"), 0, sni))


@pytest.mark.parametrize(
    ("data", "why"),
    [
        (b"GET / HTTP/1.1\r\n", "not a TLS handshake"),
        (b"\x16\x02\x00\x00\x05", "record version"),
        (b"\x16\x03\x01\x00\x00", "record length"),
        (b"\x16\x03\x01\x00\x04\x02\x00\x00\x00", "not a ClientHello"),
        (b"\x16\x03\x01\x00\x06\x01\x00\x00\x02\x03\x03", "truncated"),
        (b"\x16\x03\x01\x00\x04\x01\xff\xff\xff", "larger than"),
    ],
)
def test_malformed_hellos(data: bytes, why: str) -> None:
    """Malformed first flights are typed errors, never anything else."""
    with pytest.raises(TlsHelloError, match=why):
        ClientHelloParser().feed(data)


def test_hello_cap_is_checked_before_the_buffer_grows() -> None:
    """More bytes than the cap without a complete hello fail."""
    parser = ClientHelloParser(max_bytes=100)
    with pytest.raises(TlsHelloError, match="larger than 100"):
        parser.feed(client_hello("a.example.org"))


# -- DNS ------------------------------------------------------------------------------------


def test_query_round_trip_and_answer() -> None:
    """A query we encode parses back; the answer carries only the asked family."""
    query = parse_query(encode_query(0x1234, "Git.Example.org.", TYPE_A))
    assert (query.id, query.name, query.qtype, query.type_name) == (
        0x1234,
        "git.example.org",
        1,
        "A",
    )
    assert query.recursion_desired
    addresses = [ipaddress.ip_address("93.184.216.34"), ipaddress.ip_address("2606:4700::1")]
    answer = parse_answer(encode_answer(query, addresses))
    assert (answer.id, answer.rcode) == (0x1234, 0)
    assert answer.addresses == (ipaddress.ip_address("93.184.216.34"),)
    six = parse_query(encode_query(7, "a.example.org", TYPE_AAAA))
    assert parse_answer(encode_answer(six, addresses)).addresses == (addresses[1],)


def test_answers_are_capped_and_fit_a_udp_datagram() -> None:
    """At most eight records, under 512 bytes even for a 253-byte name."""
    name = ".".join(["a" * 63] * 3 + ["b" * 61])
    query = parse_query(encode_query(1, name, TYPE_AAAA))
    many = [ipaddress.ip_address(f"2001:db8::{i}") for i in range(1, 20)]
    message = encode_answer(query, many)
    assert len(parse_answer(message).addresses) == 8
    assert len(message) <= 512


def test_nxdomain_and_formerr() -> None:
    """Refusals echo the question with the rcode; FORMERR works without one."""
    query = parse_query(encode_query(9, "no.example.org", TYPE_A))
    answer = parse_answer(encode_error(query, RCODE_NXDOMAIN))
    assert (answer.id, answer.rcode, answer.addresses) == (9, RCODE_NXDOMAIN, ())
    assert parse_answer(encode_formerr(5)).rcode == 1


def test_names_that_are_not_host_names_have_no_name() -> None:
    """A label with a dot, a space or a non-ASCII byte inside is not a host name."""
    for label in (b"a.b", b"a b", b"\xc3\xa9"):
        wire = b"\x00\x01\x01\x00\x00\x01\x00\x00\x00\x00\x00\x00"
        wire += bytes((len(label),)) + label + b"\x03org\x00\x00\x01\x00\x01"
        assert parse_query(wire).name is None


@pytest.mark.parametrize(
    ("wire", "why"),
    [
        (b"\x00\x01", "shorter than its header"),
        (b"\x00\x01\x81\x00\x00\x01\x00\x00\x00\x00\x00\x00\x00\x00\x01\x00\x01", "a response"),
        (b"\x00\x01\x01\x00\x00\x02\x00\x00\x00\x00\x00\x00\x00\x00\x01\x00\x01", "one question"),
        (b"\x00\x01\x01\x00\x00\x01\x00\x00\x00\x00\x00\x00\xc0\x0c\x00\x01\x00\x01", "pointer"),
        (b"\x00\x01\x01\x00\x00\x01\x00\x00\x00\x00\x00\x00\x05ab", "truncated"),
        (b"\x00\x01\x01\x00\x00\x01\x00\x00\x00\x00\x00\x00\x00\x00", "truncated"),
        (b"\x00" * 5000, "larger than"),
    ],
)
def test_malformed_queries(wire: bytes, why: str) -> None:
    """Malformed queries are DnsMessageError, never anything else."""
    with pytest.raises(DnsMessageError, match=why):
        parse_query(wire)


def test_other_opcodes_parse_for_notimp() -> None:
    """An IQUERY/STATUS/UPDATE comes back with its opcode, so the stub can answer NOTIMP."""
    wire = b"\x00\x07\x28\x00" + bytes(8)
    query = parse_query(wire)
    assert query.opcode == 5
    assert query.name is None


def test_frame_reader_whole_and_byte_by_byte() -> None:
    """DNS-over-TCP framing splits messages however the stream is cut."""
    one, two = encode_query(1, "a.example.org", 1), encode_query(2, "b.example.org", 28)
    stream = frame(one) + frame(two)
    assert DnsFrameReader().feed(stream) == [one, two]
    reader = DnsFrameReader()
    got = [m for i in range(len(stream)) for m in reader.feed(stream[i : i + 1])]
    assert got == [one, two]
    with pytest.raises(DnsMessageError, match="frame of 0"):
        DnsFrameReader().feed(b"\x00\x00")
    with pytest.raises(DnsMessageError, match="frame of 5000"):
        DnsFrameReader().feed(struct.pack(">H", 5000))


def test_answer_parser_refuses_pointer_loops() -> None:
    """A compression pointer is followed a bounded number of times (here: it ends a name)."""
    bad = b"\x00\x01\x81\x80\x00\x00\x00\x01\x00\x00\x00\x00" + b"\xc0"
    with pytest.raises(DnsMessageError):
        parse_answer(bad)
