"""A proxy in a process of its own, for the test that kills it: FD AUDIT_PATH RULES_JSON.

Prints ``ready`` once serving, then serves until killed.
"""

from __future__ import annotations

import asyncio
import json
import socket
import sys

from glove.actors import running
from glove.audit import AuditLog
from glove.egress import EgressProxy, RuleSet, StaticResolver


async def main() -> None:
    """Serve the channel on descriptor ``argv[1]`` until killed."""
    fd, audit_path, spec = int(sys.argv[1]), sys.argv[2], json.loads(sys.argv[3])
    channel = socket.socket(fileno=fd)
    rules = RuleSet.load(spec["allow"], spec.get("deny", []))
    async with running(AuditLog(audit_path)) as audit:
        proxy = EgressProxy(
            channel, rules, audit, session="child", resolver=StaticResolver(spec["names"])
        )
        async with running(proxy):
            sys.stdout.write("ready\n")
            sys.stdout.flush()
            await asyncio.Event().wait()


if __name__ == "__main__":
    asyncio.run(main())
