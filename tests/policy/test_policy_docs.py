"""The policy examples in docs/policy.md are valid policies that behave as described."""

import re
from pathlib import Path

import pytest

from glove.policy import parse_policy

DOC = Path(__file__).resolve().parents[2] / "docs" / "policy.md"
PLACEHOLDER = re.compile(r'"[0-9a-f]*…"')


def _examples() -> list[str]:
    """Every ```toml block of the doc that is a whole policy, pins made well-formed."""
    blocks = re.findall(r"```toml\n(.*?)```", DOC.read_text(), re.DOTALL)
    return [
        PLACEHOLDER.sub('"' + "0" * 64 + '"', block)
        for block in blocks
        if block.startswith("version")
    ]


@pytest.mark.parametrize("example", _examples())
def test_documented_policies_parse(example: str) -> None:
    """Each complete example in the doc compiles."""
    assert parse_policy(example, source="docs/policy.md").digest.startswith("sha256:")


def test_documented_filesystem_example_decides_as_described() -> None:
    """The filesystem example allows reads in the workspace and refuses the rest."""
    example = next(block for block in _examples() if "fs-read-many" in block)
    policy = parse_policy(example)
    assert policy.check_call("fs__read_text_file", {"path": "/srv/work/a.txt"}).allowed
    assert not policy.check_call("fs__read_text_file", {"path": "/srv/work/../etc/x"}).allowed
    assert not policy.check_call("fs__read_text_file", {"path": "/srv/work/a", "head": 0}).allowed
    many = {"paths": [f"/srv/work/{i}" for i in range(17)]}
    assert not policy.check_call("fs__read_multiple_files", many).allowed
    assert policy.check_call("fs__list_directory", {"path": "/srv/work"}).allowed
    assert not policy.check_tool("fs__write_file").allowed
    assert len(_examples()) >= 3
