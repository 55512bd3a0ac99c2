"""Resource URI rules and upstream feature rules, compiled and pure.

A :class:`ResourceRule` covers resource URIs in one of three ways:

* ``uri``: the exposed URI exactly, or a glob on it (``*`` any run, ``?`` one character);
* ``prefix``: every exposed URI that starts with the text;
* ``roots``: every ``file://`` URI (as the upstream itself names it) whose path, once
  percent-decoded and normalized lexically, lies inside one of the roots. The path rules
  are those of ``op = "path"`` (``docs/policy.md``): ``~`` and relative paths are refused,
  ``..`` is normalized or refused, and a URI with a query, a fragment, a host other than
  ``localhost`` or an encoded NUL or ``/`` never matches.

A rule may name one ``upstream``: it then covers only that upstream's resources. A
:class:`FeatureRule` lists the features (logging, completion, sampling, elicitation,
roots) that the upstreams its id or glob matches may use.
"""

from dataclasses import dataclass
from urllib.parse import unquote

from glove.policy._names import glob_match
from glove.policy._paths import DotDot, PathRejected, is_within, normalize_path

__all__ = [
    "FEATURES",
    "MAX_URI_CHARS",
    "FeatureRule",
    "ResourceRule",
    "file_uri_path",
]

MAX_URI_CHARS = 2048
"""Longest resource URI (or URI rule) the policy judges, in characters."""

FEATURES = ("logging", "completion", "sampling", "elicitation", "roots")
"""The features a ``[[features]]`` rule can allow, besides tools, prompts and resources."""

_FILE_SCHEME = "file://"
_LOCAL_HOSTS = ("", "localhost")


def file_uri_path(uri: str) -> str | None:
    """The decoded absolute path of a ``file://`` URI, or ``None`` when it is not one we trust.

    Refused (``None``): another scheme, a host other than empty or ``localhost``, a query
    or fragment, a relative or empty path, an encoded ``/`` or NUL (a server might decode
    them differently than the policy would).

    Raises:
        Nothing.
    """
    if uri[: len(_FILE_SCHEME)].lower() != _FILE_SCHEME:
        return None
    rest = uri[len(_FILE_SCHEME) :]
    if "?" in rest or "#" in rest:
        return None
    slash = rest.find("/")
    if slash < 0 or rest[:slash].lower() not in _LOCAL_HOSTS:
        return None
    encoded = rest[slash:]
    lowered = encoded.lower()
    if "%2f" in lowered or "%00" in lowered:
        return None
    return unquote(encoded, errors="strict") if "%" in encoded else encoded


@dataclass(frozen=True, slots=True)
class ResourceRule:
    """One compiled ``[[resources]]`` rule.

    Attributes:
        label: the rule's ``id``, or ``resources[N]``.
        kind: ``"uri"``, ``"prefix"`` or ``"roots"``.
        pattern: the URI, glob or prefix (empty for ``roots``).
        is_glob: whether a ``uri`` rule holds a wildcard.
        roots: the normalized roots of a ``roots`` rule.
        dotdot: what ``..`` does in a ``roots`` rule.
        upstream: the one upstream the rule covers, or ``None`` for all.
        allow: ``True`` for ``effect = "allow"``.
    """

    label: str
    kind: str
    pattern: str
    is_glob: bool
    roots: tuple[str, ...]
    dotdot: DotDot
    upstream: str | None
    allow: bool

    def matches(self, uri: str, upstream: str, upstream_uri: str) -> bool:
        """Whether the rule covers the exposed ``uri`` of ``upstream`` (its own ``upstream_uri``).

        Raises:
            Nothing.
        """
        if self.upstream is not None and self.upstream != upstream:
            return False
        if self.kind == "uri":
            return glob_match(self.pattern, uri) if self.is_glob else uri == self.pattern
        if self.kind == "prefix":
            return uri.startswith(self.pattern)
        try:
            path = file_uri_path(upstream_uri)
            if path is None:
                return False
            normalized = normalize_path(path, base=None, dotdot=self.dotdot)
        except (PathRejected, UnicodeDecodeError):
            return False
        return any(is_within(normalized, root) for root in self.roots)


@dataclass(frozen=True, slots=True)
class FeatureRule:
    """One compiled ``[[features]]`` rule.

    Attributes:
        label: the rule's ``id``, or ``features[N]``.
        upstream: the upstream id or glob it covers.
        allow: the features it allows.
    """

    label: str
    upstream: str
    allow: frozenset[str]

    def covers(self, upstream: str) -> bool:
        """Whether the rule applies to ``upstream``.

        Raises:
            Nothing.
        """
        return glob_match(self.upstream, upstream)
