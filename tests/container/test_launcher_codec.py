"""The launcher channel's codec: every message round-trips; every malformed record is
refused whole, with a typed error whose code says why (pure: no process, no socket)."""

from __future__ import annotations

import msgspec
import pytest

from glove.container import ProjectionRecord, SandboxSpec
from glove.container.linux._launcher_codec import (
    MAX_FDS,
    MAX_FRAME_BYTES,
    PROTOCOL_VERSION,
    Exited,
    Failed,
    Hello,
    Launch,
    Launched,
    LauncherProtocolError,
    Message,
    decode,
    encode,
    fd_count,
)

SPEC = SandboxSpec(argv=("/bin/true",), env={"PATH": "/usr/bin"})
FROZEN = ProjectionRecord(
    alias="skill",
    target="/skills/skill.md",
    digest="sha256:" + "a" * 64,
    size=10,
    freeze_method="detached-tmpfs",
    kind="frozen",
    inode=(42, 7),
)
BUNDLE = msgspec.structs.replace(FROZEN, target="/skills/b.md", kind="bundle", identity=(1, 2))
MESSAGES: list[Message] = [
    Hello(PROTOCOL_VERSION, 1234),
    Launch(id=1, spec=SPEC, stdio=(True, True, False), pass_targets=(3, 7)),
    Launch(id=3, spec=SPEC, stdio=(True, True, True), projections=(FROZEN, BUNDLE)),
    Launched(id=1, pid=99, plans={}, setup_s=0.004, cgroup_v2="/sys/fs/cgroup/x", notify=True),
    Exited(id=1, wait_status=256),
    Failed(id=2, kind="limit", message="no cgroup", limit="memory"),
]


@pytest.mark.parametrize("message", MESSAGES, ids=lambda m: type(m).__name__)
def test_every_message_round_trips_with_its_descriptor_count(message: Message) -> None:
    assert decode(encode(message), fd_count(message)) == message


def test_descriptor_counts_follow_the_message() -> None:
    assert fd_count(MESSAGES[1]) == 4  # stdin, stdout, then fds 3 and 7
    assert fd_count(MESSAGES[3]) == 3  # pidfd, status pipe, notify channel
    assert fd_count(Launched(id=1, pid=2, plans={}, setup_s=0.0, pty=True, notify=True)) == 4
    assert fd_count(MESSAGES[2]) == 5  # stdio, then one per projection
    assert fd_count(MESSAGES[0]) == fd_count(MESSAGES[4]) == fd_count(MESSAGES[5]) == 0


def _refused(data: bytes, fds: int = 0, *, truncated: bool = False) -> str:
    with pytest.raises(LauncherProtocolError) as caught:
        decode(data, fds, truncated=truncated)
    return caught.value.code


def test_garbage_empty_and_truncated_records_are_refused() -> None:
    assert _refused(b"") == "malformed"
    assert _refused(b"\xc1\xc1\xc1") == "malformed"  # not msgpack
    assert _refused(msgspec.msgpack.encode([1, 2, 3])) == "malformed"  # not a message
    assert _refused(encode(MESSAGES[4]), truncated=True) == "oversized"
    assert _refused(b"\x00" * (MAX_FRAME_BYTES + 1)) == "oversized"


def test_unknown_types_fields_and_wrong_field_types_are_refused() -> None:
    assert _refused(msgspec.msgpack.encode({"type": "reboot", "id": 1})) == "malformed"
    extra = {"type": "exited", "id": 1, "wait_status": 0, "also": "this"}
    assert _refused(msgspec.msgpack.encode(extra)) == "malformed"
    wrong = {"type": "exited", "id": "one", "wait_status": 0}
    assert _refused(msgspec.msgpack.encode(wrong)) == "malformed"
    kind = {"type": "failed", "id": 1, "kind": "whatever", "message": "x"}
    assert _refused(msgspec.msgpack.encode(kind)) == "malformed"


def test_a_spec_the_spec_itself_refuses_is_refused_as_malformed() -> None:
    raw = msgspec.to_builtins(MESSAGES[1])
    raw["spec"]["argv"] = [""]  # SandboxSpec's own check: no command
    assert _refused(msgspec.msgpack.encode(raw), 4) == "malformed"


def test_a_record_with_other_descriptors_than_its_message_is_refused() -> None:
    data = encode(MESSAGES[1])
    assert _refused(data, 3) == "descriptors"
    assert _refused(data, 5) == "descriptors"
    assert _refused(encode(MESSAGES[4]), 1) == "descriptors"
    assert _refused(encode(MESSAGES[2]), 3) == "descriptors"  # a projection's missing


def test_a_projection_record_of_another_shape_is_refused() -> None:
    raw = msgspec.to_builtins(MESSAGES[2])
    raw["projections"][0]["kind"] = "directory"
    assert _refused(msgspec.msgpack.encode(raw), 5) == "malformed"
    raw = msgspec.to_builtins(MESSAGES[2])
    raw["projections"][1]["inode"] = [1, 2, 3]
    assert _refused(msgspec.msgpack.encode(raw), 5) == "malformed"
    raw = msgspec.to_builtins(MESSAGES[2])
    raw["projections"][0]["mount_fd"] = 9  # descriptors travel as descriptors only
    assert _refused(msgspec.msgpack.encode(raw), 5) == "malformed"


def test_a_launch_cannot_smuggle_descriptor_numbers_or_name_a_target_twice() -> None:
    smuggled = msgspec.to_builtins(MESSAGES[1])
    smuggled["spec"]["pass_fds"] = {"3": 0}
    assert _refused(msgspec.msgpack.encode(smuggled), 4) == "malformed"
    twice = Launch(id=1, spec=SPEC, stdio=(False, False, False), pass_targets=(3, 3))
    with pytest.raises(LauncherProtocolError) as caught:
        encode(twice)
    assert caught.value.code == "malformed"
    raw = msgspec.to_builtins(twice)
    assert _refused(msgspec.msgpack.encode(raw), 2) == "malformed"


@pytest.mark.parametrize("target", [-1, 0, 1, 2, 256])
def test_a_launch_cannot_pass_a_descriptor_onto_stdio_or_past_the_limit(target: int) -> None:
    """A pass-fd target of 0-2 would replace the command's stdio: refused by the sender and
    by the launcher's decoder alike, as a protocol error (the launcher would otherwise meet
    it only as the spec's SpecError, outside its reply path, when it fills ``pass_fds``)."""
    low = Launch(id=1, spec=SPEC, stdio=(False, False, False), pass_targets=(target,))
    with pytest.raises(LauncherProtocolError) as caught:
        encode(low)
    assert caught.value.code == "malformed"
    assert _refused(msgspec.msgpack.encode(msgspec.to_builtins(low)), 1) == "malformed"


def test_the_sender_refuses_what_the_channel_cannot_carry() -> None:
    big = SandboxSpec(argv=("/bin/true",), env={"X": "y" * MAX_FRAME_BYTES})
    with pytest.raises(LauncherProtocolError) as caught:
        encode(Launch(id=1, spec=big, stdio=(True, True, True)))
    assert caught.value.code == "oversized"
    many = Launch(id=1, spec=SPEC, stdio=(True, True, True), pass_targets=tuple(range(3, 70)))
    with pytest.raises(LauncherProtocolError) as caught:
        encode(many)
    assert caught.value.code == "descriptors"
    assert fd_count(many) > MAX_FDS
