"""The mediation's audit log as another part's sink: the egress proxy of a session with
tools writes its records there, beside the tool calls', with the session's run id."""

from __future__ import annotations

from collections.abc import Mapping

from glove.actors import Supervisor
from glove.audit import AuditLog, AuditUnavailable


class MediationAudit:
    """The mediation's ``audit`` child, looked up at each append, with the run id on every
    record (what :class:`glove.egress.EgressProxy` takes as its sink).

    Raises (from :meth:`append`): :class:`~glove.audit.AuditUnavailable` when that child is
    not running (the proxy then refuses: no record, no connection).
    """

    def __init__(self, mediation: Supervisor, run_id: str) -> None:
        """Append through ``mediation``'s ``audit`` child, adding ``"run": run_id``."""
        self._mediation = mediation
        self._run_id = run_id

    async def append(self, record: Mapping[str, object]) -> object:
        """Append ``record`` (with the run id) durably.

        Raises:
            AuditError: the log refused or failed the append, or is not running.
        """
        try:
            audit = self._mediation.child("audit")
        except KeyError:
            audit = None
        if not isinstance(audit, AuditLog):
            raise AuditUnavailable("the run's audit log is not running")
        return await audit.append({**record, "run": self._run_id})
