"""The Pi adapter: disabled by default, re-attests every time, one gate, no leaks."""

from __future__ import annotations

import asyncio
import json

import pytest

from glove.testing.wallet import SECRETS, FakeClock, OfflineWorld
from glove.wallet import (
    ABSENT_TEXT,
    CONNECTED_TEXT,
    DISCONNECTED_TEXT,
    PI_TOOL_NAME,
    FakeStatusChannel,
    PiStatusAdapter,
    StatusChannelError,
    StatusProcessor,
    contracted,
)
from glove.wallet._messages import StatusResult, encode_status

V1_FIELDS = {"schema_version", "connected", "chain", "available_actions", "mutating_actions"}


def adapter_for(
    world: OfflineWorld, *, enabled: bool = True, **kw: float
) -> tuple[PiStatusAdapter, FakeStatusChannel]:
    """An adapter over a fake channel to a processor over the world's authorities."""
    bridge = StatusProcessor(world.binding(), contracted(world.authorities()), clock=world.clock)
    channel = FakeStatusChannel(bridge)
    return PiStatusAdapter(channel, clock=world.clock, enabled=enabled, **kw), channel


class ScriptedChannel:
    """A channel whose answer a test decides (the fault-injection fake)."""

    def __init__(self, answer: bytes | None = None, *, hang_s: float = 0.0) -> None:
        self.answer = answer
        self.hang_s = hang_s
        self.calls: list[int] = []

    async def status(self, request_id: int, deadline: float) -> bytes:
        """Answer ``self.answer`` (or a correct status for this id) after ``hang_s``."""
        self.calls.append(request_id)
        if self.hang_s:
            await asyncio.sleep(self.hang_s)
        if self.answer is not None:
            return self.answer
        return encode_status(request_id, StatusResult(connected=True, chain="eip155:8453"))


async def test_disabled_by_default_lists_nothing_and_asks_nothing(world: OfflineWorld) -> None:
    """Without enabled=True: no tool, the generic absence, and the channel is never used."""
    adapter, channel = adapter_for(world, enabled=False)
    assert await adapter.list_tools() == []
    assert await adapter.call_tool(PI_TOOL_NAME, {}) == _absent()
    assert channel.exchanges == 0
    assert world.reads == []
    default = PiStatusAdapter(channel, clock=world.clock)
    assert default.enabled is False


def _absent() -> object:
    from glove.wallet._pi import ABSENT

    return ABSENT


async def test_the_accepted_tool_descriptor_is_exact(world: OfflineWorld) -> None:
    """One tool, exact empty-object schema, read-only/idempotent/closed-world."""
    adapter, _ = adapter_for(world)
    tools = await adapter.list_tools()
    assert len(tools) == 1
    descriptor = tools[0].to_json()
    assert descriptor["name"] == "wallet_status"
    assert descriptor["parameters"] == {
        "type": "object",
        "properties": {},
        "additionalProperties": False,
    }
    assert descriptor["annotations"] == {
        "readOnlyHint": True,
        "idempotentHint": True,
        "openWorldHint": False,
    }
    assert set(descriptor) == {"name", "label", "description", "parameters", "annotations"}


@pytest.mark.parametrize(
    ("connected", "text"), [(True, CONNECTED_TEXT), (False, DISCONNECTED_TEXT)]
)
async def test_result_text_follows_the_connected_flag(
    world: OfflineWorld, connected: bool, text: str
) -> None:
    """The content string never contradicts ``connected``: false says "not connected"."""
    world.connected = connected
    adapter, _ = adapter_for(world)
    result = (await adapter.call_tool(PI_TOOL_NAME, {})).to_json()
    assert result["content"] == [{"type": "text", "text": text}]
    assert result["details"]["connected"] is connected
    assert "isError" not in result
    assert text == ("Wallet is not connected." if not connected else "Wallet is connected.")


async def test_result_emits_only_the_sanitized_v1_fields(world: OfflineWorld) -> None:
    """``details`` holds the five v1 fields, ``["status"]`` and ``[]``, nothing secret."""
    adapter, _ = adapter_for(world)
    result = (await adapter.call_tool(PI_TOOL_NAME, {})).to_json()
    assert set(result["details"]) == V1_FIELDS
    assert result["details"]["available_actions"] == ["status"]
    assert result["details"]["mutating_actions"] == []
    text = json.dumps(result)
    for secret in (*SECRETS, world.session_digest, world.plan_digest, world.alias):
        assert secret not in text


async def test_every_listing_and_invocation_re_attests(world: OfflineWorld) -> None:
    """Each list and each call is one fresh exchange with the bridge: nothing is cached."""
    adapter, channel = adapter_for(world)
    assert await adapter.list_tools()
    assert await adapter.list_tools()
    assert not (await adapter.call_tool(PI_TOOL_NAME, {})).is_error
    assert channel.exchanges == 3
    assert world.reads.count("server") == 3
    world.server_state = "stopped"
    world.observe()
    assert (await adapter.call_tool(PI_TOOL_NAME, {})).is_error  # listed earlier, absent now
    assert await adapter.list_tools() == []
    assert adapter.last_reason == "unavailable"


@pytest.mark.parametrize("arguments", [{"x": 1}, None, [], "{}", {"": None}])
async def test_invocation_takes_exactly_an_empty_object(
    world: OfflineWorld, arguments: object
) -> None:
    """Arguments other than an exact empty object get the generic absence."""
    adapter, _ = adapter_for(world)
    assert await adapter.call_tool(PI_TOOL_NAME, arguments) == _absent()


async def test_other_tool_names_are_absent(world: OfflineWorld) -> None:
    """Only ``wallet_status`` exists."""
    adapter, _ = adapter_for(world)
    assert await adapter.call_tool("wallet_send", {}) == _absent()


async def test_absence_is_generic(world: OfflineWorld) -> None:
    """The absence says only that the status is not available, whatever the reason."""
    adapter, _ = adapter_for(world)
    world.containment_ready = False
    world.readiness_generation += 1
    body = (await adapter.call_tool(PI_TOOL_NAME, {})).to_json()
    assert body == {"content": [{"type": "text", "text": ABSENT_TEXT}], "isError": True}
    assert adapter.last_reason == "unavailable"


# -- evidence that yields no tool ----------------------------------------------------------------


async def _no_tool(adapter: PiStatusAdapter, reason: str) -> None:
    assert await adapter.list_tools() == []
    assert adapter.last_reason.startswith(reason), adapter.last_reason
    assert (await adapter.call_tool(PI_TOOL_NAME, {})).to_json()["content"][0]["text"] == (
        ABSENT_TEXT
    )
    assert adapter.last_reason.startswith(reason), adapter.last_reason


async def test_stale_answer_is_no_tool(clock: FakeClock) -> None:
    """An answer to an earlier request (a replay) is stale: no tool."""
    replay = encode_status(1, StatusResult(connected=True, chain="eip155:8453"))
    adapter = PiStatusAdapter(ScriptedChannel(), clock=clock, enabled=True)
    assert await adapter.list_tools()  # request 1
    adapter._channel = ScriptedChannel(replay)
    await _no_tool(adapter, "stale")


async def test_mismatched_answer_is_no_tool(clock: FakeClock) -> None:
    """An answer naming an id this adapter never sent is mismatched: no tool."""
    other = encode_status("x", StatusResult(connected=True, chain="eip155:8453"))
    await _no_tool(PiStatusAdapter(ScriptedChannel(other), clock=clock, enabled=True), "mismatched")


@pytest.mark.parametrize(
    "answer",
    [
        b"{",
        b"",
        b"\xff",
        (
            b'{"jsonrpc":"2.0","id":1,"result":{"schema_version":1,"connected":false,'
            b'"connected":true,"chain":"eip155:1","available_actions":["status"],'
            b'"mutating_actions":[]}}'
        ),
        (
            b'{"jsonrpc":"2.0","id":1,"result":{"schema_version":1,"connected":true,'
            b'"chain":"eip155:1","available_actions":["status"],"mutating_actions":["send"]}}'
        ),
        (
            b'{"jsonrpc":"2.0","id":1,"result":{"schema_version":1,"connected":true,'
            b'"chain":"eip155:1","available_actions":["status"],"mutating_actions":[],'
            b'"rpc_url":"https://rpc"}}'
        ),
        b"[" * 65 + b"]" * 65,
    ],
)
async def test_malformed_answer_is_no_tool(clock: FakeClock, answer: bytes) -> None:
    """Malformed, repeated-key, mutating or leaky answers are refused: no tool."""
    await _no_tool(PiStatusAdapter(ScriptedChannel(answer), clock=clock, enabled=True), "malformed")


async def test_bridge_failure_is_no_tool(world: OfflineWorld) -> None:
    """When the bridge itself refuses (expired session), the channel error means no tool."""
    adapter, _ = adapter_for(world)
    world.clock.advance(world.lifetime_s)
    await _no_tool(adapter, "malformed: StatusChannelError")


async def test_hanging_exchange_expires(clock: FakeClock) -> None:
    """An exchange that outlives the gate's deadline yields no tool."""
    adapter = PiStatusAdapter(
        ScriptedChannel(hang_s=5.0), clock=clock, enabled=True, deadline_s=0.05
    )
    await _no_tool(adapter, "expired")


async def test_lock_acquisition_is_under_the_deadline(clock: FakeClock) -> None:
    """A transaction waiting for the lock behind a slow one expires; the slow one succeeds."""

    class FirstIsSlow(ScriptedChannel):
        async def status(self, request_id: int, deadline: float) -> bytes:
            self.hang_s = 0.3 if request_id == 1 else 0.0  # only the lock can delay the second
            return await super().status(request_id, deadline)

    adapter = PiStatusAdapter(FirstIsSlow(), clock=clock, enabled=True, deadline_s=0.4)
    first = asyncio.create_task(adapter.list_tools())
    await asyncio.sleep(0.1)
    adapter._deadline_s = 0.05
    assert await adapter.list_tools() == []
    assert adapter.last_reason == "expired"
    assert len(await first) == 1


async def test_decoding_and_construction_are_under_the_deadline(world: OfflineWorld) -> None:
    """An exchange that ends in time but past the bridge clock's deadline is no tool."""

    class SlowOnTheClock(ScriptedChannel):
        async def status(self, request_id: int, deadline: float) -> bytes:
            answer = await super().status(request_id, deadline)
            world.clock.advance(10.0)  # the bridge clock passes the deadline meanwhile
            return answer

    adapter = PiStatusAdapter(SlowOnTheClock(), clock=world.clock, enabled=True)
    await _no_tool(adapter, "expired")


async def test_cancelled_exchange_is_no_tool(clock: FakeClock) -> None:
    """A channel whose exchange is cancelled under the adapter yields no tool."""

    class Cancelled(ScriptedChannel):
        async def status(self, request_id: int, deadline: float) -> bytes:
            raise asyncio.CancelledError

    await _no_tool(PiStatusAdapter(Cancelled(), clock=clock, enabled=True), "cancelled")


async def test_caller_cancellation_propagates_and_releases_the_gate(clock: FakeClock) -> None:
    """Cancelling a listing raises in the caller, lists nothing, and frees the lock."""
    channel = ScriptedChannel(hang_s=5.0)
    adapter = PiStatusAdapter(channel, clock=clock, enabled=True)
    listing = asyncio.create_task(adapter.list_tools())
    await asyncio.sleep(0.05)
    listing.cancel()
    with pytest.raises(asyncio.CancelledError):
        await listing
    assert adapter.last_reason == "cancelled"
    channel.hang_s = 0.0
    assert len(await adapter.list_tools()) == 1


async def test_fake_channel_is_single_operation(world: OfflineWorld) -> None:
    """The fake channel has one verb and carries one exchange at a time."""
    bridge = StatusProcessor(world.binding(), world.authorities(), clock=world.clock)
    channel = FakeStatusChannel(bridge)
    public = [n for n in dir(channel) if not n.startswith("_") and callable(getattr(channel, n))]
    assert public == ["status"]
    deadline = world.clock.peek() + 1
    first = asyncio.create_task(channel.status(1, deadline))
    await asyncio.sleep(0)  # the first exchange is now in flight
    with pytest.raises(StatusChannelError, match="one exchange at a time"):
        await channel.status(2, deadline)
    assert json.loads(await first)["id"] == 1
