"""Compose a session's sandbox from its validated plan, and the launch binding (pure-ish).

The sandbox of a gloved session takes its command, environment and profile from the
harness in ``gloved.toml``, its host paths from the resolved exposures (never from the
plan), and its limits from the plan (already checked against the local maxima). The
**launch binding** is the SHA-256 of the RFC 8785 canonical JSON of everything the launch
uses: the plan's digests, the complete sandbox spec, and each exposure's identity (device,
inode, generation), and each projection's alias, target, digest, size, mount flags and
freeze method. The terminal receipt commits to it, so a receipt says exactly what ran.
"""

from __future__ import annotations

import hashlib
from typing import Any, NotRequired, TypedDict

import msgspec

from glove.container import Bind, Limits, SandboxSpec, build_spec, load_profile
from glove.container import Overrides as SpecOverrides
from glove.plan import jcs_dumps
from glove.records import Projection
from glove.session._exposures import Exposure


def compose_spec(
    *,
    argv: tuple[str, ...],
    env: dict[str, str],
    profile: str | None,
    binds: list[Bind],
    limits: Limits,
    accept_weaker: frozenset[str],
    pty: bool = False,
) -> SandboxSpec:
    """The sandbox of one session: the harness's profile, no workspace of the caller's, the
    exposures as binds, the plan's limits, the harness's command and environment.

    Raises:
        ProfileError: the harness's profile cannot be loaded.
        SpecError: the combination is invalid.
    """
    base = load_profile(profile)
    spec = build_spec(
        msgspec.structs.replace(
            base, workspace=msgspec.structs.replace(base.workspace, enabled=False)
        ),
        list(argv),
        cwd="/",
        host_env={},
        overrides=SpecOverrides(binds=tuple(binds), env=dict(env), pty=pty),
    )
    cwd = binds[0].destination if binds else "/"
    return msgspec.structs.replace(
        spec, limits=limits, accept_weaker=frozenset(accept_weaker), cwd=cwd
    )


class _Digests(TypedDict):
    sha256: str
    blake3: str


class _BoundExposure(TypedDict):
    path: str
    dev: int
    ino: int
    generation: int
    mode: str
    target: str


class _LaunchBinding(TypedDict):
    """What ``launch_binding`` hashes (``glove-launch-binding/v1``, RFC 8785)."""

    binding: str
    plan: _Digests
    spec: Any  # the SandboxSpec's builtins: its own type is the Struct
    exposures: dict[str, _BoundExposure]
    projections: NotRequired[list[Any]]


def launch_binding(
    spec: SandboxSpec,
    plan_sha256: str,
    plan_blake3: str,
    exposures: list[Exposure],
    projections: list[Projection] | None = None,
) -> str:
    """The digest of everything the launch uses (``sha256:<hex>``); ``projections`` (each
    projection's receipt entry) are in it only when there are some."""
    binding: _LaunchBinding = {
        "binding": "glove-launch-binding/v1",
        "plan": {"sha256": plan_sha256, "blake3": plan_blake3},
        "spec": msgspec.to_builtins(spec, order="sorted", str_keys=True),
        "exposures": {
            e.alias: {
                "path": e.path,
                "dev": e.dev,
                "ino": e.ino,
                "generation": e.generation,
                "mode": e.mode,
                "target": e.target,
            }
            for e in exposures
        },
    }
    if projections:
        binding["projections"] = [msgspec.to_builtins(p) for p in projections]
    return "sha256:" + hashlib.sha256(jcs_dumps(binding)).hexdigest()
