"""The extension registry: exposed names and collisions."""

from __future__ import annotations

import pytest

from glove.mcp import ToolNameError, ToolRegistry, expose_name
from glove.mcp._contracts import arguments_digest
from glove.mcp._messages import ToolInfo


def _tool(name: str) -> ToolInfo:
    return ToolInfo(name, None, {"type": "object"}, {"name": name, "inputSchema": {}})


def test_expose_name_keeps_the_alphabet_and_the_length() -> None:
    """Names are <id>__<tool>, foreign characters become '-', too long is not exposed."""
    assert expose_name("fs", "read_text_file") == "fs__read_text_file"
    assert expose_name("x", "a.b:c/d") == "x__a-b-c-d"
    assert expose_name("x", "t" * 61) == "x__" + "t" * 61
    assert expose_name("x", "t" * 62) is None
    assert expose_name("x", "") is None


def test_collision_is_a_startup_error() -> None:
    """Two tools that map to one exposed name fail a strict build and name both."""
    registry = ToolRegistry()
    with pytest.raises(ToolNameError, match=r"a\.b"):
        registry.set_upstream("x", [_tool("a.b"), _tool("a-b")], strict=True)


def test_runtime_collision_hides_the_newcomer() -> None:
    """A running upstream's colliding tool is hidden; the first owner keeps the name."""
    registry = ToolRegistry()
    registry.set_upstream("x", [_tool("a-b")], strict=True)
    registry.set_upstream("x", [_tool("a-b"), _tool("a.b"), _tool("c")], strict=False)
    names = [(tool.name, tool.info.name) for tool in registry.tools()]
    assert names == [("x__a-b", "a-b"), ("x__c", "c")]


def test_lookup_and_listing_rename() -> None:
    """Lookup resolves the exposed name; the listed definition carries it."""
    registry = ToolRegistry()
    registry.set_upstream("one", [_tool("t")], strict=True)
    registry.set_upstream("two", [_tool("t")], strict=True)
    tool = registry.lookup("two__t")
    assert tool is not None
    assert tool.upstream_id == "two"
    assert tool.listing()["name"] == "two__t"
    assert registry.lookup("three__t") is None
    registry.set_upstream("one", [], strict=False)
    assert registry.lookup("one__t") is None


def test_arguments_digest_is_canonical() -> None:
    """Key order does not change the digest; values do."""
    assert arguments_digest({"a": 1, "b": 2}) == arguments_digest({"b": 2, "a": 1})
    assert arguments_digest({"a": 1}) != arguments_digest({"a": 2})


def test_long_request_ids_are_cut_for_the_audit() -> None:
    """A string id longer than 128 characters is recorded cut; other ids as they are."""
    from glove.mcp._kernel import _audit_id

    assert _audit_id("x" * 500) == "x" * 128 + "..."
    assert _audit_id(7) == 7
    assert _audit_id(None) is None


def test_public_api_is_sorted_and_complete() -> None:
    """glove.mcp re-exports a sorted __all__ of names that exist, errors rooted at GloveError."""
    import glove.mcp
    from glove.errors import GloveError

    # ruff's order (RUF022, as every package's: tests/test_exports.py): CONSTANTS first.
    constants = [name for name in glove.mcp.__all__ if name.isupper()]
    rest = [name for name in glove.mcp.__all__ if not name.isupper()]
    assert glove.mcp.__all__ == sorted(constants) + sorted(rest)
    for name in glove.mcp.__all__:
        assert hasattr(glove.mcp, name), name
    assert issubclass(glove.mcp.McpError, GloveError)
    assert issubclass(glove.mcp.UpstreamTransportError, glove.mcp.UpstreamError)


def test_merged_lists_page_with_glove_cursors() -> None:
    """A merged list is served in pages with Glove's own cursor; a foreign cursor is -32602."""
    from glove.mcp._contracts import Refusal
    from glove.mcp._features import LIST_PAGE_SIZE, encode_cursor, page

    items = [{"name": f"t{index}"} for index in range(2 * LIST_PAGE_SIZE + 50)]
    first = page("tools", "tools", items, None)
    assert len(first["tools"]) == LIST_PAGE_SIZE
    second = page("tools", "tools", items, {"cursor": first["nextCursor"]})
    third = page("tools", "tools", items, {"cursor": second["nextCursor"]})
    assert "nextCursor" not in third
    assert first["tools"] + second["tools"] + third["tools"] == items
    for cursor in ("nope", encode_cursor("prompts", 0), "", 7, "a" * 100):
        with pytest.raises(Refusal) as refused:
            page("tools", "tools", items, {"cursor": cursor})
        assert refused.value.code == -32602
