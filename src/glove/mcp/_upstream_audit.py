"""The records an upstream's own traffic leaves in the audit log (pure: no I/O).

An upstream sends Glove things Glove does not pass on, and Glove audits each of them
(``docs/mcp.md``, Audit records):

* ``mcp.upstream_output``: a line on a stdio server's stdout that is not JSON at all (or, on
  an HTTP stream, a message that is not JSON, or an SSE event that is not a message),
  dropped under ``stdout = "lenient"``;
* ``mcp.upstream_message``: a JSON-RPC message nobody waits for (a reply to a request Glove
  gave up on, a notification Glove does not relay or the policy keeps from the agents, one
  that came before the mediation was ready);
* ``mcp.upstream``: the upstream's failure, with the last lines of its stderr.

Counting (:class:`DropCounter`, one per upstream and kind): the first
:data:`AUDITED_ONE_BY_ONE` drops have a record each; after that one in every
:data:`AUDITED_EVERY` has (``dropped_so_far`` is the running count), so a flood cannot
flood the log; when the upstream stops, one ``final`` record carries the count if drops
went unrecorded since the last record. The last ``dropped_so_far`` of each kind is
therefore always the number dropped.
"""

from __future__ import annotations

from typing import Final

from glove.mcp._text import printable

#: Drops of one kind, per upstream, that each get a record of their own.
AUDITED_ONE_BY_ONE: Final = 100
#: After those, one drop in this many gets a record (with the running count).
AUDITED_EVERY: Final = 1000
#: Longest excerpt of a dropped line that is recorded, in bytes (before escaping).
EXCERPT_BYTES: Final = 160
#: The upstream's stderr in an error and its failure record: at most this many last lines,
#: of at most this many bytes together (the most recent bytes are kept).
STDERR_REPORT_LINES: Final = 10
STDERR_REPORT_BYTES: Final = 2048

OUTPUT_KIND: Final = "mcp.upstream_output"
MESSAGE_KIND: Final = "mcp.upstream_message"
FAILURE_KIND: Final = "mcp.upstream"

Record = dict[str, object]


def stderr_lines(tail: bytes) -> tuple[str, ...]:
    """The last lines of a server's stderr, bounded and neutralised for an error message.

    At most :data:`STDERR_REPORT_LINES` lines of the last :data:`STDERR_REPORT_BYTES`
    bytes; a line cut by the byte bound starts with ``...``; blank lines are left out.
    """
    cut = len(tail) > STDERR_REPORT_BYTES
    text = tail[-STDERR_REPORT_BYTES:].decode("utf-8", "replace")
    lines = text.split("\n")
    if cut:
        lines[0] = "..." + lines[0]
    kept = [line.rstrip("\r") for line in lines if line.strip() and line.strip() != "..."]
    return tuple(printable(line, STDERR_REPORT_BYTES) for line in kept[-STDERR_REPORT_LINES:])


class DropCounter:
    """How many things of one kind one upstream had dropped, and which drops get a record."""

    __slots__ = ("count", "last_excerpt", "recorded")

    def __init__(self) -> None:
        #: Drops so far.
        self.count = 0
        #: The count named by the last record made (0: none yet).
        self.recorded = 0
        self.last_excerpt = ""

    def drop(self, excerpt: str = "") -> bool:
        """Count one drop; return whether it gets a record (then it is counted as recorded)."""
        self.count += 1
        self.last_excerpt = excerpt
        due = self.count <= AUDITED_ONE_BY_ONE or self.count % AUDITED_EVERY == 0
        if due:
            self.recorded = self.count
        return due

    def final(self) -> int | None:
        """The count a ``final`` record must carry (drops since the last record), or None."""
        if self.count == self.recorded:
            return None
        self.recorded = self.count
        return self.count


def excerpt_of(line: bytes) -> str:
    """The recorded start of a dropped line."""
    return printable(line[:EXCERPT_BYTES].decode("utf-8", "replace"), 10 * EXCERPT_BYTES)


def line_record(upstream_id: str, excerpt: str, count: int, reason: str) -> Record:
    """The record of one dropped non-JSON line (the ``count``-th)."""
    return {
        "kind": OUTPUT_KIND,
        "decision": "dropped",
        "upstream": upstream_id,
        "reason": printable(reason),
        "excerpt": excerpt,
        "dropped_so_far": count,
    }


def message_record(upstream_id: str, method: str | None, count: int, reason: str) -> Record:
    """The record of one dropped JSON-RPC message (the ``count``-th)."""
    record: Record = {
        "kind": MESSAGE_KIND,
        "decision": "dropped",
        "upstream": upstream_id,
        "reason": printable(reason),
        "dropped_so_far": count,
    }
    if method is not None:
        record["method"] = printable(method, 128)
    return record


def final_record(kind: str, upstream_id: str, counter: DropCounter, count: int) -> Record:
    """The record that closes a kind's count when the upstream stops."""
    what = "lines" if kind == OUTPUT_KIND else "messages"
    record: Record = {
        "kind": kind,
        "decision": "dropped",
        "upstream": upstream_id,
        "reason": f"the upstream stopped: {count} {what} dropped in all",
        "dropped_so_far": count,
        "final": True,
    }
    if kind == OUTPUT_KIND:
        record["excerpt"] = counter.last_excerpt
    return record


def failure_record(upstream_id: str, reason: str, stderr: tuple[str, ...]) -> Record:
    """The record of an upstream's failure (the session ends with it: one strike)."""
    return {
        "kind": FAILURE_KIND,
        "decision": "failed",
        "upstream": upstream_id,
        "reason": printable(reason),
        "stderr": list(stderr),
    }
