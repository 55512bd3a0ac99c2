"""The methods every ``gloved`` serves whatever runtime it composes: health, diag.tree,
capabilities (``hello`` is the server's own).

The capabilities *provider* is the composition's: it knows which runtimes it constructed
and which mechanism enforces each limit here. Until one is set the daemon reports that
nothing can run (schema version 0, no runtimes, every limit ``unavailable``), which is the
truth for a daemon without a runtime. ``protocol`` and ``lifecycle_operational`` always
come from the server and its registry, never from the provider.
"""

from __future__ import annotations

import inspect
import os
import time
from collections.abc import Awaitable, Callable
from typing import Final

import msgspec

from glove._version import __version__
from glove.actors import TreeSnapshot
from glove.control._registry import CallContext, MethodRegistry
from glove.protocol import (
    PROTOCOL_VERSION,
    Capabilities,
    Health,
    NoParams,
    unavailable_capabilities,
)

#: The provider may be plain or async.
CapabilitiesProvider = Callable[[], Capabilities | Awaitable[Capabilities]]

HEALTH_DEADLINE_S: Final = 5.0
TREE_DEADLINE_S: Final = 5.0
CAPABILITIES_DEADLINE_S: Final = 10.0


class BuiltinMethods:
    """``health``, ``diag.tree`` and ``capabilities``, registered on a registry."""

    def __init__(
        self,
        tree: Callable[[], TreeSnapshot],
        *,
        capabilities: CapabilitiesProvider | None = None,
    ) -> None:
        self._tree = tree
        self._started = time.monotonic()
        self.capabilities_provider: CapabilitiesProvider = (
            capabilities if capabilities is not None else unavailable_capabilities
        )
        self._registry: MethodRegistry | None = None

    def set_capabilities_provider(self, provider: CapabilitiesProvider) -> None:
        """Replace what ``capabilities`` reports (the composition calls this once built)."""
        self.capabilities_provider = provider

    def register(self, registry: MethodRegistry) -> None:
        """Add the three methods to ``registry``.

        Raises:
            RegistryError: one of them is already registered.
        """
        self._registry = registry
        registry.unary("health", NoParams, self.health, deadline_s=HEALTH_DEADLINE_S)
        registry.unary("diag.tree", NoParams, self.diag_tree, deadline_s=TREE_DEADLINE_S)
        registry.unary(
            "capabilities", NoParams, self.capabilities, deadline_s=CAPABILITIES_DEADLINE_S
        )

    async def health(self, _params: NoParams, _call: CallContext) -> Health:
        """The daemon answers: its version, pid and uptime."""
        return Health(
            status="ok",
            version=__version__,
            pid=os.getpid(),
            uptime_s=round(time.monotonic() - self._started, 3),
        )

    async def diag_tree(self, _params: NoParams, _call: CallContext) -> TreeSnapshot:
        """The live supervision tree (message type names only, never payloads)."""
        return self._tree()

    async def capabilities(self, _params: NoParams, _call: CallContext) -> Capabilities:
        """What the provider reports, with the protocol and the registry's lifecycle gate."""
        reported = self.capabilities_provider()
        if inspect.isawaitable(reported):
            reported = await reported
        if not isinstance(reported, Capabilities):
            raise TypeError(f"the capabilities provider returned {type(reported).__name__}")
        operational = self._registry is not None and self._registry.lifecycle_operational()
        return msgspec.structs.replace(
            reported, protocol=PROTOCOL_VERSION, lifecycle_operational=operational
        )
