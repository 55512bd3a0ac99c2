"""Test helpers shipped with Glove, shared by its own tests and by users' tests.

Storages that fail on purpose live in :mod:`glove.testing.storage`; a real ``sd_notify``
listener (what systemd hears from a ``Type=notify`` daemon) in :mod:`glove.testing.notify`.
"""

from glove.testing.notify import Notification, NotifyListener, pings
from glove.testing.storage import CrashMode, CrashStorage, FaultStorage, SimulatedCrash

__all__ = [
    "CrashMode",
    "CrashStorage",
    "FaultStorage",
    "Notification",
    "NotifyListener",
    "SimulatedCrash",
    "pings",
]
