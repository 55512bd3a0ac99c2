"""The benchmark's peer: the least a Python asyncio JSON-over-Unix-socket service does.

Same frames as gloved (4-byte length, JSON), same ``hello`` and ``health`` answers, and
nothing else: no SO_PEERCRED, no secret, no strict decoding, no registry, no deadlines, no
caps. Run as ``python _peer.py DIRECTORY``; it listens on ``DIRECTORY/gloved.sock`` and
writes a dummy ``bootstrap-secret`` so Glove's client can be used unchanged.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
from pathlib import Path

HELLO = {"server": "peer", "version": "0", "protocol": 1, "pid": os.getpid(), "methods": []}
HEALTH = {"status": "ok", "version": "0", "pid": os.getpid(), "uptime_s": 0.0}


async def serve_client(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while True:
            header = await reader.readexactly(4)
            request = json.loads(await reader.readexactly(int.from_bytes(header, "big")))
            result = HELLO if request["method"] == "hello" else HEALTH
            payload = json.dumps({"id": request["id"], "result": result}).encode()
            writer.write(len(payload).to_bytes(4, "big") + payload)
            await writer.drain()
    except (asyncio.IncompleteReadError, ConnectionError):
        pass
    finally:
        writer.close()


async def main(directory: Path) -> None:
    directory.mkdir(mode=0o700, parents=True, exist_ok=True)
    secret = directory / "bootstrap-secret"
    secret.write_text("0" * 64)
    secret.chmod(0o600)
    server = await asyncio.start_unix_server(
        serve_client, path=str(directory / "gloved.sock"), backlog=1024
    )
    stop = asyncio.Event()
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
    async with server:
        await stop.wait()


if __name__ == "__main__":
    asyncio.run(main(Path(sys.argv[1])))
