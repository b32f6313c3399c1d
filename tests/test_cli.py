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

KEYS = {"id", "bound", "statement", "trials", "violations", "worst_ratio", "verdict", "expected"}


FAST = ["cor3-printed", "cor3-spectral", "cor3-entry"]


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
    monkeypatch.setattr(al.checks.registry, "CHECKS", {i: al.checks.CHECKS[i] for i in FAST})


def test_every_check_is_as_the_book_claims_and_json_lists_one_record_per_bound(full_run):
    code, records = full_run
    assert code == 0
    assert [r["id"] for r in records] == list(al.checks.CHECKS)
    assert [r["bound"] for r in records] == list(al.checks.NAMES.values())
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
    for column in ("id", "bound", "trials", "violations", "worst ratio", "expected", "ok", "verdict"):
        assert column in header
    for check_id in FAST:
        assert check_id in out and al.checks.NAMES[check_id] in out
    assert "✗" not in out and out.count("✓") == len(FAST)
    assert "3/3 bounds as the book claims; total run time" in out


def test_same_seed_same_json(capsys, fast_checks, uncached):
    cli.main(["check", "--json", "--trials", "8", "--seed", "5"])
    first = capsys.readouterr().out
    assert uncached()  # the second run recomputes the memoised studies instead of printing them again
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
    monkeypatch.setattr(al.checks.registry, "CHECKS", {"fake-bound": _fake(violations, expected)})
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


def _records(argv):
    buffer = io.StringIO()
    with redirect_stdout(buffer):
        code = cli.main(argv)
    return code, json.loads(buffer.getvalue())


def test_only_runs_the_named_checks_in_registry_order():
    code, records = _records(["check", "--json", "--trials", "8", "--only", "cor3-entry,cor3-printed"])
    assert code == 0 and [r["id"] for r in records] == ["cor3-printed", "cor3-entry"]
    code, repeated = _records(
        ["check", "--json", "--trials", "8", "--only", "cor3-entry", "--only", "cor3-printed", "--only", "cor3-entry"]
    )
    assert repeated == records, "repeatable and comma-separated --only select the same checks, once each"
    alone = al.checks.CHECKS["cor3-printed"](trials=8, seed=0)
    assert records[0] == {"id": "cor3-printed", **alone.record()}, "--only runs the same check as the library"


@pytest.mark.parametrize("only", ["nope", "cor3-printed,Corollary 1", ","])
def test_only_with_an_unknown_id_exits_2_listing_the_valid_ids(capsys, only):
    assert cli.main(["check", "--only", only]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert "valid ids: " + ", ".join(al.checks.CHECKS) in captured.err


def test_check_ids_are_stable_and_distinct_from_the_display_names():
    assert list(al.checks.CHECKS) == [
        "cor1",
        "lem1",
        "cor3-printed",
        "cor3-spectral",
        "cor3-entry",
        "lem2",
        "thm1-dmax-reconstructed",
        "thm1-dmax-sharp",
        "thm1-residual-sign",
        "thm1-residual-bound",
        "thm2-lower",
        "thm2-upper-reconstructed",
        "thm2-upper",
        "multihead",
    ]
    assert al.checks.NAMES["thm2-upper-reconstructed"] == "Theorem 2 upper bound (as reconstructed)"
    assert al.checks.id_of("Corollary 3 (as printed)") == "cor3-printed"
    with pytest.raises(ValueError, match="already registered"):
        al.checks.register("cor1", "Something new")(lambda trials, seed: None)
    with pytest.raises(ValueError, match="hyphens"):
        al.checks.register("Not An Id", "x")


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


def test_analyze_with_a_model_that_cannot_be_found_is_an_error(monkeypatch, capsys, tmp_path):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.delenv("ATTNLIMITS_MODEL", raising=False)
    out = tmp_path / "run"
    code = cli.main(["analyze", "--model", "no-such-model", "--preset", "quick", "--windows", "1", "--out", str(out)])
    err = capsys.readouterr().err
    assert code == 2 and not out.exists()
    assert err.startswith("attnlimits analyze: error: model 'no-such-model' could not be loaded")
    assert "--allow-fallback" in err
    help_text = cli.build_parser()._subparsers._group_actions[0].choices["analyze"].format_help()
    assert "--allow-fallback" in help_text
