"""Test helpers shipped with Glove, shared by its own tests and by users' tests.

Storages that fail on purpose live in :mod:`glove.testing.storage`; offline wallet
authorities, their adversaries and a fake clock in :mod:`glove.testing.wallet` (imported
on its own, not re-exported here).
"""

from glove.testing.storage import CrashMode, CrashStorage, FaultStorage, SimulatedCrash

__all__ = ["CrashMode", "CrashStorage", "FaultStorage", "SimulatedCrash"]
