"""``python -m glove.mcp serve --config FILE``: the mediator without the whole CLI."""

from __future__ import annotations

import typer

from glove.mcp.cli import register


def main() -> None:
    """Run the ``mcp`` command group on its own."""
    app = typer.Typer(add_completion=False, pretty_exceptions_enable=False)
    register(app)
    app(prog_name="glove")


if __name__ == "__main__":
    main()
