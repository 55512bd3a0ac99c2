"""Start the upstreams, list their tools, and say what the policy decides for each.

``glove mcp tools --config F`` and ``glove policy check --config F`` both need the tools
the configured upstreams really offer, under the names the agent would see. This starts
only the upstream actors (no audit log is opened or written: nothing is mediated), builds
the same :class:`~glove.mcp._kernel.ToolRegistry` the mediator uses, and stops them.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

import msgspec

from glove.actors import ChildSpec, Supervisor, race, start_node
from glove.mcp._config import McpConfig
from glove.mcp._kernel import ToolRegistry
from glove.mcp._service import (
    STARTUP_MARGIN_S,
    _definition_factory,
    _load_policy,
    startup_failure,
    wait_started,
)
from glove.mcp._upstream import UpstreamActor

if TYPE_CHECKING:
    from glove.policy import ToolDefinition


class ToolListing(msgspec.Struct, frozen=True):
    """One tool an upstream offers, as the agent would see it, and the policy's decision."""

    name: str
    upstream: str
    tool: str
    listed: bool
    rule: str | None
    reason: str
    description: str | None = None


async def upstream_tools(config: McpConfig) -> tuple[ToolRegistry, dict[str, ToolDefinition]]:
    """Start every upstream, collect its tools, stop them; return the registry and the
    policy definitions by exposed name.

    Raises:
        GloveError: an upstream failed to start, or two tools collide (``ToolNameError``).
    """
    specs = [
        ChildSpec(f"mcp-{uid}", lambda i=uid, u=upstream: UpstreamActor(i, u))  # type: ignore[misc]
        for uid, upstream in config.upstreams.items()
    ]
    supervisor = Supervisor("mcp-tools", specs, strategy="one_for_all", intensity=0)
    task = start_node(supervisor)
    limit = max(u.startup_timeout_s for u in config.upstreams.values()) + STARTUP_MARGIN_S
    try:
        await supervisor.started.wait()
        nodes = [node for _, node, _ in supervisor.children()]
        _, waiting = await race(task, wait_started(nodes, limit))
        if not waiting.done() or waiting.cancelled() or waiting.exception() is not None:
            raise startup_failure(supervisor)
        registry = ToolRegistry()
        for uid in config.upstreams:
            node = supervisor.child(f"mcp-{uid}")
            assert isinstance(node, UpstreamActor)
            registry.set_upstream(uid, node.tools, strict=True, expose=config.upstreams[uid].expose)
    finally:
        supervisor.stop()
        await asyncio.wait({task})
        if not task.cancelled():
            task.exception()
    definition_of = _definition_factory()
    definitions = {tool.name: definition_of(tool.info) for tool in registry.tools()}
    return registry, definitions


async def list_tools(config: McpConfig) -> list[ToolListing]:
    """Every tool the upstreams offer, with what the policy decides for listing it.

    Raises:
        GloveError: the policy is invalid, or an upstream failed to start.
    """
    policy = _load_policy(config)
    registry, definitions = await upstream_tools(config)
    listings: list[ToolListing] = []
    for tool in registry.tools():
        decision = policy.check_tool(tool.name, definitions[tool.name])
        listings.append(
            ToolListing(
                name=tool.name,
                upstream=tool.upstream_id,
                tool=tool.info.name,
                listed=decision.allowed,
                rule=decision.rule,
                reason=decision.reason,
                description=tool.info.description,
            )
        )
    return listings
