"""The strict mediator configuration."""

from __future__ import annotations

from pathlib import Path

import pytest

from glove.mcp import McpConfigError, load_config, parse_config
from glove.mcp._config import child_environment

BASE = b'policy = "p.toml"\naudit = "logs/audit.log"\n[upstreams.fs]\ncommand = ["srv", "-x"]\n'


def test_relative_paths_resolve_against_the_config_folder(tmp_path: Path) -> None:
    """policy, audit and cwd are resolved in the configuration file's folder."""
    path = tmp_path / "glove.toml"
    path.write_bytes(BASE + b'cwd = "work"\n')
    config = load_config(path)
    assert config.policy == str(tmp_path / "p.toml")
    assert config.audit == str(tmp_path / "logs" / "audit.log")
    assert config.upstreams["fs"].cwd == str(tmp_path / "work")
    assert config.upstreams["fs"].command == ["srv", "-x"]
    assert config.upstreams["fs"].era == "auto"


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (b"bogus = 1\n", "unknown field `bogus`"),
        (b'era = "1999"\n', "era"),
        (b"call_timeout_s = 0\n", "call_timeout_s"),
        (b"env = { A = 1 }\n", "Expected `str`"),
    ],
)
def test_bad_upstream_keys_name_their_path(extra: bytes, message: str) -> None:
    """An unknown or mistyped key is an error that says where it is."""
    with pytest.raises(McpConfigError, match=message):
        parse_config(BASE + extra, base_dir=Path("/"), source="glove.toml")


@pytest.mark.parametrize("upstream_id", ["has_underscore", "-dash", "x" * 33, "dot.ted"])
def test_upstream_ids_cannot_make_names_ambiguous(upstream_id: str) -> None:
    """An id outside [A-Za-z0-9-]{1,32} is refused so <id>__<tool> splits one way."""
    data = f'policy = "p"\naudit = "a"\n[upstreams."{upstream_id}"]\ncommand = ["x"]\n'
    with pytest.raises(McpConfigError, match="an id is"):
        parse_config(data.encode(), base_dir=Path("/"))


def test_missing_and_empty_sections_are_errors(tmp_path: Path) -> None:
    """No upstreams, a missing key, unreadable files and non-TOML are all refused."""
    with pytest.raises(McpConfigError, match="empty"):
        parse_config(b'policy = "p"\naudit = "a"\n[upstreams]\n', base_dir=tmp_path)
    with pytest.raises(McpConfigError, match="audit"):
        parse_config(b'policy = "p"\n[upstreams.a]\ncommand = ["x"]\n', base_dir=tmp_path)
    with pytest.raises(McpConfigError, match="cannot read"):
        load_config(tmp_path / "absent.toml")
    with pytest.raises(McpConfigError):
        parse_config(b"[[[", base_dir=tmp_path)


def test_child_environment_is_scrubbed() -> None:
    """Only env and the inherited names reach an upstream; nothing else of the parent."""
    config = parse_config(
        BASE + b'env = { MODE = "1" }\ninherit_env = ["PATH", "ABSENT"]\n', base_dir=Path("/")
    )
    parent = {"PATH": "/bin", "SECRET_TOKEN": "s3cret", "HOME": "/root"}
    assert child_environment(config.upstreams["fs"], parent) == {"PATH": "/bin", "MODE": "1"}
