"""Run as a gloved's owner (any interpreter with glove): create sessions from plans and
wait for each; print one JSON list of their final views. Used where the owner is the
unprivileged test user, whose socket only it may use.

argv: RUNTIME_DIR PLANS_JSON_FILE CONCURRENCY
"""

import json
import sys
from pathlib import Path

from glove.control import Client


def main() -> None:
    runtime, plans_file, concurrency = Path(sys.argv[1]), Path(sys.argv[2]), int(sys.argv[3])
    plans = json.loads(plans_file.read_text())
    finals = []
    with Client.for_runtime_dir(runtime, timeout=120.0) as client:
        for start in range(0, len(plans), concurrency):
            ids = [
                client.call("session.create", {"plan": plan})["session_id"]
                for plan in plans[start : start + concurrency]
            ]
            for session_id in ids:
                last = None
                for view in client.stream(
                    "session.watch", {"session_id": session_id}, timeout=300.0
                ):
                    last = view
                finals.append(last)
    print(json.dumps(finals))


if __name__ == "__main__":
    main()
