"""The library launch path, driven like the daemon: threads and open fds must not leak in."""

from __future__ import annotations

import json
import shutil
import tempfile
from pathlib import Path

from tests.escape._harness import PROBES_DIR, Sandbox

LAUNCHES = 6
SECRET = "glove-library-secret"


def test_library_launch_leaks_no_fds_from_a_busy_process(sb: Sandbox) -> None:
    """run() and run_async() from a multi-threaded, fd-churning process pass only 0/1/2."""
    secret_dir = Path(tempfile.mkdtemp(prefix="glove-escape-lib-"))
    try:
        secret_dir.chmod(0o755)
        (secret_dir / "secret.txt").write_text(SECRET)
        (secret_dir / "secret.txt").chmod(0o644)
        shutil.copy(PROBES_DIR / "libdriver.py", sb.ws / "libdriver.py")
        sb.give(sb.ws)
        driver = [sb.user.python, "-P", str(sb.ws / "libdriver.py")]
        p = sb.host([*driver, str(sb.ws), str(secret_dir), str(LAUNCHES)])
        assert p.returncode == 0, p.stderr.decode(errors="replace")[-3000:]
        summary = json.loads(p.stdout.splitlines()[-1])
    finally:
        shutil.rmtree(secret_dir, ignore_errors=True)
    control = summary["control"]["probes"]
    assert control[f"{summary['held'][0]}/secret.txt"] == {"ok": SECRET}, f"control: {control}"
    reports = summary["reports"]
    assert len(reports) == LAUNCHES + 1, summary
    for i, report in enumerate(reports):
        assert report.get("exit_code") == 0, f"launch {i}: {report}"
        assert "fds" in report, f"control: launch {i} produced a probe report: {report}"
        extra = {
            n: t
            for n, t in report["fds"].items()
            if n not in {"0", "1", "2"} and "ok" in t and not t["ok"].endswith("/fd")
        }
        assert extra == {}, f"launch {i}: fds leaked into the sandbox: {extra}"
        used = {k: v for k, v in report["probes"].items() if "ok" in v}
        assert used == {}, f"launch {i}: host fds usable inside: {used}"
