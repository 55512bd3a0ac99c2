"""The launcher's wire format: typed messages, one per SOCK_SEQPACKET record (sans-IO).

gloved and its launcher process (:mod:`glove.container.linux._launcher`) speak over one Unix
``SOCK_SEQPACKET`` socketpair. Every record is one msgpack-encoded message of the tagged
union :data:`Message` plus the descriptors it carries (``SCM_RIGHTS``), in the order the
message says. This module holds no I/O: :func:`encode` gives the bytes of a message,
:func:`decode` turns one received record (its bytes and how many descriptors came with it)
into a message, or raises :class:`LauncherProtocolError` with a code saying why not. A
record that is too long, not msgpack, of an unknown type, with a field of the wrong type or
an unknown field, or with other descriptors than its message carries is refused whole.

Descriptors, in order:

* :class:`Launch` (gloved -> launcher): the command's stdin, stdout and stderr for each
  ``True`` of ``stdio``, then one per ``pass_targets`` entry (``spec.pass_fds`` is empty
  on the wire; the launcher rebuilds it from these), then one per ``projections`` entry
  (a library projection's frozen tmpfs or opened bundle, which the launcher checks
  against its record before it uses it).
* :class:`Launched` (launcher -> gloved): the init's pidfd, its status pipe, then the
  notify channel when ``notify``, then the terminal channel when ``pty``.
* :class:`Hello`, :class:`Exited`, :class:`Failed`: none.
"""

from __future__ import annotations

from typing import Final, Literal

import msgspec

from glove.container._limits import LimitPlan
from glove.container._spec import MAX_PASSED_FD, ProjectionRecord, SandboxSpec
from glove.container.errors import SandboxError

#: Version of this wire format; the launcher says it first (:class:`Hello`). gloved and its
#: launcher are one build (a fork), so gloved accepts this version only. 2: projections.
PROTOCOL_VERSION: Final = 2
#: Largest record either side sends or accepts (a spec with a large environment fits).
MAX_FRAME_BYTES: Final = 256 * 1024
#: Most descriptors one record carries (the kernel's SCM_MAX_FD is 253).
MAX_FDS: Final = 64

FailureKind = Literal["spec", "limit", "unsupported", "setup", "protocol", "internal"]


class LauncherProtocolError(SandboxError):
    """A record on the launcher channel was refused, or the channel itself broke.

    Attributes:
        code: ``oversized``, ``malformed``, ``descriptors``, ``version``, ``unexpected`` or
            ``closed``.
    """

    def __init__(self, code: str, message: str) -> None:
        """Name the refusal (``code``) and say what was wrong."""
        super().__init__(f"launcher channel: {message} [{code}]")
        self.code = code


class Hello(msgspec.Struct, frozen=True, forbid_unknown_fields=True, tag="hello"):
    """The launcher is up (its caches are warm); sent once, first."""

    version: int
    pid: int


class Launch(msgspec.Struct, frozen=True, forbid_unknown_fields=True, tag="launch"):
    """Clone ``spec`` into a new sandbox (see the module docstring for its descriptors)."""

    id: int
    spec: SandboxSpec
    stdio: tuple[bool, bool, bool]
    pass_targets: tuple[int, ...] = ()
    report_violations: bool = False
    terminal_size: tuple[int, int] = (24, 80)
    projections: tuple[ProjectionRecord, ...] = ()


class Launched(msgspec.Struct, frozen=True, forbid_unknown_fields=True, tag="launched"):
    """Launch ``id`` is released: its init runs as host pid ``pid``.

    The sandbox's cgroups (``cgroup_v2``, ``cgroup_v1``: controller -> group) are gloved's
    from here: it reads their events, kills through them and removes them. ``setup_s`` is
    the time from the clone to the release, in the launcher.
    """

    id: int
    pid: int
    plans: dict[str, LimitPlan]
    setup_s: float
    cgroup_v2: str | None = None
    cgroup_v1: dict[str, str] = msgspec.field(default_factory=dict)
    nproc_limit: int | None = None
    unix_gate: bool = False
    notify: bool = False
    pty: bool = False


class Exited(msgspec.Struct, frozen=True, forbid_unknown_fields=True, tag="exited"):
    """The init of launch ``id`` exited and was reaped; ``wait_status`` as from waitpid."""

    id: int
    wait_status: int


class Failed(msgspec.Struct, frozen=True, forbid_unknown_fields=True, tag="failed"):
    """Launch ``id`` failed before anything ran; ``kind`` names the error class."""

    id: int
    kind: FailureKind
    message: str
    #: For ``limit``: the limit refused.
    limit: str | None = None


Message = Hello | Launch | Launched | Exited | Failed

_encoder: Final = msgspec.msgpack.Encoder()
_decoder: Final = msgspec.msgpack.Decoder(Message)


def fd_count(message: Message) -> int:
    """How many descriptors travel with ``message``."""
    if isinstance(message, Launch):
        return sum(message.stdio) + len(message.pass_targets) + len(message.projections)
    if isinstance(message, Launched):
        return 2 + int(message.notify) + int(message.pty)
    return 0


def encode(message: Message) -> bytes:
    """The record for ``message`` (send it with :func:`fd_count` descriptors).

    Raises:
        LauncherProtocolError: the record would be too long, or a launch names a
            descriptor twice or carries ``spec.pass_fds`` (they go as descriptors).
    """
    if isinstance(message, Launch):
        _check_launch(message)
    if fd_count(message) > MAX_FDS:
        raise LauncherProtocolError("descriptors", f"more than {MAX_FDS} descriptors")
    data = _encoder.encode(message)
    if len(data) > MAX_FRAME_BYTES:
        raise LauncherProtocolError("oversized", f"a record of {len(data)} bytes")
    return data


def decode(data: bytes, fds: int, *, truncated: bool = False) -> Message:
    """The message in one received record that came with ``fds`` descriptors.

    ``truncated`` is whether the kernel cut the record or its descriptors (``MSG_TRUNC``,
    ``MSG_CTRUNC``). The caller closes the descriptors when this raises.

    Raises:
        LauncherProtocolError: the record is refused (its ``code`` says why).
    """
    if truncated or len(data) > MAX_FRAME_BYTES:
        raise LauncherProtocolError("oversized", "a record longer than the channel takes")
    if not data:
        raise LauncherProtocolError("malformed", "an empty record")
    try:
        message = _decoder.decode(data)
    except (msgspec.DecodeError, msgspec.ValidationError) as exc:
        raise LauncherProtocolError("malformed", str(exc)) from exc
    except (SandboxError, ValueError, TypeError) as exc:  # the spec's own checks
        raise LauncherProtocolError("malformed", f"an invalid spec: {exc}") from exc
    if isinstance(message, Launch):
        _check_launch(message)
    expected = fd_count(message)
    if fds != expected:
        raise LauncherProtocolError(
            "descriptors", f"{type(message).__name__} came with {fds} descriptors, not {expected}"
        )
    return message


def _check_launch(message: Launch) -> None:
    if message.spec.pass_fds:
        raise LauncherProtocolError("malformed", "spec.pass_fds travel as descriptors")
    if len(set(message.pass_targets)) != len(message.pass_targets):
        raise LauncherProtocolError("malformed", "a descriptor target named twice")
    if any(not 3 <= target <= MAX_PASSED_FD for target in message.pass_targets):
        # 0-2 are the command's stdio; refused here, in the protocol, rather than by the
        # spec's own check when the launcher fills pass_fds (outside its reply path)
        raise LauncherProtocolError("malformed", f"a descriptor target outside 3..{MAX_PASSED_FD}")
