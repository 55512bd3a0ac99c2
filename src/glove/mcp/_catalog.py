"""The catalog: what each upstream offers, under the names the agent sees (pure).

Each upstream is an *extension* named by its configured id. By default its tools and
prompts are exposed as ``<id>__<name>`` and its resources and resource templates as
``<id>+<uri>`` (``fs+file:///srv/work/a.txt``: a valid URI whose scheme names the
upstream; ids hold no ``+`` or ``_``, so the first ``+``/``__`` always splits). With
``expose = "bare"`` an upstream's own names and URIs are exposed unchanged, so a
one-server setup is transparent.

Exposed tool and prompt names keep to ``[A-Za-z0-9_-]`` and at most 64 characters: a
character outside that alphabet becomes ``-``; a name that would be longer is not
exposed. Two items of one kind mapping to one exposed name (or URI) are a startup error
(:class:`~glove.mcp.errors.ToolNameError`, naming both); when a running upstream's new
list collides, the newcomers stay hidden instead.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable, Sequence
from typing import Final, Literal

import msgspec

from glove.mcp._messages import McpObject, ToolInfo
from glove.mcp.errors import ToolNameError

_log = logging.getLogger(__name__)

SEPARATOR: Final = "__"
URI_SEPARATOR: Final = "+"
MAX_EXPOSED_NAME_CHARS: Final = 64
MAX_EXPOSED_URI_CHARS: Final = 2048
#: Variables one URI template may hold before it is not matched at all (a bound on work).
MAX_TEMPLATE_VARIABLES: Final = 16
_NOT_NAME_CHAR: Final = re.compile(r"[^A-Za-z0-9_-]")
_TEMPLATE_PART: Final = re.compile(r"\{([^{}]{1,64})\}")

Expose = Literal["prefix", "bare"]
Kind = Literal["tool", "prompt", "resource", "template"]
_KEYS: Final[dict[str, str]] = {
    "tool": "name",
    "prompt": "name",
    "resource": "uri",
    "template": "uriTemplate",
}


def expose_name(upstream_id: str, tool: str, *, bare: bool = False) -> str | None:
    """Return the exposed name of a tool or prompt, or ``None`` if it would be too long."""
    cleaned = _NOT_NAME_CHAR.sub("-", tool)
    name = cleaned if bare else f"{upstream_id}{SEPARATOR}{cleaned}"
    if not tool or len(name) > MAX_EXPOSED_NAME_CHARS:
        return None
    return name


def expose_uri(upstream_id: str, uri: str, *, bare: bool = False) -> str | None:
    """Return the exposed form of a resource URI (or template), or ``None`` if too long."""
    exposed = uri if bare else f"{upstream_id}{URI_SEPARATOR}{uri}"
    if not uri or len(exposed) > MAX_EXPOSED_URI_CHARS:
        return None
    return exposed


class ExposedTool(msgspec.Struct, frozen=True):
    """A tool as the agent sees it, and where it really lives."""

    name: str
    upstream_id: str
    info: ToolInfo

    def listing(self) -> McpObject:
        """The tool definition to list to the agent: the upstream's, renamed."""
        return {**self.info.raw, "name": self.name}


class Entry(msgspec.Struct, frozen=True):
    """A prompt, resource or resource template as the agent sees it, and its origin.

    ``name`` is the exposed name (prompts) or URI (resources, templates); ``original`` the
    upstream's own; ``raw`` the whole definition as the upstream advertised it.
    """

    kind: str
    name: str
    upstream_id: str
    original: str
    raw: McpObject

    def listing(self) -> McpObject:
        """The definition to list to the agent: the upstream's, renamed."""
        return {**self.raw, _KEYS[self.kind]: self.name}


def _collision(kind: str, upstream_id: str, mine: str, other: tuple[str, str], name: str) -> str:
    return (
        f"upstream {upstream_id!r}: {kind} {mine!r} and {kind} {other[0]!r} of {other[1]!r} "
        f"are both exposed as {name!r}"
    )


class ToolRegistry:
    """Exposed tool names to upstream tools, rebuilt whenever an upstream's list changes."""

    def __init__(self) -> None:
        self._by_upstream: dict[str, list[ExposedTool]] = {}
        self._by_name: dict[str, ExposedTool] = {}

    def set_upstream(
        self,
        upstream_id: str,
        tools: Sequence[ToolInfo],
        *,
        strict: bool,
        expose: Expose = "prefix",
    ) -> None:
        """Replace the tools of ``upstream_id``.

        Raises:
            ToolNameError: ``strict`` and two tools map to one exposed name.
        """
        others = {
            name: tool for name, tool in self._by_name.items() if tool.upstream_id != upstream_id
        }
        exposed: list[ExposedTool] = []
        for info in tools:
            name = expose_name(upstream_id, info.name, bare=expose == "bare")
            if name is None:
                _log.warning(
                    "upstream %s: tool %r not exposed: its name would exceed %d characters",
                    upstream_id,
                    info.name[:80],
                    MAX_EXPOSED_NAME_CHARS,
                )
                continue
            if name in others:
                other = others[name]
                message = _collision(
                    "tool", upstream_id, info.name, (other.info.name, other.upstream_id), name
                )
                if strict:
                    raise ToolNameError(message)
                _log.warning("%s; hiding it", message)
                continue
            tool = ExposedTool(name, upstream_id, info)
            others[name] = tool
            exposed.append(tool)
        self._by_upstream[upstream_id] = exposed
        self._by_name = others

    def lookup(self, name: str) -> ExposedTool | None:
        """Return the tool exposed as ``name``, if any."""
        return self._by_name.get(name)

    def tools(self) -> list[ExposedTool]:
        """Every exposed tool, grouped by upstream in configuration order."""
        return [tool for tools in self._by_upstream.values() for tool in tools]


class Table:
    """One kind of named item (prompts, resources or templates) of every upstream."""

    def __init__(self, kind: Kind) -> None:
        self.kind = kind
        self._key = _KEYS[kind]
        self._by_upstream: dict[str, list[Entry]] = {}
        self._by_name: dict[str, Entry] = {}

    def set_upstream(
        self,
        upstream_id: str,
        items: Iterable[McpObject],
        *,
        strict: bool,
        expose: Expose = "prefix",
    ) -> None:
        """Replace the items of ``upstream_id`` (definitions without a string key are skipped).

        Raises:
            ToolNameError: ``strict`` and two items map to one exposed name or URI.
        """
        others = {
            name: entry for name, entry in self._by_name.items() if entry.upstream_id != upstream_id
        }
        exposed: list[Entry] = []
        bare = expose == "bare"
        for raw in items:
            original = raw.get(self._key)
            if not isinstance(original, str):
                continue
            if self.kind == "prompt":
                name = expose_name(upstream_id, original, bare=bare)
            else:
                name = expose_uri(upstream_id, original, bare=bare)
            if name is None:
                _log.warning(
                    "upstream %s: %s %r not exposed (too long)",
                    upstream_id,
                    self.kind,
                    original[:80],
                )
                continue
            if name in others:
                other = others[name]
                message = _collision(
                    self.kind, upstream_id, original, (other.original, other.upstream_id), name
                )
                if strict:
                    raise ToolNameError(message)
                _log.warning("%s; hiding it", message)
                continue
            entry = Entry(self.kind, name, upstream_id, original, raw)
            others[name] = entry
            exposed.append(entry)
        self._by_upstream[upstream_id] = exposed
        self._by_name = others

    def lookup(self, name: str) -> Entry | None:
        """Return the item exposed as ``name``, if any."""
        return self._by_name.get(name)

    def entries(self) -> list[Entry]:
        """Every exposed item, grouped by upstream in configuration order."""
        return [entry for entries in self._by_upstream.values() for entry in entries]

    def of(self, upstream_id: str) -> list[Entry]:
        """The items of one upstream."""
        return list(self._by_upstream.get(upstream_id, ()))


def template_regex(template: str) -> re.Pattern[str] | None:
    """A regex matching the URIs a (level 1-2) RFC 6570 template expands to, or ``None``.

    ``{var}`` matches one path segment (no ``/``), ``{+var}``/``{#var}`` any run; other
    operators match any run too. Used only to route a read to the upstream whose template
    produced the URI; the policy judges the concrete URI on its own.
    """
    parts: list[str] = []
    position = 0
    for variables, match in enumerate(_TEMPLATE_PART.finditer(template), start=1):
        if variables > MAX_TEMPLATE_VARIABLES:
            return None
        parts.append(re.escape(template[position : match.start()]))
        expression = match.group(1)
        parts.append("[^/?#]+" if expression[0].isalnum() or expression[0] == "_" else ".*")
        position = match.end()
    parts.append(re.escape(template[position:]))
    return re.compile("".join(parts), re.DOTALL)


class Catalog:
    """Everything the upstreams offer: tools, prompts, resources and resource templates.

    ``modes`` gives each upstream's ``expose`` mode, in configuration order (the order
    lists are merged and bare templates are tried in).
    """

    def __init__(self, modes: dict[str, Expose]) -> None:
        self.modes = dict(modes)
        self.tools = ToolRegistry()
        self.prompts = Table("prompt")
        self.resources = Table("resource")
        self.templates = Table("template")
        self._template_regexes: dict[str, re.Pattern[str] | None] = {}

    def set_upstream(
        self,
        upstream_id: str,
        *,
        tools: Sequence[ToolInfo] | None = None,
        prompts: Sequence[McpObject] | None = None,
        resources: Sequence[McpObject] | None = None,
        templates: Sequence[McpObject] | None = None,
        strict: bool,
    ) -> None:
        """Replace what ``upstream_id`` offers (a ``None`` list is left as it was).

        Raises:
            ToolNameError: ``strict`` and two items of one kind share an exposed name, or a
                bare URI of this upstream would read as another upstream's prefixed one.
        """
        expose = self.modes.get(upstream_id, "prefix")
        if tools is not None:
            self.tools.set_upstream(upstream_id, tools, strict=strict, expose=expose)
        if prompts is not None:
            self.prompts.set_upstream(upstream_id, prompts, strict=strict, expose=expose)
        if resources is not None:
            self.resources.set_upstream(upstream_id, resources, strict=strict, expose=expose)
        if templates is not None:
            self.templates.set_upstream(upstream_id, templates, strict=strict, expose=expose)
            for entry in self.templates.of(upstream_id):
                self._template_regexes.setdefault(entry.name, template_regex(entry.name))
        if expose == "bare" and strict:
            self._check_bare_uris(upstream_id)

    def _check_bare_uris(self, upstream_id: str) -> None:
        prefixed = [uid for uid, mode in self.modes.items() if mode == "prefix"]
        for entry in self.resources.of(upstream_id) + self.templates.of(upstream_id):
            for other in prefixed:
                if entry.name.startswith(f"{other}{URI_SEPARATOR}"):
                    raise ToolNameError(
                        f"upstream {upstream_id!r}: {entry.kind} {entry.original!r} reads as "
                        f"a URI of upstream {other!r} (exposed as {other}{URI_SEPARATOR}...)"
                    )

    def resolve_uri(self, uri: str) -> tuple[str, str] | None:
        """Which upstream a read of exposed ``uri`` goes to, and the URI it names there.

        A listed resource first; then ``<id>+<uri>`` of a prefixed upstream; then the
        first bare upstream (in configuration order) with a template matching it; then the
        one bare upstream offering resources, if there is exactly one.
        """
        entry = self.resources.lookup(uri)
        if entry is not None:
            return entry.upstream_id, entry.original
        upstream_id, plus, rest = uri.partition(URI_SEPARATOR)
        if plus and rest and self.modes.get(upstream_id) == "prefix":
            return upstream_id, rest
        bare = [uid for uid, mode in self.modes.items() if mode == "bare"]
        for template in self.templates.entries():
            if template.upstream_id not in bare:
                continue
            regex = self._template_regexes.get(template.name)
            if regex is not None and regex.fullmatch(uri):
                return template.upstream_id, uri
        offering = [uid for uid in bare if self.resources.of(uid) or self.templates.of(uid)]
        if len(offering) == 1:
            return offering[0], uri
        return None

    def resolve_prompt(self, name: str) -> Entry | None:
        """The prompt exposed as ``name``, if any."""
        return self.prompts.lookup(name)

    def resolve_template(self, uri_template: str) -> Entry | None:
        """The resource template exposed as ``uri_template``, if any."""
        return self.templates.lookup(uri_template)
