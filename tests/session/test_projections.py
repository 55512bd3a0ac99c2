"""Projections through a real gloved, as root and as the unprivileged owner: the child
reads exactly the stored bytes and can change nothing of the mount; every refusal has its
own code in the receipt and runs nothing; a writer rewriting the stored bundle during
launches is never seen in a child; the launch binding and the receipt commit what was
mounted."""

from __future__ import annotations

import contextlib
import errno
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import Unpriv, readable_copy

from ._gloved import FAULTY_GLOVED, LIMITS, Gloved

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="needs root: two owners")

PROBE = Path(__file__).with_name("_projection_probe.py")
DRIVER = Path(__file__).with_name("_projection_driver.py")
#: gloved under a seccomp filter making fsopen/fsmount/fspick fail with ENOSYS.
NO_FSOPEN = Path(__file__).with_name("_no_fsopen.py")
SKILL_TARGET = "/skills/skill.md"
#: A second alias the same bundle is projected under in one session.
COPY_TARGET = "/skills/copy.md"
PROBE_TARGET = "/glove-probe/probe.py"
#: In the command line of the ``hold`` harness's shell (found in /proc by it).
HOLD_MARKER = "glove-projection-hold-5d1e"
#: Bound on waiting for a sandbox to show up or end.
EVENT_DEADLINE_S = 60.0
HARNESSES = f"""
[projections.skill]
target = "{SKILL_TARGET}"

[projections.probe]
target = "{PROBE_TARGET}"

[projections.copy]
target = "{COPY_TARGET}"

[harnesses.probe]
argv = ["/usr/bin/python3", "{PROBE_TARGET}", "{SKILL_TARGET}"]

[harnesses.sum]
argv = ["/usr/bin/sha256sum", "{SKILL_TARGET}"]

[harnesses.both]
argv = ["/usr/bin/sha256sum", "{SKILL_TARGET}", "{COPY_TARGET}"]

[harnesses.hold]
argv = ["/bin/sh", "-c", "/usr/bin/sha256sum {SKILL_TARGET} && /bin/sleep 60; : {HOLD_MARKER}"]
"""
SKILL = b"# a skill\n" + bytes(range(256)) * 256  # 64 KiB + 10 bytes
#: Launches per batch the racing writer runs against (GLOVE_PROJECTION_RACE_ROUNDS).
RACE_ROUNDS = int(os.environ.get("GLOVE_PROJECTION_RACE_ROUNDS", "200"))
#: Rewrites of the stored bundle that must happen during launches: batches of launches
#: go on until the writer has done this many (the issue's figure).
RACE_REWRITES = int(os.environ.get("GLOVE_PROJECTION_RACE_REWRITES", "10000"))
#: Rewrites (other bytes, then the bundle's own) in one burst of the racing writer.
REWRITE_BURST = 200


@dataclass
class Owner:
    """A running gloved of root or of the unprivileged user, with its library filled."""

    who: str
    home: Gloved
    uid: int
    gid: int
    other_uid: int
    python: str
    command: Any
    bundles: dict[str, dict[str, Any]]
    #: The freeze method its receipts must name (the fallback where fsopen is filtered).
    freeze_method: str = "detached-tmpfs"

    @property
    def library(self) -> Path:
        return self.home.state / "library"

    def stored(self, alias: str) -> Path:
        return self.library / ("sha256-" + self.bundles[alias]["digest"][7:])

    def add(self, name: str, data: bytes) -> dict[str, Any]:
        """``glove library add --json`` of ``data`` as the owner."""
        source = self.home.base / name
        source.write_bytes(data)
        os.chown(source, self.uid, self.gid)
        done = self.home.glove("library", "add", str(source), "--json")
        assert done.returncode == 0, done.stderr
        result: dict[str, Any] = json.loads(done.stdout)
        return result

    def plan(self, harness: str, *aliases: str, **changes: Any) -> dict[str, Any]:
        projections = [{"alias": a, **self.bundles[a]} for a in aliases]
        return {
            "version": 1,
            "harness": harness,
            "exposures": [],
            "limits": dict(LIMITS),
            "network": "none",
            "terminal": "pipes",
            "projections": projections,
            **changes,
        }

    def run(self, plans: list[dict[str, Any]], concurrency: int = 1) -> list[dict[str, Any]]:
        """Create each session as the owner and wait for it; the final views, in order."""
        plans_file = self.home.base / f"plans-{len(plans)}-{os.urandom(4).hex()}.json"
        plans_file.write_text(json.dumps(plans))
        os.chown(plans_file, self.uid, self.gid)
        driver = readable_copy(DRIVER)
        argv = self.command(self.python, str(driver), str(self.home.runtime), str(plans_file),
                            str(concurrency))  # fmt: skip
        done = subprocess.run(
            argv, env=self.home.env, capture_output=True, text=True, timeout=3600, check=False
        )
        assert done.returncode == 0, done.stderr
        finals: list[dict[str, Any]] = json.loads(done.stdout)
        return finals

    def stdout(self, view: dict[str, Any]) -> bytes:
        """What the session's command wrote (nothing when it never ran)."""
        path = self.home.state / "sessions-data" / view["session_id"] / "stdout"
        return path.read_bytes() if path.exists() else b""

    def receipt(self, view: dict[str, Any]) -> dict[str, Any]:
        done = self.home.glove("receipts", "page", "--json", "--limit", "1000")
        assert done.returncode == 0, done.stderr
        for item in json.loads(done.stdout)["receipts"]:
            if item["receipt"]["session_id"] == view["session_id"]:
                body: dict[str, Any] = item["receipt"]
                return body
        raise AssertionError(f"no receipt for {view['session_id']}")


@pytest.fixture(params=["root", "unpriv", "root-no-fsopen", "unpriv-no-fsopen"], scope="module")
def owner(request: pytest.FixtureRequest, unpriv: Unpriv) -> Iterator[Owner]:
    """gloved as root or as the unprivileged owner, with the skill and the probe stored;
    the ``-no-fsopen`` ones run where fsopen, fsmount and fspick fail with ENOSYS (a seccomp
    filter on gloved, inherited by its sandboxes), so every projection takes the fallback."""
    base = Path(tempfile.mkdtemp(prefix="glove-project-", dir="/var/tmp"))
    who, _, fault = request.param.partition("-")
    if who == "unpriv":
        uid, gid, other = unpriv.uid, unpriv.gid, 0
        home = Gloved(base, python=unpriv.python, creds=unpriv.credentials())
        python, command = unpriv.python, unpriv.command
    else:
        uid, gid, other = os.getuid(), os.getgid(), unpriv.uid
        home = Gloved(base)
        python, command = sys.executable, lambda *argv: list(argv)
    os.chown(base, uid, gid)
    home.setup(HARNESSES)
    method = "detached-tmpfs"
    if fault:
        home.start(entry=(str(readable_copy(NO_FSOPEN)),))
        method = "tmpfs-bind-remount"
    else:
        home.start()
    made = Owner(who, home, uid, gid, other, python, command, {}, method)
    try:
        made.bundles["skill"] = made.add("skill.md", SKILL)
        made.bundles["probe"] = made.add("probe.py", PROBE.read_bytes())
        yield made
    finally:
        home.stop()
        shutil.rmtree(base, ignore_errors=True)


def test_the_child_reads_the_bytes_and_cannot_change_the_mount(owner: Owner) -> None:
    """The command reads exactly the stored bytes at the target; writing (EROFS),
    remounting read-write, unmounting and mount_setattr clearing RDONLY or NOEXEC all fail
    (EPERM) and leave it ro,nosuid,nodev,noexec; no descriptor of it reaches the command,
    and its only mount in the sandbox is the one at its target."""
    with_skill, probe_only = owner.run(
        [owner.plan("probe", "probe", "skill"), owner.plan("probe", "probe")]
    )
    assert with_skill["outcome"]["kind"] == "exited", with_skill
    assert with_skill["outcome"]["exit_code"] == 0, with_skill
    report = json.loads(owner.stdout(with_skill))
    assert report["sha256"] == owner.bundles["skill"]["digest"]
    assert report["size"] == len(SKILL)
    assert report["write"] == errno.EROFS
    for attempt in ("remount_rw", "remount_sb_rw", "clear_rdonly", "clear_noexec", "umount"):
        assert report[attempt] == errno.EPERM, (attempt, report)
    assert report["umount_detach"] == errno.EPERM
    assert report["mount_cmd"] != 0
    assert report["umount_cmd"] != 0
    assert set(report["mountinfo"].split()[5].split(",")) >= {"ro", "nosuid", "nodev", "noexec"}
    assert report["after"] == report["sha256"]
    assert not any("sha256" in fd or "skill" in fd for fd in report["fds"]), report["fds"]
    # One projection more adds no descriptor: the command holds only its own stdio.
    assert probe_only["outcome"]["exit_code"] == 0, probe_only
    baseline = json.loads(owner.stdout(probe_only))
    assert len(report["fds"]) == len(baseline["fds"])
    # ... and exactly one mount, at its target: the parked copy stayed in the old root.
    assert sorted(report["mounts"]) == sorted([*baseline["mounts"], SKILL_TARGET])


def test_the_binding_and_the_receipt_commit_what_was_mounted(owner: Owner) -> None:
    """The terminal receipt lists each projection's alias, target, digest, size, mount flags
    and freeze method; the launch binding differs with a different projected bundle."""
    first, other = owner.run([owner.plan("sum", "skill"), owner.plan("sum", "probe", "skill")])
    assert first["outcome"]["exit_code"] == 0, first
    receipt = owner.receipt(first)
    assert receipt["projections"] == [
        {
            "alias": "skill",
            "target": SKILL_TARGET,
            "digest": owner.bundles["skill"]["digest"],
            "size": len(SKILL),
            "mount_flags": ["ro", "nosuid", "nodev", "noexec"],
            "freeze_method": owner.freeze_method,
        }
    ]
    assert receipt["launch_binding"] == first["launch_binding"]
    assert [p["alias"] for p in owner.receipt(other)["projections"]] == ["probe", "skill"]
    assert other["launch_binding"] != first["launch_binding"]
    assert owner.stdout(first).startswith(owner.bundles["skill"]["digest"][7:].encode())


def _status(pid: int, field: str) -> str:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(f"{field}:"):
            return line.split(":", 1)[1].strip()
    raise AssertionError(f"no {field} for {pid}")


def _cmdline(pid: int | str) -> bytes:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return b""


def _held_inits() -> list[int]:
    """The sandbox inits running the ``hold`` harness (its shell's parent)."""
    inits = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and HOLD_MARKER.encode() in _cmdline(entry.name):
            with contextlib.suppress(OSError, AssertionError):
                parent = int(_status(int(entry.name), "PPid"))
                if b"glove-init" in _cmdline(parent):
                    inits.append(parent)
    return inits


def test_a_projection_sessions_sandbox_is_the_launchers_child(owner: Owner) -> None:
    """gloved clones a session with projections in its launcher process too: the
    sandbox's init is the launcher's child (not gloved's), and the command reads the
    projected bytes; in all four freeze modes (root or not, fsopen or the fallback)."""
    assert owner.home.proc is not None
    gloved = owner.home.proc.pid
    launchers = [
        int(entry.name)
        for entry in Path("/proc").iterdir()
        if entry.name.isdigit()
        and _cmdline(entry.name).startswith(b"glove-launcher")
        and int(_status(int(entry.name), "PPid")) == gloved
    ]
    assert len(launchers) == 1, launchers
    plan_file = owner.home.base / f"hold-{os.urandom(4).hex()}.json"
    plan_file.write_text(json.dumps(owner.plan("hold", "skill")))
    os.chown(plan_file, owner.uid, owner.gid)
    done = owner.home.glove("session", "create", str(plan_file), "--json")
    assert done.returncode == 0, done.stdout + done.stderr
    session = str(json.loads(done.stdout)["session_id"])
    try:
        deadline = time.monotonic() + EVENT_DEADLINE_S
        while not (inits := _held_inits()):
            assert time.monotonic() < deadline, owner.home.stderr()
            time.sleep(0.05)
        assert [int(_status(init, "PPid")) for init in inits] == launchers
    finally:
        stopped = owner.home.glove("session", "stop", session)
        assert stopped.returncode == 0, stopped.stdout + stopped.stderr
        owner.home.glove("session", "wait", session, "--json")
    digest = owner.bundles["skill"]["digest"][7:]
    path = owner.home.state / "sessions-data" / session / "stdout"
    assert path.read_bytes().startswith(digest.encode())


def test_one_bundle_under_two_aliases_is_at_both_targets(owner: Owner) -> None:
    """The same bundle named under two aliases in one session (one tmpfs holds a session's
    projections) is at both targets, whole, and the receipt lists each alias."""
    owner.bundles["copy"] = owner.bundles["skill"]
    (view,) = owner.run([owner.plan("both", "skill", "copy")])
    assert view["outcome"]["exit_code"] == 0, view
    digest = owner.bundles["skill"]["digest"][7:]
    lines = owner.stdout(view).decode().splitlines()
    assert lines == [f"{digest}  {SKILL_TARGET}", f"{digest}  {COPY_TARGET}"]
    entries = owner.receipt(view)["projections"]
    assert [(e["alias"], e["target"], e["digest"]) for e in entries] == [
        ("skill", SKILL_TARGET, owner.bundles["skill"]["digest"]),
        ("copy", COPY_TARGET, owner.bundles["skill"]["digest"]),
    ]
    assert {e["freeze_method"] for e in entries} == {owner.freeze_method}


def _refused(owner: Owner, code: str) -> None:
    """One session of ``sum`` is refused with ``code`` and nothing of it ran."""
    (view,) = owner.run([owner.plan("sum", "skill")])
    outcome = view["outcome"]
    assert outcome["kind"] == "setup_error", view
    assert outcome.get("error_code") == code, view
    assert outcome["exit_code"] is None
    assert owner.stdout(view) == b""
    receipt = owner.receipt(view)
    assert receipt["outcome"]["error_code"] == code
    assert receipt["times"]["launched_us"] is None


def test_every_attack_on_the_stored_bundle_has_its_own_code(owner: Owner) -> None:
    """A symlink, a hard link, a FIFO, another owner, group write and changed bytes under
    the bundle's name: each session is a setup_error with its code and nothing runs; the
    store restored, the session runs."""
    stored = owner.stored("skill")
    aside = owner.home.base / "aside"
    shutil.copy2(stored, aside)

    def restore() -> None:
        stored.unlink(missing_ok=True)
        shutil.copy2(aside, stored)
        os.chown(stored, owner.uid, owner.gid)
        stored.chmod(0o400)

    elsewhere = owner.home.base / "elsewhere"
    shutil.copy2(aside, elsewhere)
    os.chown(elsewhere, owner.uid, owner.gid)
    elsewhere.chmod(0o400)
    stored.unlink()
    stored.symlink_to(elsewhere)
    _refused(owner, "projection_symlink")
    restore()
    link = owner.library.parent / "second-link"
    os.link(stored, link)
    _refused(owner, "projection_hardlinked")
    link.unlink()
    stored.unlink()
    os.mkfifo(stored, 0o400)
    os.chown(stored, owner.uid, owner.gid)
    _refused(owner, "projection_not_regular")
    restore()
    os.chown(stored, owner.other_uid, owner.gid)
    _refused(owner, "projection_wrong_owner")
    restore()
    stored.chmod(0o420)
    _refused(owner, "projection_writable")
    restore()
    with stored.open("r+b") as handle:  # root writes through the 0400 mode: same size
        handle.write(b"# A skill")
    _refused(owner, "projection_digest_mismatch")
    restore()
    (view,) = owner.run([owner.plan("sum", "skill")])
    assert view["outcome"]["exit_code"] == 0, view


def test_bad_references_are_invalid_plans_with_their_path(owner: Owner) -> None:
    """An unknown alias, a malformed or traversing digest, a size that is not the stored
    one, an alias named twice: plan.validate answers invalid_plan with each JSON path."""
    plan = owner.plan("sum", "skill")
    entry = plan["projections"][0]
    cases = [
        ([{**entry, "alias": "nosuch"}], "$.projections[0].alias"),
        ([{**entry, "digest": "sha256:../../etc/passwd"}], "$.projections[0].digest"),
        ([{**entry, "size": entry["size"] + 1}], "$.projections[0].size"),
        ([entry, entry], "$.projections[1].alias"),
    ]
    for projections, path in cases:
        plan_file = owner.home.base / "bad-plan.json"
        plan_file.write_text(json.dumps({**plan, "projections": projections}))
        os.chown(plan_file, owner.uid, owner.gid)
        done = owner.home.glove("plan", "validate", str(plan_file), "--json")
        assert done.returncode == 1, done
        assert path in done.stdout + done.stderr, (path, done.stdout, done.stderr)


def test_a_rewriting_writer_is_never_seen_in_a_child(owner: Owner) -> None:
    """While the stored bundle is rewritten in place over and over (other bytes, then its
    own, in bursts), every session that ran saw exactly the planned bytes; every other one
    was refused with a projection code before anything ran. An unprivileged gloved reads
    the bundle at prepare and again in the init: any write in between refuses the launch
    (its identity changed), so there most launches are refused."""
    stored = owner.stored("skill")
    other = bytes(reversed(SKILL))
    stop = threading.Event()
    rewrites = 0

    def writer() -> None:
        nonlocal rewrites
        with stored.open("r+b", buffering=0) as handle:
            while not stop.is_set():
                for _ in range(REWRITE_BURST):
                    for data in (other, SKILL):
                        os.pwrite(handle.fileno(), data, 0)
                    rewrites += 1
                # Bursts with the planned bytes back in place between them, so that some
                # launches get through: a writer that never stops refuses them all.
                stop.wait(0.2)

    thread = threading.Thread(target=writer)
    thread.start()
    finals: list[dict[str, Any]] = []
    try:
        while rewrites < RACE_REWRITES:
            finals += owner.run([owner.plan("sum", "skill")] * RACE_ROUNDS, concurrency=16)
    finally:
        stop.set()
        thread.join()
    want = owner.bundles["skill"]["digest"][7:].encode()
    ran = refused = 0
    for view in finals:
        outcome = view["outcome"]
        if outcome["kind"] == "exited":
            assert outcome["exit_code"] == 0, view
            assert owner.stdout(view).split()[0] == want, view
            ran += 1
        else:
            assert outcome["kind"] == "setup_error", view
            assert outcome.get("error_code") in {
                "projection_digest_mismatch",
                "projection_changed",
            }, view
            assert owner.stdout(view) == b""
            refused += 1
    assert ran + refused == len(finals) >= RACE_ROUNDS
    assert rewrites >= RACE_REWRITES
    if owner.freeze_method == "detached-tmpfs" and owner.who == "root":  # frozen at prepare:
        # only a burst during that one read refuses it
        assert ran > 0, "every launch was refused: the race was never run"


def test_a_third_party_recomputes_a_projection_offline(owner: Owner) -> None:
    """``glove receipts verify --library FILE`` hashes the file and finds it among the
    receipt's projections; a file that is none of them fails with exit 4."""
    (view,) = owner.run([owner.plan("sum", "skill")])
    assert view["outcome"]["exit_code"] == 0, view
    key = owner.home.glove("receipts", "public-key")
    assert key.returncode == 0, key.stderr
    public = owner.home.base / "log.pub"
    public.write_text(key.stdout)
    bundle = owner.home.base / f"bundle-{view['session_id']}.json"
    exported = owner.home.glove("receipts", "export", view["session_id"], "-o", str(bundle))
    assert exported.returncode == 0, exported.stdout + exported.stderr
    skill = owner.home.base / "skill.md"
    done = owner.home.glove(
        "receipts", "verify", str(bundle), "--public-key", str(public), "--json",
        "--library", str(skill),
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    checked = json.loads(done.stdout)["projections_verified"]
    assert checked == [
        {
            "alias": "skill",
            "target": SKILL_TARGET,
            "digest": owner.bundles["skill"]["digest"],
            "size": len(SKILL),
            "file": str(skill),
        }
    ]
    forged = owner.home.base / "forged.md"
    forged.write_bytes(SKILL[:-1] + b"!")
    os.chown(forged, owner.uid, owner.gid)
    done = owner.home.glove(
        "receipts", "verify", str(bundle), "--public-key", str(public), "--library", str(forged)
    )
    assert done.returncode == 4, done.stdout + done.stderr
    assert "is not a projection of this receipt" in done.stderr


@pytest.mark.parametrize("who", ["root", "unpriv"])
def test_recovered_and_internal_error_receipts_list_the_projections(
    who: str, unpriv: Unpriv
) -> None:
    """gloved SIGKILLed once a session with a projection launched: after the restart its
    daemon_lost receipt lists the projection as the durable ``composed`` step committed it;
    a session whose finalize fails gets an internal_error receipt listing it too."""
    base = Path(tempfile.mkdtemp(prefix="glove-project-lost-", dir="/var/tmp"))
    if who == "unpriv":
        uid, gid = unpriv.uid, unpriv.gid
        home = Gloved(base, python=unpriv.python, creds=unpriv.credentials())
    else:
        uid, gid = os.getuid(), os.getgid()
        home = Gloved(base)
    os.chown(base, uid, gid)
    try:
        home.setup(HARNESSES)
        home.start(entry=(*FAULTY_GLOVED, "--fault", "launch:sum:kill", "--"))
        made = Owner(who, home, uid, gid, 0, home.python, None, {})
        made.bundles["skill"] = made.add("skill.md", SKILL)
        plan_file = base / "plan.json"
        plan_file.write_text(json.dumps(made.plan("sum", "skill")))
        os.chown(plan_file, uid, gid)
        created = home.glove("session", "create", str(plan_file), "--json")
        assert created.returncode == 0, created.stdout + created.stderr
        lost_id = json.loads(created.stdout)["session_id"]
        assert home.proc is not None
        assert home.proc.wait(timeout=60) == -9, home.stderr()
        want = [
            {
                "alias": "skill",
                "target": SKILL_TARGET,
                "digest": made.bundles["skill"]["digest"],
                "size": len(SKILL),
                "mount_flags": ["ro", "nosuid", "nodev", "noexec"],
                "freeze_method": "detached-tmpfs",
            }
        ]
        home.start(entry=(*FAULTY_GLOVED, "--fault", "finalize:sum", "--"))
        lost = made.receipt({"session_id": lost_id})
        assert lost["outcome"]["kind"] == "daemon_lost", lost
        assert lost["projections"] == want
        created = home.glove("session", "create", str(plan_file), "--json")
        assert created.returncode == 0, created.stdout + created.stderr
        failed_id = json.loads(created.stdout)["session_id"]
        waited = home.glove("session", "wait", failed_id, "--json")
        assert json.loads(waited.stdout)["outcome"]["kind"] == "internal_error", waited.stdout
        failed = made.receipt({"session_id": failed_id})
        assert failed["outcome"]["kind"] == "internal_error", failed
        assert failed["projections"] == want
    finally:
        home.stop()
        shutil.rmtree(base, ignore_errors=True)


def test_capabilities_say_schema_1_only_with_the_library_store(tmp_path: Path) -> None:
    """A gloved whose library root is unsafe (group-writable) runs sessions but reports
    schema_version 0, leaves the root as it is and refuses every projection; with the
    store constructed it reports 1."""
    base = Path(tempfile.mkdtemp(prefix="glove-caps-", dir="/var/tmp"))
    home = Gloved(base)
    try:
        home.setup(HARNESSES)
        library = home.state / "library"
        library.mkdir(mode=0o700, parents=True)
        library.chmod(0o770)
        home.start()
        caps = json.loads(home.glove("capabilities", "--json").stdout)
        assert caps["lifecycle_operational"] is True
        assert caps["schema_version"] == 0
        plan = tmp_path / "plan.json"
        digest = "sha256:" + "ab" * 32
        doc = {"version": 1, "harness": "sum", "exposures": [], "limits": LIMITS,
               "network": "none", "terminal": "pipes",
               "projections": [{"alias": "skill", "digest": digest, "size": 1}]}  # fmt: skip
        plan.write_text(json.dumps(doc))
        done = home.glove("plan", "validate", str(plan), "--json")
        assert done.returncode == 1
        assert "no library store" in done.stdout + done.stderr
        assert library.stat().st_mode & 0o777 == 0o770
        home.stop()
        library.chmod(0o700)
        home.start()
        caps = json.loads(home.glove("capabilities", "--json").stdout)
        assert caps["schema_version"] == 1
    finally:
        home.stop()
        shutil.rmtree(base, ignore_errors=True)
