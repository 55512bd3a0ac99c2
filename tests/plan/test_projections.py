"""The plan's ``projections`` key: strictly decoded, judged against gloved.toml's aliases and
the library store, covered by both digests; plans without it are unchanged."""

from __future__ import annotations

import json
from typing import Any

import pytest

from glove.plan import (
    PlanError,
    ResolvedProjection,
    canonical_bytes,
    decode_plan,
    plan_digests,
    validate_plan,
)
from tests.plan._helpers import EXAMPLE_CANONICAL, local_policy, plan_bytes

DIGEST = "sha256:" + "ab" * 32
OTHER = "sha256:" + "cd" * 32
TARGETS = {"skill": "/skills/skill.md", "notes": "/skills/notes.md"}
LIBRARY = {DIGEST: 120, OTHER: 7}


def _projection(alias: str = "skill", digest: str = DIGEST, size: int = 120) -> dict[str, Any]:
    return {"alias": alias, "digest": digest, "size": size}


def _problems(data: bytes, **policy: Any) -> list[tuple[str, str]]:
    """The (path, message) of every problem decoding then validating ``data``."""
    with pytest.raises(PlanError) as info:
        validate_plan(
            decode_plan(data),
            local_policy(projections=TARGETS, library=LIBRARY, **policy),
        )
    return [(p.path, p.message) for p in info.value.problems]


def test_a_plan_without_projections_canonicalizes_as_before() -> None:
    """Absent, the key leaves the canonical bytes (so the digests) exactly as they were."""
    plan = decode_plan(plan_bytes())
    assert plan.projection_list == ()
    assert canonical_bytes(plan) == EXAMPLE_CANONICAL


def test_valid_projections_resolve_to_their_targets_in_plan_order() -> None:
    """Each projection comes back with its alias's target, digest and size, in order."""
    data = plan_bytes(projections=[_projection("notes", OTHER, 7), _projection()])
    validated = validate_plan(decode_plan(data), local_policy(projections=TARGETS, library=LIBRARY))
    assert validated.projections == (
        ResolvedProjection(alias="notes", target="/skills/notes.md", digest=OTHER, size=7),
        ResolvedProjection(alias="skill", target="/skills/skill.md", digest=DIGEST, size=120),
    )


def test_both_digests_cover_the_projections() -> None:
    """A different digest, size or alias changes both plan digests."""
    base = plan_digests(canonical_bytes(decode_plan(plan_bytes(projections=[_projection()]))))
    for changed in (
        _projection(digest=OTHER),
        _projection(size=121),
        _projection(alias="notes"),
    ):
        other = plan_digests(canonical_bytes(decode_plan(plan_bytes(projections=[changed]))))
        assert other.sha256 != base.sha256
        assert other.blake3 != base.blake3
    assert b'"projections":[{"alias":"skill"' in canonical_bytes(
        decode_plan(plan_bytes(projections=[_projection()]))
    )


@pytest.mark.parametrize(
    ("entry", "path", "needle"),
    [
        ({**_projection(), "digest": "sha256:" + "AB" * 32}, "$.projections[0].digest", "hex"),
        ({**_projection(), "digest": "ab" * 32}, "$.projections[0].digest", "sha256:"),
        ({**_projection(), "digest": "sha256-" + "ab" * 32}, "$.projections[0].digest", "hex"),
        ({**_projection(), "alias": "/etc/passwd"}, "$.projections[0].alias", "raw paths"),
        ({**_projection(), "alias": "Skill"}, "$.projections[0].alias", "identifier"),
        ({**_projection(), "path": "/x"}, "$.projections[0].path", "refused"),
        ({**_projection(), "mode": "rw"}, "$.projections[0].mode", "unknown field"),
        ({"alias": "skill", "digest": DIGEST}, "$.projections[0].size", "missing"),
        ({**_projection(), "size": -1}, "$.projections[0].size", ">= 0"),
        ({**_projection(), "size": "120"}, "$.projections[0].size", "int"),
    ],
)
def test_malformed_entries_are_refused_with_their_path(
    entry: dict[str, Any], path: str, needle: str
) -> None:
    """A malformed digest, a path for an alias, an unknown or missing member: its path."""
    problems = _problems(plan_bytes(projections=[entry]))
    assert problems, entry
    assert problems[0][0] == path, problems
    assert needle in problems[0][1], problems


def test_an_alias_named_twice_is_refused() -> None:
    """A duplicate alias names where it first appeared."""
    data = plan_bytes(projections=[_projection(), _projection(digest=OTHER, size=7)])
    assert _problems(data) == [
        ("$.projections[1].alias", "projection 'skill' is named twice (first at $.projections[0])")
    ]


def test_unknown_alias_missing_bundle_and_size_mismatch_are_each_reported() -> None:
    """Every judged problem is listed with its path in one answer."""
    data = plan_bytes(
        projections=[
            _projection(alias="absent"),
            _projection(alias="skill", digest="sha256:" + "00" * 32),
            _projection(alias="notes", digest=OTHER, size=8),
        ]
    )
    problems = _problems(data)
    assert [p for p, _ in problems] == [
        "$.projections[0].alias",
        "$.projections[1].digest",
        "$.projections[2].size",
    ]
    assert "[projections.absent]" in problems[0][1]
    assert "glove library add" in problems[1][1]
    assert "is 7 bytes, not 8" in problems[2][1]


def test_without_a_library_store_every_projection_is_refused() -> None:
    """A gloved with no library store refuses a plan that names a bundle (fail closed)."""
    data = plan_bytes(projections=[_projection()])
    with pytest.raises(PlanError) as info:
        validate_plan(decode_plan(data), local_policy(projections=TARGETS))
    assert [p.path for p in info.value.problems] == ["$.projections[0]"]


def test_too_many_projections_are_refused() -> None:
    """At most 16 entries."""
    entries = [_projection(alias=f"a{i}") for i in range(17)]
    paths = [
        p
        for p, _ in _problems(
            json.dumps({**json.loads(plan_bytes()), "projections": entries}).encode()
        )
    ]
    assert paths[0] == "$.projections"
