"""Errors of the construction-only remote backend and its forced executor.

Every class derives from :class:`glove.errors.GloveError` through
:class:`RemoteBackendError`::

    RemoteBackendError                 anything the remote backend refuses on purpose
    ├── RemoteConfigError              ``[remote_backend]`` is invalid (names the field)
    ├── RemoteFilesError               the SSH config or known_hosts could not be written safely
    ├── RemoteMethodNotFound           a lifecycle method was called: none is operational
    └── ExecutorError                  the forced executor refused to serve
        ├── ExecutorUsageError         its arguments were not exactly ``--stdio``
        ├── IdentityError              the identity file is missing, unsafe, malformed or
        │                              does not match the measured executable
        └── DeadlineError              a frame or response deadline passed
            ├── FrameDeadlineExceeded  a frame was not received within the channel deadline
            ├── TtlExhausted           receiving the frame consumed the request's TTL
            └── ResponseDeadlineExceeded
                                       the response could not be written by the request deadline

Frame decoding faults of the executor are :mod:`glove.protocol.errors` classes
(``FrameTooLarge``, ``TruncatedFrame``, ``MalformedFrame``): the executor speaks the same
length-prefixed framing as the control socket.
"""

from __future__ import annotations

from glove.errors import GloveError
from glove.exits import EXIT_DEADLINE, EXIT_EXECUTOR_REFUSED, EXIT_IDENTITY, EXIT_USAGE


class RemoteBackendError(GloveError):
    """Base class of every error the remote backend raises deliberately."""


class RemoteConfigError(RemoteBackendError, ValueError):
    """The ``[remote_backend]`` section is invalid; ``gloved`` must not start.

    Attributes:
        field: the offending key of ``[remote_backend]`` (``remote_backend`` itself when the
            section as a whole collides with another setting).
        reason: what is wrong with it.
    """

    def __init__(self, field: str, reason: str) -> None:
        where = "[remote_backend]" if field == "remote_backend" else f"remote_backend.{field}"
        super().__init__(f"{where}: {reason}")
        self.field = field
        self.reason = reason


class RemoteFilesError(RemoteBackendError):
    """The isolated SSH client files could not be written beneath the runtime directory."""


class RemoteMethodNotFound(RemoteBackendError):
    """A lifecycle method of the non-operational remote runtime was called.

    Attributes:
        code: always ``method_not_found``, the control protocol's error code.
        method: the method that was asked for.
    """

    code = "method_not_found"

    def __init__(self, method: str) -> None:
        super().__init__(
            f"method {method!r} is not available: the remote_linux_container runtime is "
            "construction-only and has no operational lifecycle"
        )
        self.method = method


class ExecutorError(RemoteBackendError):
    """The forced remote executor refused to serve (it exits with ``exit_code``)."""

    exit_code = EXIT_EXECUTOR_REFUSED


class ExecutorUsageError(ExecutorError):
    """The executor was started with arguments other than exactly ``--stdio``."""

    exit_code = EXIT_USAGE


class IdentityError(ExecutorError):
    """The identity file failed a check; the executor serves nothing.

    Attributes:
        fault: a stable word for the failed check (``missing``, ``empty``, ``malformed``,
            ``writable``, ``not_root``, ``link``, ``not_regular``, ``unsafe_directory``,
            ``too_large``, ``mismatch``, ``unmeasurable``).
    """

    exit_code = EXIT_IDENTITY

    def __init__(self, fault: str, message: str) -> None:
        super().__init__(message)
        self.fault = fault


class DeadlineError(ExecutorError):
    """A receive or response deadline of the executor's channel passed."""

    exit_code = EXIT_DEADLINE


class FrameDeadlineExceeded(DeadlineError):
    """A frame that had started arriving was not complete by the channel deadline."""


class TtlExhausted(DeadlineError):
    """The time spent receiving a request frame used up all of its TTL.

    Attributes:
        request_id: the request's ``id``.
        ttl_s: the TTL the request carried.
        receive_s: how long its frame took to arrive.
    """

    def __init__(self, request_id: int, ttl_s: float, receive_s: float) -> None:
        super().__init__(
            f"request {request_id} consumed its {ttl_s * 1000:.0f} ms TTL while its frame "
            f"was received ({receive_s * 1000:.0f} ms); it is not run"
        )
        self.request_id = request_id
        self.ttl_s = ttl_s
        self.receive_s = receive_s


class ResponseDeadlineExceeded(DeadlineError):
    """The response was not fully written before the request's deadline."""
