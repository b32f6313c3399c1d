"""The ``attnlimits`` command, called in-process through ``main(argv)`` (small --trials keep it fast)."""

from __future__ import annotations

import io
import json
import subprocess
import sys
from contextlib import redirect_stdout

import pytest

import attnlimits as al
from attnlimits import cli
from attnlimits.checks import Verdict

KEYS = {"bound", "statement", "trials", "violations", "worst_ratio", "verdict", "expected"}


FAST = ["Corollary 3 (as printed)", "Corollary 3 corrected: spectral 1/(2T)", "Corollary 3 corrected: entry 1/(4T)"]


@pytest.fixture(scope="module")
def full_run():
    """One real run of every registered check (small budget), shared by the tests that need all of them."""
    buffer = io.StringIO()
    with redirect_stdout(buffer):
        code = cli.main(["check", "--json", "--trials", "8", "--seed", "1"])
    return code, json.loads(buffer.getvalue())


@pytest.fixture
def fast_checks(monkeypatch):
    """Only the quick Corollary-3 checks, for tests about the output format."""
    monkeypatch.setattr(al.checks, "CHECKS", {name: al.checks.CHECKS[name] for name in FAST})


def test_every_check_is_as_the_book_claims_and_json_lists_one_record_per_bound(full_run):
    code, records = full_run
    assert code == 0
    assert [r["bound"] for r in records] == list(al.checks.CHECKS)
    for r in records:
        assert set(r) == KEYS
        assert isinstance(r["trials"], int) and isinstance(r["violations"], int)
        assert (r["violations"] == 0) == (r["expected"] == "holds")
    printed = next(r for r in records if r["bound"] == "Corollary 3 (as printed)")
    assert printed["expected"] == "violated" and printed["violations"] > 0


def test_check_prints_a_table(capsys, fast_checks):
    assert cli.main(["check", "--trials", "8", "--seed", "1"]) == 0
    out = capsys.readouterr().out
    header = out.splitlines()[0]
    for column in ("bound", "trials", "violations", "worst ratio", "expected", "ok", "verdict"):
        assert column in header
    for name in FAST:
        assert name in out
    assert "✗" not in out and out.count("✓") == len(FAST)
    assert "3/3 bounds as the book claims; total run time" in out


def test_same_seed_same_json(capsys, fast_checks):
    cli.main(["check", "--json", "--trials", "8", "--seed", "5"])
    first = capsys.readouterr().out
    cli.main(["check", "--json", "--trials", "8", "--seed", "5"])
    assert capsys.readouterr().out == first
    cli.main(["check", "--json", "--trials", "8", "--seed", "6"])
    assert capsys.readouterr().out != first


def _fake(violations: int, expected: str):
    def check(trials: int, seed: int) -> Verdict:
        return Verdict("fake bound", "x <= y", trials, violations, 1.5, "made up", expected)

    return check


@pytest.mark.parametrize(
    ("violations", "expected", "code"),
    [(0, "holds", 0), (3, "holds", 1), (3, "violated", 0), (0, "violated", 1)],
)
def test_exit_status_follows_the_book_claims(monkeypatch, capsys, violations, expected, code):
    monkeypatch.setattr(al.checks, "CHECKS", {"fake bound": _fake(violations, expected)})
    assert cli.main(["check", "--trials", "2"]) == code
    out = capsys.readouterr().out
    assert ("✓" in out) == (code == 0) and ("✗" in out) == (code == 1)


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["check", "--trials", "0"], "--trials: must be an integer >= 1"),
        (["check", "--trials", "-5"], "--trials: must be an integer >= 1"),
        (["check", "--trials", "many"], "--trials: must be an integer >= 1"),
        (["check", "--seed", "-1"], "--seed: must be an integer in [0, 2**63)"),
        (["check", "--seed", "x"], "--seed: must be an integer in [0, 2**63)"),
        (["check", "--frobnicate"], "unrecognized arguments"),
        ([], "the following arguments are required: COMMAND"),
        (["nonsense"], "invalid choice"),
    ],
)
def test_bad_arguments_exit_2_with_a_clear_message(capsys, argv, message):
    with pytest.raises(SystemExit) as exc:
        cli.main(argv)
    assert exc.value.code == 2
    assert message in capsys.readouterr().err


def test_help_lists_the_check_subcommand(capsys):
    with pytest.raises(SystemExit) as exc:
        cli.main(["--help"])
    assert exc.value.code == 0
    assert "check" in capsys.readouterr().out


def test_module_entry_point_runs():
    result = subprocess.run(
        [sys.executable, "-m", "attnlimits.cli", "--version"], capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0 and result.stdout.startswith("attnlimits ")
