"""Canonical JSON and the SHA-256 digests that pin a tool definition.

Canonical JSON here is what ``msgspec.json.encode(value, order="sorted")`` writes: object
keys sorted, no whitespace, UTF-8, shortest round-tripping floats. An operator computes a
pin once from a reviewed definition (:func:`definition_digests`); the engine recomputes it
from the definition the upstream advertises now and refuses the tool if they differ.
"""

import hashlib
from collections.abc import Mapping

import msgspec

__all__ = [
    "ToolDefinition",
    "canonical_json",
    "definition_digests",
    "full_definition_digest",
    "sha256_json",
]


class ToolDefinition(msgspec.Struct, frozen=True):
    """A tool as an upstream advertises it in ``tools/list``.

    Attributes:
        name: the tool's name (informative: the policy matches the exposed name it is
            given separately).
        description: the tool's description, or ``None`` when the upstream gives none.
        input_schema: the tool's ``inputSchema`` object, or ``None`` when unknown.
        raw: the whole tool object as advertised (title, annotations, outputSchema...),
            needed only by a ``definition_sha256`` pin; ``None`` when not supplied.
    """

    name: str
    description: str | None = None
    input_schema: Mapping[str, object] | None = None
    raw: Mapping[str, object] | None = None


def _plain(value: object) -> object:
    """Turn mappings and sequences of any concrete type into dicts and lists for encoding."""
    if isinstance(value, Mapping):
        return {key: _plain(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(item) for item in value]
    return value


def canonical_json(value: object) -> bytes:
    """Encode ``value`` as canonical JSON bytes.

    Raises:
        TypeError: the value holds something JSON cannot represent.
        RecursionError: the value is nested too deeply to encode.
    """
    try:
        # Fast path: decoded JSON is made of dicts, lists and scalars, which msgspec
        # encodes natively; other Mapping/Sequence types are converted first.
        return msgspec.json.encode(value, order="sorted")
    except (TypeError, msgspec.EncodeError):
        pass
    try:
        return msgspec.json.encode(_plain(value), order="sorted")
    except msgspec.EncodeError as exc:
        raise TypeError(f"not encodable as JSON: {exc}") from exc


def sha256_json(value: object) -> str:
    """The lowercase hex SHA-256 of the canonical JSON of ``value``.

    Raises:
        TypeError: the value holds something JSON cannot represent.
        RecursionError: the value is nested too deeply to encode.
    """
    return hashlib.sha256(canonical_json(value)).hexdigest()


def definition_digests(definition: ToolDefinition) -> tuple[str, str]:
    """The pins of a definition: ``(description_sha256, schema_sha256)``.

    The description is hashed as a JSON string (``null`` when absent), the input schema as
    a canonical JSON object (``null`` when absent). Paste the two values into the tool's
    rule as ``description_sha256`` and ``schema_sha256``.

    Raises:
        TypeError: the schema holds something JSON cannot represent.
        RecursionError: the schema is nested too deeply to encode.
    """
    return sha256_json(definition.description), sha256_json(definition.input_schema)


def full_definition_digest(definition: ToolDefinition) -> str:
    """The ``definition_sha256`` pin: SHA-256 of the canonical JSON of the whole tool object.

    Covers everything the upstream advertises (title, annotations such as ``readOnlyHint``,
    ``outputSchema``), not only the description and input schema. ``null`` when the
    definition carries no ``raw`` object, so such a pin fails unless the mediator supplies it.

    Raises:
        TypeError: the object holds something JSON cannot represent.
        RecursionError: the object is nested too deeply to encode.
    """
    return sha256_json(definition.raw)
