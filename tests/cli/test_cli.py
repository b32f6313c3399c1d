"""The ``attnlimits`` command, called in-process through ``main(argv)`` (small --trials keep it fast)."""

from __future__ import annotations

import io
import json
import subprocess
import sys
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path

import pandas as pd
import pytest
import torch
from hypothesis import example, given, settings
from hypothesis import strategies as st

import attnlimits as al
from attnlimits import cli
from attnlimits.infra.progress import progress_bar
from attnlimits.theory.checks import Verdict
from attnlimits.theory.checks.search import WIDE, generator, tightness_text

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
    monkeypatch.setattr(al.theory.checks.registry, "CHECKS", {i: al.theory.checks.CHECKS[i] for i in FAST})


def test_every_check_is_as_the_book_claims_and_json_lists_one_record_per_bound(full_run):
    code, records = full_run
    assert code == 0
    assert [r["id"] for r in records] == list(al.theory.checks.CHECKS)
    assert [r["bound"] for r in records] == list(al.theory.checks.NAMES.values())
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
        assert check_id in out and al.theory.checks.NAMES[check_id] in out
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
    monkeypatch.setattr(al.theory.checks.registry, "CHECKS", {"fake-bound": _fake(violations, expected)})
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
    alone = al.theory.checks.CHECKS["cor3-printed"](trials=8, seed=0)
    assert records[0] == {"id": "cor3-printed", **alone.record()}, "--only runs the same check as the library"


@pytest.mark.parametrize("only", ["nope", "cor3-printed,Corollary 1", ","])
def test_only_with_an_unknown_id_exits_2_listing_the_valid_ids(capsys, only):
    assert cli.main(["check", "--only", only]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert "valid ids: " + ", ".join(al.theory.checks.CHECKS) in captured.err


def test_check_ids_are_stable_and_distinct_from_the_display_names():
    assert list(al.theory.checks.CHECKS) == [
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
        "cor2-expectation-linear",
        "cor2-expectation-bounded",
        "thm2-lower",
        "thm2-upper-reconstructed",
        "thm2-upper",
        "multihead",
    ]
    assert al.theory.checks.NAMES["thm2-upper-reconstructed"] == "Theorem 2 upper bound (as reconstructed)"
    assert al.theory.checks.id_of("Corollary 3 (as printed)") == "cor3-printed"
    with pytest.raises(ValueError, match="already registered"):
        al.theory.checks.register("cor1", "Something new")(lambda trials, seed: None)
    with pytest.raises(ValueError, match="hyphens"):
        al.theory.checks.register("Not An Id", "x")


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


# ---------------------------------------------------------------------------------------------------------------
# check: every value of every option in its allowed range ends in a verdict
# ---------------------------------------------------------------------------------------------------------------
CHEAP = ["cor3-printed", "thm2-upper"]  # thm2-upper is the Monte Carlo check whose few-trial ratio can be 0


def test_a_bound_that_holds_with_every_trial_measuring_zero_says_its_tightness_is_unknown():
    assert tightness_text(0.0).startswith("holds, tightness unknown")
    assert tightness_text(1.0).startswith("holds, sharp") and tightness_text(0.995).startswith("holds, tight")
    assert tightness_text(0.5).startswith("holds but conservative by a factor 2")


def test_check_streams_work_for_every_seed_and_are_unchanged_for_small_ones():
    same = torch.Generator().manual_seed(5 * WIDE + 29)
    assert torch.equal(torch.rand(3, generator=generator(5, 29, stride=WIDE)), torch.rand(3, generator=same))
    generator(2**63 - 1, 31, stride=WIDE)


@settings(max_examples=6, deadline=None)
@example(trials=20, seed=0, only=["thm2-upper"], as_json=False)  # its worst ratio is 0 at 20 trials
@given(
    trials=st.integers(1, 20),
    seed=st.one_of(st.integers(0, 20), st.integers(0, 2**63 - 1)),
    only=st.lists(st.sampled_from(CHEAP), min_size=1, max_size=2, unique=True),
    as_json=st.booleans(),
)
def test_check_ends_in_a_verdict_for_any_trials_seed_and_only(trials, seed, only, as_json):
    argv = ["check", "--trials", str(trials), "--seed", str(seed), "--only", ",".join(only)] + ["--json"] * as_json
    buffer = io.StringIO()
    with redirect_stdout(buffer):
        code = cli.main(argv)
    selected = [i for i in al.theory.checks.CHECKS if i in only]
    if as_json:
        records = json.loads(buffer.getvalue())
        assert [r["id"] for r in records] == selected
        as_claimed = [(r["violations"] == 0) == (r["expected"] == "holds") for r in records]
        assert code == (0 if all(as_claimed) else 1)
        assert all(r["trials"] >= 1 and r["verdict"] for r in records)
    else:
        assert code in (0, 1) and all(i in buffer.getvalue() for i in selected)


@settings(max_examples=30, deadline=None)
@given(
    option=st.sampled_from(["--trials", "--seed"]),
    value=st.one_of(st.integers(max_value=0), st.integers(min_value=2**63), st.text("abc.-+ ", max_size=4)),
)
def test_check_rejects_every_value_outside_the_allowed_range(option, value):
    if option == "--trials" and isinstance(value, int) and value >= 1:
        value = -value
    if option == "--seed" and value == 0:
        value = -1
    stderr = io.StringIO()
    with redirect_stderr(stderr), pytest.raises(SystemExit) as exc:
        cli.main(["check", f"{option}={value}"])
    message = stderr.getvalue()
    assert exc.value.code == 2
    assert f"argument {option}: must be an integer" in message or (
        value == "--" and f"argument {option}: expected one value, got '--'" in message
    )


# ---------------------------------------------------------------------------------------------------------------
# analyze: arguments and --out are validated before any model is loaded; the output folder appears only complete
# ---------------------------------------------------------------------------------------------------------------
class _Loaded(Exception):
    """Raised by the stand-in for models.load: validation passed and the model would now be loaded."""


def _refuse_to_load(*args, **kwargs):
    raise _Loaded(kwargs)


def _analyze(argv, mp):
    """Run ``attnlimits analyze`` with models.load replaced; returns (exit code or "loaded", stderr)."""
    mp.setattr(al.models, "load", _refuse_to_load)
    stderr = io.StringIO()
    with redirect_stderr(stderr), redirect_stdout(io.StringIO()):
        try:
            code = cli.main(["analyze", *argv])
        except SystemExit as exc:
            code = exc.code
        except _Loaded:
            code = "loaded"
    return code, stderr.getvalue()


VALID = {
    "--windows": st.integers(1, 10**6).map(str),
    "--first-window": st.integers(0, 10**6).map(str),
    "--seed": st.integers(0, 2**63 - 1).map(str),
    "--precision": st.sampled_from(["float32", "float64"]),
    "--device": st.sampled_from(["cpu", "cuda"]),
    "--preset": st.sampled_from(sorted(al.experiments.PRESETS)),
    "--jobs": st.one_of(st.integers(1, 10**6), st.just(-1)).map(str),
}
INVALID = {
    "--windows": st.one_of(st.integers(max_value=0).map(str), st.text("xyz.", max_size=3)),
    "--first-window": st.one_of(st.integers(max_value=-1).map(str), st.text("xyz.", max_size=3)),
    "--seed": st.one_of(st.integers(max_value=-1), st.integers(min_value=2**63)).map(str),
    "--precision": st.text("float3264", max_size=8).filter(lambda s: s not in ("float32", "float64")),
    "--device": st.text("cpuda:0", max_size=6).filter(lambda s: s not in ("cpu", "cuda")),
    "--preset": st.text("paerquick", max_size=6).filter(lambda s: s not in al.experiments.PRESETS),
    "--jobs": st.one_of(st.integers(max_value=-2), st.just(0), st.text("xyz.", max_size=3)).map(str),
}


@settings(max_examples=60, deadline=None)
@given(values=st.fixed_dictionaries({}, optional=VALID), force=st.booleans(), nested=st.booleans())
def test_analyze_accepts_every_allowed_value_and_loads_the_model_only_then(tmp_path_factory, values, force, nested):
    out = tmp_path_factory.mktemp("analyze") / ("a/b/run" if nested else "run")
    argv = ["--out", str(out), *(f"{k}={v}" for k, v in values.items())] + ["--force"] * force
    with pytest.MonkeyPatch.context() as mp:
        code, err = _analyze(argv, mp)
    assert code == "loaded", err
    assert not out.exists() and not out.parent.exists() if nested else list(out.parent.iterdir()) == []
    args = cli.build_parser().parse_args(["analyze", *argv])
    assert args.force == force and args.out == str(out)
    for option, value in values.items():
        assert str(getattr(args, option[2:].replace("-", "_"))) == value


@settings(max_examples=60, deadline=None)
@given(data=st.data(), option=st.sampled_from(sorted(INVALID)))
def test_analyze_rejects_every_value_outside_the_allowed_range_naming_the_option(data, option):
    value = data.draw(INVALID[option])
    with pytest.MonkeyPatch.context() as mp:
        code, err = _analyze(["--out", "never-written", f"{option}={value}"], mp)
    assert code == 2 and f"argument {option}:" in err


@pytest.mark.parametrize("value", ["0", "-2", "1.5", "all", ""])
def test_jobs_must_be_a_positive_integer_or_minus_one(monkeypatch, value):
    code, err = _analyze(["--out", "never-written", f"--jobs={value}"], monkeypatch)
    assert code == 2 and "argument --jobs: must be an integer >= 1, or -1 for every core" in err


def test_jobs_help_says_the_workers_share_the_cores_and_change_no_result():
    analyze = cli.build_parser()._subparsers._group_actions[0].choices["analyze"]
    help_text = " ".join(analyze.format_help().split())
    assert "split the machine's cores" in help_text and "results are identical for any J" in help_text


def test_every_preset_is_a_choice_named_in_the_help():
    analyze = cli.build_parser()._subparsers._group_actions[0].choices["analyze"]
    help_text = " ".join(analyze.format_help().split())
    assert f"{', '.join(al.experiments.PRESETS)} (default: paper)" in help_text
    assert "reduced" in al.experiments.PRESETS
    for name in al.experiments.PRESETS:
        assert cli.build_parser().parse_args(["analyze", "--out", "x", "--preset", name]).preset == name


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda d: (d / "run").mkdir() or (d / "run" / "distance.csv").write_text("old"), "pass --force"),
        (lambda d: (d / "run").write_text("a file"), "is an existing file"),
        (lambda d: (d / "file").write_text("x"), "is a file, not a folder"),
    ],
    ids=["non-empty-folder", "existing-file", "file-above"],
)
def test_an_out_that_cannot_receive_the_results_exits_2_before_loading(monkeypatch, tmp_path, make, message):
    make(tmp_path)
    out = tmp_path / "file" / "run" if (tmp_path / "file").exists() else tmp_path / "run"
    before = sorted(p.name for p in tmp_path.rglob("*"))
    code, err = _analyze(["--preset", "quick", "--out", str(out)], monkeypatch)
    assert code == 2 and err.startswith("attnlimits analyze: error: --out: ") and message in err
    assert sorted(p.name for p in tmp_path.rglob("*")) == before, "nothing was touched"


def test_an_out_where_no_folder_can_be_created_exits_2_before_loading(monkeypatch):
    code, err = _analyze(["--out", "/proc/attnlimits-run"], monkeypatch)
    assert code == 2 and "--out: cannot create /proc/attnlimits-run" in err


def test_force_lets_a_non_empty_folder_through_and_an_empty_one_needs_no_force(monkeypatch, tmp_path):
    (tmp_path / "empty").mkdir()
    assert _analyze(["--out", str(tmp_path / "empty")], monkeypatch)[0] == "loaded"
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "old.csv").write_text("old")
    assert _analyze(["--out", str(tmp_path / "full"), "--force"], monkeypatch)[0] == "loaded"


class _FakeResults:
    """What the analyze command reads of :class:`attnlimits.experiments.Results`, written in an instant."""

    critical = pd.DataFrame(
        {
            "L": [16, 32, 16],
            "reading": ["E", "E", "E_full"],
            "critical_N": pd.array([3, None, 1], dtype="Int64"),
            "ks_level": 0.05,
        }
    )
    provenance = {"seconds": {"total": 0.5}}

    def save(self, folder):
        for name in al.experiments.TABLES:
            (folder / f"{name}.csv").write_text("new\n")
        (folder / "provenance.json").write_text("{}\n")
        return folder


def _fake_page(res, folder, command=None):
    """The report page of a run, empty but for the command line that made it."""
    return al.reporting.run_page.Page(
        title="fake",
        lead="",
        command=command,
        facts=[],
        claims=pd.DataFrame(columns=al.reporting.run_page.CLAIM_COLUMNS),
    )


def _fake_analyze(monkeypatch, out, *extra, run=None, save_all=None):
    """``attnlimits analyze`` with the model, the text, the run and the figures replaced by instant stand-ins."""
    calls = {}

    def fake_run(model, text, preset, **kwargs):
        calls.update(kwargs)
        return run() if run else _FakeResults()

    def fake_save_all(res, folder):
        if save_all:
            save_all()
        (folder / "fig.png").write_bytes(b"png")

    def fake_save_tables(res, folder):
        for name in al.experiments.paper_claims.TABLES:
            (folder / f"{name}.csv").write_text("new\n")

    monkeypatch.setattr(al.models, "load", lambda *a, **k: "model")
    monkeypatch.setattr(al.texts, "load", lambda *a, **k: "text")
    monkeypatch.setattr(al.experiments, "run", fake_run)
    monkeypatch.setattr(al.experiments.figures, "save_all", fake_save_all)
    monkeypatch.setattr(al.experiments.paper_claims, "save_tables", fake_save_tables)
    monkeypatch.setattr(al.reporting.run_page, "page_of", _fake_page)
    stdout, stderr = io.StringIO(), io.StringIO()
    with redirect_stdout(stdout), redirect_stderr(stderr):
        code = cli.main(["analyze", "--preset", "quick", "--out", str(out), *extra])
    return code, stdout.getvalue(), stderr.getvalue(), calls


def _interrupt():
    raise KeyboardInterrupt


def test_a_complete_run_is_renamed_into_place_and_asks_for_progress_lines(monkeypatch, tmp_path):
    out = tmp_path / "deeper" / "run"
    code, stdout, _, calls = _fake_analyze(monkeypatch, out, "--seed", "7")
    assert code == 0 and stdout.startswith(f"wrote {out}: report.html, report.md, distance.csv")
    assert "L=16: 3" in stdout and "L=32" not in stdout
    assert sorted(p.name for p in out.iterdir()) == sorted(
        [f"{t}.csv" for t in (*al.experiments.TABLES, *al.experiments.paper_claims.TABLES)]
        + ["provenance.json", "fig.png", "report.html", "report.md"]
    )
    command = f"attnlimits analyze --preset quick --out {out} --seed 7"
    assert command in (out / "report.md").read_text() and command in (out / "report.html").read_text()
    assert [p.name for p in out.parent.iterdir()] == ["run"], "no partial folder left beside it"
    assert calls["progress"] == "lines" and calls["seed"] == 7
    assert calls["n_jobs"] == 1, "one worker unless --jobs asks for more"


@pytest.mark.parametrize(("argv", "n_jobs"), [(["--jobs", "3"], 3), (["--jobs", "-1"], -1), (["--jobs=1"], 1)])
def test_jobs_reaches_the_run(monkeypatch, tmp_path, argv, n_jobs):
    code, _, _, calls = _fake_analyze(monkeypatch, tmp_path / "run", *argv)
    assert code == 0 and calls["n_jobs"] == n_jobs


def test_force_replaces_the_old_folder_only_once_the_new_one_is_complete(monkeypatch, tmp_path):
    out = tmp_path / "run"
    out.mkdir()
    (out / "stale.txt").write_text("old")
    code, *_ = _fake_analyze(monkeypatch, out, "--force", save_all=_interrupt)
    assert code == 130 and [p.name for p in out.iterdir()] == ["stale.txt"], "interrupted: the old folder stays"
    code, *_ = _fake_analyze(monkeypatch, out, "--force")
    assert code == 0 and not (out / "stale.txt").exists() and (out / "distance.csv").read_text() == "new\n"
    assert [p.name for p in tmp_path.iterdir()] == ["run"]


def test_ctrl_c_between_the_two_renames_puts_the_old_folder_back(monkeypatch, tmp_path):
    out = tmp_path / "run"
    out.mkdir()
    (out / "stale.txt").write_text("old")
    rename = Path.rename

    def interrupted_rename(self, target):
        if self.name.startswith(".run.partial-"):
            raise KeyboardInterrupt
        return rename(self, target)

    monkeypatch.setattr(Path, "rename", interrupted_rename)
    code, *_ = _fake_analyze(monkeypatch, out, "--force")
    assert code == 130 and [p.name for p in tmp_path.iterdir()] == ["run"]
    assert [p.name for p in out.iterdir()] == ["stale.txt"]


@pytest.mark.parametrize("where", ["run", "save_all"])
def test_ctrl_c_leaves_no_folder_and_no_partial_folder(monkeypatch, tmp_path, where):
    out = tmp_path / "new" / "run"
    hooks = {"run": _interrupt} if where == "run" else {"save_all": _interrupt}
    code, stdout, stderr, _ = _fake_analyze(monkeypatch, out, **hooks)
    assert code == 130 and stdout == ""
    assert stderr.splitlines() == [f"attnlimits analyze: interrupted; {out} left as it was"]
    assert list(tmp_path.iterdir()) == [], "neither the folder, its partial sibling nor the created parent remain"


def test_an_error_while_writing_propagates_and_leaves_nothing_behind(monkeypatch, tmp_path):
    def fail():
        raise RuntimeError("disk full")

    with pytest.raises(RuntimeError, match="disk full"):
        _fake_analyze(monkeypatch, tmp_path / "run", save_all=fail)
    assert list(tmp_path.iterdir()) == []


# ---------------------------------------------------------------------------------------------------------------
# progress: quiet by default off a terminal, plain lines when the command asks for them
# ---------------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize(("total", "lines"), [(0, 0), (1, 1), (4, 4), (10, 10), (48, 10), (95, 10), (101, 10)])
def test_progress_lines_report_each_item_or_each_tenth_of_a_long_loop(capsys, total, lines):
    assert list(progress_bar(list(range(total)), "Alg. 4", "lines")) == list(range(total))
    printed = capsys.readouterr().err.splitlines()
    assert len(printed) == lines
    if total:
        assert printed[-1] == f"[attnlimits] Alg. 4 {total}/{total}"


def test_progress_is_silent_off_a_terminal_unless_lines_are_asked_for(capsys):
    items = [1, 2, 3]
    assert progress_bar(items, "capture", None) is items and progress_bar(items, "capture", False) is items
    assert capsys.readouterr().err == ""
    with pytest.raises(ValueError, match="progress: must be True, False, None or 'lines'"):
        progress_bar(items, "capture", "bars")


@pytest.mark.parametrize(
    "argv",
    [
        ["check", "--only=--"],
        ["check", "--seed=--"],
        ["analyze", "--out=--"],
        ["analyze", "--out", "x", "--windows=--"],
        ["analyze", "--out", "x", "--preset=--"],
    ],  # fmt: skip
)
def test_a_bare_double_dash_is_no_option_value(argv):
    """argparse (Python < 3.12) stores ``--opt=--`` as an empty list, bypassing the option's type."""
    stderr = io.StringIO()
    with redirect_stderr(stderr), pytest.raises(SystemExit) as exc:
        cli.main(argv)
    assert exc.value.code == 2 and "expected one value, got '--'" in stderr.getvalue()
