"""Fuzz target: the cgroup interface and /proc parsers (``glove.container._cgroupfs``).

Contract under test: every parser returns a value of its documented shape or raises
``CgroupFormatError``, nothing else; paths it returns are absolute and normalized, and
``cgroup_dir`` of a returned mount never leaves the mount point.

    python fuzz/cgroup_files.py [-atheris_runs=N ...]     # with atheris
    python fuzz/cgroup_files.py --replay [--seconds S]    # without: seeds + mutations
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import contextlib
import posixpath

from policy_common import mutate

from glove.container._cgroupfs import (
    cgroup_dir,
    parse_cgroup2_mounts,
    parse_controllers,
    parse_keyed,
    parse_pid_list,
    parse_proc_cgroup,
    parse_proc_cgroups,
)
from glove.container.errors import CgroupFormatError

SEEDS = Path(__file__).resolve().parent / "cgroup_corpus"


def one_input(data: bytes) -> None:
    """Feed ``data`` to every parser; raise only on a contract violation."""
    text = data.decode("utf-8", errors="surrogateescape")
    own = None
    with contextlib.suppress(CgroupFormatError):
        own = parse_proc_cgroup(text)
        assert own is None or (own.startswith("/") and posixpath.normpath(own) == own)
    with contextlib.suppress(CgroupFormatError):
        for mount in parse_cgroup2_mounts(text):
            assert mount.mount_point.startswith("/")
            assert mount.root.startswith("/")
            for cgroup in (own or "/", mount.root, mount.root + "/x"):
                below = cgroup_dir(mount, posixpath.normpath(cgroup))
                if below is not None:
                    assert below == mount.mount_point or below.startswith(
                        mount.mount_point.rstrip("/") + "/"
                    )
    with contextlib.suppress(CgroupFormatError):
        assert all(v >= 0 for v in parse_keyed(text).values())
    with contextlib.suppress(CgroupFormatError):
        assert all(isinstance(name, str) for name in parse_controllers(text))
    with contextlib.suppress(CgroupFormatError):
        assert all(pid > 0 for pid in parse_pid_list(text))
    with contextlib.suppress(CgroupFormatError):
        assert all(h >= 0 for h in parse_proc_cgroups(text).values())


def main() -> None:
    """Run under atheris, or replay the seeds and random mutations of them."""
    import random
    import time

    if "--replay" not in sys.argv:
        import atheris  # type: ignore[import-not-found]

        atheris.Setup(sys.argv, one_input)
        atheris.Fuzz()
        return
    seconds = float(sys.argv[sys.argv.index("--seconds") + 1]) if "--seconds" in sys.argv else 10
    seeds = [p.read_bytes() for p in sorted(SEEDS.iterdir())]
    for seed in seeds:
        one_input(seed)
    rng = random.Random(0)  # noqa: S311 - reproducible mutations, not secrets
    deadline, count = time.monotonic() + seconds, 0
    while time.monotonic() < deadline:
        one_input(mutate(rng.choice(seeds), rng))
        count += 1
    print(f"cgroup_files: {len(seeds)} seeds and {count} mutations, no contract violation")


if __name__ == "__main__":
    main()
