"""The sandbox's seccomp filters compiled ahead of time, shipped beside the code.

Compiling the filter with libseccomp costs a ``glove exec`` (a fresh process) about 5 ms
quiet: importing pyseccomp (its ctypes bindings) and two compiles. The filter is the same
for every launch on one machine: it depends only on the rules (:func:`filter_rules`, no
profile field reaches it), the architecture, the libseccomp that compiles them and the
kernel's seccomp API level libseccomp reads. ``seccomp-programs.json`` holds each variant's
BPF with those four as its key; :func:`packed_program` serves one only while all four match
this process (the rules are compared whole, not by a digest) and the program's SHA-256
matches. It is package data, written by :func:`pack` when the rules change (a test checks it
is current), as trusted as the module that would compile the filter instead: whoever can
write it can write ``_seccomp.py``. It is never a per-user cache (decision 0056).
"""

from __future__ import annotations

import ctypes
import os
import stat
from pathlib import Path
from typing import Any, Final

import msgspec

#: The packed programs, beside this module.
PACKED_FILE: Final = Path(__file__).with_name("seccomp-programs.json")
#: Upper bound on a program read back (BPF programs are limited to 4096 instructions).
_MAX_FILE_BYTES: Final = 1 << 20


class PackedProgram(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    notify: bool
    gate: bool
    #: The rules it was compiled from (compared whole with this process's).
    rules: list[Any]
    #: The classic BPF program, hex.
    bpf: str
    #: SHA-256 of the program (a corruption check: the file is as trusted as the code).
    sha256: str


class PackedPrograms(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    arch: str
    libseccomp: str
    api: int
    programs: tuple[PackedProgram, ...]


_libseccomp_key: list[tuple[str, int] | None] = []


def libseccomp_key() -> tuple[str, int] | None:
    """This process's libseccomp version and the kernel's seccomp API level as libseccomp
    reads it (a dlopen by soname, no pyseccomp); None if libseccomp does not load."""
    if not _libseccomp_key:
        try:
            lib = ctypes.CDLL("libseccomp.so.2")
            lib.seccomp_version.restype = ctypes.POINTER(ctypes.c_uint * 3)
            lib.seccomp_api_get.restype = ctypes.c_uint
            major, minor, micro = lib.seccomp_version().contents
            _libseccomp_key.append((f"{major}.{minor}.{micro}", int(lib.seccomp_api_get())))
        except (OSError, AttributeError, ValueError):
            _libseccomp_key.append(None)
    return _libseccomp_key[0]


def _sha256(data: bytes) -> str:
    try:  # the builtin module: hashlib would load and initialise OpenSSL (about 4 ms)
        from _sha256 import sha256  # type: ignore[import-not-found,unused-ignore]
    except ImportError:
        try:
            from _sha2 import sha256  # type: ignore[import-not-found,no-redef,unused-ignore]
        except ImportError:
            from hashlib import sha256  # type: ignore[assignment,unused-ignore]
    digest: str = sha256(data).hexdigest()
    return digest


def _read(path: Path) -> bytes | None:
    """The file's bytes if it is a regular file (not a link) owned by root or this user and
    writable by no one else; None otherwise."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        st = os.fstat(fd)
        if (
            not stat.S_ISREG(st.st_mode)
            or st.st_uid not in (0, os.geteuid())
            or st.st_mode & (stat.S_IWGRP | stat.S_IWOTH)
            or st.st_size > _MAX_FILE_BYTES
        ):
            return None
        return os.read(fd, _MAX_FILE_BYTES + 1)
    except OSError:
        return None
    finally:
        os.close(fd)


def packed_program(
    notify: bool, gate: bool, rules: Any, max_bytes: int, path: Path = PACKED_FILE
) -> bytes | None:
    """The packed program for (``notify``, ``gate``) compiled from exactly ``rules`` on this
    architecture, libseccomp and kernel API level, its digest verified; None if there is no
    such program (the caller compiles the filter)."""
    data = _read(path)
    key = libseccomp_key()
    if data is None or key is None:
        return None
    try:
        packed = msgspec.json.decode(data, type=PackedPrograms)
    except msgspec.DecodeError:
        return None
    if (packed.arch, packed.libseccomp, packed.api) != (os.uname().machine, *key):
        return None
    wanted = msgspec.json.decode(msgspec.json.encode(rules))  # tuples as JSON lists
    for entry in packed.programs:
        if (entry.notify, entry.gate) == (notify, gate) and entry.rules == wanted:
            return _verified(entry, max_bytes)
    return None


def _verified(entry: PackedProgram, max_bytes: int) -> bytes | None:
    """The entry's program if it decodes, is whole instructions within ``max_bytes`` and
    matches its digest."""
    try:
        program = bytes.fromhex(entry.bpf)
    except ValueError:
        return None
    if not 0 < len(program) <= max_bytes or len(program) % 8 or _sha256(program) != entry.sha256:
        return None
    return program


def pack(programs: dict[tuple[bool, bool], tuple[Any, bytes]]) -> bytes:
    """The packed file's bytes for ``programs`` ((notify, gate) -> (rules, BPF)), keyed by
    this machine's architecture, libseccomp and kernel API level.

    Raises:
        OSError: libseccomp does not load.
    """
    key = libseccomp_key()
    if key is None:
        raise OSError("libseccomp.so.2 does not load")
    entries = tuple(
        PackedProgram(
            notify=notify,
            gate=gate,
            rules=msgspec.json.decode(msgspec.json.encode(rules)),
            bpf=bpf.hex(),
            sha256=_sha256(bpf),
        )
        for (notify, gate), (rules, bpf) in sorted(programs.items())
    )
    packed = PackedPrograms(os.uname().machine, key[0], key[1], entries)
    return msgspec.json.encode(packed) + b"\n"
