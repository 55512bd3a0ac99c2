"""Every exit code a Glove command or process ends with: one table, one meaning per name.

Two ranges, two rules (docs/cli.md lists them all; decision 0040 says why):

- **64 and above** mean the same thing in every command and process: 64 a usage error, 69
  a service the command needs is not running, 70 a bug, 75 a deadline passed, 124-127 and
  128+N the sandbox's (``glove exec``/``glove run``, after ``timeout(1)`` and ``env(1)``),
  130 interrupted. No two names share one of these values.
- **1 to 63** are each command's own answers ("no", "invalid", "which check failed"): the
  same value means different things in different commands (journal ``verify``'s 2 is
  "tampered", ``policy check``'s 2 is "invalid"), so every name here says whose it is, and a
  command uses only its own names and the common ones.

``glove exec``, ``glove run`` and ``glove session wait`` pass the command's own exit code
through, so a command that itself exits 125 looks like Glove's; their ``--json-status`` (or
``--json``) says which.

The in-sandbox scripts (``glove.egress.helper``, which is also ``glove-relay`` and
``glove.mcp.relay``, and ``glove.mcp.shim``) are standard-library scripts run by the
sandbox's own Python, so they cannot import this module: they spell the same values, and
``tests/test_exits.py`` holds them to it.
"""

from __future__ import annotations

from typing import Final

# -- every command -----------------------------------------------------------------------------

EXIT_OK: Final = 0
"""Success."""

EXIT_USAGE: Final = 64
"""A usage error: an unknown or malformed option, a missing argument; nothing ran
(``EX_USAGE``). Every command, ``gloved`` and ``glove-remote-executor`` too."""

EXIT_UNAVAILABLE: Final = 69
"""A Glove service the command needs is not running (``EX_UNAVAILABLE``): no ``gloved``
(the controller's commands, ``receipts page/ack``), no mediator (the in-sandbox
``glove-mcp`` shim)."""

EXIT_INTERNAL: Final = 70
"""An internal error: a bug in Glove (``EX_SOFTWARE``); ``GLOVE_DEBUG=1`` shows where."""

EXIT_DEADLINE: Final = 75
"""A deadline passed before the work was done; trying again may succeed (``EX_TEMPFAIL``):
``glove session wait --timeout`` expired with the session still going, a remote executor's
frame, TTL or response deadline."""

EXIT_INTERRUPTED: Final = 130
"""Interrupted by the operator (Ctrl-C: 128 + SIGINT)."""

# -- the sandbox: glove exec, glove run (and the sandbox library's results) --------------------

EXIT_HOST_PART_FAILED: Final = 124
"""A host-side part of the session (the mediation, the egress proxy or its audit log) failed
while the command ran; the command was stopped (one strike)."""

EXIT_SETUP_FAILED: Final = 125
"""The sandbox, the mediation or the egress proxy could not be set up (a profile rule that
does not load, a limit this machine cannot enforce, an unwritable audit log, a helper
started wrongly); nothing ran."""

EXIT_NOT_EXECUTABLE: Final = 126
"""The command exists in the sandbox but cannot be executed."""

EXIT_NOT_FOUND: Final = 127
"""The command was not found in the sandbox's ``PATH`` (or could not be started at all)."""

EXIT_SIGNAL_BASE: Final = 128
"""128 + N: the command was killed by signal N (a limit kill is SIGKILL: 137)."""

# -- the controller's commands: init, capabilities, plan, session, attach, receipts page/ack --

EXIT_REFUSED: Final = 1
"""``gloved`` refused the request (its error code is printed), or the plan is invalid."""

EXIT_NOT_AN_EXIT: Final = 1
"""``glove session wait``, ``glove attach``: the session ended without an exit of its own
(a limit, a signal, a stop, a lost daemon, a setup error; its outcome says which). A session
whose command exited passes that code through instead."""

EXIT_RECEIPTS_REFUSED: Final = 11
"""``glove receipts page/ack``: ``gloved`` refused the request or the connection failed
(1-10 are ``receipts verify``'s)."""

# -- gloved ------------------------------------------------------------------------------------

EXIT_GLOVED_FAILED: Final = 1
"""``gloved`` stopped because a child of its root tree failed (one strike at the root)."""

EXIT_GLOVED_REFUSED: Final = 2
"""``gloved`` refused to start: an unsafe runtime directory, another instance, an invalid
``gloved.toml`` (the unit's ``RestartPreventExitStatus=2``: a refusal does not loop)."""

# -- a check's answer: policy check/explain/pin, network check, mcp serve/tools ---------------

EXIT_DENIED: Final = 1
"""``policy explain``: the call is denied; ``network check``: a query is refused."""

EXIT_INVALID: Final = 2
"""The command's input does not load: a policy, a rule, an MCP configuration, a plan."""

# -- glove journal verify / repair -------------------------------------------------------------

EXIT_JOURNAL_CORRUPT: Final = 1
"""The journal is corrupt: a torn tail or garbled bytes."""

EXIT_JOURNAL_TAMPERED: Final = 2
"""The journal was tampered with: the chain, a sequence, the journal id, the segment order."""

EXIT_JOURNAL_TRUNCATED: Final = 3
"""The journal was truncated beneath its checkpoint."""

EXIT_JOURNAL_OTHER: Final = 4
"""Anything else: an unreadable key or directory, an unsupported format, a bad checkpoint."""

# -- glove receipts verify / consistency / export / public-key --------------------------------

EXIT_RECEIPT_SIGNATURE: Final = 1
"""A signature does not verify with the key given, a witness did not cosign, or a signature
line is by a key not given."""

EXIT_RECEIPT_PROOF: Final = 3
"""A proof does not hold: inclusion, consistency, or NEW does not extend OLD."""

EXIT_RECEIPT_ENTRY: Final = 4
"""The entry does not match the receipt shown, or the session named."""

EXIT_RECEIPT_MALFORMED: Final = 5
"""An input is malformed: a bundle, a checkpoint, a key."""

EXIT_RECEIPT_UNREADABLE: Final = 6
"""An input cannot be read, or a key file is unsafe."""

EXIT_RECEIPT_NOT_FOUND: Final = 7
"""The journal holds no receipt of that session."""

EXIT_RECEIPT_NOT_SEALED: Final = 8
"""Not sealed yet: no stored checkpoint covers the session's final receipt."""

EXIT_RECEIPT_LOG: Final = 9
"""The journal and its checkpoint disagree (a cut tail, a rewrite), or the journal is damaged."""

EXIT_RECEIPT_NO_PROOF: Final = 10
"""No consistency proof is available (NEW carries none from OLD's size)."""

# -- glove library add / list / remove / verify ------------------------------------------------

EXIT_LIBRARY_DIFFERS: Final = 1
"""``glove library verify``: a bundle differs from its name or is not as the store leaves it
(each is named), or an entry that is not a bundle is in the store."""

EXIT_LIBRARY_REFUSED: Final = 2
"""``glove library``: the store or the file refused the operation (an unsafe library root, a
source that is not a regular file or changed while read, no such bundle, a full disk); the
error's code is printed."""

# -- glove eval ab / verify / report ---------------------------------------------------------

EXIT_EVAL_MISMATCH: Final = 1
"""``glove eval verify``: the bundle does not hold (an envelope, a transcript, a verdict, a
bundle file or the report differs from what it must be); the first difference is named."""

EXIT_EVAL_REFUSED: Final = 2
"""``glove eval``: the inputs refused the run (a fixture that is no fixture, a file the
library refuses, gloved refusing a plan, a bundle directory that cannot be written or read)."""

# -- the other commands' own failure -----------------------------------------------------------

EXIT_FAILED: Final = 1
"""The command could not do what was asked, and says why: ``setup``, ``daemon``, a failed
``doctor`` check, ``diag tree`` without a daemon, an unreadable log for ``audit show``, a
``mcp serve`` session that failed (an upstream died)."""

EXIT_DAEMON_NOT_RUNNING: Final = 3
"""``glove daemon status``: installed, not running."""

EXIT_DAEMON_NOT_INSTALLED: Final = 4
"""``glove daemon status``: not installed."""

# -- glove-remote-executor (sysexits.h) --------------------------------------------------------

EXIT_EXECUTOR_REFUSED: Final = 1
"""The remote executor refused to serve, for a reason without a code of its own."""

EXIT_IO: Final = 74
"""The remote executor's channel failed (EPIPE and the like; ``EX_IOERR``)."""

EXIT_PROTOCOL: Final = 76
"""A protocol fault on the remote executor's channel: an oversized, truncated or malformed
frame, a field out of range (``EX_PROTOCOL``)."""

EXIT_IDENTITY: Final = 78
"""The remote executor's identity does not hold: its file is unsafe or malformed, or the
running executable does not measure to it (``EX_CONFIG``)."""
