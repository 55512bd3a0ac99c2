"""What the proxy sends upstream for a plain-HTTP request: the one header rewrite (sans-IO).

The proxy judges a request by its method, its target and its body framing, then forwards
it. :func:`rewrite_request` is the only code that decides what the forwarded head holds,
so the origin reads the request that was judged and no other:

====================================  ==================================================
in the request                        sent upstream
====================================  ==================================================
``GET http://host:port/p?q HTTP/1.1`` ``GET /p?q HTTP/1.1`` (origin form, the judged path)
``Host`` (any number, any value)      one ``Host`` naming the judged authority: the
                                      normalized host (lowercase, no trailing dot), the
                                      port unless 80 (RFC 9112 section 3.2.2)
``Content-Length`` (one, repeated or  one ``Content-Length: N``, the length the proxy
a list of one value, leading zeros)   counts, in canonical decimal
``Transfer-Encoding: chunked`` (any   one ``Transfer-Encoding: chunked``
case)
:data:`HOP_BY_HOP` (``Connection``,   removed (RFC 9110 section 7.6.1); the proxy speaks
``Keep-Alive``, ``Proxy-*``, ``TE``,  for itself on its own connection, and the origin
``Upgrade``, ``HTTP2-Settings``)      never switches protocols (no h2c) behind it
a field ``Connection`` lists          removed, unless it is protected (below)
every other field                     as sent, in order
(added)                               ``Connection: close``, last
====================================  ==================================================

Refused with :class:`~glove.egress.errors.HttpHeadError` (400; 501 for a transfer coding
other than chunked), because honouring it would make what the origin reads differ from
what the proxy judged:

* a ``Connection`` option naming a field in :data:`~glove.egress._http.PROTECTED`
  (``Content-Length``, ``Transfer-Encoding``, ``Host``), in any case or spelled with ``_``:
  removing ``Content-Length`` while forwarding the body it counted would turn that body
  into a second request nobody judged; a ``Connection`` option that is not a token;
* a field whose name is a look-alike of a protected one (``Content_Length``,
  ``transfer_encoding``): servers that map ``_`` to ``-`` would read it as the real one;
* anything :func:`~glove.egress._http.body_framing` refuses (both framings, disagreeing
  lengths, another coding, chunked on HTTP/1.0).

The hop-by-hop fields the proxy removes unconditionally (``Proxy-Authorization``,
``Upgrade``, ...) may be listed in ``Connection``: they are removed either way. The proxy
reads no other field to decide anything.
"""

from __future__ import annotations

from typing import Final

import msgspec

from glove.egress._http import (
    HOP_BY_HOP,
    PROTECTED,
    Framing,
    RequestHead,
    Target,
    body_framing,
    is_token,
    lookalike,
)
from glove.egress._rules import normalize_host
from glove.egress.errors import HttpHeadError, RuleError

#: The line the proxy ends every forwarded head with: one request per connection.
CONNECTION_CLOSE: Final = "Connection: close"


class UpstreamRequest(msgspec.Struct, frozen=True):
    """What goes upstream for one plain-HTTP request.

    Attributes:
        head: the rewritten head, CRLF CRLF included.
        framing: how its body is delimited (the proxy forwards exactly that much).
    """

    head: bytes
    framing: Framing


def rewrite_request(head: RequestHead, target: Target) -> UpstreamRequest:
    """The head to send upstream for ``head``, going to ``target`` (see the module table).

    Raises:
        HttpHeadError: ``Connection`` names a protected field or is not a token list, a
            field name is a look-alike of a protected one, the framing is refused, or the
            target's host is not a host name.
    """
    options = _connection_options(head)
    for name, _ in head.headers:
        if lookalike(name) in PROTECTED and name.lower() not in PROTECTED:
            raise HttpHeadError(f"the {name!r} header reads as a framing or routing header")
    framing = body_framing(head)
    drop = HOP_BY_HOP | PROTECTED | options
    lines = [f"{head.method} {target.path} {head.version}", f"Host: {_authority(target)}"]
    lines.extend(f"{name}: {value}" for name, value in head.headers if name.lower() not in drop)
    kind, length = framing
    if kind == "length":
        lines.append(f"Content-Length: {length}")
    elif kind == "chunked":
        lines.append("Transfer-Encoding: chunked")
    lines.append(CONNECTION_CLOSE)
    return UpstreamRequest(("\r\n".join(lines) + "\r\n\r\n").encode("latin-1"), framing)


def forward_head(head: RequestHead, target: Target) -> bytes:
    """The head :func:`rewrite_request` sends upstream (kept for callers of the old name).

    Raises:
        HttpHeadError: as :func:`rewrite_request`.
    """
    return rewrite_request(head, target).head


def _connection_options(head: RequestHead) -> frozenset[str]:
    """The lowercase options every ``Connection`` field lists.

    Raises:
        HttpHeadError: an option is not a token, or names a protected field.
    """
    options: set[str] = set()
    for value in head.values("connection"):
        for item in value.split(","):
            option = item.strip(" \t")
            if not option:
                continue  # empty list elements are allowed (RFC 9110 section 5.6.1)
            if not is_token(option):
                raise HttpHeadError("a Connection option is not a token")
            if lookalike(option) in PROTECTED:
                raise HttpHeadError(
                    "the Connection header names a header the request's framing or routing "
                    "depends on"
                )
            options.add(option.lower())
    return frozenset(options)


def _authority(target: Target) -> str:
    """The judged authority: the host as the rules normalized it, the port unless 80.

    Raises:
        HttpHeadError: the host is neither an IP literal nor a host name.
    """
    try:
        host = normalize_host(target.host)
    except RuleError as exc:
        raise HttpHeadError("malformed host name") from exc
    shown = f"[{host}]" if ":" in host else host
    return shown if target.port == 80 else f"{shown}:{target.port}"
