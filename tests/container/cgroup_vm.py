"""A throwaway virtual machine with a pure cgroup v2 hierarchy, for the controller paths.

This host binds memory, pids and cpu to cgroup v1, so no v2 hierarchy here has a controller
(a cgroup2 mount in a private mount namespace shows the same empty tree). A guest kernel
does: :func:`run_in_guest` boots Debian's kernel under QEMU (TCG: nested KVM hangs on this
machine) with this machine's root filesystem shared read-only over 9p, a tmpfs ``/tmp`` and
``/run``, cgroup2 alone at ``/sys/fs/cgroup`` with every controller, and runs one script as
the guest's first process. The guest writes its findings into a shared directory; the host
reads them after the guest powers off. Nothing in the guest can touch this machine's
processes or cgroups.
"""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import tempfile
from pathlib import Path
from typing import Final

#: Where scripts/setup puts the guest kernel (Debian's linux-image-amd64), and busybox.
KERNEL_GLOB: Final = "vmlinuz-*"
BUSYBOX: Final = Path("/bin/busybox")
QEMU: Final = "qemu-system-x86_64"
#: Guest memory and the deadline of one boot-run-poweroff cycle.
GUEST_MEMORY_MB: Final = 1024
GUEST_DEADLINE_S: Final = 420.0
#: The modules the guest needs for a 9p root over virtio-pci, in load order.
GUEST_MODULES: Final = (
    "drivers/virtio/virtio_ring.ko",
    "drivers/virtio/virtio.ko",
    "drivers/virtio/virtio_pci_legacy_dev.ko",
    "drivers/virtio/virtio_pci_modern_dev.ko",
    "drivers/virtio/virtio_pci.ko",
    "fs/netfs/netfs.ko",
    "fs/fscache/fscache.ko",
    "net/9p/9pnet.ko",
    "net/9p/9pnet_virtio.ko",
    "fs/9p/9p.ko",
)
_NINEP: Final = "trans=virtio,version=9p2000.L,msize=262144"

STAGE1: Final = f"""#!/bin/busybox sh
/bin/busybox --install -s /bin
mount -t proc proc /proc
mount -t sysfs sys /sys
mount -t devtmpfs dev /dev
for m in $(cat /modules); do insmod /mod/$(basename $m) || echo "insmod $m failed"; done
mount -t 9p -o {_NINEP},ro hostroot /newroot || echo "no 9p root"
mount -t tmpfs -o mode=1777 tmpfs /newroot/tmp
mount -t tmpfs tmpfs /newroot/run
mount -t 9p -o {_NINEP},rw out "/newroot$(cat /outdir)"
mount --move /dev /newroot/dev
mount --move /proc /newroot/proc
mount --move /sys /newroot/sys
exec switch_root /newroot /bin/sh "$(cat /outdir)/guest.sh"
"""

STAGE2: Final = """#!/bin/sh
mount -t cgroup2 none /sys/fs/cgroup
echo "+cpu +memory +pids" > /sys/fs/cgroup/cgroup.subtree_control
hostname glove-vm
ip link set lo up 2>/dev/null
cd "$OUT"
env -i PATH=/usr/local/bin:/usr/bin:/bin HOME=/tmp LANG=C.UTF-8 PYTHONDONTWRITEBYTECODE=1 \\
    GLOVE_UNPRIV_PYTHON="$UNPRIV_PYTHON" GLOVE_UNPRIV_USER="$UNPRIV_USER" \\
    "$PYTHON" "$OUT/scenario.py" "$OUT" > "$OUT/stdout" 2> "$OUT/stderr"
echo $? > "$OUT/rc"
sync
echo o > /proc/sysrq-trigger
sleep 10
"""


def guest_kernel() -> tuple[Path, Path] | None:
    """The newest installed Debian kernel image and its module tree, or None."""
    images = sorted(Path("/boot").glob(KERNEL_GLOB))
    for image in reversed(images):
        release = image.name.removeprefix("vmlinuz-")
        modules = Path("/lib/modules") / release / "kernel"
        if all((modules / m).exists() for m in GUEST_MODULES):
            return image, modules
    return None


def missing_tools() -> list[str]:
    """What the guest needs that this machine lacks (scripts/setup installs all of it)."""
    missing = []
    if shutil.which(QEMU) is None:
        missing.append("qemu-system-x86 (qemu-system-x86_64)")
    if guest_kernel() is None:
        missing.append("linux-image-amd64 (a kernel with 9p and virtio modules)")
    if not BUSYBOX.exists():
        missing.append("busybox-static (/bin/busybox)")
    return missing


def _cpio_entry(name: str, mode: int, data: bytes = b"") -> bytes:
    """One ``newc`` cpio record (what the kernel unpacks an initramfs from)."""
    encoded = name.encode() + b"\0"
    fields = [0, mode, 0, 0, 1, 0, len(data), 0, 0, 0, 0, len(encoded), 0]
    header = b"070701" + b"".join(b"%08X" % value for value in fields)
    record = header + encoded
    record += b"\0" * (-len(record) % 4)
    record += data
    record += b"\0" * (-len(record) % 4)
    return record


def build_initramfs(path: Path, out_dir: Path, modules: Path) -> None:
    """Write the stage-1 initramfs: busybox, the 9p modules and the /init that mounts the
    shared root and switches to it."""
    dirs = ("bin", "dev", "proc", "sys", "newroot", "mod")
    parts = [_cpio_entry(d, stat.S_IFDIR | 0o755) for d in dirs]
    parts.append(_cpio_entry("bin/busybox", stat.S_IFREG | 0o755, BUSYBOX.read_bytes()))
    parts.append(_cpio_entry("init", stat.S_IFREG | 0o755, STAGE1.encode()))
    parts.append(_cpio_entry("outdir", stat.S_IFREG | 0o644, str(out_dir).encode()))
    parts.append(_cpio_entry("modules", stat.S_IFREG | 0o644, "\n".join(GUEST_MODULES).encode()))
    for module in GUEST_MODULES:
        data = (modules / module).read_bytes()
        parts.append(_cpio_entry(f"mod/{Path(module).name}", stat.S_IFREG | 0o644, data))
    parts.append(_cpio_entry("TRAILER!!!", 0))
    path.write_bytes(b"".join(parts))


def run_in_guest(scenario: str, *, python: str, unpriv_python: str, unpriv_user: str) -> Path:
    """Boot the guest, run ``scenario`` (Python source) in it as root, return the directory
    holding what it wrote (``rc``, ``stdout``, ``stderr`` and its own files).

    Raises:
        RuntimeError: the guest did not finish in time or wrote no exit code.
    """
    found = guest_kernel()
    if found is None:
        raise RuntimeError("no guest kernel: " + ", ".join(missing_tools()))
    image, modules = found
    base = Path(tempfile.mkdtemp(prefix="glove-cgvm-", dir="/var/tmp"))
    base.chmod(0o755)
    out = base / "out"
    out.mkdir(mode=0o777)
    out.chmod(0o777)
    (out / "scenario.py").write_text(scenario)
    (out / "guest.sh").write_text(
        f"OUT={out}\nPYTHON={python}\nUNPRIV_PYTHON={unpriv_python}\n"
        f"UNPRIV_USER={unpriv_user}\n" + STAGE2
    )
    initramfs = base / "initramfs.cpio"
    build_initramfs(initramfs, out, modules)
    argv = [
        QEMU, "-accel", "tcg", "-m", str(GUEST_MEMORY_MB), "-smp", "1",
        "-nographic", "-nodefaults", "-no-reboot", "-serial", f"file:{base / 'console'}",
        "-kernel", str(image), "-initrd", str(initramfs),
        "-append", "console=ttyS0 panic=-1 quiet loglevel=3 cgroup_no_v1=all",
        "-virtfs", ("local,path=/,mount_tag=hostroot,security_model=none,readonly=on,"
                    "multidevs=remap"),
        "-virtfs", f"local,path={out},mount_tag=out,security_model=none,multidevs=remap",
    ]  # fmt: skip
    try:
        subprocess.run(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            timeout=GUEST_DEADLINE_S,
            check=False,
        )
    except subprocess.TimeoutExpired as exc:
        console = (base / "console").read_text(errors="replace")[-3000:]
        raise RuntimeError(f"the guest did not power off in time; console:\n{console}") from exc
    if not (out / "rc").exists():
        console = (base / "console").read_text(errors="replace")[-3000:]
        raise RuntimeError(f"the guest wrote no exit code; console:\n{console}")
    return out


def remove(out: Path) -> None:
    """Remove a guest's directories."""
    shutil.rmtree(out.parent, ignore_errors=True)


def unpriv_ids(user: str) -> tuple[int, int]:
    """The uid and gid of ``user`` (the same in the guest: it shares /etc)."""
    import pwd

    entry = pwd.getpwnam(user)
    return entry.pw_uid, entry.pw_gid


__all__ = ["missing_tools", "remove", "run_in_guest", "unpriv_ids"]

if __name__ == "__main__":  # pragma: no cover - a manual smoke test
    done = run_in_guest(
        "import os, sys; open(sys.argv[1] + '/hello', 'w').write(open('/sys/fs/cgroup/"
        "cgroup.controllers').read())",
        python="/usr/bin/python3",
        unpriv_python="/usr/bin/python3",
        unpriv_user=os.environ.get("GLOVE_UNPRIV_USER", "glovetest"),
    )
    print((done / "rc").read_text(), (done / "stderr").read_text(), (done / "hello").read_text())
