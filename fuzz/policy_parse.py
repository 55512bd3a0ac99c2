"""Fuzz target: policy text -> parse_policy -> a few decisions.

Contract under test: parsing returns a Policy or raises PolicyFileError (nothing else);
a parsed policy answers check_tool/check_call with a Decision and never an internal error.
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from policy_common import run

from glove.policy import Decision, PolicyFileError, parse_policy

PROBE_NAMES = ("up__t", "fs__read_text_file", "a", "x" * 64)
PROBE_ARGUMENTS: tuple[object, ...] = (
    {},
    None,
    {"v": "/srv/work/a", "path": "../../etc", "a": {"b": [1, 2]}},
    {"v": 1, "x": True, "paths": ["/a", 2]},
)


def one_input(data: bytes) -> None:
    """Parse ``data`` as a policy and probe the result."""
    try:
        policy = parse_policy(data, source="fuzz")
    except PolicyFileError:
        return
    for name in PROBE_NAMES:
        decision = policy.check_tool(name)
        assert isinstance(decision, Decision)
        for arguments in PROBE_ARGUMENTS:
            decision = policy.check_call(name, arguments)
            assert isinstance(decision, Decision)
            assert "internal error" not in decision.reason, decision.reason


if __name__ == "__main__":
    run("parse", one_input)
