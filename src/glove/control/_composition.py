"""What a daemon composes into its root tree beyond the control socket.

``gloved``'s composition root (:mod:`glove.daemon`) asks the session service for one
(:meth:`glove.session.SessionService.composition`) and builds the root tree around it; the
control package knows nothing of sessions.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from glove.actors import ChildSpec
from glove.control._builtin import CapabilitiesProvider
from glove.control._registry import MethodRegistry


@dataclass(frozen=True)
class Composition:
    """What a daemon runs beyond its socket: root children, methods, capabilities.

    Attributes:
        children: started in order after ``loop-lag`` and before ``control``.
        register: adds the composition's methods to the registry.
        operational: whether the lifecycle methods are offered now.
        capabilities: what ``capabilities`` reports.
    """

    children: Sequence[ChildSpec] = ()
    register: Callable[[MethodRegistry], None] = field(default=lambda _registry: None)
    operational: Callable[[], bool] = field(default=lambda: False)
    capabilities: CapabilitiesProvider | None = None
