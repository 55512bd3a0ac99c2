"""The control clients' typed calls against a real gloved: each returns its Struct, decoded
strictly, with the very values ``call`` returns as a dict, from the blocking and the asyncio
client alike (the blocking one's calls are generated from the asyncio one's)."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Iterator
from pathlib import Path

import msgspec
import pytest

from glove.control import (
    AsyncClient,
    Client,
    Exposure,
    PlanVerdict,
    RemoteError,
    SessionPage,
    SessionStatus,
    call_once,
)
from glove.protocol import Capabilities
from tests.session._gloved import Gloved, plan_text


@pytest.fixture(scope="module")
def gloved(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Gloved]:
    """A set-up home with a running gloved."""
    home = Gloved(Path(os.path.realpath(tmp_path_factory.mktemp("typed"))))
    home.setup()
    home.start()
    try:
        yield home
    finally:
        home.stop()


def test_the_blocking_clients_typed_calls_match_call(gloved: Gloved, tmp_path: Path) -> None:
    """capabilities, plan_validate, session_create/status/list/stop/cleanup and exposures:
    each result is its Struct and equals what ``call`` (and ``call_once``) return as JSON."""
    with Client.for_runtime_dir(gloved.runtime, timeout=60.0) as client:
        caps = client.capabilities()
        assert isinstance(caps, Capabilities)
        assert msgspec.to_builtins(caps) == client.call("capabilities")
        verdict = client.plan_validate(plan_text("ok"))
        assert isinstance(verdict, PlanVerdict)
        assert verdict.valid
        assert not client.plan_validate("{}").valid
        created = client.session_create(plan_text("ok"))
        assert isinstance(created, SessionStatus)
        sid = created.session_id
        gloved.wait_terminal(sid)
        status = client.session_status(sid)
        assert status.state == "terminal"
        as_dict = client.call("session.status", {"session_id": sid})
        assert msgspec.to_builtins(status) == as_dict
        assert call_once(gloved.runtime, "session.status", {"session_id": sid}) == as_dict
        page = client.session_list(state="terminal", limit=10)
        assert isinstance(page, SessionPage)
        assert sid in [view.session_id for view in page.sessions]
        assert client.session_stop(sid).state == "terminal"
        assert client.session_cleanup(sid).cleaned
        shared = tmp_path / "shared"
        shared.mkdir()
        exposure = client.exposure_create("typed", str(shared))
        assert isinstance(exposure, Exposure)
        assert (exposure.alias, exposure.mode) == ("typed", "ro")
        assert client.exposure_revoke("typed").revoked
        with pytest.raises(RemoteError) as info:
            client.session_status("s-00000000000000000000000000")
        assert info.value.code == "session_not_found"


def test_the_asyncio_clients_typed_calls_are_the_same(gloved: Gloved) -> None:
    """The asyncio client's calls (the source of the blocking ones) give equal Structs."""
    sid = gloved.call("session.create", {"plan": plan_text("ok")})["session_id"]
    gloved.wait_terminal(sid)

    async def typed() -> tuple[Capabilities, SessionStatus, SessionPage]:
        async with AsyncClient.for_runtime_dir(gloved.runtime, timeout=60.0) as client:
            return (
                await client.capabilities(),
                await client.session_status(sid),
                await client.session_list(),
            )

    caps, status, page = asyncio.run(typed())
    with Client.for_runtime_dir(gloved.runtime, timeout=60.0) as client:
        assert caps == client.capabilities()
        assert status == client.session_status(sid)
        assert page == client.session_list()
