"""``--network proxy`` for ``glove exec`` and ``glove run``: the rules, the guest parts, the audit.

The effective network is the profile's ``[network]`` table with the flags on top
(:func:`network_choice`): ``--network`` replaces the mode, ``--allow``/``--deny`` add rules
(and imply ``proxy``). In ``proxy`` mode the sandbox's command is the egress helper
(``/opt/glove/glove-egress``, one PID) with the channel as descriptor 3, and the session tree
gets an ``egress`` child, :class:`glove.egress.EgressProxy`, on the channel's host end::

    glove exec --network proxy                 glove run --network proxy
    session-<id>  one_for_all, intensity 0     session-<id>  one_for_all, intensity 0
    ├─ audit      the egress audit log         ├─ mcp        audit, upstreams, kernel
    ├─ egress     h, s, d                      ├─ channel    attaches MCP connections
    └─ sandbox    glove-egress -- CMD          ├─ egress     h, s, d, and c -> channel
                                               └─ sandbox    glove-egress --mcp -- AGENT

Audit: under ``glove run`` every egress record goes to the run's own audit log (the
mediation's ``audit`` child) with the run id (``"run"``) beside the ``"session"``; under
``glove exec`` to ``--audit FILE`` or, by default, ``$XDG_STATE_HOME/glove/egress-audit.log``
(shared: concurrent runs take turns; each record names its session). The log is a
protected path: the sandbox never sees it. No record, no connection (fail closed).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Final, NamedTuple

from glove.container import DEFAULT_HOSTNAME, NetworkMode, Profile, Protected, SpecError
from glove.run._options import SandboxOptions
from glove.run._prepare import network_mode

if TYPE_CHECKING:
    from glove.egress import RuleSet

#: The default egress audit log of ``glove exec``, under ``$XDG_STATE_HOME/glove/``.
EXEC_AUDIT_NAME: Final = "egress-audit.log"
#: Rotated audit files protected beside a log (``audit.log.1`` .. ``.N``).
PROTECTED_ROTATIONS: Final = 16


class NetworkChoice(NamedTuple):
    """The network a run gets: the mode and, in ``proxy`` mode, the rule texts."""

    mode: NetworkMode
    allow: tuple[str, ...] = ()
    deny: tuple[str, ...] = ()
    #: The sandbox's host name (the proxy's DNS answers it with loopback).
    hostname: str = DEFAULT_HOSTNAME

    def rules(self) -> RuleSet:
        """The loaded rules.

        Raises:
            SpecError: a rule (from the profile) is malformed or too broad.
        """
        from glove.egress import RuleError, RuleSet

        try:
            return RuleSet.load(self.allow, self.deny)
        except RuleError as exc:
            raise SpecError(f"network rules: {exc}") from exc

    def described(self) -> dict[str, object]:
        """What ``--dry-run`` adds to its ``network`` object (the rules as loaded)."""
        if self.mode == "none":
            return {}
        rules = self.rules()
        return {
            "allow": [rule_text(rule.text) for rule in rules.allow],
            "deny": [rule_text(rule.text) for rule in rules.deny],
        }


def rule_text(text: str) -> str:
    """A loaded rule's text without its action word (``allow pypi.org:443`` -> ``pypi.org:443``)."""
    return text.split(" ", 1)[-1]


def network_choice(opts: SandboxOptions, profile: Profile) -> NetworkChoice:
    """The profile's ``[network]`` with the flags on top (the module docstring says how)."""
    if network_mode(opts, profile) == "none":
        return NetworkChoice("none", hostname=profile.hostname)
    section = profile.network
    return NetworkChoice(
        "proxy", (*section.allow, *opts.allow), (*section.deny, *opts.deny), profile.hostname
    )


def exec_audit_path(opts: SandboxOptions, cwd: str, environ: Mapping[str, str]) -> str:
    """The egress audit log of ``glove exec``: ``--audit FILE``, or the default one.

    The default's directory (``$XDG_STATE_HOME/glove``) is created owner-only if missing.

    Raises:
        SpecError: the state directory is unsafe or cannot be created.
    """
    if opts.audit is not None:
        return os.path.normpath(Path(cwd, opts.audit))
    from glove.config import UnsafePath, ensure_private_dir, glove_paths

    state = glove_paths(environ).state_dir
    try:
        ensure_private_dir(state)
    except (UnsafePath, OSError) as exc:
        raise SpecError(f"the egress audit log's directory {state}: {exc}") from exc
    return str(state / EXEC_AUDIT_NAME)


def audit_protected(path: str, what: str) -> tuple[Protected, ...]:
    """An audit log, its lock and its rotated files, as paths the sandbox must never see."""
    return (
        Protected(path, what),
        Protected(f"{path}.lock", f"the lock of {what}"),
        *(Protected(f"{path}.{n}", f"a rotated {what}") for n in range(1, PROTECTED_ROTATIONS + 1)),
    )
