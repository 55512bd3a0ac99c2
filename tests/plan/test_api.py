"""The public surface of glove.plan, its error tree, and the sans-IO rule for every module."""

from __future__ import annotations

import ast
import inspect
from pathlib import Path

import glove.plan
import glove.plan.errors
from glove.errors import GloveError
from tests._ast import parse as parse_source

PLAN_DIR = Path(glove.plan.__file__).parent
FORBIDDEN_IMPORTS = {
    "asyncio",
    "os",
    "socket",
    "subprocess",
    "pathlib",
    "io",
    "threading",
    "time",
    "selectors",
    "shutil",
}
#: The interface the lead builds on (issue 9, section 3), plus what this package adds.
EXPORTS = [
    "CONTAINER_LIMIT_NAMES",
    "EVALUATION_KIND",
    "IDENTIFIER_PATTERN",
    "MAX_EXPOSURES",
    "MAX_NETWORK_RULES",
    "MAX_PLAN_BYTES",
    "MAX_PLAN_DEPTH",
    "MAX_PROJECTIONS",
    "MAX_TERMINAL_CELLS",
    "MIN_TERMINAL_CELLS",
    "PLAN_LIMIT_NAMES",
    "PLAN_VERSION",
    "PROJECTION_DIGEST_RE",
    "REJECTED_MEMBERS",
    "CanonicalError",
    "ExposurePolicy",
    "FixtureRef",
    "HarnessPolicy",
    "LocalPolicy",
    "LocalPolicyError",
    "Plan",
    "PlanDigests",
    "PlanError",
    "PlanEvaluation",
    "PlanLimits",
    "PlanProblem",
    "PlanProjection",
    "ProxyNetwork",
    "ResolvedProjection",
    "ValidatedPlan",
    "canonical_bytes",
    "decode_plan",
    "ecmascript_number",
    "host_mechanisms",
    "jcs_dumps",
    "mechanism_is_full",
    "network_mode",
    "plan_digests",
    "validate_plan",
]


def test_public_names_are_pinned_and_sorted() -> None:
    """``__all__`` is the documented contract, sorted as ruff sorts it, each name documented."""
    assert glove.plan.__all__ == EXPORTS
    constants = [name for name in EXPORTS if name.isupper()]
    assert constants == sorted(constants)
    others = [name for name in EXPORTS if not name.isupper()]
    assert others == sorted(others, key=lambda name: (name[0].islower(), name))
    for name in EXPORTS:
        value = getattr(glove.plan, name)
        if callable(value):
            assert inspect.getdoc(value), name


def test_the_constants_are_the_issues() -> None:
    """64 KiB, 64 containers, 32 exposures, version 1, six limits."""
    assert glove.plan.MAX_PLAN_BYTES == 64 * 1024
    assert glove.plan.MAX_PLAN_DEPTH == 64
    assert glove.plan.MAX_EXPOSURES == 32
    assert glove.plan.PLAN_VERSION == 1
    assert len(glove.plan.PLAN_LIMIT_NAMES) == 6


def test_every_module_is_sans_io() -> None:
    """No module of glove.plan imports asyncio, os, socket, files, threads or clocks."""
    checked = 0
    for module in sorted(PLAN_DIR.glob("*.py")):
        tree = parse_source(module.read_text())
        for node in ast.walk(tree):
            names: list[str] = []
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module]
            for name in names:
                assert name.split(".")[0] not in FORBIDDEN_IMPORTS, f"{module.name} imports {name}"
        checked += 1
    assert checked == 7  # __init__, errors, _model, _decode, _canonical, _digest, _validate


def test_every_error_roots_at_glove_error_and_is_in_the_tree() -> None:
    """Each error class derives from GloveError and appears in the errors module docstring."""
    doc = glove.plan.errors.__doc__ or ""
    classes = [
        value
        for value in vars(glove.plan.errors).values()
        if isinstance(value, type)
        and issubclass(value, Exception)
        and value.__module__ == "glove.plan.errors"
    ]
    assert {cls.__name__ for cls in classes} == {"PlanError", "CanonicalError", "LocalPolicyError"}
    for cls in classes:
        assert issubclass(cls, GloveError)
        assert cls.__name__ in doc
        assert isinstance(cls.code, str)  # type: ignore[attr-defined]
    assert issubclass(glove.plan.CanonicalError, glove.plan.PlanError)
