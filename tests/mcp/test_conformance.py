"""The official MCP conformance suite's server scenarios, direct and through Glove.

``@modelcontextprotocol/conformance`` 0.1.16 (``--suite all``, every server scenario) runs
against the reference server directly over Streamable HTTP, then against
``glove mcp serve --http`` mediating that same server with the built-in ``allow-all``
policy and ``expose = "bare"``: every scenario that passes directly must pass through
Glove, with at least as many passing checks and no failing one.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from .conformance import FIXTURE, PYTHON, glove_http, reference_http, run_suite

#: Scenarios that must exist in the suite: a suite that silently ran fewer proves nothing.
REQUIRED = {
    "server-initialize",
    "ping",
    "logging-set-level",
    "completion-complete",
    "tools-list",
    "tools-call-with-progress",
    "tools-call-with-logging",
    "tools-call-sampling",
    "tools-call-elicitation",
    "resources-list",
    "resources-templates-read",
    "resources-subscribe",
    "prompts-get-with-args",
    "dns-rebinding-protection",
    "elicitation-sep1330-enums",
    "json-schema-2020-12",
    "server-sse-polling",
}


def _config(folder: Path, upstream: str) -> Path:
    config = folder / "glove.toml"
    config.write_text(
        'policy = "allow-all"\naudit = "audit.log"\n[upstreams.ref]\n'
        f'{upstream}\nexpose = "bare"\nera = "legacy"\n'
    )
    return config


def _compare(direct: dict[str, tuple[int, int]], through: dict[str, tuple[int, int]]) -> None:
    assert set(direct) >= REQUIRED, sorted(REQUIRED - set(direct))
    passing = {name for name, (ok, bad) in direct.items() if bad == 0 and ok > 0}
    assert len(passing) >= 30
    for name in sorted(passing):
        ok, bad = through.get(name, (0, -1))
        assert bad == 0, f"{name}: fails through Glove"
        assert ok >= direct[name][0], (
            f"{name}: {ok} checks pass through Glove, {direct[name][0]} direct"
        )
    assert sum(bad for _, bad in through.values()) == 0


# The whole official suite twice (direct, then through Glove): about 60 s on a quiet 2-core
# machine, over 200 s on a loaded one; the run's own timeout, not the suite's default 120 s.
@pytest.mark.timeout(900)
async def test_every_scenario_passing_directly_passes_through_glove(tmp_path: Path) -> None:
    """The suite against the reference server, then through Glove (stdio upstream)."""
    async with reference_http() as url:
        direct = await run_suite(url, tmp_path / "direct")
    command = f'command = ["{PYTHON}", "{FIXTURE}", "stdio"]\ninherit_env = ["PATH", "HOME"]'
    async with glove_http(_config(tmp_path, command)) as url:
        through = await run_suite(url, tmp_path / "glove")
    _compare(direct, through)
    runs = {r.get("run") for r in _records(tmp_path / "audit.log")}
    assert len(runs) >= 20  # one mediation (its own run id) per HTTP session that decided


@pytest.mark.timeout(900)
async def test_the_same_through_an_http_upstream(tmp_path: Path) -> None:
    """The suite through Glove when Glove reaches the reference server over HTTP too."""
    async with reference_http() as upstream:
        direct = await run_suite(upstream, tmp_path / "direct")
        async with glove_http(_config(tmp_path, f'url = "{upstream}"')) as url:
            through = await run_suite(url, tmp_path / "glove")
    _compare(direct, through)


def _records(path: Path) -> list[dict[str, object]]:
    import json

    return [json.loads(line) for line in path.read_text().splitlines()]
