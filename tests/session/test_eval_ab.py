"""`glove eval ab` through a real gloved on real PTYs: a harness whose output depends on
the projected skill makes the base fail and the candidate pass, deterministically; the
report's counts and keys, the bundle verified offline (and refused once tampered), and the
HTML report drawn in Debian's headless chromium."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from ._gloved import HARNESSES, Gloved

SKILL_TARGET = "/skills/skill.md"
AB_HARNESSES = (
    HARNESSES
    + f"""
[projections.skill]
target = "{SKILL_TARGET}"

[harnesses.skilled]
argv = ["/bin/sh", "-c", "cat {SKILL_TARGET}; exit 0"]

[harnesses.slow]
argv = ["/bin/sh", "-c", "cat {SKILL_TARGET}; sleep 2; exit 0"]
"""
)
#: The first fixture passes only the candidate's skill; the second passes both.
FIXTURES = [
    {"version": 1, "exit_code": 0, "max_wall_ms": 30000, "required": ["SKILL-GOOD"],
     "forbidden": ["SKILL-BAD"]},
    {"version": 1, "exit_code": 0, "max_wall_ms": 30000, "required": ["skill"],
     "forbidden": ["Traceback"]},
]  # fmt: skip
RUNS = 3
CHROMIUM = "/usr/bin/chromium"


@dataclass
class Done:
    """The module's one A/B run: its home, bundle, the CLI's answer."""

    home: Gloved
    bundle: Path
    public_key: Path
    result: subprocess.CompletedProcess[str]
    report: dict[str, Any]


def _ab(home: Gloved, fixtures: list[dict[str, Any]], runs: int) -> Done:
    """Write the skills and fixtures as the home's owner, run `glove eval ab --bundle`
    through its (started) gloved, fetch the log's public key."""
    base = home.base
    paths: list[str] = []
    files = {"base.md": "a skill: SKILL-BAD\n", "candidate.md": "a skill: SKILL-GOOD\n"}
    for index, fixture in enumerate(fixtures):
        files[f"fixture-{index}.json"] = json.dumps(fixture)
        paths.extend(["--fixture", str(base / f"fixture-{index}.json")])
    for name, text in files.items():
        (base / name).write_text(text)
        if home.creds:
            os.chown(base / name, home.creds["user"], home.creds["group"])
    bundle = base / "bundle"
    result = home.glove(
        "eval", "ab", "--harness", "skilled", "--alias", "skill",
        "--base", str(base / "base.md"), "--candidate", str(base / "candidate.md"),
        *paths, "--runs", str(runs), "--seed", "7", "--json", "--bundle", str(bundle),
        "--runtime-dir", str(home.runtime), timeout=900,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    key = home.glove("receipts", "public-key")
    assert key.returncode == 0, key.stderr
    public = base / "log.pub"
    public.write_text(key.stdout)
    return Done(home, bundle, public, result, json.loads(result.stdout))


@pytest.fixture(scope="module")
def done() -> Iterator[Done]:
    """A gloved of ours that ran one A/B of two fixtures, K=3, with a bundle."""
    base = Path(tempfile.mkdtemp(prefix="glove-evalab-", dir="/var/tmp"))
    home = Gloved(base)
    home.setup(AB_HARNESSES)
    home.start()
    try:
        yield _ab(home, FIXTURES, RUNS)
    finally:
        assert home.stop() == 0
        shutil.rmtree(base, ignore_errors=True)


def test_the_report_counts_each_arm_and_has_the_contract_keys(done: Done) -> None:
    """The base fails the first fixture and the candidate passes it, both pass the second:
    the JSON report's arms, difference, McNemar p and rule digest say exactly that."""
    report = done.report
    base, candidate = report["arms"]["base"], report["arms"]["candidate"]
    assert base.items() >= {"runs": 6, "pass": 3, "invalid": 0, "infra_error": 0}.items()
    assert candidate.items() >= {"runs": 6, "pass": 6, "invalid": 0, "infra_error": 0}.items()
    assert report["difference"]["estimate"] == pytest.approx(0.5)
    low, high = report["difference"]["ci95"]
    assert low < 0.5 < high
    assert report["difference"]["method"] == "newcombe-1998-method-10"
    assert report["mcnemar_p"] == pytest.approx(0.25)
    assert report["decision_rule_digest"].startswith("sha256:")
    first, second = report["fixtures"]
    assert first["comparison"]["arms"]["base"]["pass"] == 0
    assert first["comparison"]["arms"]["candidate"]["pass_hat_k"] == [1.0, 1.0, 1.0]
    assert second["comparison"]["difference"]["estimate"] == 0
    assert report["bootstrap"] is not None
    assert report["attrition_warning"] is False


def test_the_rule_is_committed_before_the_first_run_and_progress_is_shown(done: Done) -> None:
    """stderr names the decision rule digest before the first progress line, one progress
    line per session, and plan.json holds the same digest and the seeded order."""
    lines = done.result.stderr.splitlines()
    rule = done.report["decision_rule_digest"]
    assert lines[0].startswith(f"glove eval ab: committed decision rule {rule}")
    progress = [line for line in lines if " run " in line and "fixture" in line]
    assert len(progress) == 2 * RUNS * len(FIXTURES)
    plan = json.loads((done.bundle / "plan.json").read_text())
    assert plan["decision_rule_digest"] == done.report["decision_rule_digest"]
    assert len(plan["order"]) == 2 * RUNS * len(FIXTURES)


def _verify(done: Done, bundle: Path) -> subprocess.CompletedProcess[str]:
    result: subprocess.CompletedProcess[str] = done.home.glove(
        "eval", "verify", str(bundle), "--public-key", str(done.public_key), timeout=300
    )
    return result


def test_the_bundle_verifies_offline(done: Done) -> None:
    """`glove eval verify` checks every envelope and re-runs every verdict: exit 0."""
    result = _verify(done, done.bundle)
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("OK: 12 envelopes verified")


@pytest.mark.parametrize(
    ("part", "named"),
    [
        ("transcript", "the transcript is not the stream the envelope names"),
        ("envelope", "the envelope does not verify"),
        ("report", "report.json is not the report of the verdicts"),
    ],
)
def test_a_tampered_bundle_fails_verify(done: Done, part: str, named: str, tmp_path: Path) -> None:
    """A transcript with one byte changed, an envelope whose receipt was edited, or a
    report with a changed count: verify exits 1 naming the difference."""
    copy = tmp_path / "bundle"
    shutil.copytree(done.bundle, copy)
    runs = json.loads((copy / "runs.json").read_text())
    if part == "transcript":
        path = copy / runs[0]["transcript"]
        data = bytearray(path.read_bytes())
        data[0] ^= 0x20
        path.write_bytes(bytes(data))
    elif part == "envelope":
        path = copy / runs[0]["receipt"]
        bundle = json.loads(path.read_text())
        bundle["receipt"]["evaluation"]["outcome"]["verdict"] = "pass"
        path.write_text(json.dumps(bundle, indent=2))
    else:
        path = copy / "report.json"
        report = json.loads(path.read_text())
        report["arms"]["base"]["pass"] += 1
        path.write_text(json.dumps(report))
    result = _verify(done, copy)
    assert result.returncode == 1, result.stdout + result.stderr
    assert result.stderr.startswith("glove eval verify: FAILED:")
    assert named in result.stderr
    assert len(result.stderr.splitlines()) == 1


def test_the_html_report_draws_each_interval_in_chromium(done: Done, tmp_path: Path) -> None:
    """`glove eval report --html` writes a page whose SVG, once rendered by headless
    chromium, holds one interval per fixture plus the overall one, with the rule digest."""
    if not os.access(CHROMIUM, os.X_OK):
        pytest.fail(f"{CHROMIUM} is missing: scripts/setup installs Debian's chromium")
    page = tmp_path / "report.html"
    result = done.home.glove("eval", "report", str(done.bundle), "--html", str(page))
    assert result.returncode == 0, result.stderr
    dom = subprocess.run(
        [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu",
         f"--user-data-dir={tmp_path / 'profile'}", "--dump-dom", page.as_uri()],
        capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert dom.returncode == 0, dom.stderr
    assert dom.stdout.count('class="interval"') == len(FIXTURES) + 1
    assert 'data-label="overall"' in dom.stdout
    assert done.report["decision_rule_digest"] in dom.stdout
    assert "<circle" in dom.stdout


@pytest.mark.unpriv
def test_an_unprivileged_owner_runs_and_verifies_an_ab(
    request: pytest.FixtureRequest, unpriv: Any
) -> None:
    """As the test user, with a gloved and a library the user owns: one fixture, K=2, the
    candidate passes every run and the base none, and the bundle verifies offline."""
    base = Path(tempfile.mkdtemp(prefix="glove-evalab-", dir="/var/tmp"))
    os.chown(base, unpriv.uid, unpriv.gid)
    request.addfinalizer(lambda: shutil.rmtree(base, ignore_errors=True))
    home = Gloved(base, creds=unpriv.credentials())
    home.python = unpriv.python
    home.setup(AB_HARNESSES)
    home.start()
    try:
        ran = _ab(home, FIXTURES[:1], 2)
        assert ran.report["arms"]["base"]["pass"] == 0
        assert ran.report["arms"]["candidate"]["pass"] == 2
        assert ran.report["difference"]["estimate"] == 1.0
        verified = _verify(ran, ran.bundle)
        assert verified.returncode == 0, verified.stderr
        assert verified.stdout.startswith("OK: 4 envelopes verified")
    finally:
        assert home.stop() == 0


def test_another_logs_key_fails_verify(done: Done, tmp_path: Path) -> None:
    """Verified with the public key of another log, the intact bundle fails: exit 1, the
    first envelope named as not verifying."""
    from glove.journal import generate_signing_key

    other, _ = generate_signing_key(tmp_path / "other.key")
    result = done.home.glove(
        "eval", "verify", str(done.bundle), "--public-key", other.verifier.text, timeout=300
    )
    assert result.returncode == 1, result.stdout + result.stderr
    assert "run 1 " in result.stderr
    assert "the envelope does not verify" in result.stderr


def test_the_text_report_says_the_method_and_the_decision(done: Done) -> None:
    """`glove eval verify --json` gives the report recomputed, equal to what ab printed, and
    the text of ab (rendered from that report) names the interval method and McNemar."""
    from glove.cli._eval import _text

    result = done.home.glove(
        "eval", "verify", str(done.bundle), "--public-key", str(done.public_key), "--json"
    )
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout) == done.report
    text = _text(done.report, [Path("one.json"), Path("two.json")])
    assert "95% CI" in text
    assert "(newcombe-1998-method-10)" in text
    assert "McNemar exact p 0.2500" in text
    assert text.splitlines()[-1].startswith("decision: ")


def test_attrition_is_counted_and_warned_about_in_the_text_report(done: Done) -> None:
    """A candidate skill that ends on a cut UTF-8 sequence makes every candidate run
    invalid_evidence: the text report counts it per arm (never dropped) and warns that the
    arms' attrition differs by more than 5 points."""
    where = done.home.base / "attrition"
    where.mkdir()
    (where / "base.md").write_bytes(b"a skill: SKILL-GOOD\n")
    (where / "candidate.md").write_bytes(b"a skill: SKILL-GOOD\n\xe2\x82")
    (where / "fixture.json").write_text(json.dumps(FIXTURES[0]))
    result = done.home.glove(
        "eval", "ab", "--harness", "skilled", "--alias", "skill",
        "--base", str(where / "base.md"), "--candidate", str(where / "candidate.md"),
        "--fixture", str(where / "fixture.json"), "--runs", "2",
        "--runtime-dir", str(done.home.runtime), timeout=900,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert "  base      pass 2/2  invalid 0  infra_error 0  pass^k 1.00 1.00" in lines
    assert "  candidate pass 0/2  invalid 2  infra_error 0  pass^k 0.00 0.00" in lines
    warnings = [line for line in lines if line.startswith("  warning: attrition differs by")]
    assert len(warnings) == 2  # the fixture's and the overall
    assert "decision: keep (lower_bound_not_above_threshold, differential_attrition)" in (
        result.stdout
    )


def test_a_bundle_naming_a_file_outside_runs_fails_verify(done: Done, tmp_path: Path) -> None:
    """runs.json naming a transcript outside the bundle's runs/ directory (`..`) is refused
    before anything is read there."""
    copy = tmp_path / "bundle"
    shutil.copytree(done.bundle, copy)
    runs = json.loads((copy / "runs.json").read_text())
    runs[0]["transcript"] = "runs/../../" + runs[0]["transcript"]
    (copy / "runs.json").write_text(json.dumps(runs))
    result = _verify(done, copy)
    assert result.returncode == 1, result.stdout + result.stderr
    assert "not a file of runs/" in result.stderr


def test_a_refusal_mid_run_leaves_no_bundle(done: Done) -> None:
    """The candidate's bundle removed from the library once the first run is reported
    (each run takes 2 s: the third and fourth are created after it): a later session is
    refused, `glove eval ab` exits 2 naming the refusal and that no bundle was written, and
    nothing is named like the bundle (no staging directory left)."""
    home = done.home
    parent = Path(tempfile.mkdtemp(prefix="bundles-", dir=home.base))
    (home.base / "fixture-mid.json").write_text(json.dumps(FIXTURES[0]))
    (home.base / "base-mid.md").write_text("a skill (mid): SKILL-BAD\n")
    (home.base / "candidate-mid.md").write_text("a skill (mid): SKILL-GOOD\n")
    added = home.glove("library", "add", str(home.base / "candidate-mid.md"), "--json")
    assert added.returncode == 0, added.stderr
    candidate = json.loads(added.stdout)["digest"]
    bundle = parent / "bundle"
    argv = [
        home.python, "-m", "glove", "eval", "ab", "--harness", "slow", "--alias", "skill",
        "--base", str(home.base / "base-mid.md"),
        "--candidate", str(home.base / "candidate-mid.md"),
        "--fixture", str(home.base / "fixture-mid.json"), "--runs", "2", "--json",
        "--bundle", str(bundle), "--runtime-dir", str(home.runtime),
    ]  # fmt: skip
    proc = subprocess.Popen(
        argv, env=home.env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    assert proc.stderr is not None
    lines = []
    for line in proc.stderr:
        lines.append(line)
        if line.startswith("glove eval ab: 1/4 "):
            removed = home.glove("library", "remove", candidate)
            assert removed.returncode == 0, removed.stderr
            break
    stdout, rest = proc.communicate(timeout=600)
    errors = "".join(lines) + rest
    assert proc.returncode == 2, errors
    assert stdout == ""
    assert "gloved refused a session" in errors or "refused" in errors, errors
    assert f"no bundle was written at {bundle}" in errors, errors
    assert list(parent.iterdir()) == []


def test_receipts_verify_says_a_run_is_a_refinement_envelope(done: Done) -> None:
    """`glove receipts verify` of one run's bundle reports kind refinement and its verdict;
    `--kind refinement` holds, `--kind receipt` refuses it (another envelope domain)."""
    run = json.loads((done.bundle / "runs.json").read_text())[0]
    path = str(done.bundle / run["receipt"])
    key = str(done.public_key)
    checked = done.home.glove("receipts", "verify", path, "--public-key", key, "--json")
    assert checked.returncode == 0, checked.stderr
    assert json.loads(checked.stdout)["kind"] == "refinement"
    text = done.home.glove("receipts", "verify", path, "--public-key", key)
    assert f"a refinement envelope: verdict {run['verdict']}" in text.stdout, text.stdout
    same = done.home.glove("receipts", "verify", path, "--public-key", key, "--kind", "refinement")
    assert same.returncode == 0, same.stderr
    other = done.home.glove("receipts", "verify", path, "--public-key", key, "--kind", "receipt")
    assert other.returncode == 4, other.stdout + other.stderr  # EntryMismatch
    assert "envelope domain" in other.stderr, other.stderr
