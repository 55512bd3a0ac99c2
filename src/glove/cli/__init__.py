"""The ``glove`` command line, every command of it: the typer app and the fast paths.

:func:`main` is the console script's entry point (``python -m glove`` runs it too). One
module per command family (``_setup``, ``_session`` for ``init``/``capabilities``/``plan``/
``session``, ``_attach``, ``_doctor``, ``_exec``, ``_run``, ``_mcp``, ``_audit``,
``_policy``, ``_journal``, ``_receipts``, ``_library``, ``_diag``, ``_daemon``,
``_network``), each imported only when its command runs (or for typer's help).
``--version``, ``--help``, ``capabilities`` and ``session status`` are answered before typer
is imported (``_fast``, decision 0054). This package sits above every other
(docs/architecture.md, "Layers"): nothing in the library imports it.
"""

from glove.cli._main import build_app, main

__all__ = ["build_app", "main"]
