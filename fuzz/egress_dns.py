"""Fuzz target: a DNS query from the sandbox -> the stub's codec (parse, answer, re-parse).

Contract under test: parse_query returns a DnsQuery or raises DnsMessageError; an answer
built for a parsed query parses back with the same id; parse_answer on arbitrary bytes
returns a DnsAnswer or raises DnsMessageError; the TCP frame reader never returns more
than it was given.
"""

import contextlib
import ipaddress
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from egress_common import run

from glove.egress import (
    DnsFrameReader,
    DnsMessageError,
    encode_answer,
    encode_error,
    parse_answer,
    parse_query,
)

ADDRESSES = [ipaddress.ip_address("192.0.2.1"), ipaddress.ip_address("2001:db8::1")]


def one_input(data: bytes) -> None:
    """Parse ``data`` as a query, answer it, and parse arbitrary bytes as answers and frames."""
    try:
        query = parse_query(data)
    except DnsMessageError:
        query = None
    if query is not None and query.question:
        assert parse_answer(encode_answer(query, ADDRESSES)).id == query.id
        assert parse_answer(encode_error(query, 3)).rcode == 3
    with contextlib.suppress(DnsMessageError):
        parse_answer(data)
    try:
        messages = DnsFrameReader().feed(data)
        assert sum(len(m) + 2 for m in messages) <= len(data)
    except DnsMessageError:
        pass


if __name__ == "__main__":
    run("dns", one_input)
