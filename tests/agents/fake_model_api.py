"""A scripted model API for the agent tests: ``python3 fake_model_api.py PORT LOG``.

Standard library only: it runs inside the sandbox, on the sandbox's own loopback, started by
the test's wrapper just before the agent. It speaks just enough of two wire formats to
drive a few tool-use turns, streamed as server-sent events the way the agents ask for them:

* Anthropic Messages (``POST /v1/messages``: Claude Code);
* OpenAI Responses (``POST /v1/responses``: Codex).

The script, for either: turn 1 calls the allowed tool (the one whose name ends in
``echo__echo``) with ``{"text": "glove-allowed-text"}``; turn 2 calls the tool ending in
``echo__add`` with ``a = 1000``, which the test's policy refuses (``-33001``); turn 3
answers ``SCRIPT-DONE``. Which turn a request is in is read from what the request carries
back (tool results), so the agent's side requests (titles, token counts) get a plain
answer. Every request body is appended to LOG (one JSON line) so the test can see what came
back to the model.
"""

from __future__ import annotations

import json
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

ALLOWED_TEXT = "glove-allowed-text"
DENIED_A = 1000
DONE_TEXT = "SCRIPT-DONE"
MAX_BODY_BYTES = 64 * 1024 * 1024


def _tool_named(tools: list[dict[str, Any]], suffix: str) -> tuple[str | None, str] | None:
    """(namespace, name) of the tool whose name ends in ``suffix``; Codex nests MCP tools
    in a ``namespace`` tool (``mcp__glove``), Claude Code names them ``mcp__glove__...``."""
    for tool in tools:
        if tool.get("type") == "namespace":
            found = _tool_named(tool.get("tools") or [], suffix)
            if found is not None:
                return tool.get("name"), found[1]
            continue
        name = tool.get("name") or (tool.get("function") or {}).get("name")
        if isinstance(name, str) and name.endswith(suffix):
            return None, name
    return None


def _turn(body: dict[str, Any]) -> int:
    """0: first call, 1: after the allowed result, 2: after the denial (by what came back)."""
    text = json.dumps(body.get("messages") or body.get("input") or [])
    results = text.count('"tool_result"') + text.count('"function_call_output"')
    return min(results, 2)


class Handler(BaseHTTPRequestHandler):
    """Answers every POST by the script; anything else with an empty JSON object."""

    log_path: Path

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the base's name
        """Stay quiet (the agent's terminal is the test's)."""

    def _body(self) -> dict[str, Any]:
        length = min(int(self.headers.get("Content-Length") or 0), MAX_BODY_BYTES)
        raw = self.rfile.read(length) if length else b"{}"
        try:
            body = json.loads(raw)
        except ValueError:
            body = {}
        with self.log_path.open("a") as log:
            log.write(json.dumps({"path": self.path, "body": body}) + "\n")
        return body if isinstance(body, dict) else {}

    def _sse(self, events: list[tuple[str, dict[str, Any]]]) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.end_headers()
        for name, data in events:
            self.wfile.write(f"event: {name}\ndata: {json.dumps(data)}\n\n".encode())
        self.wfile.flush()
        self.close_connection = True

    def _json(self, data: dict[str, Any]) -> None:
        payload = json.dumps(data).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def do_GET(self) -> None:
        """Side endpoints (model lists, settings): an empty answer."""
        self._json({"data": [], "has_more": False})

    def do_POST(self) -> None:
        """The two model endpoints, scripted; anything else gets an empty object."""
        body = self._body()
        path = self.path.split("?", 1)[0]
        if path.endswith("/messages/count_tokens"):
            self._json({"input_tokens": 10})
        elif path.endswith("/messages"):
            self._anthropic(body)
        elif path.endswith("/responses"):
            self._openai(body)
        else:
            self._json({})

    def _call_for(
        self, body: dict[str, Any]
    ) -> tuple[tuple[str | None, str], dict[str, Any]] | None:
        tools = body.get("tools") or []
        turn = _turn(body)
        if turn == 0 and (found := _tool_named(tools, "echo__echo")):
            return found, {"text": ALLOWED_TEXT}
        if turn == 1 and (found := _tool_named(tools, "echo__add")):
            return found, {"a": DENIED_A, "b": 1}
        return None

    def _anthropic(self, body: dict[str, Any]) -> None:
        call = self._call_for(body)
        message = {
            "id": "msg_fake", "type": "message", "role": "assistant", "model": body.get("model"),
            "content": [], "stop_reason": None, "stop_sequence": None,
            "usage": {"input_tokens": 10, "output_tokens": 1},
        }  # fmt: skip
        events: list[tuple[str, dict[str, Any]]] = [
            ("message_start", {"type": "message_start", "message": message})
        ]
        if call is not None:
            (_, name), arguments = call
            block = {"type": "tool_use", "id": f"toolu_{_turn(body)}", "name": name, "input": {}}
            delta = {"type": "input_json_delta", "partial_json": json.dumps(arguments)}
            stop = "tool_use"
        else:
            block = {"type": "text", "text": ""}
            delta = {"type": "text_delta", "text": DONE_TEXT}
            stop = "end_turn"
        events += [
            ("content_block_start", {"type": "content_block_start", "index": 0,
                                     "content_block": block}),
            ("content_block_delta", {"type": "content_block_delta", "index": 0, "delta": delta}),
            ("content_block_stop", {"type": "content_block_stop", "index": 0}),
            ("message_delta", {"type": "message_delta", "delta": {"stop_reason": stop},
                               "usage": {"output_tokens": 5}}),
            ("message_stop", {"type": "message_stop"}),
        ]  # fmt: skip
        if body.get("stream"):
            self._sse(events)
        else:
            content = [{**block, "input": call[1]} if call else {"type": "text", "text": DONE_TEXT}]
            self._json({**message, "content": content, "stop_reason": stop})

    def _openai(self, body: dict[str, Any]) -> None:
        call = self._call_for(body)
        turn = _turn(body)
        if call is not None:
            (namespace, name), arguments = call
            item: dict[str, Any] = {
                "type": "function_call", "id": f"fc_{turn}", "call_id": f"call_{turn}",
                "name": name, "arguments": json.dumps(arguments), "status": "completed",
            }  # fmt: skip
            if namespace is not None:
                item["namespace"] = namespace
        else:
            item = {
                "type": "message", "id": "msg_done", "role": "assistant", "status": "completed",
                "content": [{"type": "output_text", "text": DONE_TEXT, "annotations": []}],
            }  # fmt: skip
        response = {"id": f"resp_{turn}", "object": "response", "status": "in_progress",
                    "model": body.get("model"), "output": []}  # fmt: skip
        usage = {"input_tokens": 10, "output_tokens": 5, "total_tokens": 15,
                 "input_tokens_details": {"cached_tokens": 0},
                 "output_tokens_details": {"reasoning_tokens": 0}}  # fmt: skip
        done = {**response, "status": "completed", "output": [item], "usage": usage}
        self._sse([
            ("response.created", {"type": "response.created", "response": response}),
            ("response.output_item.added", {"type": "response.output_item.added",
                                            "output_index": 0, "item": item}),
            ("response.output_item.done", {"type": "response.output_item.done",
                                           "output_index": 0, "item": item}),
            ("response.completed", {"type": "response.completed", "response": done}),
        ])  # fmt: skip


def main() -> int:
    """Serve on HOST:PORT (default 127.0.0.1) until killed (the sandbox ends it with the
    agent; on the host, the test does): ``fake_model_api.py PORT LOG [HOST]``."""
    port, log = int(sys.argv[1]), Path(sys.argv[2])
    host = sys.argv[3] if len(sys.argv) > 3 else "127.0.0.1"
    Handler.log_path = log
    server = ThreadingHTTPServer((host, port), Handler)
    server.daemon_threads = True
    server.serve_forever()
    return 0


if __name__ == "__main__":
    sys.exit(main())
