"""``glove network check`` as a library: what a sandbox could reach, and which rule decides.

Pure functions over a :class:`~glove.egress.RuleSet` (and, through
:func:`policy_from_toml`, the ``[network]`` table of a profile): :func:`network_report`
lists every host pattern and port the rules open, every socket the sandbox itself sees
(the helper's listeners), and what is refused outright; :func:`explain` answers
``HOST[:PORT]`` with the deciding rule. :func:`narrow` applies a plan's allowlist on top of
the owner's local one and refuses a plan that would widen it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final, Literal

import msgspec

from glove.egress._addresses import parse_address
from glove.egress._listeners import DNS_ADDRESS, HTTP_PROXY_ADDRESS, MCP_NAME, SOCKS_ADDRESS
from glove.egress._rules import DEFAULT_PORTS, Decision, PortRange, Rule, RuleSet, parse_rule
from glove.egress.errors import RuleError

NetworkMode = Literal["none", "proxy"]
#: Largest profile or plan ``[network]`` document accepted.
MAX_POLICY_BYTES: Final = 256 * 1024


class NetworkPolicy(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """The ``[network]`` table of a profile, or a plan's ``"network"`` object.

    Attributes:
        mode: ``none`` (loopback only) or ``proxy`` (the audited proxy, these rules).
        allow: rules written ``HOST[:PORTS][+OPTION...]``.
        deny: rules written ``HOST[:PORTS]``.
    """

    mode: NetworkMode = "none"
    allow: list[str] = msgspec.field(default_factory=list)
    deny: list[str] = msgspec.field(default_factory=list)

    def rules(self) -> RuleSet:
        """The loaded rules (``none`` mode loads none: nothing is reachable).

        Raises:
            RuleError: a rule is malformed or too broad.
        """
        if self.mode == "none":
            return RuleSet()
        return RuleSet.load(self.allow, self.deny)


class _ProfileNetwork(msgspec.Struct, frozen=True):
    network: NetworkPolicy = msgspec.field(default_factory=NetworkPolicy)


def policy_from_toml(data: bytes, origin: str) -> NetworkPolicy:
    """The ``[network]`` table of a profile file (other tables are ignored here).

    Raises:
        RuleError: the TOML is malformed, the table has unknown keys, or a rule is bad.
    """
    if len(data) > MAX_POLICY_BYTES:
        raise RuleError(f"{origin} is larger than {MAX_POLICY_BYTES} bytes")
    try:
        policy = msgspec.toml.decode(data, type=_ProfileNetwork).network
    except msgspec.DecodeError as exc:
        raise RuleError(f"{origin}: {exc}") from exc
    policy.rules()  # every rule must load
    return policy


class Reachable(msgspec.Struct, frozen=True):
    """Hosts and ports one allow rule opens (less what deny rules take back)."""

    rule: str
    hosts: str
    ports: str
    checks: list[str]
    denied_within: list[str]


class SandboxSocket(msgspec.Struct, frozen=True):
    """A socket inside the sandbox's own network namespace (the helper's listeners)."""

    address: str
    transport: str
    serves: str


class NetworkReport(msgspec.Struct, frozen=True):
    """Everything a sandbox with these rules could reach.

    ``unix_gate`` names the mechanism that keeps a sandbox's ``connect()`` from host Unix
    sockets (None: this host has none, see ``glove doctor``); ``notes`` say what remains.
    """

    mode: NetworkMode
    reachable: list[Reachable]
    denied: list[str]
    sockets: list[SandboxSocket]
    notes: list[str]
    unix_gate: str | None = None


class Explanation(msgspec.Struct, frozen=True):
    """Which rule decides one ``HOST:PORT`` (before the lookup: names get an address check)."""

    host: str
    port: int
    allowed: bool
    rule: str | None
    reason: str
    address_check: bool


def _ports_text(rule: Rule) -> str:
    if rule.ports is None:
        return "all" if rule.action == "deny" else ",".join(map(str, DEFAULT_PORTS))
    return ",".join(str(lo) if lo == hi else f"{lo}-{hi}" for lo, hi in rule.ports)


def _hosts_text(rule: Rule) -> str:
    if rule.kind == "wildcard":
        return f"every subdomain of {rule.pattern} (not {rule.pattern} itself)"
    if rule.kind == "localhost":
        return "the host's loopback via localhost (127.0.0.1, ::1)"
    if rule.kind == "address":
        return f"the address {rule.pattern}"
    return f"{rule.pattern} only"


def _overlaps(deny: Rule, allow: Rule) -> bool:
    """Whether ``deny`` takes back some of what ``allow`` opens (ports aside)."""
    if allow.kind in ("address", "localhost") or deny.kind in ("address", "localhost"):
        return allow.kind == deny.kind and allow.pattern == deny.pattern
    if allow.kind == "name":
        return deny.matches_host(allow.pattern)
    inside = deny.pattern == allow.pattern or deny.pattern.endswith("." + allow.pattern)
    broader = deny.kind == "wildcard" and allow.pattern.endswith("." + deny.pattern)
    return inside or broader


def sandbox_sockets(*, mcp: bool = False) -> list[SandboxSocket]:
    """The helper's listeners inside the sandbox (and ``@glove-mcp`` under ``glove run``)."""
    http, socks, dns = HTTP_PROXY_ADDRESS, SOCKS_ADDRESS, DNS_ADDRESS
    sockets = [
        SandboxSocket(f"{http[0]}:{http[1]}", "tcp", "HTTP proxy (forward and CONNECT)"),
        SandboxSocket(f"{socks[0]}:{socks[1]}", "tcp", "SOCKS5 proxy (CONNECT)"),
        SandboxSocket(f"{dns[0]}:{dns[1]}", "udp", "DNS stub (A/AAAA for allowed names)"),
        SandboxSocket(f"{dns[0]}:{dns[1]}", "tcp", "DNS stub (A/AAAA for allowed names)"),
    ]
    if mcp:
        sockets.append(SandboxSocket(f"@{MCP_NAME}", "unix-abstract", "mediated MCP server"))
    return sockets


def local_channel_notes(unix_gate: str | None) -> list[str]:
    """What a sandbox can still reach outside the network, whatever its mode (decision 0034).

    ``unix_gate`` is the Unix socket gate's mechanism on this host, or None.
    """
    if unix_gate is not None:
        own = "/tmp and /dev/shm"  # noqa: S108 - the sandbox's own, named in words
        unix = (
            f"Unix sockets ({unix_gate}): connect() reaches only sockets on the sandbox's own "
            f"{own}, abstract names in its own network namespace and the socket "
            "pairs it was given; a socket in the workspace, an exposure or any bind is "
            "refused (EACCES), even one a sandboxed process made; datagram Unix sockets are "
            "refused"
        )
    else:
        unix = (
            "Unix sockets: this host has no gate (glove doctor: unix_socket_gate): a host "
            "process listening on a socket inside the workspace, an exposure or a bind is "
            "reachable; gloved refuses an exposure holding a socket, glove exec does not check "
            "its binds; datagram Unix sockets are refused"
        )
    return [
        unix,
        (
            "FIFOs: a host process reading a FIFO inside a visible directory is reachable; "
            "gloved refuses an exposure holding one at glove init and at every launch, not "
            "one made after the launch, and glove exec does not check its binds"
        ),
        "files: a writable directory shared with the host is a channel to whatever reads it",
    ]


def network_report(
    policy: NetworkPolicy, *, mcp: bool = False, unix_gate: str | None = None
) -> NetworkReport:
    """List what ``policy`` lets a sandbox reach; ``unix_gate`` is this host's Unix socket
    gate (:func:`glove.container.probe_unix_gate`), None when it has none.

    Raises:
        RuleError: a rule is malformed or too broad.
    """
    rules = policy.rules()
    local = local_channel_notes(unix_gate)
    if policy.mode == "none":
        sockets = sandbox_sockets(mcp=True)[-1:] if mcp else []
        notes = [
            "mode none: no network but the sandbox's own loopback; no address outside is reachable",
            *local,
        ]
        return NetworkReport("none", [], [], sockets, notes, unix_gate)
    reachable = [
        Reachable(
            rule=rule.text,
            hosts=_hosts_text(rule),
            ports=_ports_text(rule),
            checks=[c for c, on in (("sni", rule.sni), ("read-only", rule.read_only)) if on],
            denied_within=[d.text for d in rules.deny if _overlaps(d, rule)],
        )
        for rule in rules.allow
    ]
    notes = [
        "deny rules win over allow rules",
        (
            "a name that resolves to a loopback, private, link-local or unique-local address "
            "is refused unless an allow rule lists that address"
        ),
        "DNS inside the sandbox answers only names an allow rule names; others get NXDOMAIN",
        "no UDP leaves the sandbox; raw and other socket families are refused by seccomp",
        *local,
    ]
    if not rules.allow:
        notes.insert(0, "the allowlist is empty: no host is reachable through the proxy")
    return NetworkReport(
        "proxy",
        reachable,
        [d.text for d in rules.deny],
        sandbox_sockets(mcp=mcp),
        notes,
        unix_gate,
    )


def explain(policy: NetworkPolicy, query: str) -> list[Explanation]:
    """Which rule decides ``HOST[:PORT]``; without a port, ports 80 and 443 are both shown.

    Raises:
        RuleError: the query is not ``HOST[:PORT]``.
    """
    probe = parse_rule(query, "allow")  # the same HOST[:PORT] syntax as a rule
    if probe.sni or probe.read_only or (probe.ports and len(probe.ports) > 1):
        raise RuleError(f"{query!r}: give one HOST[:PORT], without options")
    if probe.kind == "wildcard":
        raise RuleError(f"{query!r}: give a host, not a pattern")
    ports: Sequence[int] = DEFAULT_PORTS if probe.ports is None else (probe.ports[0][0],)
    if probe.ports is not None and probe.ports[0][0] != probe.ports[0][1]:
        raise RuleError(f"{query!r}: give one port, not a range")
    rules = policy.rules()
    explanations = []
    for port in ports:
        if policy.mode == "none":
            decision = Decision(False, None, "network mode none: nothing is reachable")
        else:
            decision = rules.decide(probe.pattern, port, method="GET")
        explanations.append(
            Explanation(
                host=probe.pattern,
                port=port,
                allowed=decision.allowed,
                rule=decision.rule_text,
                reason=decision.reason,
                address_check=decision.allowed and parse_address(probe.pattern) is None,
            )
        )
    return explanations


def _port_subset(inner: tuple[PortRange, ...] | None, outer: tuple[PortRange, ...] | None) -> bool:
    inner_ranges = inner if inner is not None else tuple((p, p) for p in DEFAULT_PORTS)
    outer_ranges = outer if outer is not None else tuple((p, p) for p in DEFAULT_PORTS)
    return all(
        any(lo <= i_lo and i_hi <= hi for lo, hi in outer_ranges) for i_lo, i_hi in inner_ranges
    )


def _covers(local: Rule, plan: Rule) -> bool:
    if not _port_subset(plan.ports, local.ports):
        return False
    if (local.sni and not plan.sni) or (local.read_only and not plan.read_only):
        return False  # a plan may add checks, never drop the owner's
    if local.kind == "wildcard":
        # *.x.com covers the names and wildcards below x.com, and *.x.com itself (the same
        # hosts), never x.com: a plan wildcard's pattern is its suffix, like the owner's.
        suffix = "." + local.pattern
        if plan.kind == "wildcard":
            return plan.pattern == local.pattern or plan.pattern.endswith(suffix)
        return plan.kind == "name" and plan.pattern.endswith(suffix)
    return local.kind == plan.kind and local.pattern == plan.pattern


def narrow(local: RuleSet, plan: RuleSet) -> RuleSet:
    """The rules a plan runs with: its allow rules, each inside the owner's, and both denylists.

    Raises:
        RuleError: a plan allow rule that no local allow rule covers (a plan can only narrow).
    """
    for rule in plan.allow:
        if not any(_covers(own, rule) for own in local.allow):
            raise RuleError(f"the plan's {rule.text!r} is not within the local allowlist")
    return RuleSet(allow=plan.allow, deny=local.deny + plan.deny)
