"""The named-model registry and ``attnlimits models``: one list that load, the comparison, the CLI and the Makefile
read; a listing that loads no weights; ``--compute`` runs the comparison; the commands that errors suggest exist."""

from __future__ import annotations

import dataclasses
import re
import shlex
from pathlib import Path

import pytest

from attnlimits import cli
from attnlimits.models import gemma, gguf, registry
from attnlimits.studies import several_models

ROOT = Path(__file__).resolve().parents[2]


def test_registry_names_labels_and_wheels():
    assert registry.names() == ["fallback", "gemma3-270m", "gpt2"]
    assert [m.label for m in registry.MODELS] == ["SmolLM2-135M", "Gemma-3-270M", "GPT-2"]
    assert all(m.description and m.model_id for m in registry.MODELS)
    assert registry.wheels() == [gguf.FALLBACK["wheel"], *gemma.GEMMA["wheels"]]
    assert registry.get("gemma3-270m").loader is not None and registry.get("gpt2").loader is None
    with pytest.raises(KeyError, match="known: \\['fallback'"):
        registry.get("nope")


def test_comparison_models_come_from_the_registry():
    assert several_models.MODELS == {"SmolLM2-135M": "fallback", "Gemma-3-270M": "gemma3-270m", "GPT-2": "gpt2"}


def test_makefile_installs_the_registrys_wheels():
    makefile = (ROOT / "Makefile").read_text()
    assert "registry.wheels()" in makefile
    hardcoded = [w for w in registry.wheels() if w.split("==")[0] in makefile]
    assert not hardcoded, f"the Makefile names wheels the registry lists: {hardcoded}"


def test_load_dispatches_a_named_model_to_its_loader(monkeypatch):
    from attnlimits.models import loading

    sentinel = RuntimeError("the registry's loader was called")

    def boom():
        raise sentinel

    entries = tuple(dataclasses.replace(m, loader=boom) if m.loader else m for m in registry.MODELS)
    monkeypatch.setattr(registry, "MODELS", entries)
    for name in ("fallback", "gemma3-270m"):
        with pytest.raises(RuntimeError) as caught:
            loading.load(name)
        assert caught.value is sentinel


def _no_loading(monkeypatch):
    """Every loader and every weight read fails: the listing must not need them."""

    def boom(*args, **kwargs):
        raise AssertionError("the listing loaded a model")

    entries = tuple(dataclasses.replace(m, loader=boom) for m in registry.MODELS)
    monkeypatch.setattr(registry, "MODELS", entries)
    monkeypatch.setattr(gguf, "load_fallback", boom)
    monkeypatch.setattr(gemma, "gemma_gguf", boom)


def test_models_lists_every_entry_without_loading(monkeypatch, capsys):
    _no_loading(monkeypatch)
    absent = registry.NamedModel(
        name="absent",
        label="Absent-1M",
        model_id="x/absent",
        description="a model whose files are not here",
        loader=None,
        present=lambda: (False, "its wheel is not installed"),
    )
    monkeypatch.setattr(registry, "MODELS", (*registry.MODELS, absent))
    assert cli.main(["models"]) == 0
    out = capsys.readouterr().out
    for entry in registry.MODELS:
        row = next(line for line in out.splitlines() if line.startswith(entry.name + " "))
        assert entry.label in row and entry.description in row
    absent_row = next(line for line in out.splitlines() if line.startswith("absent "))
    assert re.search(r"Absent-1M\s+no\s", absent_row) and "its wheel is not installed" in out


@pytest.mark.skipif(not registry.get("fallback").present()[0], reason="the offline fallback's wheel is not installed")
def test_an_installed_wheel_lists_as_present(monkeypatch, capsys):
    _no_loading(monkeypatch)
    assert cli.main(["models"]) == 0
    row = next(line for line in capsys.readouterr().out.splitlines() if line.startswith("fallback "))
    assert re.search(r"SmolLM2-135M\s+yes\s", row)


def test_models_compute_runs_the_comparison_with_the_preset(monkeypatch, capsys, tmp_path):
    seen = []
    manifest = {
        "models": [
            {"label": "SmolLM2-135M", "present": True, "computed_seconds": 1.5},
            {"label": "GPT-2", "present": False, "reason": "ModelUnavailableError: offline"},
        ]
    }
    monkeypatch.setattr(several_models, "compute", lambda preset, n_jobs: (seen.append((preset, n_jobs)), manifest)[1])
    assert cli.main(["models", "--compute", "--preset", "paper"]) == 0
    assert [(p.name, jobs) for p, jobs in seen] == [("paper", -1)]  # windows in parallel on every core
    out = capsys.readouterr().out
    assert (
        "1.5 s" in out and "not run: ModelUnavailableError: offline" in out and "models-paper/runs/manifest.json" in out
    )
    assert cli.main(["models", "--compute"]) == 0
    assert seen[-1][0].name == "reduced"


def test_models_compute_rejects_an_unknown_preset(monkeypatch, capsys):
    monkeypatch.setattr(several_models, "compute", lambda preset, n_jobs: pytest.fail("computed with a bad preset"))
    assert cli.main(["models", "--compute", "--preset", "nope"]) == 2
    err = capsys.readouterr().err
    assert "--preset" in err and "'reduced'" in err and "'nope'" in err


def test_loading_a_missing_run_suggests_commands_that_exist(tmp_path):
    with pytest.raises(FileNotFoundError) as caught:
        several_models.SeveralModels.load(tmp_path / "empty", "quick")
    commands = re.findall(r"'([^']+)'", str(caught.value))
    assert "attnlimits models --compute --preset quick" in commands
    makefile = (ROOT / "Makefile").read_text()
    for command in commands:
        words = shlex.split(command)
        if words[0] == "attnlimits":
            args = cli.build_parser().parse_args(words[1:])
            assert args.func.__name__ == "_run_models" and args.compute and args.preset == "quick"
        else:
            assert words[0] == "make" and re.search(rf"^{words[1]}:", makefile, flags=re.M), command
