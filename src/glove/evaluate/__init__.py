"""refinement-eval-v1: the fixture DSL, the evaluator core, the verdict, A/B statistics
(pure, sans-IO; depends on no other Glove package).

A fixture says what a run must and must not print; the PTY drain feeds every raw byte to
a :class:`StreamEvaluator`; the supervisor's termination facts and the evidence make one
:class:`Outcome`; paired outcomes of a base and a candidate skill make an
:class:`ABReport`::

    fixture = decode_fixture(data)                 # strict JSON DSL, FixtureError + paths
    digest = fixture_digest(data)                  # "sha256:<hex>" of the exact bytes
    evaluator = StreamEvaluator(fixture)
    evaluator.feed(chunk); evaluator.note_evicted(n)   # per chunk, any chunking
    evidence = evaluator.finish()
    outcome = judge(termination, evidence, fixture)    # {"verdict": ..., "reasons": [...]}
    order = interleaved_order(fixtures, runs, seed)    # the recorded schedule
    report = ab_report(runs, seed=seed, decision_rule_digest=decision_rule_digest(rule))

See ``docs/evaluation.md`` for the DSL, the normalizer, the verdicts and the statistics.
"""

from glove.evaluate._ab import (
    ATTRITION_WARNING,
    BOOTSTRAP_METHOD,
    BOOTSTRAP_RESAMPLES,
    MAX_FIXTURES,
    MAX_RUNS_PER_ARM,
    NEWCOMBE_METHOD,
    ABReport,
    Arm,
    Arms,
    ArmStats,
    Bootstrap,
    Comparison,
    Difference,
    FixtureReport,
    FixtureRuns,
    ab_report,
    cluster_bootstrap_interval,
)
from glove.evaluate._evaluator import EVIDENCE_VERSION, Evidence, StreamEvaluator, evaluate_stream
from glove.evaluate._fixture import (
    FIXTURE_VERSION,
    MAX_EXIT_CODE,
    MAX_FIXTURE_BYTES,
    MAX_FIXTURE_DEPTH,
    MAX_FIXTURE_WALL_MS,
    MAX_LITERAL_BYTES,
    MAX_LITERALS,
    MAX_PROBLEMS,
    Fixture,
    decode_fixture,
    encode_fixture,
    fixture_digest,
    literal_problems,
)
from glove.evaluate._normalize import NORMALIZER_VERSION, TextNormalizer, normalize
from glove.evaluate._order import (
    MAX_SCHEDULED_PAIRS,
    MAX_SEED,
    ORDER_ALGORITHM,
    ScheduledRun,
    interleaved_order,
    order_digest,
)
from glove.evaluate._rule import (
    DECISION_RULE_KIND,
    MAX_RULE_BYTES,
    Decision,
    DecisionRule,
    decide,
    decision_rule_bytes,
    decision_rule_digest,
    decode_decision_rule,
)
from glove.evaluate._scan import NATIVE_SCANNER
from glove.evaluate._stats import (
    CONFIDENCE,
    MDE_ALPHA,
    MDE_POWER,
    Z_95,
    mcnemar_exact_p,
    newcombe_paired_interval,
    paired_mde,
    pass_hat_k,
    required_pairs,
    wilson_interval,
)
from glove.evaluate._utf8 import Utf8State
from glove.evaluate._verdict import (
    REASON_VERDICTS,
    VERDICTS,
    Outcome,
    Reason,
    ReasonCode,
    Termination,
    Verdict,
    encode_outcome,
    judge,
)
from glove.evaluate.errors import (
    EvaluateError,
    EvidenceError,
    FixtureError,
    FixtureProblem,
    StatsError,
)

__all__ = [
    "ATTRITION_WARNING",
    "BOOTSTRAP_METHOD",
    "BOOTSTRAP_RESAMPLES",
    "CONFIDENCE",
    "DECISION_RULE_KIND",
    "EVIDENCE_VERSION",
    "FIXTURE_VERSION",
    "MAX_EXIT_CODE",
    "MAX_FIXTURES",
    "MAX_FIXTURE_BYTES",
    "MAX_FIXTURE_DEPTH",
    "MAX_FIXTURE_WALL_MS",
    "MAX_LITERALS",
    "MAX_LITERAL_BYTES",
    "MAX_PROBLEMS",
    "MAX_RULE_BYTES",
    "MAX_RUNS_PER_ARM",
    "MAX_SCHEDULED_PAIRS",
    "MAX_SEED",
    "MDE_ALPHA",
    "MDE_POWER",
    "NATIVE_SCANNER",
    "NEWCOMBE_METHOD",
    "NORMALIZER_VERSION",
    "ORDER_ALGORITHM",
    "REASON_VERDICTS",
    "VERDICTS",
    "Z_95",
    "ABReport",
    "Arm",
    "ArmStats",
    "Arms",
    "Bootstrap",
    "Comparison",
    "Decision",
    "DecisionRule",
    "Difference",
    "EvaluateError",
    "Evidence",
    "EvidenceError",
    "Fixture",
    "FixtureError",
    "FixtureProblem",
    "FixtureReport",
    "FixtureRuns",
    "Outcome",
    "Reason",
    "ReasonCode",
    "ScheduledRun",
    "StatsError",
    "StreamEvaluator",
    "Termination",
    "TextNormalizer",
    "Utf8State",
    "Verdict",
    "ab_report",
    "cluster_bootstrap_interval",
    "decide",
    "decision_rule_bytes",
    "decision_rule_digest",
    "decode_decision_rule",
    "decode_fixture",
    "encode_fixture",
    "encode_outcome",
    "evaluate_stream",
    "fixture_digest",
    "interleaved_order",
    "judge",
    "literal_problems",
    "mcnemar_exact_p",
    "newcombe_paired_interval",
    "normalize",
    "order_digest",
    "paired_mde",
    "pass_hat_k",
    "required_pairs",
    "wilson_interval",
]
