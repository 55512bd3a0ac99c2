"""A DNS message codec for the sandbox's stub resolver: A and AAAA only (sans-IO).

The stub inside the sandbox answers nothing itself: each query (UDP or TCP) travels to the
proxy over the inherited channel in DNS-over-TCP framing (RFC 1035 section 4.2.2, a two-byte
length before each message). The proxy parses it here, decides the name with the same rules
as connections, and answers:

* an allowed name: A or AAAA records for the addresses the proxy itself resolved and would
  connect to (public ones, or ones a rule lists), at most :data:`MAX_ANSWERS`, with a short
  TTL; any other type for an allowed name gets an empty NOERROR (NODATA);
* every other name: NXDOMAIN, without the proxy ever resolving it (a lookup of a
  refused name leaks nothing to any resolver);
* a malformed query: FORMERR; an opcode other than QUERY: NOTIMP.

Strict parsing: exactly one question, no compression pointer in it, labels of letters,
digits, ``-`` and ``_`` only (anything else is not a host name: NXDOMAIN), at most
:data:`MAX_MESSAGE_BYTES` per query, and the message ends where its sections do (the
additional records, an EDNS OPT for instance, are walked to their end; a byte after them
is FORMERR), so the name the proxy judges is the only thing the query can mean.
:func:`encode_query` and :func:`parse_answer` are the client side, for tests and
``glove network check``.
"""

from __future__ import annotations

import ipaddress
import re
from typing import Final

import msgspec

from glove.egress._addresses import IPAddress
from glove.egress.errors import DnsMessageError

HEADER_BYTES: Final = 12
#: Largest query accepted (a real query is under 300 bytes; EDNS padding stays well under).
MAX_MESSAGE_BYTES: Final = 4096
#: Largest name on the wire (RFC 1035 section 2.3.4).
MAX_WIRE_NAME_BYTES: Final = 255
#: Most address records in one answer (keeps every answer under 512 bytes: no truncation).
MAX_ANSWERS: Final = 8
#: Seconds an answer may be cached in the sandbox.
ANSWER_TTL_S: Final = 5
#: Compression pointers followed while reading one name in an answer.
MAX_POINTER_HOPS: Final = 16
FRAME_LENGTH_BYTES: Final = 2

TYPE_A: Final = 1
TYPE_AAAA: Final = 28
CLASS_IN: Final = 1
OPCODE_QUERY: Final = 0
RCODE_NOERROR: Final = 0
RCODE_FORMERR: Final = 1
RCODE_SERVFAIL: Final = 2
RCODE_NXDOMAIN: Final = 3
RCODE_NOTIMP: Final = 4
RCODE_REFUSED: Final = 5

_FLAG_QR: Final = 0x8000
_FLAG_RD: Final = 0x0100
_FLAG_RA: Final = 0x0080
_LABEL = re.compile(rb"[A-Za-z0-9_-]{1,63}\Z")
_QTYPE_NAMES: Final = {TYPE_A: "A", TYPE_AAAA: "AAAA"}


class DnsQuery(msgspec.Struct, frozen=True):
    """One parsed question.

    Attributes:
        id: the message id, echoed in the answer.
        opcode: 0 for a standard query (others are answered NOTIMP).
        recursion_desired: the RD flag, echoed.
        name: the lowercase name without a trailing dot, or None when it is not a host
            name (a label with other bytes, or the root).
        qtype: the question type (A is 1, AAAA is 28).
        qclass: the question class (IN is 1).
        question: the question section's wire bytes, echoed in the answer.
    """

    id: int
    opcode: int
    recursion_desired: bool
    name: str | None
    qtype: int
    qclass: int
    question: bytes

    @property
    def type_name(self) -> str:
        """``A``, ``AAAA`` or ``TYPE<n>``, for the audit record."""
        return _QTYPE_NAMES.get(self.qtype, f"TYPE{self.qtype}")


class DnsAnswer(msgspec.Struct, frozen=True):
    """A parsed answer (client side): id, rcode and the A/AAAA addresses it carries."""

    id: int
    rcode: int
    addresses: tuple[IPAddress, ...]


def _u16(data: bytes, pos: int) -> int:
    if pos + 2 > len(data):
        raise DnsMessageError("truncated DNS message")
    return int.from_bytes(data[pos : pos + 2], "big")


def message_id(data: bytes) -> int | None:
    """The id of a message too malformed to parse (to send FORMERR), or None if shorter."""
    return int.from_bytes(data[:2], "big") if len(data) >= 2 else None


def parse_query(data: bytes) -> DnsQuery:
    """Parse a query with one question.

    Raises:
        DnsMessageError: too short or long, a response, not exactly one question, answer
            or authority records, a pointer or bad length in the name, a truncated question,
            malformed additional records or bytes after them.
    """
    if len(data) > MAX_MESSAGE_BYTES:
        raise DnsMessageError(f"DNS query larger than {MAX_MESSAGE_BYTES} bytes")
    if len(data) < HEADER_BYTES:
        raise DnsMessageError("DNS message shorter than its header")
    ident, flags = _u16(data, 0), _u16(data, 2)
    qdcount, ancount, nscount = _u16(data, 4), _u16(data, 6), _u16(data, 8)
    arcount = _u16(data, 10)
    if flags & _FLAG_QR:
        raise DnsMessageError("a response where a query was expected")
    opcode = (flags >> 11) & 0xF
    if opcode != OPCODE_QUERY:
        return DnsQuery(ident, opcode, bool(flags & _FLAG_RD), None, 0, 0, b"")
    if qdcount != 1 or ancount or nscount:
        raise DnsMessageError("a query must carry exactly one question and no answers")
    labels, valid, pos = _question_name(data)
    qtype, qclass = _u16(data, pos), _u16(data, pos + 2)
    question = data[HEADER_BYTES : pos + 4]
    end = pos + 4
    for _ in range(arcount):
        end = _skip_record(data, end)
    if end != len(data):
        raise DnsMessageError("bytes after the last record of the query")
    name = b".".join(labels).decode("ascii").lower() if valid and labels else None
    return DnsQuery(ident, opcode, bool(flags & _FLAG_RD), name, qtype, qclass, question)


def _question_name(data: bytes) -> tuple[list[bytes], bool, int]:
    """The question's labels, whether each is a host-name label, and the position after it.

    Raises:
        DnsMessageError: a pointer or extended label, a truncated or over-long name.
    """
    pos = HEADER_BYTES
    labels: list[bytes] = []
    valid = True
    while True:
        if pos >= len(data):
            raise DnsMessageError("truncated question name")
        length = data[pos]
        if length & 0xC0:
            raise DnsMessageError("a compression pointer or extended label in the question")
        pos += 1
        if length == 0:
            break
        label = data[pos : pos + length]
        if len(label) < length:
            raise DnsMessageError("truncated label")
        pos += length
        if pos - HEADER_BYTES > MAX_WIRE_NAME_BYTES:
            raise DnsMessageError("question name longer than 255 bytes")
        valid = valid and bool(_LABEL.match(label))
        labels.append(label)
    return labels, valid, pos


def _header(query: DnsQuery, rcode: int, answers: int) -> bytes:
    flags = _FLAG_QR | (query.opcode << 11) | _FLAG_RA | rcode
    if query.recursion_desired:
        flags |= _FLAG_RD
    questions = 1 if query.question else 0
    return b"".join(n.to_bytes(2, "big") for n in (query.id, flags, questions, answers, 0, 0))


def encode_answer(query: DnsQuery, addresses: list[IPAddress] | tuple[IPAddress, ...]) -> bytes:
    """NOERROR with the addresses of the query's type (an empty list is NODATA)."""
    records: list[bytes] = []
    for address in addresses:
        if len(records) >= MAX_ANSWERS:
            break
        rtype = TYPE_A if address.version == 4 else TYPE_AAAA
        if rtype != query.qtype:
            continue
        packed = address.packed
        records.append(
            b"\xc0\x0c"  # the name: a pointer to the question's name
            + rtype.to_bytes(2, "big")
            + CLASS_IN.to_bytes(2, "big")
            + ANSWER_TTL_S.to_bytes(4, "big")
            + len(packed).to_bytes(2, "big")
            + packed
        )
    return _header(query, RCODE_NOERROR, len(records)) + query.question + b"".join(records)


def encode_error(query: DnsQuery, rcode: int) -> bytes:
    """An answer with ``rcode`` (NXDOMAIN, SERVFAIL, NOTIMP, REFUSED) and no records."""
    return _header(query, rcode, 0) + query.question


def encode_formerr(ident: int) -> bytes:
    """FORMERR for a query too malformed to echo its question."""
    return (
        ident.to_bytes(2, "big")
        + (_FLAG_QR | _FLAG_RA | RCODE_FORMERR).to_bytes(2, "big")
        + bytes(8)
    )


def encode_query(ident: int, name: str, qtype: int) -> bytes:
    """A standard recursive query for ``name`` (client side).

    Raises:
        DnsMessageError: a label is empty or longer than 63 bytes, or the name too long.
    """
    wire = bytearray()
    for label in name.rstrip(".").split("."):
        raw = label.encode("ascii")
        if not 1 <= len(raw) <= 63:
            raise DnsMessageError("a label must be 1 to 63 bytes")
        wire += bytes((len(raw),)) + raw
    wire += b"\0"
    if len(wire) > MAX_WIRE_NAME_BYTES:
        raise DnsMessageError("name longer than 255 bytes")
    head = b"".join(n.to_bytes(2, "big") for n in (ident, _FLAG_RD, 1, 0, 0, 0))
    return head + bytes(wire) + qtype.to_bytes(2, "big") + CLASS_IN.to_bytes(2, "big")


def _skip_name(data: bytes, pos: int) -> int:
    """Position after the name at ``pos`` (pointers end a name; hops are bounded)."""
    hops = 0
    while True:
        if pos >= len(data):
            raise DnsMessageError("truncated name")
        length = data[pos]
        if length & 0xC0 == 0xC0:
            hops += 1
            if hops > MAX_POINTER_HOPS or pos + 2 > len(data):
                raise DnsMessageError("bad compression pointer")
            return pos + 2
        if length & 0xC0:
            raise DnsMessageError("extended label type")
        if length == 0:
            return pos + 1
        pos += 1 + length


def _skip_record(data: bytes, pos: int) -> int:
    """Position after the resource record at ``pos`` (name, fixed fields, data).

    Raises:
        DnsMessageError: the record is truncated or its name malformed.
    """
    pos = _skip_name(data, pos)
    length = _u16(data, pos + 8)
    end = pos + 10 + length
    if end > len(data):
        raise DnsMessageError("truncated record data")
    return end


def parse_answer(data: bytes) -> DnsAnswer:
    """Parse an answer (client side): its id, rcode and A/AAAA addresses.

    Raises:
        DnsMessageError: not a response, or truncated or malformed records.
    """
    if len(data) < HEADER_BYTES:
        raise DnsMessageError("DNS message shorter than its header")
    ident, flags = _u16(data, 0), _u16(data, 2)
    if not flags & _FLAG_QR:
        raise DnsMessageError("a query where an answer was expected")
    qdcount, ancount = _u16(data, 4), _u16(data, 6)
    pos = HEADER_BYTES
    for _ in range(qdcount):
        pos = _skip_name(data, pos) + 4
    addresses: list[IPAddress] = []
    for _ in range(ancount):
        pos = _skip_name(data, pos)
        rtype, length = _u16(data, pos), _u16(data, pos + 8)
        rdata = data[pos + 10 : pos + 10 + length]
        if len(rdata) < length:
            raise DnsMessageError("truncated record data")
        pos += 10 + length
        if rtype == TYPE_A and length == 4:
            addresses.append(ipaddress.IPv4Address(rdata))
        elif rtype == TYPE_AAAA and length == 16:
            addresses.append(ipaddress.IPv6Address(rdata))
    if pos > len(data):
        raise DnsMessageError("truncated DNS message")
    return DnsAnswer(ident, flags & 0xF, tuple(addresses))


def frame(message: bytes) -> bytes:
    """``message`` in DNS-over-TCP framing (a two-byte length first)."""
    return len(message).to_bytes(FRAME_LENGTH_BYTES, "big") + message


class DnsFrameReader:
    """Splits a DNS-over-TCP stream into messages; one message of buffer at most."""

    def __init__(self, *, max_message_bytes: int = MAX_MESSAGE_BYTES) -> None:
        """Start empty; longer messages are an error."""
        self._max = max_message_bytes
        self._buffer = bytearray()

    def feed(self, data: bytes) -> list[bytes]:
        """Add ``data``; return every complete message now available.

        Raises:
            DnsMessageError: a message is announced longer than the cap, or empty.
        """
        messages: list[bytes] = []
        view = memoryview(data)
        while view:
            if len(self._buffer) < FRAME_LENGTH_BYTES:
                take = FRAME_LENGTH_BYTES - len(self._buffer)
                self._buffer += view[:take]
                view = view[take:]
                if len(self._buffer) < FRAME_LENGTH_BYTES:
                    break
                length = int.from_bytes(self._buffer[:FRAME_LENGTH_BYTES], "big")
                if length == 0 or length > self._max:
                    raise DnsMessageError(f"DNS frame of {length} bytes (1..{self._max})")
            length = int.from_bytes(self._buffer[:FRAME_LENGTH_BYTES], "big")
            need = FRAME_LENGTH_BYTES + length - len(self._buffer)
            self._buffer += view[:need]  # at most one message: the length was capped
            view = view[need:]
            if len(self._buffer) == FRAME_LENGTH_BYTES + length:
                messages.append(bytes(self._buffer[FRAME_LENGTH_BYTES:]))
                self._buffer.clear()
        return messages
