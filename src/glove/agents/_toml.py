"""A TOML writer for the values ``tomllib`` reads (sans-IO): Codex's ``config.toml``.

Glove changes a few keys of the operator's Codex configuration and must write the rest back
unchanged. The standard library reads TOML but cannot write it, and the one key set Glove
needs does not justify a dependency, so this module writes what :func:`tomllib.loads`
returns: tables, arrays of tables, strings, integers, floats, booleans, arrays and dates.
Comments and the original layout are not kept (documented in ``docs/agents.md``).
"""

from __future__ import annotations

import datetime
import json
import math
import re
from typing import Any, Final

from glove.agents.errors import AgentConfigError

#: A key TOML takes unquoted (matched whole: ``$`` would also match before a last newline,
#: and ``"a\n"`` written bare is not TOML).
_BARE_KEY: Final = re.compile(r"[A-Za-z0-9_-]+")
#: Deepest table nesting written (tomllib has no limit; a hostile file might).
MAX_TOML_DEPTH: Final = 64


def _key(key: str) -> str:
    return key if _BARE_KEY.fullmatch(key) else _string(key)


def _string(text: str) -> str:
    # JSON's escapes are TOML's basic-string escapes; non-ASCII stays as is (TOML is UTF-8).
    # JSON leaves DEL (U+007F) raw, which TOML forbids in a basic string.
    return json.dumps(text, ensure_ascii=False).replace("\x7f", "\\u007f")


def _value(value: Any, depth: int) -> str:  # noqa: PLR0911 - one return per TOML type
    if depth > MAX_TOML_DEPTH:
        raise AgentConfigError(f"TOML nested deeper than {MAX_TOML_DEPTH} levels")
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if math.isnan(value):
            return "nan"
        if math.isinf(value):
            return "inf" if value > 0 else "-inf"
        return repr(value)
    if isinstance(value, str):
        return _string(value)
    if isinstance(value, datetime.datetime | datetime.date | datetime.time):
        return value.isoformat()
    if isinstance(value, list):
        return "[" + ", ".join(_value(item, depth + 1) for item in value) + "]"
    if isinstance(value, dict):
        items = (f"{_key(k)} = {_value(v, depth + 1)}" for k, v in value.items())
        return "{ " + ", ".join(items) + " }" if value else "{}"
    raise AgentConfigError(f"cannot write a {type(value).__name__} as TOML")


def _is_table_array(value: Any) -> bool:
    return isinstance(value, list) and bool(value) and all(isinstance(v, dict) for v in value)


def _is_subtable(value: Any) -> bool:
    return isinstance(value, dict) or _is_table_array(value)


# Any TOML document of the agent's (see agents/_configs.py): free-form on purpose.
def _table(lines: list[str], path: list[str], table: dict[str, Any], depth: int) -> None:
    if depth > MAX_TOML_DEPTH:
        raise AgentConfigError(f"TOML nested deeper than {MAX_TOML_DEPTH} levels")
    plain = [(k, v) for k, v in table.items() if not isinstance(v, dict) and not _is_table_array(v)]
    lines.extend(f"{_key(k)} = {_value(v, depth)}" for k, v in plain)
    for key, value in table.items():
        if isinstance(value, dict):
            name = ".".join(_key(part) for part in (*path, key))
            if not value or any(not _is_subtable(v) for v in value.values()):
                lines.extend(["", f"[{name}]"])  # a table of tables only needs no header
            _table(lines, [*path, key], value, depth + 1)
        elif _is_table_array(value):
            name = ".".join(_key(part) for part in (*path, key))
            for item in value:
                lines.extend(["", f"[[{name}]]"])
                _table(lines, [*path, key], item, depth + 1)


def dumps(document: dict[str, Any], header: str = "") -> str:
    """Write ``document`` (as :func:`tomllib.loads` returns it) as TOML text.

    ``header`` lines are written first, each as a comment.

    Raises:
        AgentConfigError: a value TOML cannot hold, or nesting deeper than the cap.
    """
    lines = [f"# {line}" if line else "#" for line in header.splitlines()]
    _table(lines, [], document, 0)
    return "\n".join(lines).lstrip("\n") + "\n"
