"""Fuzz target: a client's first bytes -> the ClientHello SNI reader.

Contract under test: the parser returns a ClientHello or None, or raises TlsHelloError, the
same whole and split in two; an SNI is lowercase ASCII of at most 255 characters.
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from egress_common import run

from glove.egress import ClientHello, ClientHelloParser, TlsHelloError


def _outcome(chunks: list[bytes]) -> object:
    parser = ClientHelloParser()
    try:
        for chunk in chunks:
            hello = parser.feed(chunk)
            if hello is not None:
                assert isinstance(hello, ClientHello)
                name = hello.server_name
                assert name is None or (
                    name.isascii() and name == name.lower() and len(name) <= 255
                )
                return hello
    except TlsHelloError:
        return "error"
    return None


def one_input(data: bytes) -> None:
    """Read ``data`` whole and split in two."""
    cut = data[-1] % (len(data) + 1) if data else 0
    assert _outcome([data]) == _outcome([data[:cut], data[cut:]])


if __name__ == "__main__":
    run("tls_hello", one_input)
