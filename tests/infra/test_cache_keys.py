"""Each study's results-cache key holds the code it computes with and nothing else: an edit to a module a study does
not run (the TransformerLens adapter, the checks of the bounds, the models for the training sweep) must not throw
away its results, while an edit to a kernel it runs must."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import attnlimits
from attnlimits import experiments
from attnlimits.infra import cache

PACKAGE = Path(attnlimits.__file__).parent


def test_the_training_sweep_keys_on_no_model_code():
    key = cache.dependencies("attnlimits.studies.training.study")
    assert "attnlimits.studies.training.study" in key and "attnlimits.core.normalizers" in key
    models = [m for m in key if m.startswith("attnlimits.models")]
    assert not models, f"the training sweep's key holds model code: {models}"
    assert "attnlimits.studies.training.report" not in key  # the chapter's figures and tables


def test_the_experiments_on_a_hugging_face_model_key_on_no_transformer_lens_code():
    key = cache.dependencies(*experiments.code())
    assert {"attnlimits.experiments.tables", "attnlimits.models.windows", "attnlimits.core.rowstats"} <= set(key)
    assert "attnlimits.models.lens" not in key, "the experiments' key holds the TransformerLens adapter"


def test_the_alternative_normalizers_key_on_no_check_of_the_bounds():
    key = cache.dependencies("attnlimits.studies.alternatives.study")
    assert "attnlimits.studies.alternatives.study" in key
    checks = [m for m in key if m.startswith("attnlimits.theory.checks")]
    assert not checks, f"chapter 33's key holds the checks of the bounds: {checks}"
    assert "attnlimits.studies.alternatives.report" not in key  # the chapter's figures and summaries


def _code_hash_of_a_copy(tmp_path: Path, edited: str | None) -> str:
    """The experiments' code hash (a Hugging Face model) computed in a fresh process on a copy of the package, in
    which the file ``edited`` (relative to the package folder) has a statement appended. The real sources are never
    touched."""
    copy = tmp_path / (edited or "unedited").replace("/", "-") / "attnlimits"
    shutil.copytree(PACKAGE, copy, ignore=shutil.ignore_patterns("__pycache__"))
    if edited:
        with open(copy / edited, "a", encoding="utf-8") as f:
            f.write("\n_EDITED = True  # a statement: it changes the code, not what the code computes\n")
    script = (
        "import sys; from attnlimits.infra import cache; import attnlimits\n"
        f"assert attnlimits.__file__.startswith({str(copy)!r}), attnlimits.__file__\n"
        f"print(cache.code_hash(*{experiments.code()!r}))"
    )
    env = {**os.environ, "PYTHONPATH": str(copy.parent)}
    done = subprocess.run(
        [sys.executable, "-c", script], env=env, cwd=copy.parent, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


@pytest.mark.parametrize(
    ("edited", "changes_the_key"),
    [("models/lens.py", False), ("theory/checks/registry.py", False), ("core/rowstats.py", True)],
)
def test_an_edit_changes_the_experiments_key_only_when_the_experiments_run_the_edited_file(
    tmp_path, edited, changes_the_key
):
    unedited = _code_hash_of_a_copy(tmp_path, None)
    assert unedited == cache.code_hash(*experiments.code())  # the copy is the package, byte for byte
    assert (_code_hash_of_a_copy(tmp_path, edited) != unedited) is changes_the_key
