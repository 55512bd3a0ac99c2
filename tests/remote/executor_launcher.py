"""Test launcher for the forced executor: the real run_executor with a test identity path.

Never installed and not reachable from the ``glove-remote-executor`` console script, which
has no way to change the identity path. Usage::

    python executor_launcher.py IDENTITY_FILE [--record FILE] [--idle S] [--frame S] -- ARGV...

``--record`` writes the argument vector the executor receives (and SSH_ORIGINAL_COMMAND, if
sshd set it) as JSON, so a test can see exactly what a login reached.
"""

import json
import os
import sys

from glove.remote._executor import EXECUTOR_IDLE_DEADLINE_S, FRAME_RECEIVE_DEADLINE_S, run_executor


def _main(args: list[str]) -> int:
    identity = args.pop(0)
    record = None
    idle_s, frame_s = EXECUTOR_IDLE_DEADLINE_S, FRAME_RECEIVE_DEADLINE_S
    while args and args[0] != "--":
        flag, value = args.pop(0), args.pop(0)
        if flag == "--record":
            record = value
        elif flag == "--idle":
            idle_s = float(value)
        elif flag == "--frame":
            frame_s = float(value)
        else:
            raise SystemExit(f"executor_launcher: unknown flag {flag}")
    argv = args[1:]
    if record is not None:
        with open(record, "w") as out:
            json.dump({"argv": argv, "original": os.environ.get("SSH_ORIGINAL_COMMAND")}, out)
    return run_executor(
        argv, identity_path=identity, idle_deadline_s=idle_s, frame_deadline_s=frame_s
    )


if __name__ == "__main__":
    code = _main(sys.argv[1:])
    sys.stderr.flush()
    os._exit(code)
