"""Allow and deny rules: parsing, matching and the decision (sans-IO).

A rule is written ``HOST[:PORTS][+OPTION...]`` on the command line, in a profile and in a
plan (one syntax everywhere)::

    github.com                 github.com itself, ports 80 and 443
    *.githubusercontent.com    every subdomain, never githubusercontent.com itself
    pypi.org:443+sni           port 443 only; the TLS SNI must equal the CONNECT host
    deb.debian.org+read-only   plain HTTP, GET/HEAD/OPTIONS without a body only (no tunnels)
    127.0.0.1:8080             an IP literal: the operator means this very address
    [::1]:8080, localhost:5432 likewise (``localhost`` is 127.0.0.1 and ::1)
    registry.internal:80,443,8000-8010

Semantics (DESIGN.md and issue 12; decision 0016 for the choices made here):

* **Deny beats allow.** Any matching deny rule refuses, whatever allows it.
* ``*.x.com`` matches subdomains at any depth and never ``x.com``; ``x.com`` matches only
  itself. ``*``, ``*.com`` (a wildcard over one label) and single-label names other than
  ``localhost`` (``com``, ``intranet``) are refused when the rules are loaded: an allowlist
  that silently allows everything, or nothing the operator meant, is an error now, not a
  surprise later. A name's last label may not be all digits (``127.1`` is an address to
  ``inet_aton``), and non-ASCII names are stored in their IDNA (punycode) form.
* **Ports** default to 80 and 443 for an allow rule; a **deny** rule without ports covers
  every port (deny is never narrower than what was written).
* Among several allow rules the most specific decides (an exact name over a wildcard, a
  longer wildcard over a shorter one, then the first listed); its options apply.
* An IP literal request is matched only by IP-literal rules, a name only by name rules.
* **Addresses**: a name the proxy resolves may lead only to public addresses, or to an
  address that an allow rule lists itself (an IP literal, or ``localhost`` for 127.0.0.1 and
  ::1) on that port; a deny rule for an address refuses it however it was reached.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from typing import Final, Literal

import msgspec

from glove.egress._addresses import IPAddress, address_class, canonical, parse_address
from glove.egress.errors import RuleError

#: Ports an allow rule covers when it lists none.
DEFAULT_PORTS: Final = (80, 443)
#: Methods a ``read-only`` rule lets through on plain HTTP.
READ_ONLY_METHODS: Final = frozenset({"GET", "HEAD", "OPTIONS"})
#: Longest host name (RFC 1035), without the trailing dot.
MAX_NAME_BYTES: Final = 253
#: Longest label.
MAX_LABEL_BYTES: Final = 63
#: Longest rule text accepted.
MAX_RULE_BYTES: Final = 512
#: Most rules of one kind (allow or deny) in one set.
MAX_RULES: Final = 4096
#: Most port items (``N`` or ``N-M``) in one rule.
MAX_PORT_ITEMS: Final = 64
LOCALHOST: Final = "localhost"
#: What ``localhost`` means, in the order it is tried (RFC 6761: never sent to DNS).
LOCALHOST_ADDRESSES: Final = (parse_address("127.0.0.1"), parse_address("::1"))
OPTIONS: Final = ("sni", "read-only")

_LABEL = re.compile(r"[a-z0-9_](?:[a-z0-9_-]{0,61}[a-z0-9_])?\Z")

Action = Literal["allow", "deny"]
RuleKind = Literal["name", "wildcard", "address", "localhost"]
PortRange = tuple[int, int]


class Rule(msgspec.Struct, frozen=True):
    """One loaded rule.

    Attributes:
        action: ``allow`` or ``deny``.
        kind: ``name`` (exact), ``wildcard`` (``*.suffix``), ``address`` or ``localhost``.
        pattern: the normalized host: a name, the wildcard's suffix (without ``*.``), or
            the canonical address text.
        ports: inclusive ranges, or None for the default (allow: 80/443; deny: all).
        sni: the TLS SNI of a tunnel must equal the requested host.
        read_only: plain HTTP only, with a method in :data:`READ_ONLY_METHODS` and no body.
        text: the rule as shown in replies, audit records and ``glove network check``.
    """

    action: Action
    kind: RuleKind
    pattern: str
    ports: tuple[PortRange, ...] | None
    sni: bool = False
    read_only: bool = False
    text: str = ""
    address: IPAddress | None = None
    """The parsed address of an ``address`` rule (canonical), kept to match without parsing."""

    def covers_port(self, port: int) -> bool:
        """True when ``port`` is one this rule applies to."""
        if self.ports is None:
            return self.action == "deny" or port in DEFAULT_PORTS
        return any(low <= port <= high for low, high in self.ports)

    def matches_host(self, host: str) -> bool:
        """True when the normalized request ``host`` is one this rule names."""
        if self.kind == "wildcard":
            return host.endswith("." + self.pattern)
        return host == self.pattern

    def lists_address(self, address: IPAddress) -> bool:
        """True when this rule names ``address`` itself (an IP literal or ``localhost``)."""
        if self.kind == "address":
            return self.address is not None and canonical(address) == self.address
        if self.kind == "localhost":
            real = canonical(address)
            return any(real == a for a in LOCALHOST_ADDRESSES if a is not None)
        return False

    @property
    def specificity(self) -> int:
        """Higher is more specific: exact hosts first, then longer wildcard suffixes."""
        if self.kind == "wildcard":
            return self.pattern.count(".") + 1
        return MAX_NAME_BYTES + 1


class Decision(msgspec.Struct, frozen=True):
    """What the rules decide about one destination.

    Attributes:
        allowed: the destination may be reached (subject to the address check for names).
        rule: the rule that decided, or None when no rule matched (or the host is malformed).
        reason: a short fixed text for the reply and the audit record; never echoes more
            of the request than the host and port.
    """

    allowed: bool
    rule: Rule | None
    reason: str

    @property
    def rule_text(self) -> str | None:
        """The deciding rule as written (for replies and audit), or None."""
        return self.rule.text if self.rule is not None else None


class AddressCheck(msgspec.Struct, frozen=True):
    """The resolved addresses a connection may use, in the resolver's order.

    Attributes:
        allowed: addresses that passed, in order; empty means the connection is refused.
        refused: the reason the first refused address was refused, or None.
        rule: the rule that refused it (a deny for an address), if a rule did.
    """

    allowed: tuple[IPAddress, ...]
    refused: str | None
    rule: Rule | None


def normalize_name(text: str) -> str:
    """The lowercase, dot-stripped ASCII form of host name ``text``.

    Raises:
        RuleError: not a host name this proxy will ever look up.
    """
    name = text[:-1] if text.endswith(".") else text
    if not name or len(name) > MAX_NAME_BYTES * 4:
        raise RuleError("a host name must be 1 to 253 characters")
    if not name.isascii():
        try:
            name = name.encode("idna").decode("ascii")
        except UnicodeError as exc:
            raise RuleError(f"{text!r} is not a valid international domain name") from exc
    name = name.lower()
    if len(name) > MAX_NAME_BYTES:
        raise RuleError("a host name must be 1 to 253 characters")
    labels = name.split(".")
    for label in labels:
        if not _LABEL.match(label):
            raise RuleError(f"{text!r} is not a valid host name")
    if labels[-1].isdigit():
        raise RuleError(f"{text!r} ends in a numeric label (an address in disguise?)")
    return name


def normalize_host(text: str) -> str:
    """The canonical form of a requested host: an address's text, or a normalized name.

    Raises:
        RuleError: neither a strict IP literal nor a valid host name.
    """
    inner = text[1:-1] if text.startswith("[") and text.endswith("]") else text
    address = parse_address(inner)
    if address is not None:
        return str(address)
    if inner is not text:
        raise RuleError(f"{text!r} is not an IPv6 literal")
    return normalize_name(text)


def _decimal(text: str) -> int:
    """``text`` as a decimal number of at most five ASCII digits, else -1."""
    if not text or len(text) > 5 or not text.isascii() or not text.isdigit():
        return -1
    return int(text, 10)


def _parse_ports(text: str, rule: str) -> tuple[PortRange, ...]:
    items = text.split(",")
    if len(items) > MAX_PORT_ITEMS:
        raise RuleError(f"rule {rule!r}: more than {MAX_PORT_ITEMS} port items")
    ranges: list[PortRange] = []
    for item in items:
        low_text, dash, high_text = item.partition("-")
        low = _decimal(low_text)
        high = _decimal(high_text) if dash else low
        if not (1 <= low <= high <= 65535):
            raise RuleError(f"rule {rule!r}: bad port {item!r} (1-65535, or a range N-M)")
        ranges.append((low, high))
    return tuple(ranges)


def _split_host_ports(body: str, rule: str) -> tuple[str, str | None]:
    if body.startswith("["):
        close = body.find("]")
        if close < 0:
            raise RuleError(f"rule {rule!r}: unclosed '[' in an IPv6 literal")
        host, rest = body[1:close], body[close + 1 :]
        if rest and not rest.startswith(":"):
            raise RuleError(f"rule {rule!r}: expected ':PORT' after ']'")
        if parse_address(host) is None:
            raise RuleError(f"rule {rule!r}: {host!r} is not an IPv6 address")
        return host, (rest[1:] if rest else None)
    if body.count(":") >= 2:  # a bare IPv6 literal: no port without brackets
        return body, None
    host, colon, ports = body.partition(":")
    return host, (ports if colon else None)


def _host_pattern(host_text: str, rule: str) -> tuple[str, RuleKind]:
    """The normalized pattern and kind of a rule's host part.

    Raises:
        RuleError: ``*``, a misplaced ``*``, a wildcard over a TLD, a single label.
    """
    if host_text == "*" or (host_text.startswith("*") and not host_text.startswith("*.")):
        raise RuleError(f"rule {rule!r}: '*' alone matches everything; name the hosts")
    if host_text.startswith("*."):
        if "*" in host_text[2:]:
            raise RuleError(f"rule {rule!r}: '*' may only be the whole first label")
        pattern = normalize_name(host_text[2:])
        if "." not in pattern:
            raise RuleError(f"rule {rule!r}: '*.{pattern}' covers a whole top-level domain")
        return pattern, "wildcard"
    if "*" in host_text:
        raise RuleError(f"rule {rule!r}: '*' may only be the whole first label")
    address = parse_address(host_text)
    if address is not None:
        return str(address), "address"
    try:
        pattern = normalize_name(host_text)
    except RuleError as exc:
        raise RuleError(f"rule {rule!r}: {exc}") from exc
    if pattern == LOCALHOST:
        return pattern, "localhost"
    if "." not in pattern:
        raise RuleError(
            f"rule {rule!r}: {pattern!r} is a single label (a top-level domain?); "
            "name a full host, or list its address"
        )
    return pattern, "name"


def parse_rule(text: str, action: Action) -> Rule:
    """Load one rule written ``HOST[:PORTS][+OPTION...]``.

    Raises:
        RuleError: bad syntax, ``*``, a bare TLD or single-label name, a bad port or option.
    """
    if len(text) > MAX_RULE_BYTES:
        raise RuleError(f"a rule is at most {MAX_RULE_BYTES} characters")
    body, *options = text.strip().split("+")
    unknown = [opt for opt in options if opt not in OPTIONS]
    if unknown:
        raise RuleError(f"rule {text!r}: unknown option {unknown[0]!r} (options: sni, read-only)")
    if action == "deny" and options:
        raise RuleError(f"rule {text!r}: options apply to allow rules only")
    host_text, port_text = _split_host_ports(body, text)
    ports = _parse_ports(port_text, text) if port_text is not None else None
    pattern, kind = _host_pattern(host_text, text)
    shown = f"[{pattern}]" if kind == "address" and ":" in pattern else pattern
    shown = f"*.{shown}" if kind == "wildcard" else shown
    if port_text is not None:
        shown += ":" + port_text
    shown += "".join(f"+{opt}" for opt in options)
    parsed = parse_address(pattern) if kind == "address" else None
    return Rule(
        action=action,
        kind=kind,
        pattern=pattern,
        ports=ports,
        sni="sni" in options,
        read_only="read-only" in options,
        text=f"{action} {shown}",
        address=canonical(parsed) if parsed is not None else None,
    )


def _names(rule: Rule, name: str, address: IPAddress | None, port: int) -> bool:
    """Whether ``rule`` covers the request: addresses by listing, names by pattern."""
    if not rule.covers_port(port):
        return False
    if address is not None:
        return rule.lists_address(address)
    return rule.kind != "address" and rule.matches_host(name)


def _most_specific(rules: Iterable[Rule]) -> Rule | None:
    best: Rule | None = None
    for rule in rules:
        if best is None or rule.specificity > best.specificity:
            best = rule
    return best


class RuleSet(msgspec.Struct, frozen=True):
    """A loaded allowlist and denylist. An empty allowlist allows nothing.

    Build it with :meth:`load`; decide with :meth:`decide` then :meth:`check_addresses`.
    """

    allow: tuple[Rule, ...] = ()
    deny: tuple[Rule, ...] = ()

    @classmethod
    def load(cls, allow: Iterable[str] = (), deny: Iterable[str] = ()) -> RuleSet:
        """Parse every rule; the first bad one fails the whole load.

        Raises:
            RuleError: a rule is malformed, too broad, or there are too many.
        """
        allowed = tuple(parse_rule(text, "allow") for text in allow)
        denied = tuple(parse_rule(text, "deny") for text in deny)
        if len(allowed) > MAX_RULES or len(denied) > MAX_RULES:
            raise RuleError(f"at most {MAX_RULES} allow and {MAX_RULES} deny rules")
        return cls(allow=allowed, deny=denied)

    def decide(  # noqa: PLR0911 - one return per verdict, in precedence order
        self,
        host: str,
        port: int,
        *,
        method: str | None = None,
        tunnel: bool = False,
        body: bool = False,
    ) -> Decision:
        """Decide about ``host:port`` before any lookup.

        ``tunnel`` is true for CONNECT and SOCKS5 (bytes the proxy cannot read); ``method``
        is the plain-HTTP method; ``body`` says the request carries content (a read-only
        rule refuses it: an origin that ignores a GET's body would read it as a second
        request). Malformed hosts are refused, never raised.
        """
        try:
            name = normalize_host(host)
        except RuleError:
            return Decision(False, None, "malformed host name")
        if not 1 <= port <= 65535:
            return Decision(False, None, "bad port")
        address = parse_address(name)
        denied = _most_specific(r for r in self.deny if _names(r, name, address, port))
        if denied is not None:
            return Decision(False, denied, f"denied by rule {denied.text!r}")
        rule = _most_specific(r for r in self.allow if _names(r, name, address, port))
        if rule is None:
            return Decision(False, None, "no rule allows this host and port")
        if rule.read_only and tunnel:
            return Decision(False, rule, f"rule {rule.text!r} is read-only: tunnels are refused")
        if rule.read_only and method not in READ_ONLY_METHODS:
            return Decision(False, rule, f"rule {rule.text!r} is read-only: method refused")
        if rule.read_only and body:
            return Decision(False, rule, f"rule {rule.text!r} is read-only: a body is refused")
        return Decision(True, rule, f"allowed by rule {rule.text!r}")

    def decide_name(self, name: str) -> Decision:
        """Whether the DNS stub may answer for ``name``: some allow rule names it on some
        port, and no deny rule refuses it on every port.
        """
        try:
            host = normalize_name(name)
        except RuleError:
            return Decision(False, None, "malformed host name")
        denied = _most_specific(
            r for r in self.deny if r.ports is None and r.kind != "address" and r.matches_host(host)
        )
        if denied is not None:
            return Decision(False, denied, f"denied by rule {denied.text!r}")
        rule = _most_specific(r for r in self.allow if r.kind != "address" and r.matches_host(host))
        if rule is None:
            return Decision(False, None, "no rule names this host")
        return Decision(True, rule, f"named by rule {rule.text!r}")

    def check_addresses(self, port: int | None, addresses: Sequence[IPAddress]) -> AddressCheck:
        """Keep the resolved ``addresses`` a connection to ``port`` may use.

        An address matched by a deny rule is refused; a non-public one is refused unless an
        allow rule lists it on ``port``. ``port`` None (a DNS answer) means any port.
        """
        allowed: list[IPAddress] = []
        refused: str | None = None
        refusing: Rule | None = None

        def on_port(rule: Rule) -> bool:
            return port is None or rule.covers_port(port)

        for address in addresses:
            deny = next((r for r in self.deny if on_port(r) and r.lists_address(address)), None)
            if deny is not None:
                if refused is None:
                    refused, refusing = f"the address is denied by rule {deny.text!r}", deny
                continue
            kind = address_class(address)
            listed = any(on_port(r) and r.lists_address(address) for r in self.allow)
            if kind != "public" and not listed:
                if refused is None:
                    refused = f"the name resolves to a {kind} address that no rule lists"
                continue
            allowed.append(address)
        return AddressCheck(tuple(allowed), refused, refusing)
