"""Fuzz target: arbitrary JSON arguments against a policy using every operator.

Contract under test: check_call on any decoded JSON returns a Decision with a reason, is
never an internal error, and never quotes a string argument value in its reason.
"""

import sys
from pathlib import Path

import msgspec

sys.path.insert(0, str(Path(__file__).resolve().parent))

from policy_common import run

from glove.policy import Decision, parse_policy

POLICY = parse_policy(
    """
version = 1
[[tools]]
name = "up__*"
[[tools.args]]
pointer = "/eq"
op = "eq"
value = {a = [1, "x"]}
optional = true
[[tools.args]]
pointer = "/in"
op = "in"
values = ["r", 2, true, [1]]
optional = true
[[tools.args]]
pointer = "/prefix"
op = "prefix"
value = "feat/"
optional = true
[[tools.args]]
pointer = "/re"
op = "regex"
pattern = "[a-z]+(-[0-9]{1,4})*"
optional = true
[[tools.args]]
pointer = "/len"
op = "length"
max = 8
optional = true
[[tools.args]]
pointer = "/num"
op = "range"
min = -5
max = 5.5
optional = true
[[tools.args]]
pointer = "/paths"
op = "path"
each = true
roots = ["/srv/work"]
base = "/srv/work"
optional = true
[[tools.args]]
pointer = "/t/~1x/0"
op = "type"
types = ["string", "null"]
optional = true
""",
    source="fuzz",
)
SECRET_MIN_CHARS = 16


def _strings(value: object) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, list):
        return [text for item in value for text in _strings(item)]
    if isinstance(value, dict):
        return [text for item in value.values() for text in _strings(item)]
    return []


def one_input(data: bytes) -> None:
    """Decode ``data`` as JSON and check a call with it as the arguments."""
    try:
        arguments = msgspec.json.decode(data)
    except msgspec.DecodeError:
        return
    decision = POLICY.check_call("up__t", arguments)
    assert isinstance(decision, Decision)
    assert decision.reason
    assert "internal error" not in decision.reason, decision.reason
    if isinstance(arguments, dict):
        for text in _strings(arguments):
            if len(text) >= SECRET_MIN_CHARS:
                assert text not in decision.reason, "a reason quotes an argument value"


if __name__ == "__main__":
    run("call", one_input)
