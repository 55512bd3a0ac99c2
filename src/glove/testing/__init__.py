"""Test helpers shipped with Glove, shared by its own tests and by users' tests.

Storages that fail on purpose live in :mod:`glove.testing.storage`; a real ``sd_notify``
listener (what systemd hears from a ``Type=notify`` daemon) in :mod:`glove.testing.notify`;
offline wallet authorities, their adversaries and a fake clock in
:mod:`glove.testing.wallet` (imported on its own, not re-exported here); a fault raised in
one gloved session's lifecycle in :mod:`glove.testing.faults`, and a gloved with one armed,
``python -m glove.testing.faulty_gloved`` (imported on their own too: the production gloved
never loads them).
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
