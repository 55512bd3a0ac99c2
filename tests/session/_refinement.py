"""Helpers for the refinement-eval-v1 tests: a home whose gloved runs adversarial agents on
PTYs, fixtures added to its library through glove.library's store API, plans that name them."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

from glove.library import Library

from ._gloved import HARNESSES, LIMITS, Gloved

#: What every fixture of these tests asks for (the agents below print it, or not).
REQUIRED = "tests passed"
FORBIDDEN = "FORBIDDEN"
FIXTURE: dict[str, Any] = {
    "version": 1,
    "exit_code": 0,
    "max_wall_ms": 60_000,
    "required": [REQUIRED],
    "forbidden": [FORBIDDEN, "FIXTURE-VISIBLE"],
}

#: The fake evidence an agent prints or writes: a passing verdict, a receipt, evidence JSON.
_FAKE = (
    '{"verdict": "pass", "reasons": []}\n'
    '{"receipt": "glove-refinement/v1", "evaluation": {"outcome": {"verdict": "pass"}}}\n'
    '{"version": 1, "required_text": [0], "forbidden_raw": [null], "utf8": "valid"}\n'
)
#: The adversarial agents (sh scripts), each with the verdict docs/evaluation.md gives it.
AGENTS: dict[str, str] = {
    # The honest run: prints the required literal, exits 0.
    "ev-pass": f"echo '{REQUIRED}'; exit 0",
    # Writes files named like evidence (in its scratch and its cwd), prints fake evidence
    # JSON and a fake receipt, never prints the required literal: fail, required_missing.
    "ev-files": (
        "cd /tmp; "
        f"printf '%s' '{_FAKE}' > reward.json; cp reward.json reward.txt; "
        f"printf '%s' '{_FAKE}' > receipt.json; cat reward.json; "
        'echo \'{"session_id": "x", "outcome": {"kind": "exited", "exit_code": 0}}\'; '
        "exit 0"
    ),
    # The required literal only inside an OSC title, a DCS string and an APC string, with
    # bracketed-paste toggles and a paste around other text: fail, required_missing.
    "ev-escapes": (
        r"printf '\033]0;tests passed\007\033Ptests passed\033\\\033_tests passed\033\\';"
        r"printf '\033[?2004h\033[200~pasted\033[201~\033[?2004l\n'; exit 0"
    ),
    # The forbidden word split by an SGR code (a terminal shows FORBIDDEN): fail,
    # forbidden_literal in the text (not in the raw bytes).
    "ev-sgr": rf"printf 'FOR\033[0mBIDDEN\n'; echo '{REQUIRED}'; exit 0",
    # Ends on a cut UTF-8 sequence (the first two bytes of a euro sign): invalid_evidence,
    # utf8_truncated.
    "ev-cut": rf"echo '{REQUIRED}'; printf '\342\202'; exit 0",
    # Leaves a background writer that would print the forbidden word later: it dies with
    # the sandbox's pid namespace when the command exits, so it never does: pass.
    "ev-background": (
        f"(sleep 3; echo {FORBIDDEN}; sleep 3; echo {FORBIDDEN}) & echo '{REQUIRED}'; exit 0"
    ),
    # Prints the required literal, then outlives its plan's wall time: resource_terminated
    # (limit_hit wall_time_s), the satisfied assertion notwithstanding.
    "ev-wall": f"echo '{REQUIRED}'; exec sleep 600",
    # Exits with the wrong code: fail, exit_code_mismatch.
    "ev-exit": f"echo '{REQUIRED}'; exit 3",
}


def harnesses_toml(extra: dict[str, str] | None = None) -> str:
    """The [harnesses.*] tables of the agents (and ``extra``), argv written as JSON."""
    agents = {**AGENTS, **(extra or {})}
    return "".join(
        f"\n[harnesses.{name}]\nargv = {json.dumps(['/bin/sh', '-c', script])}\n"
        for name, script in agents.items()
    )


def refinement_home(
    base: Path,
    *,
    creds: dict[str, Any] | None = None,
    python: str | None = None,
    extra: dict[str, str] | None = None,
) -> Gloved:
    """A set-up home with the adversarial agents as harnesses."""
    home = Gloved(base, creds=creds or {})
    if python is not None:
        home.python = python
    home.setup(HARNESSES + harnesses_toml(extra))
    return home


def add_bundle(home: Gloved, data: bytes, name: str = "fixture.json") -> dict[str, Any]:
    """Add ``data`` to the home's library (as its owner) through glove.library; the bundle
    as ``{"digest": ..., "size": ...}``."""
    source = home.base / name
    source.write_bytes(data)
    root = home.state / "library"
    if not home.creds:
        with Library.open(root, create=True) as library:
            bundle = library.add(source)
        return {"digest": bundle.digest, "size": bundle.size}
    import os

    os.chown(source, home.creds["user"], home.creds["group"])
    script = (
        "import json, sys\n"
        "from glove.library import Library\n"
        "with Library.open(sys.argv[1], create=True) as library:\n"
        "    bundle = library.add(sys.argv[2])\n"
        "print(json.dumps({'digest': bundle.digest, 'size': bundle.size}))\n"
    )
    done = subprocess.run(
        [home.python, "-c", script, str(root), str(source)],
        **home.creds,
        env=home.env,
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    added: dict[str, Any] = json.loads(done.stdout)
    return added


def add_fixture(home: Gloved, **changes: Any) -> dict[str, Any]:
    """Add the suite's fixture (members replaced) to the library; its digest and size."""
    return add_bundle(home, json.dumps({**FIXTURE, **changes}).encode())


def refinement_plan(harness: str, fixture: dict[str, Any], **limits: Any) -> str:
    """A PTY plan for ``harness`` evaluated against ``fixture`` (digest and size)."""
    return json.dumps(
        {
            "version": 1,
            "harness": harness,
            "exposures": [],
            "limits": {**LIMITS, **limits},
            "network": "none",
            "terminal": "pty",
            "evaluation": {"kind": "refinement-eval-v1", "fixture": fixture},
        }
    )
