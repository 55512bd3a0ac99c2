"""Every MCP feature besides tools, each under policy: prompts, resources, logging,
completion, and the server-to-client requests (sampling, elicitation, roots).

The rules are the tools' rules (``docs/mcp.md``): deny by default; the decision is
audited **before** anything is forwarded or refused; what the policy hides answers exactly
like what does not exist (``-32602 Unknown prompt``, ``-32002 Resource not found``); an
allowed item whose arguments fail a rule gets ``-33001`` with the policy's reason.

:class:`FeatureMediation` is mixed into :class:`~glove.mcp._kernel.Mediator`; it reads the
mediator's policy, catalog and audit, and forwards through its ``request`` callable.
"""

from __future__ import annotations

import base64
import binascii
import logging
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Final, TypedDict

import msgspec

from glove.mcp._catalog import Entry, expose_uri
from glove.mcp._contracts import Refusal, arguments_digest, audit_id
from glove.mcp._messages import McpObject, ToolInfo
from glove.mcp.errors import (
    INTERNAL_ERROR,
    INVALID_PARAMS,
    METHOD_NOT_FOUND,
    POLICY_DENIED,
    UPSTREAM_FAILED,
    UPSTREAM_TIMEOUT,
    agent_message,
)

if TYPE_CHECKING:
    from glove.mcp._catalog import Catalog
    from glove.mcp._contracts import PolicyDecision, PolicyEngine, ProgressSink, UpstreamRequest

_log = logging.getLogger(__name__)

RESOURCE_NOT_FOUND: Final = -32002
#: Items in one page of a merged list Glove serves (tools, prompts, resources, templates).
LIST_PAGE_SIZE: Final = 200
MAX_CURSOR_CHARS: Final = 64
MAX_AUDITED_URI_CHARS: Final = 256
MAX_REASON_CHARS: Final = 512
LOG_LEVELS: Final = (
    "debug",
    "info",
    "notice",
    "warning",
    "error",
    "critical",
    "alert",
    "emergency",
)
#: Server-to-client request -> the feature a policy must allow for the upstream.
SERVER_REQUESTS: Final = {
    "sampling/createMessage": "sampling",
    "elicitation/create": "elicitation",
    "roots/list": "roots",
}
#: Client capability Glove declares upstream for each allowed feature.
CLIENT_CAPABILITY: Final = {"sampling": "sampling", "elicitation": "elicitation", "roots": "roots"}


def encode_cursor(kind: str, offset: int) -> str:
    """An opaque cursor for the page of ``kind`` starting at ``offset``."""
    return base64.urlsafe_b64encode(f"{kind}:{offset}".encode()).decode().rstrip("=")


def decode_cursor(kind: str, cursor: object) -> int:
    """The offset a cursor Glove issued for ``kind`` stands for.

    Raises:
        Refusal: not a cursor Glove issued for this list (``-32602 invalid cursor``).
    """
    if not isinstance(cursor, str) or not cursor or len(cursor) > MAX_CURSOR_CHARS:
        raise Refusal(INVALID_PARAMS, "invalid cursor")
    try:
        text = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)).decode()
    except (binascii.Error, UnicodeDecodeError, ValueError) as exc:
        raise Refusal(INVALID_PARAMS, "invalid cursor") from exc
    name, _, number = text.partition(":")
    if name != kind or not (number.isascii() and number.isdigit()) or len(number) > 9:
        raise Refusal(INVALID_PARAMS, "invalid cursor")
    return int(number)


def page(kind: str, key: str, items: Sequence[McpObject], params: Any) -> McpObject:
    """One page of a merged list, with ``nextCursor`` when more follow.

    Raises:
        Refusal: the cursor is not one Glove issued (``-32602``).
    """
    cursor = params.get("cursor") if isinstance(params, dict) else None
    start = 0 if cursor is None else decode_cursor(kind, cursor)
    chunk = list(items[start : start + LIST_PAGE_SIZE])
    result: McpObject = {key: chunk}
    if start + LIST_PAGE_SIZE < len(items):
        result["nextCursor"] = encode_cursor(kind, start + LIST_PAGE_SIZE)
    return result


def _text(value: object, limit: int) -> str:
    return value[:limit] if isinstance(value, str) else repr(value)[:limit]


class ListChanged(TypedDict):
    """A capability whose lists Glove announces changes of."""

    listChanged: bool


class ResourcesCapability(ListChanged):
    """The ``resources`` capability: lists, and subscriptions when every upstream has them."""

    subscribe: bool


class EmptyCapability(TypedDict):
    """A capability with no options (``logging``, ``completions``)."""


class ServerCapabilities(TypedDict, total=False):
    """The server capabilities Glove advertises to the agent (``tools`` always)."""

    tools: ListChanged
    prompts: ListChanged
    resources: ResourcesCapability
    logging: EmptyCapability
    completions: EmptyCapability


#: The client capabilities Glove declares to an upstream: capability -> its options (the
#: agent's own declaration when it is passed on, which is MCP's boundary JSON).
ClientCapabilities = dict[str, McpObject]


class FeatureMediation:
    """Prompts, resources, logging, completion and server-to-client requests under policy."""

    # Provided by the Mediator this is mixed into.
    policy: PolicyEngine
    catalog: Catalog
    _request: UpstreamRequest | None
    _upstream_capabilities: Callable[[str], Mapping[str, Any]]
    _definition_of: Callable[[ToolInfo], Any]
    _upstream_errors: tuple[type[BaseException], ...]
    _timeout_errors: tuple[type[BaseException], ...]

    async def record(self, record: dict[str, object]) -> None:  # pragma: no cover - overridden
        raise NotImplementedError

    def _count_denial(self, name: str) -> None:  # pragma: no cover - overridden
        raise NotImplementedError

    def __init__(self) -> None:
        #: Upstream ids whose log level the agent set (``logging/setLevel`` was forwarded).
        self.log_levels: dict[str, str] = {}

    # -- deciding ------------------------------------------------------------------------------

    async def record_decision(
        self, record: dict[str, object], decision: PolicyDecision, *, inspected: bool = False
    ) -> None:
        """Add the policy's ``decision`` to ``record`` and audit it durably.

        Raises:
            Refusal: the append failed; the request must be refused.
        """
        record.update(
            decision="allow" if decision.allowed else "deny",
            reason=decision.reason,
            rule=decision.rule,
        )
        if inspected:
            record["inspected"] = dict(decision.inspected)
        await self.record(record)

    def refuse_denied(
        self, name: str, decision: PolicyDecision, *, hidden: bool, kind: str, action: str
    ) -> None:
        """Count and refuse a call the policy denied (its decision already audited).

        A ``hidden`` one (the policy does not even list it) is answered exactly like an
        unknown ``kind``; otherwise the refusal gives the reason in words, as the audit log
        has it (it never quotes argument values).

        Raises:
            Refusal: whenever ``decision`` is not an allow.
        """
        if decision.allowed:
            return
        self._count_denial(name)
        if hidden:
            raise Refusal(INVALID_PARAMS, f"Unknown {kind}: {name[:128]}")
        raise Refusal(
            POLICY_DENIED,
            f"{action} denied by policy: {decision.reason}",
            {"rule": decision.rule, "reason": decision.reason},
        )

    # -- what is advertised ------------------------------------------------------------------

    def upstream_offers(self, upstream_id: str, capability: str) -> bool:
        """Whether ``upstream_id`` advertised ``capability``."""
        return isinstance(self._upstream_capabilities(upstream_id).get(capability), dict)

    def feature_allowed(self, upstream_id: str, feature: str) -> bool:
        """Whether the policy lets ``upstream_id`` use ``feature``."""
        return self.policy.check_feature(upstream_id, feature).allowed

    def agent_capabilities(self) -> ServerCapabilities:
        """The server capabilities Glove advertises: exactly what the policy can let through
        from what the upstreams offer."""
        upstreams = list(self.catalog.modes)
        caps: ServerCapabilities = {"tools": {"listChanged": True}}
        if self.policy.allows_any("prompts") and any(
            self.upstream_offers(u, "prompts") for u in upstreams
        ):
            caps["prompts"] = {"listChanged": True}
        if self.policy.allows_any("resources") and any(
            self.upstream_offers(u, "resources") for u in upstreams
        ):
            subscribe = any(
                self._upstream_capabilities(u).get("resources", {}).get("subscribe") is True
                for u in upstreams
                if self.upstream_offers(u, "resources")
            )
            caps["resources"] = {"listChanged": True, "subscribe": subscribe}
        if any(self._feature_offered(u, "logging", "logging") for u in upstreams):
            caps["logging"] = {}
        if any(self._feature_offered(u, "completions", "completion") for u in upstreams):
            caps["completions"] = {}
        return caps

    def _feature_offered(self, upstream_id: str, capability: str, feature: str) -> bool:
        return self.upstream_offers(upstream_id, capability) and self.feature_allowed(
            upstream_id, feature
        )

    # -- lists -------------------------------------------------------------------------------

    def _prompt_definition(self, entry: Entry) -> Any:
        description = entry.raw.get("description")
        arguments = entry.raw.get("arguments")
        return self._definition_of(
            ToolInfo(
                entry.name,
                description if isinstance(description, str) else None,
                {"arguments": arguments if isinstance(arguments, list) else []},
                entry.raw,
            )
        )

    def visible_prompts(self) -> list[McpObject]:
        """The prompt definitions the policy lets the agent see, renamed."""
        return [
            entry.listing()
            for entry in self.catalog.prompts.entries()
            if self.policy.check_prompt(entry.name, self._prompt_definition(entry)).allowed
        ]

    def _resource_allowed(self, entry: Entry) -> bool:
        return self.policy.check_resource(
            entry.name, upstream=entry.upstream_id, upstream_uri=entry.original
        ).allowed

    def visible_resources(self) -> list[McpObject]:
        """The resources the policy lets the agent see, their URIs exposed."""
        return [e.listing() for e in self.catalog.resources.entries() if self._resource_allowed(e)]

    def visible_templates(self) -> list[McpObject]:
        """The resource templates whose ``uriTemplate`` the policy allows (reads are judged
        again on each concrete URI)."""
        return [e.listing() for e in self.catalog.templates.entries() if self._resource_allowed(e)]

    # -- forwarding --------------------------------------------------------------------------

    async def forward_request(
        self,
        upstream_id: str,
        method: str,
        params: McpObject | None,
        record: dict[str, object],
        progress: tuple[int | str, ProgressSink] | None = None,
    ) -> msgspec.Raw:
        """Forward an allowed (and already audited) request; map its failures.

        Raises:
            Refusal: the upstream failed, timed out or answered with an error.
        """
        if self._request is None:
            raise Refusal(METHOD_NOT_FOUND, f"method not found: {method}")
        token, sink = progress if progress is not None else (None, None)
        try:
            return await self._request(upstream_id, method, params, token, sink)
        except self._upstream_errors + self._timeout_errors as exc:
            timed_out = isinstance(exc, self._timeout_errors)
            code = getattr(exc, "code", None)
            failure: dict[str, object] = {
                key: record[key] for key in ("kind", "request_id", "upstream") if key in record
            }
            await self.record(
                {
                    **failure,
                    "decision": "upstream_error",
                    "method": method,
                    "reason": agent_message(exc)[:MAX_REASON_CHARS],
                }
            )
            if isinstance(code, int) and not timed_out:
                raise Refusal(code, getattr(exc, "remote_message", agent_message(exc))) from exc
            if timed_out:
                raise Refusal(UPSTREAM_TIMEOUT, f"upstream {upstream_id!r} timed out") from exc
            raise Refusal(UPSTREAM_FAILED, agent_message(exc)) from exc
        except Refusal:
            raise
        except Exception as exc:
            _log.exception("internal error forwarding %s", method)
            raise Refusal(INTERNAL_ERROR, "internal error") from exc

    # -- prompts -----------------------------------------------------------------------------

    async def get_prompt(self, request_id: int | str, params: McpObject | None) -> msgspec.Raw:
        """Run one ``prompts/get``: resolve, check (name and argument rules), audit, forward.

        Raises:
            Refusal: malformed, unknown or hidden (``-32602``), denied (``-33001``), not
                durably audited, or failed upstream.
        """
        params = params or {}
        name = params.get("name")
        arguments = params.get("arguments")
        if not isinstance(name, str) or not (arguments is None or isinstance(arguments, dict)):
            raise Refusal(INVALID_PARAMS, "prompts/get needs a string name and object arguments")
        record: dict[str, object] = {
            "kind": "mcp.prompt",
            "request_id": audit_id(request_id),
            "prompt": name[:128],
            "args_sha256": arguments_digest(arguments if arguments is not None else {}),
        }
        entry = self.catalog.resolve_prompt(name)
        if entry is None:
            record.update(decision="unknown_prompt", reason="no upstream exposes this prompt")
            await self.record(record)
            self._count_denial(name)
            raise Refusal(INVALID_PARAMS, f"Unknown prompt: {name[:128]}")
        definition = self._prompt_definition(entry)
        record.update(upstream=entry.upstream_id, upstream_prompt=entry.original)
        decision = self.policy.check_prompt_get(name, arguments, definition)
        hidden = not decision.allowed and not self.policy.check_prompt(name, definition).allowed
        await self.record_decision(record, decision, inspected=True)
        self.refuse_denied(name, decision, hidden=hidden, kind="prompt", action="prompt")
        forwarded: McpObject = {"name": entry.original}
        if arguments is not None:
            forwarded["arguments"] = arguments
        return await self.forward_request(entry.upstream_id, "prompts/get", forwarded, record)

    # -- resources ---------------------------------------------------------------------------

    async def resource_request(
        self, request_id: int | str, method: str, params: McpObject | None
    ) -> msgspec.Raw:
        """Run ``resources/read``, ``resources/subscribe`` or ``resources/unsubscribe``.

        Subscribing needs exactly what reading needs: the policy allows the URI.

        Raises:
            Refusal: malformed (``-32602``), unknown or hidden (``-32002``), not durably
                audited, or failed upstream.
        """
        params = params or {}
        uri = params.get("uri")
        if not isinstance(uri, str) or not uri:
            raise Refusal(INVALID_PARAMS, f"{method} needs a string uri")
        operation = method.rpartition("/")[2]
        record: dict[str, object] = {
            "kind": "mcp.resource",
            "op": operation,
            "request_id": audit_id(request_id),
            "uri": uri[:MAX_AUDITED_URI_CHARS],
        }
        target = self.catalog.resolve_uri(uri)
        if target is None:
            record.update(decision="unknown_resource", reason="no upstream offers this URI")
            await self.record(record)
            self._count_denial(uri)
            raise Refusal(RESOURCE_NOT_FOUND, "Resource not found", {"uri": uri[:256]})
        upstream_id, upstream_uri = target
        record.update(upstream=upstream_id, upstream_uri=upstream_uri[:MAX_AUDITED_URI_CHARS])
        decision = self.policy.check_resource(uri, upstream=upstream_id, upstream_uri=upstream_uri)
        await self.record_decision(record, decision)
        if not decision.allowed:
            self._count_denial(uri)
            raise Refusal(RESOURCE_NOT_FOUND, "Resource not found", {"uri": uri[:256]})
        raw = await self.forward_request(
            upstream_id, method, {**params, "uri": upstream_uri}, record
        )
        if method != "resources/read" or self.catalog.modes.get(upstream_id) == "bare":
            return raw
        return _rename_contents(raw, upstream_id)

    def exposed_update(self, upstream_id: str, params: McpObject) -> McpObject | None:
        """A ``notifications/resources/updated`` as the agent may see it, or ``None``."""
        uri = params.get("uri")
        if not isinstance(uri, str):
            return None
        exposed = expose_uri(upstream_id, uri, bare=self.catalog.modes.get(upstream_id) == "bare")
        if exposed is None:
            return None
        decision = self.policy.check_resource(exposed, upstream=upstream_id, upstream_uri=uri)
        return {**params, "uri": exposed} if decision.allowed else None

    # -- logging -----------------------------------------------------------------------------

    async def set_level(self, request_id: int | str, params: McpObject | None) -> Any:
        """``logging/setLevel``: forwarded to every upstream that offers logging and may use
        it; the agent gets ``{}``.

        Raises:
            Refusal: an unknown level (``-32602``), nothing to forward to (``-32601``), not
                durably audited.
        """
        level = (params or {}).get("level")
        if level not in LOG_LEVELS:
            raise Refusal(INVALID_PARAMS, "logging/setLevel needs a known level")
        targets = [u for u in self.catalog.modes if self._feature_offered(u, "logging", "logging")]
        record: dict[str, object] = {
            "kind": "mcp.logging",
            "request_id": audit_id(request_id),
            "level": level,
            "upstreams": targets,
            "decision": "allow" if targets else "deny",
            "reason": "forwarded to the upstreams allowed to log"
            if targets
            else "no upstream may log (policy [[features]])",
        }
        await self.record(record)
        if not targets:
            raise Refusal(METHOD_NOT_FOUND, "method not found: logging/setLevel")
        for upstream_id in targets:
            await self.forward_request(
                upstream_id,
                "logging/setLevel",
                {"level": level},
                {**record, "upstream": upstream_id},
            )
            self.log_levels[upstream_id] = str(level)
        return {}

    def exposed_log(self, upstream_id: str, params: McpObject) -> McpObject | None:
        """A ``notifications/message`` tagged with its upstream, or ``None`` if not allowed."""
        if not self.feature_allowed(upstream_id, "logging"):
            return None
        logger = params.get("logger")
        tagged = (
            upstream_id if not isinstance(logger, str) or not logger else f"{upstream_id}/{logger}"
        )
        return {**params, "logger": tagged[:256]}

    # -- completion --------------------------------------------------------------------------

    async def complete(self, request_id: int | str, params: McpObject | None) -> msgspec.Raw:
        """``completion/complete`` for a prompt or resource template argument.

        The referenced prompt or template must be visible to the agent and its upstream
        allowed ``completion``.

        Raises:
            Refusal: malformed or unknown reference, denied, not durably audited, or failed
                upstream.
        """
        params = params or {}
        ref = params.get("ref")
        if not isinstance(ref, dict):
            raise Refusal(INVALID_PARAMS, "completion/complete needs a ref")
        kind = ref.get("type")
        key = "name" if kind == "ref/prompt" else "uri" if kind == "ref/resource" else None
        target = ref.get(key) if key is not None else None
        if key is None or not isinstance(target, str):
            raise Refusal(INVALID_PARAMS, "completion/complete needs a prompt or resource ref")
        record: dict[str, object] = {
            "kind": "mcp.complete",
            "request_id": audit_id(request_id),
            "ref": kind,
            "target": target[:MAX_AUDITED_URI_CHARS],
        }
        entry = (
            self.catalog.resolve_prompt(target)
            if key == "name"
            else self.catalog.resolve_template(target) or self.catalog.resources.lookup(target)
        )
        visible = entry is not None and (
            self.policy.check_prompt(target, self._prompt_definition(entry)).allowed
            if key == "name"
            else self._resource_allowed(entry)
        )
        if entry is None or not visible:
            record.update(decision="unknown_ref", reason="no visible prompt or template")
            await self.record(record)
            if key == "name":
                raise Refusal(INVALID_PARAMS, f"Unknown prompt: {target[:128]}")
            raise Refusal(RESOURCE_NOT_FOUND, "Resource not found", {"uri": target[:256]})
        decision = self.policy.check_feature(entry.upstream_id, "completion")
        record["upstream"] = entry.upstream_id
        await self.record_decision(record, decision)
        if not decision.allowed:
            raise Refusal(POLICY_DENIED, f"completion denied by policy: {decision.reason}")
        forwarded = {**params, "ref": {**ref, key: entry.original}}
        return await self.forward_request(
            entry.upstream_id, "completion/complete", forwarded, record
        )

    # -- server-to-client requests -------------------------------------------------------------

    def client_capabilities_for(
        self, upstream_id: str, agent: Mapping[str, Any] | None = None
    ) -> ClientCapabilities:
        """The client capabilities Glove declares to ``upstream_id`` (see
        :func:`client_capabilities`)."""
        return client_capabilities(self.policy, upstream_id, agent)

    async def decide_server_request(
        self, upstream_id: str, method: str, params: McpObject | None
    ) -> str:
        """Audit and decide a server-to-client request; return the capability to relay it under.

        Raises:
            Refusal: not a request Glove relays (``-32601``), or the policy does not allow it
                for this upstream (``-33001``), or not durably audited.
        """
        feature = SERVER_REQUESTS.get(method)
        record: dict[str, object] = {
            "kind": "mcp.server_request",
            "method": _text(method, 64),
            "upstream": upstream_id,
            "params_sha256": arguments_digest(params or {}),
        }
        if feature is None:
            record.update(decision="deny", reason="not a server-to-client request Glove relays")
            await self.record(record)
            raise Refusal(METHOD_NOT_FOUND, f"Glove does not relay {method[:64]}")
        decision = self.policy.check_feature(upstream_id, feature)
        await self.record_decision(record, decision)
        if not decision.allowed:
            raise Refusal(POLICY_DENIED, f"{feature} is not allowed for this server by policy")
        return CLIENT_CAPABILITY[feature]


def client_capabilities(
    policy: PolicyEngine, upstream_id: str, agent: Mapping[str, Any] | None = None
) -> ClientCapabilities:
    """The client capabilities Glove declares to ``upstream_id``: each server-to-client
    feature the policy allows it and, when the agent's capabilities are known, the agent
    supports too (its own declaration is passed on)."""
    caps: ClientCapabilities = {}
    for feature, capability in CLIENT_CAPABILITY.items():
        if not policy.check_feature(upstream_id, feature).allowed:
            continue
        if agent is None:
            caps[capability] = {"listChanged": True} if capability == "roots" else {}
        elif isinstance(agent.get(capability), dict):
            caps[capability] = dict(agent[capability])
    return caps


def _rename_contents(raw: msgspec.Raw, upstream_id: str) -> msgspec.Raw:
    """Give each ``contents[].uri`` of a read result its exposed (prefixed) form."""
    try:
        result = msgspec.json.decode(raw)
    except msgspec.DecodeError:
        return raw
    contents = result.get("contents") if isinstance(result, dict) else None
    if not isinstance(contents, list):
        return raw
    for item in contents:
        if isinstance(item, dict) and isinstance(item.get("uri"), str):
            exposed = expose_uri(upstream_id, item["uri"])
            if exposed is not None:
                item["uri"] = exposed
    return msgspec.Raw(msgspec.json.encode(result))
