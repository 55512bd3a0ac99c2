"""Approved egress: an authenticated, audited proxy reached through an inherited descriptor.

A sandbox in ``proxy`` network mode keeps its route-less network namespace. Inside it, one
helper process (:mod:`glove.egress.helper`, ``glove-egress``) listens on loopback (HTTP
proxy 127.0.0.1:3128, SOCKS5 127.0.0.1:1080, DNS 127.0.0.1:53) and hands every connection
to the host over an inherited Unix socket with ``SCM_RIGHTS``. On the host the
:class:`EgressProxy` actor decides each one by the :class:`RuleSet` (deny beats allow),
resolves names itself, once, refuses names that lead to non-public addresses nobody listed,
writes an audit record and only then connects to exactly the address it checked.

Pure cores (no asyncio, os or socket): :mod:`._rules`, :mod:`._addresses`, :mod:`._http`,
:mod:`._rewrite`, :mod:`._socks5`, :mod:`._tls`, :mod:`._dns`, :mod:`._check`. See
``docs/egress.md``.
"""

from glove.egress._addresses import address_class, is_public
from glove.egress._admission import AuditSink, DeniedDestination, EgressStats, ProxyLimits
from glove.egress._channel import INET_FAMILIES, UNIX_FAMILIES, ChannelReceiver, Kind
from glove.egress._check import (
    Explanation,
    NetworkPolicy,
    NetworkReport,
    Reachable,
    SandboxSocket,
    explain,
    narrow,
    network_report,
    policy_from_toml,
    sandbox_sockets,
)
from glove.egress._dns import (
    DnsAnswer,
    DnsFrameReader,
    DnsQuery,
    encode_answer,
    encode_error,
    encode_query,
    parse_answer,
    parse_query,
)
from glove.egress._guest import (
    GUEST_CHANNEL_FD,
    GUEST_DIR,
    RESOLV_TARGET,
    EgressGuest,
    EgressParts,
    prepare_egress,
    prepare_guest,
    resolv_conf,
    write_guest_files,
    write_helper,
)
from glove.egress._http import (
    MAX_HEAD_BYTES,
    ChunkedFramer,
    RequestHead,
    RequestHeadParser,
    Target,
    body_framing,
    error_response,
    parse_head,
    proxy_target,
)
from glove.egress._proxy import EgressProxy, GetStats
from glove.egress._resolve import Resolver, StaticResolver, SystemResolver
from glove.egress._rewrite import UpstreamRequest, forward_head, rewrite_request
from glove.egress._rules import (
    DEFAULT_PORTS,
    READ_ONLY_METHODS,
    AddressCheck,
    Decision,
    Rule,
    RuleSet,
    normalize_host,
    parse_rule,
)
from glove.egress._socks5 import Socks5Greeting, Socks5Parser, Socks5Request
from glove.egress._tls import ClientHello, ClientHelloParser
from glove.egress.errors import (
    ChannelError,
    ConnectFailed,
    DnsMessageError,
    EgressError,
    EgressProtocolError,
    HttpHeadError,
    ResolveFailed,
    RuleError,
    Socks5Error,
    TlsHelloError,
    UpstreamError,
)
from glove.egress.helper import proxy_environment

__all__ = [
    "DEFAULT_PORTS",
    "GUEST_CHANNEL_FD",
    "GUEST_DIR",
    "INET_FAMILIES",
    "MAX_HEAD_BYTES",
    "READ_ONLY_METHODS",
    "RESOLV_TARGET",
    "UNIX_FAMILIES",
    "AddressCheck",
    "AuditSink",
    "ChannelError",
    "ChannelReceiver",
    "ChunkedFramer",
    "ClientHello",
    "ClientHelloParser",
    "ConnectFailed",
    "Decision",
    "DeniedDestination",
    "DnsAnswer",
    "DnsFrameReader",
    "DnsMessageError",
    "DnsQuery",
    "EgressError",
    "EgressGuest",
    "EgressParts",
    "EgressProtocolError",
    "EgressProxy",
    "EgressStats",
    "Explanation",
    "GetStats",
    "HttpHeadError",
    "Kind",
    "NetworkPolicy",
    "NetworkReport",
    "ProxyLimits",
    "Reachable",
    "RequestHead",
    "RequestHeadParser",
    "ResolveFailed",
    "Resolver",
    "Rule",
    "RuleError",
    "RuleSet",
    "SandboxSocket",
    "Socks5Error",
    "Socks5Greeting",
    "Socks5Parser",
    "Socks5Request",
    "StaticResolver",
    "SystemResolver",
    "Target",
    "TlsHelloError",
    "UpstreamError",
    "UpstreamRequest",
    "address_class",
    "body_framing",
    "encode_answer",
    "encode_error",
    "encode_query",
    "error_response",
    "explain",
    "forward_head",
    "is_public",
    "narrow",
    "network_report",
    "normalize_host",
    "parse_answer",
    "parse_head",
    "parse_query",
    "parse_rule",
    "policy_from_toml",
    "prepare_egress",
    "prepare_guest",
    "proxy_environment",
    "proxy_target",
    "resolv_conf",
    "rewrite_request",
    "sandbox_sockets",
    "write_guest_files",
    "write_helper",
]
