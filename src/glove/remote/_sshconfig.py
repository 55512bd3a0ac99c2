"""The isolated OpenSSH client configuration and pinned known_hosts (sans-IO rendering).

The config is meant for ``ssh -F FILE glove-remote-backend``. ``-F`` makes OpenSSH read this
file only (neither ``~/.ssh/config`` nor ``/etc/ssh/ssh_config``), and the file has no
``Host`` or ``Match`` block and no ``Include``: every option applies to every destination
name, so no name can select different settings. What it pins, option by option:

* ``GlobalKnownHostsFile none`` and ``UserKnownHostsFile <pinned file>``: the only host key
  ever trusted is the one in ``[remote_backend] host_key``, recorded under the alias
  ``HostKeyAlias glove-remote-backend`` (so the port and address spelling never matter).
* ``HostKeyAlgorithms ssh-ed25519``: no other key type is negotiated.
* ``StrictHostKeyChecking yes``, ``UpdateHostKeys no``, ``CheckHostIP no``,
  ``VerifyHostKeyDNS no``: no host key is learnt, rotated in, or looked up in DNS.
* ``ControlMaster no``, ``ControlPath none``, ``ControlPersist no``: no connection sharing,
  so no other ssh process can ride on (or hijack) a session.
* ``BatchMode yes``, no agent, no forwarding, no local command, no proxy, no escape
  character, no TTY, no hostname canonicalization (which would resolve names).

Paths are double-quoted and ``%`` is doubled (``UserKnownHostsFile`` expands ``%`` tokens); a
path containing a double quote, a backslash or a control character is refused rather than
escaped, since an unusual runtime directory is more likely a mistake than a need.
"""

from __future__ import annotations

from typing import Final

from glove.remote._config import RemoteBackendConfig, check_host_key
from glove.remote.errors import RemoteFilesError

#: The destination name the runtime passes to ``ssh -F``; also the key's known_hosts name.
SSH_HOST_ALIAS: Final = "glove-remote-backend"

#: Options written after the destination lines, in order. Each is a (keyword, value) pair.
ISOLATION_OPTIONS: Final[tuple[tuple[str, str], ...]] = (
    ("HostKeyAlgorithms", "ssh-ed25519"),
    ("StrictHostKeyChecking", "yes"),
    ("UpdateHostKeys", "no"),
    ("CheckHostIP", "no"),
    ("VerifyHostKeyDNS", "no"),
    ("HashKnownHosts", "no"),
    ("ControlMaster", "no"),
    ("ControlPath", "none"),
    ("ControlPersist", "no"),
    ("CanonicalizeHostname", "no"),
    ("BatchMode", "yes"),
    ("PasswordAuthentication", "no"),
    ("KbdInteractiveAuthentication", "no"),
    ("HostbasedAuthentication", "no"),
    ("GSSAPIAuthentication", "no"),
    ("IdentitiesOnly", "yes"),
    ("IdentityAgent", "none"),
    ("AddKeysToAgent", "no"),
    ("ForwardAgent", "no"),
    ("ForwardX11", "no"),
    ("ClearAllForwardings", "yes"),
    ("PermitLocalCommand", "no"),
    ("ProxyCommand", "none"),
    ("ProxyJump", "none"),
    ("EnableEscapeCommandline", "no"),
    ("EscapeChar", "none"),
    ("RequestTTY", "no"),
)

_FORBIDDEN_PATH_CHARS: Final = frozenset('"\\') | frozenset(chr(c) for c in range(0x20)) | {"\x7f"}


def quote_config_path(path: str) -> str:
    """Return ``path`` as one double-quoted ssh_config argument with ``%`` doubled.

    Raises:
        RemoteFilesError: the path is relative or holds a quote, backslash or control char.
    """
    if not path.startswith("/"):
        raise RemoteFilesError(f"ssh_config paths must be absolute: {path!r}")
    bad = sorted(set(path) & _FORBIDDEN_PATH_CHARS)
    if bad:
        raise RemoteFilesError(
            f"the runtime directory path {path!r} holds characters ssh_config cannot carry "
            f"safely: {bad!r}"
        )
    return '"' + path.replace("%", "%%") + '"'


def render_ssh_config(section: RemoteBackendConfig, known_hosts_path: str) -> str:
    """Return the isolated client config for an already validated ``section``.

    Raises:
        RemoteFilesError: ``known_hosts_path`` cannot be written into the config safely.
    """
    lines = [
        "# Written by gloved for the construction-only remote_linux_container runtime.",
        f"# Use only as: ssh -F <this file> {SSH_HOST_ALIAS}. Regenerated at every start.",
        f"HostName {section.host}",
        f"Port {section.port}",
        f"User {section.user}",
        f"HostKeyAlias {SSH_HOST_ALIAS}",
        "GlobalKnownHostsFile none",
        f"UserKnownHostsFile {quote_config_path(known_hosts_path)}",
    ]
    lines.extend(f"{keyword} {value}" for keyword, value in ISOLATION_OPTIONS)
    return "\n".join(lines) + "\n"


def render_known_hosts(section: RemoteBackendConfig) -> str:
    """Return the pinned known_hosts: one line, the alias and the ``ssh-ed25519`` key.

    Raises:
        RemoteConfigError: the host key is not one ssh-ed25519 public key.
    """
    key_type, blob = check_host_key(section.host_key)
    return f"{SSH_HOST_ALIAS} {key_type} {blob}\n"
