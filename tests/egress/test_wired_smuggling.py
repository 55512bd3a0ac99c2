"""The attack table through the real ``glove exec --network proxy``, root and unprivileged.

The attacker is a stdlib script inside a real Glove sandbox (``_attack_client.py`` with
the system python, talking to the helper's 127.0.0.1:3128); the proxy runs in the
``glove`` process of the launching user (root, or the unprivileged test user); the witness
is the logging origin on host loopback (``_logging_origin.py``), which reads pipelined
requests whatever ``Connection`` says. For every row the origin receives exactly the
judged request, or the sandbox gets the refusal, the audit log has its record, and the
origin receives nothing of it.
"""

from __future__ import annotations

import base64
import json
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import Unpriv

from ._attacks import ATTACKS, check_origin, check_records, check_reply, rules
from ._logging_origin import LoggingOrigin, logging_origin
from ._wired import World, launcher, world
from .conftest import LocalCA

WHO = ["root", "unprivileged"]
SYSTEM_PYTHON = "/usr/bin/python3"
CLIENT = Path(__file__).with_name("_attack_client.py")


@pytest.fixture(scope="module")
def origins(test_ca: LocalCA) -> Iterator[World]:
    """The wired harness's files (hosts, profile) and origins."""
    with world(test_ca) as made:
        yield made


@pytest.fixture
def witness() -> Iterator[LoggingOrigin]:
    """A fresh logging origin for one run of the table."""
    with logging_origin() as origin:
        yield origin


@pytest.mark.parametrize("who", WHO)
def test_every_attack_through_glove_exec(
    origins: World, witness: LoggingOrigin, unpriv: Unpriv, who: str
) -> None:
    """Each row of the table from inside a real sandbox: the origin sees exactly the judged
    request or nothing, the sandbox sees the answer or the refusal, the audit log agrees."""
    port = witness.port
    with launcher(origins, who, unpriv) as glove:
        table = [
            {
                "name": a.name,
                "parts": [base64.b64encode(p).decode() for p in a.render(port)],
                "expect_continue": a.expect_continue,
            }
            for a in ATTACKS
        ]
        attacks = glove.workspace / "attacks.json"
        attacks.write_text(json.dumps(table))
        shutil.copy(CLIENT, glove.workspace / "client.py")
        for path in (attacks, glove.workspace / "client.py"):
            path.chmod(0o644)
        allow = [flag for rule in rules(port) for flag in ("--allow", rule)]
        done = glove.exec(f"{SYSTEM_PYTHON} /workspace/client.py /workspace/attacks.json", *allow)
    assert done.rc == 0, done
    replies = {
        line["name"]: base64.b64decode(line["reply"])
        for line in map(json.loads, done.stdout.splitlines())
    }
    assert list(replies) == [a.name for a in ATTACKS], done.stderr
    connections = witness.wait_ended(witness.accepted)
    decisions = [r for r in done.audit if r.get("kind") == "egress" and r["proto"] != "dns"]
    ends = {r["conn"]: r for r in done.audit if r.get("kind") == "egress.end"}
    assert len(decisions) == len(ATTACKS), decisions
    forwarded = 0
    for attack, decision in zip(ATTACKS, decisions, strict=True):
        check_reply(attack, port, replies[attack.name])
        check_origin(attack, port, connections)
        check_records(attack, port, decision, ends.get(decision["conn"]))
        forwarded += attack.judged is not None
    assert witness.accepted == forwarded  # no refused row opened a connection
    assert {r["session"] for r in done.audit} == {done.audit[0]["session"]}
