"""The ``sd_notify`` protocol, sans I/O: where to send, whether to ping, what to send.

A service manager that wants to hear from its service (systemd's ``Type=notify``) passes
three environment variables; this module turns them into values, or into a typed error:

* ``NOTIFY_SOCKET``: an ``AF_UNIX`` datagram socket, either a filesystem path (``/...``) or
  an abstract name (``@name``, which becomes ``\\0name`` on the wire). Anything else (a
  relative path, an empty value, a ``vsock:`` address) is refused, not guessed at.
* ``WATCHDOG_USEC``: the watchdog interval in microseconds, a positive integer. The service
  pings at half of it (``sd_watchdog_enabled(3)``).
* ``WATCHDOG_PID``: when set, the watchdog is meant for that process only; another process
  (a child that inherited the environment) must not ping.

A notification is one datagram of newline-separated ``NAME=VALUE`` fields. Values are
ours (``READY=1``, ``STATUS=...``), but a status text is built from runtime data, so a value
holding a newline (which would smuggle in a second field) or a NUL is refused, and
:func:`clean_status` makes free text safe before it gets that far.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Final

from glove.control.errors import NotifyError

NOTIFY_SOCKET_VAR: Final = "NOTIFY_SOCKET"
WATCHDOG_USEC_VAR: Final = "WATCHDOG_USEC"
WATCHDOG_PID_VAR: Final = "WATCHDOG_PID"
NOTIFY_VARS: Final = (NOTIFY_SOCKET_VAR, WATCHDOG_USEC_VAR, WATCHDOG_PID_VAR)

# sockaddr_un.sun_path is 108 bytes: a path needs its terminating NUL, an abstract name
# spends its first byte on the leading NUL.
MAX_SOCKET_PATH_BYTES: Final = 107
# systemd reads at most this much of one notification datagram (NOTIFY_BUFFER_MAX = PIPE_BUF).
MAX_MESSAGE_BYTES: Final = 4096
# STATUS= is shown by `systemctl status`; a line longer than this is cut.
MAX_STATUS_CHARS: Final = 200
# systemd refuses WATCHDOG_USEC values at or above USEC_INFINITY (2**64 - 1).
MAX_WATCHDOG_USEC: Final = 2**64 - 2
USEC_PER_S: Final = 1_000_000

_FIELD_NAME: Final = re.compile(r"[A-Z][A-Z0-9_]*")
_CONTROL_CHARS: Final = re.compile(r"[\x00-\x1f\x7f]+")


def parse_notify_socket(value: str) -> str | bytes:
    """Return the socket address ``NOTIFY_SOCKET`` names: a path, or an abstract name.

    An abstract name comes back as bytes starting with NUL, a path as ``str``: both are
    what ``socket.sendto`` takes for ``AF_UNIX``.

    Raises:
        NotifyError: empty, relative, too long, or a transport other than ``AF_UNIX``.
    """
    if value.startswith("@"):
        name = value[1:].encode(errors="surrogateescape")  # as os.environ decoded it
        if not name:
            raise NotifyError("NOTIFY_SOCKET='@' names no abstract socket")
        if len(name) > MAX_SOCKET_PATH_BYTES:
            raise NotifyError(f"NOTIFY_SOCKET abstract name is longer than {MAX_SOCKET_PATH_BYTES}")
        return b"\0" + name
    if value.startswith("/"):
        if "\0" in value:
            raise NotifyError("NOTIFY_SOCKET holds a NUL byte")
        if len(value.encode(errors="surrogateescape")) > MAX_SOCKET_PATH_BYTES:
            raise NotifyError(f"NOTIFY_SOCKET path is longer than {MAX_SOCKET_PATH_BYTES} bytes")
        return value
    raise NotifyError(
        f"NOTIFY_SOCKET={value!r} is neither an absolute path nor an abstract '@name' "
        "(other transports are not supported)"
    )


def _positive_int(name: str, value: str, maximum: int) -> int:
    text = value.strip()
    if not text.isdigit() or not text.isascii():
        raise NotifyError(f"{name}={value!r} is not a positive integer")
    number = int(text)
    if number <= 0 or number > maximum:
        raise NotifyError(f"{name}={value!r} is out of range (1..{maximum})")
    return number


def watchdog_interval_s(usec: str | None, watchdog_pid: str | None, own_pid: int) -> float | None:
    """Return the watchdog interval this process must honour, in seconds, or None.

    None when the manager asked for no watchdog (``WATCHDOG_USEC`` unset) or asked another
    process (``WATCHDOG_PID`` names a different pid). The caller pings at half the value.

    Raises:
        NotifyError: ``WATCHDOG_USEC`` or ``WATCHDOG_PID`` is set but not a positive integer.
    """
    if usec is None:
        return None
    interval = _positive_int(WATCHDOG_USEC_VAR, usec, MAX_WATCHDOG_USEC)
    if watchdog_pid is not None and _positive_int(WATCHDOG_PID_VAR, watchdog_pid, 2**31) != own_pid:
        return None
    return interval / USEC_PER_S


def encode_message(fields: Iterable[tuple[str, str]]) -> bytes:
    """Encode notification fields as one datagram: ``NAME=VALUE`` lines.

    Raises:
        NotifyError: no field, a malformed name, a value holding a newline or NUL, or a
            datagram over :data:`MAX_MESSAGE_BYTES`.
    """
    lines = []
    for name, value in fields:
        if not _FIELD_NAME.fullmatch(name):
            raise NotifyError(f"notification field name {name!r} is not NAME_IN_CAPITALS")
        if "\n" in value or "\0" in value:
            raise NotifyError(f"notification field {name} holds a newline or NUL")
        lines.append(f"{name}={value}")
    if not lines:
        raise NotifyError("a notification needs at least one field")
    data = ("\n".join(lines) + "\n").encode()
    if len(data) > MAX_MESSAGE_BYTES:
        raise NotifyError(f"notification of {len(data)} bytes exceeds {MAX_MESSAGE_BYTES}")
    return data


def clean_status(text: str) -> str:
    """Make free text a safe one-line ``STATUS=`` value: no control characters, bounded."""
    line = _CONTROL_CHARS.sub(" ", text).strip()
    if len(line) > MAX_STATUS_CHARS:
        line = line[: MAX_STATUS_CHARS - 3] + "..."
    return line


def decode_message(data: bytes) -> dict[str, str]:
    """Decode one notification datagram into its fields (the listener's side, for tests
    and diagnostics). A line without ``=`` is skipped, as systemd does.

    Raises:
        NotifyError: the datagram is not UTF-8 or exceeds :data:`MAX_MESSAGE_BYTES`.
    """
    if len(data) > MAX_MESSAGE_BYTES:
        raise NotifyError(f"notification of {len(data)} bytes exceeds {MAX_MESSAGE_BYTES}")
    try:
        text = data.decode()
    except UnicodeDecodeError as exc:
        raise NotifyError("notification is not UTF-8") from exc
    fields: dict[str, str] = {}
    for line in text.split("\n"):
        name, sep, value = line.partition("=")
        if sep:
            fields[name] = value
    return fields
