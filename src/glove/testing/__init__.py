"""Test helpers shipped with Glove, shared by its own tests and by users' tests.

Storages that fail on purpose live in :mod:`glove.testing.storage`.
"""

from glove.testing.storage import CrashMode, CrashStorage, FaultStorage, SimulatedCrash

__all__ = ["CrashMode", "CrashStorage", "FaultStorage", "SimulatedCrash"]
