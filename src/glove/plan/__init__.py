"""Plan v1: strict decoding, RFC 8785 canonical bytes, digests, validation (pure, sans-IO).

A controller sends an identifier-only plan; gloved turns it into a :class:`ValidatedPlan`
or a :class:`PlanError` that lists every problem with its JSON path::

    plan = decode_plan(data)                   # strict JSON, refusals by name, typed decode
    canon = canonical_bytes(plan)              # RFC 8785 (JCS) of the plan as decoded
    digests = plan_digests(canon)              # .sha256 "sha256:<hex>", .blake3 "blake3:<hex>"
    validated = validate_plan(plan, local)     # against the owner's LocalPolicy

See ``docs/plans.md`` for the format, every rule and the error shape.
"""

from glove.plan._canonical import canonical_bytes, ecmascript_number, jcs_dumps
from glove.plan._decode import REJECTED_MEMBERS, decode_plan
from glove.plan._digest import PlanDigests, plan_digests
from glove.plan._model import (
    CONTAINER_LIMIT_NAMES,
    EVALUATION_KIND,
    IDENTIFIER_PATTERN,
    MAX_EXPOSURES,
    MAX_NETWORK_RULES,
    MAX_PLAN_BYTES,
    MAX_PLAN_DEPTH,
    MAX_PROJECTIONS,
    MAX_TERMINAL_CELLS,
    MIN_TERMINAL_CELLS,
    PLAN_LIMIT_NAMES,
    PLAN_VERSION,
    PROJECTION_DIGEST_RE,
    ExposurePolicy,
    FixtureRef,
    HarnessPolicy,
    LocalPolicy,
    Plan,
    PlanEvaluation,
    PlanLimits,
    PlanProjection,
    ProxyNetwork,
    ResolvedProjection,
    ValidatedPlan,
    network_mode,
)
from glove.plan._validate import host_mechanisms, mechanism_is_full, validate_plan
from glove.plan.errors import CanonicalError, LocalPolicyError, PlanError, PlanProblem

__all__ = [
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
