"""A session's outcome, as its receipt and its ``terminal`` journal event state it."""

from __future__ import annotations

from typing import Literal

import msgspec

#: Every kind of session outcome (``glove.container``'s sandbox outcomes, plus the ones
#: the session layer adds: ``cancelled``, ``internal_error``, ``daemon_lost``).
OutcomeKind = Literal[
    "exited",
    "signaled",
    "limit",
    "setup_error",
    "exec_error",
    "usage_error",
    "mediation_failed",
    "cancelled",
    "internal_error",
    "daemon_lost",
]


class ReceiptOutcome(msgspec.Struct, frozen=True, forbid_unknown_fields=True, kw_only=True):
    """``{"kind", "exit_code", "signal", "limit", "mechanism", "error"}``, and
    ``error_code`` (a refused projection's code) only when there is one: every other
    member is present, null when it does not apply. Declared in sorted order, so the
    control methods show it with its members in the order the journal keeps them."""

    error: str | None
    error_code: str | msgspec.UnsetType = msgspec.UNSET
    exit_code: int | None
    kind: OutcomeKind
    limit: str | None
    mechanism: str | None
    signal: int | None
