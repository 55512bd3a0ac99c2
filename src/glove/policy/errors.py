"""Errors raised by the policy package.

The engine itself never raises while deciding (every doubt is a denial with a reason);
these errors come from building a policy::

    GloveError
    └── PolicyError                 any failure to build a policy
        └── PolicyFileError         unreadable, oversized, malformed or invalid policy file
"""

from glove.errors import GloveError

__all__ = ["PolicyError", "PolicyFileError"]


class PolicyError(GloveError):
    """Base class of the errors of :mod:`glove.policy`."""


class PolicyFileError(PolicyError):
    """A policy file that cannot be read or does not describe a valid policy.

    The message reads ``<source>: <key path>: <what is wrong>``, for example
    ``policy.toml: tools[2].args[0].opp: unknown key``.

    Attributes:
        source: the path or name the policy text came from.
        key_path: the dotted/indexed path of the offending key, or ``""`` when the
            problem concerns the whole file (unreadable, too large, not TOML).
        problem: what is wrong, without the source and path prefix.
    """

    def __init__(self, source: str, key_path: str, problem: str) -> None:
        """Build the error from where it happened and what is wrong."""
        self.source = source
        self.key_path = key_path
        self.problem = problem
        where = f"{source}: {key_path}" if key_path else source
        super().__init__(f"{where}: {problem}")
