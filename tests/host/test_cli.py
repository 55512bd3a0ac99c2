"""The glove command line: version, help, and only working commands registered."""

from __future__ import annotations

import subprocess
import sys

from glove import __version__


def test_version() -> None:
    """glove --version prints the package version."""
    out = subprocess.run(
        [sys.executable, "-m", "glove", "--version"], capture_output=True, text=True, timeout=30
    )
    assert out.returncode == 0
    assert out.stdout.strip() == f"glove {__version__}"


def test_help_lists_commands_without_importing_heavy_modules() -> None:
    """--help works without importing the heavy third-party modules commands use."""
    probe = (
        "import sys, runpy; sys.argv=['glove','--help'];\n"
        "try: runpy.run_module('glove', run_name='__main__')\n"
        "except SystemExit: pass\n"
        "heavy=[m for m in sys.modules if m.startswith(('pyseccomp','cryptography','mcp',"
        "'hypothesis','blake3'))]\n"
        "print('HEAVY', heavy)"
    )
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=30)
    assert "doctor" in out.stdout
    assert "HEAVY []" in out.stdout
