"""``attnlimits results``: the book's results pipeline (:mod:`attnlimits.reporting.book_results`) as a command, run
in-process on a tiny random-init model and a short text in place of the default ones, with the quick presets."""

from __future__ import annotations

import io
import random
import re
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path

import pytest
import tiny_models
import torch

import attnlimits as al
from attnlimits import cli
from attnlimits.experiments import shipped
from attnlimits.infra import cache, shipping
from attnlimits.reporting import book_results

ROOT = Path(__file__).resolve().parents[2]
QUICK = ["results", "--preset", "quick", "--study", "experiments,training,alternatives"]
WORDS = "the of and a to in is was he that it his with as for had on at by not but which be this from".split()
#: A short text of seeded words (about 1,000 tokens: more than the quick presets' windows read).
TEXT = "\n".join(" ".join(random.Random(i).choices(WORDS, k=12)) for i in range(80))


def _tiny_model(folder: Path):
    """A random-init GPT-2 of 2 layers with a word-level tokenizer of :data:`WORDS`, loaded as a user's model."""
    from tokenizers import Tokenizer, pre_tokenizers
    from tokenizers.models import WordLevel
    from transformers import PreTrainedTokenizerFast

    vocab = {w: i for i, w in enumerate(["[UNK]", *WORDS])}
    words = Tokenizer(WordLevel(vocab, unk_token="[UNK]"))
    words.pre_tokenizer = pre_tokenizers.Whitespace()
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=words, unk_token="[UNK]")
    tiny_models.saved(tiny_models.gpt2(heads=2, width=32, positions=128, vocab=len(vocab)), folder, tokenizer)
    return al.models.load(str(folder))


def _main(argv) -> tuple[int, str, str]:
    """``cli.main(argv)``: exit code (argparse's SystemExit included), stdout, stderr."""
    stdout, stderr = io.StringIO(), io.StringIO()
    with redirect_stdout(stdout), redirect_stderr(stderr):
        try:
            code = cli.main(argv)
        except SystemExit as exit_:
            code = exit_.code
    return code, stdout.getvalue(), stderr.getvalue()


def _watching(cached, computed: list):
    """``cached`` (:func:`attnlimits.infra.cache.cached`), recording in ``computed`` the folder of every entry that
    is computed rather than read back."""

    def watching(folder, key, compute, save, load):
        def recording():
            computed.append(Path(folder))
            return compute()

        return cached(folder, key, recording, save, load)

    return watching


def _files(root: Path) -> dict:
    """Every file under ``root``: its bytes and modification time."""
    return {p.relative_to(root): (p.read_bytes(), p.stat().st_mtime_ns) for p in sorted(root.rglob("*")) if p.is_file()}


@pytest.fixture(scope="module")
def two_runs(tmp_path_factory):
    """The quick pipeline run twice into one empty results cache, the second time with --quiet: the cache root,
    the model, and per run (exit code, stdout, stderr, the entries computed, every file of the cache after it)."""
    root = tmp_path_factory.mktemp("results")
    model = _tiny_model(tmp_path_factory.mktemp("tiny-gpt2"))
    runs, threads = [], torch.get_num_threads()
    torch.set_num_threads(1)  # tiny tensors: one thread is fastest, most of all on a shared machine
    _forget_loaded()
    try:
        with pytest.MonkeyPatch.context() as mp:
            mp.setenv("ATTNLIMITS_RESULTS", str(root))
            mp.setattr(al.models, "load", lambda *a, **k: model)
            mp.setattr(al.texts, "load", lambda *a, **k: TEXT)
            real = cache.cached
            for extra in ([], ["--quiet"]):
                computed = []
                mp.setattr(cache, "cached", _watching(real, computed))
                runs.append((*_main([*QUICK, *extra]), computed, _files(root)))
    finally:
        torch.set_num_threads(threads)
        _forget_loaded()
    return root, model, runs


def _forget_loaded():
    """Drop the shipped design's model and texts that this process loaded (the pipeline's parts load them once per
    process; here they are the tiny model and text, which no other test may see)."""
    for loaded in (shipped.model, shipped.text, shipped.text_key):
        loaded.cache_clear()


def test_the_quick_pipeline_writes_every_entry_of_the_chosen_studies(two_runs):
    root, model, [(code, out, err, computed, _), _] = two_runs
    assert code == 0, err
    windows = al.experiments.get_preset("quick").windows
    folders = [
        al.experiments.window_folder(model, TEXT, "quick", w, exclude_sink=s, root=root)
        for w in range(windows)
        for s in (False, True)
    ]  # one window at a time, each in its own entry (the second text is this same text here: read back)
    for folder in folders:
        for table in al.experiments.TABLES:
            assert (folder / f"{table}.csv").is_file(), (folder, table)
    pieces = [root / "training" / "quick" / name for name, _, _ in al.studies.training.jobs("quick")]
    assert all((piece / "final.csv").is_file() for piece in pieces)  # each piece of the sweep its own entry
    # the synthetic heads once, the model's heads for chapter 33 and for chapter 36 (the later normalisers)
    for part, entries in (("synthetic", 1), ("model", 2)):
        assert len(list((root / "alternatives").glob(f"{part}-*/result.pkl"))) == entries, part
    alternatives = [p.parent for p in (root / "alternatives").glob("*/result.pkl")]
    assert sorted(computed) == sorted([*folders, *pieces, *alternatives])
    summary = [line.split()[:2] for line in out.splitlines() if re.match(r"^\S+\s+quick\s+[\d.]+ s  ", line)]
    assert summary == [["experiments", "quick"], ["training", "quick"], ["alternatives", "quick"]]
    assert "3 studies current in" in out
    for name in ("experiments", "training", "alternatives"):
        assert f"[attnlimits] results: {name} (quick): " in err


def test_a_second_run_recomputes_nothing_and_leaves_every_table_as_it_was(two_runs):
    _, _, [(_, _, _, _, first), (code, out, err, computed, second)] = two_runs
    assert code == 0, err
    assert computed == [], out  # the lines of the cache say why an entry was recomputed
    assert second == first  # the same files, byte for byte, none rewritten
    assert "[attnlimits] results:" not in err  # --quiet
    assert "3 studies current in" in out


def test_the_studies_run_in_the_pipelines_order_each_once():
    names = ["claims", "training", "experiments", "training"]
    assert [s.name for s in book_results.select(names)] == ["experiments", "training", "claims"]
    assert [s.name for s in book_results.select()] == list(book_results.STUDIES)
    assert list(book_results.STUDIES) == ["experiments", "training", "alternatives", "models", "long-context", "claims"]


@pytest.mark.parametrize(
    ("env", "study", "preset"),
    [
        ({}, "experiments", "paper"),
        ({"ATTNLIMITS_EXPERIMENTS_PRESET": "quick"}, "experiments", "quick"),
        ({"ATTNLIMITS_EXPERIMENTS_PRESET": "reduced"}, "claims", "reduced"),
        ({}, "training", "reduced"),
        ({"ATTNLIMITS_PRESET": "full"}, "training", "full"),
        ({"ATTNLIMITS_PRESET": "full"}, "alternatives", "full"),
        ({"ATTNLIMITS_PRESET": "full", "ATTNLIMITS_EXPERIMENTS_PRESET": "quick"}, "models", "reduced"),
        ({}, "long-context", "reduced"),
    ],
)
def test_each_study_defaults_to_the_preset_the_book_reads(monkeypatch, env, study, preset):
    for name in ("ATTNLIMITS_EXPERIMENTS_PRESET", "ATTNLIMITS_PRESET"):
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    assert book_results.STUDIES[study].preset() == preset


@pytest.fixture
def nothing_loads(monkeypatch):
    """A model or text load fails the test: argument errors are found before anything is loaded."""

    def fail(*args, **kwargs):
        raise AssertionError("loaded before the arguments were checked")

    monkeypatch.setattr(al.models, "load", fail)
    monkeypatch.setattr(al.texts, "load", fail)


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (
            ["--study", "experiments,nonsense"],
            "argument --study: no study 'nonsense'; the studies are experiments, training, alternatives, models, "
            "long-context, claims",
        ),
        (["--study", ","], "argument --study: names no study; the studies are experiments, training"),
        (
            ["--preset", "paper", "--study", "experiments,training"],
            "error: --preset: training has no preset 'paper' (its presets: reduced, full, quick)",
        ),
        (
            ["--preset", "huge", "--study", "models,long-context"],
            "error: --preset: models has no preset 'huge' (its presets: paper, reduced, quick); long-context has no "
            "preset 'huge' (its presets: reduced, full, quick)",
        ),
        (["--preset", "full"], "error: --preset: experiments has no preset 'full'"),
        (["--jobs", "0"], "argument --jobs: must be an integer >= 1, or -1 for every core, got 0"),
        (["--jobs", "all"], "argument --jobs: must be an integer >= 1, or -1 for every core, got 'all'"),
        (["--progress", "--quiet"], "argument --quiet: not allowed with argument --progress"),
    ],
)
def test_bad_arguments_exit_2_naming_the_argument_and_the_allowed_values(nothing_loads, argv, message):
    code, out, err = _main(["results", *argv])
    assert code == 2 and out == ""
    assert message in err


def test_a_default_preset_that_names_no_preset_is_an_error_naming_its_variable(nothing_loads, monkeypatch):
    monkeypatch.setenv("ATTNLIMITS_PRESET", "huge")
    code, _, err = _main(["results", "--study", "training"])
    assert code == 2
    assert "ATTNLIMITS_PRESET: must be one of ['reduced', 'full', 'quick'], got 'huge'" in err


def test_the_readme_documents_the_command_beside_check_and_analyze():
    readme = (ROOT / "README.md").read_text()
    blocks = re.findall(r"```bash\n(.*?)```", readme, re.S)
    commands = next(b for b in blocks if ".venv/bin/attnlimits analyze --out runs/smollm2" in b)
    assert re.search(r"^\.venv/bin/attnlimits results\s", commands, re.M)
    assert re.search(r"^\.venv/bin/attnlimits results --preset quick --study \S+", commands, re.M)
    assert re.search(r"`make results`[^.]*`attnlimits results", readme), "say that `make results` runs the command"
    for name in book_results.STUDIES:
        assert f"`{name}`" in readme, name


def _toy_table(window: int, folder: Path) -> None:
    """A shard's file: a small seeded table (what a shard of the book writes, in miniature)."""
    import numpy as np
    import pandas as pd

    rng = np.random.default_rng(window)
    table = pd.DataFrame({"N": np.arange(1, 5), "value": rng.random(4) + 1, "reached": [True, True, False, True]})
    shipping.write_table(table, folder / "rows.parquet")


def test_check_and_audit_say_current_stale_or_corrupt_by_their_exit_status(tmp_path, monkeypatch):
    import functools
    import json

    shards = [
        shipping.Shard(f"toy/window-{w}", ("attnlimits.infra.ks",), {"window": w}, functools.partial(_toy_table, w))
        for w in range(3)
    ]
    monkeypatch.setattr(book_results, "shards", lambda chosen=None: shards)
    monkeypatch.setattr(book_results, "most_influential", lambda: ["toy/window-2"])
    root = tmp_path / "results"
    monkeypatch.setenv("ATTNLIMITS_SHIPPED", str(root))
    code, out, _ = _main(["results", "--check"])
    assert code == 2 and "manifest.json is missing" in out
    shipping.ship(shards, root)
    code, out, _ = _main(["results", "--check"])
    assert code == 0 and "3 shipped shards" in out and "current" in out
    report = tmp_path / "audit.json"
    code, out, err = _main(["results", "--audit", "--budget", "0", "--seed", "5", "--report", str(report)])
    record = json.loads(report.read_text())
    assert code == 0 and record["seed"] == 5 and "toy/window-2" in record["shards"], out + err
    assert "audit (seed 5)" in out
    path = root / "toy" / "window-1" / "rows.parquet"
    table = shipping.read_table(path)
    table.loc[2, "value"] *= 1 + 1e-6
    shipping.write_table(table, path)
    code, out, _ = _main(["results", "--check"])
    assert code == 2 and "toy/window-1/rows.parquet does not match the manifest" in out
    code, out, _ = _main(["results", "--audit", "--all"])
    assert code == 1 and "toy/window-1/rows.parquet: column value, row 2" in out
    real = shipping.versions()
    monkeypatch.setattr(shipping, "versions", lambda: {**real, "numpy": "0.0"})
    code, out, _ = _main(["results", "--check"])
    assert code == 2 and f"numpy {real['numpy']} -> 0.0" in out  # stale and corrupt: the worse status wins
