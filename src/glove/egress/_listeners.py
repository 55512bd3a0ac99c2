"""Where the sandbox's helper listens and the kind byte of each listener (pure data).

The helper (:mod:`glove.egress.helper`) runs on the sandbox's system Python and cannot
import this package, so it carries its own copy of these values; ``tests/egress/test_api.py``
pins the two copies equal.
"""

from __future__ import annotations

from typing import Final

HTTP_PROXY_ADDRESS: Final = ("127.0.0.1", 3128)
SOCKS_ADDRESS: Final = ("127.0.0.1", 1080)
DNS_ADDRESS: Final = ("127.0.0.1", 53)
MCP_NAME: Final = "glove-mcp"
KIND_HTTP: Final = b"h"
KIND_SOCKS: Final = b"s"
KIND_DNS: Final = b"d"
KIND_MCP: Final = b"c"
