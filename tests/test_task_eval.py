"""`agentlab eval tasks --scripted`: the task eval's fixtures run end to end through the bot's own machinery
(worktree, sandbox, worker, commit, the bot's test run) with the scripted model playing each fixture's fix; the
report says how the workers did. The fixtures' bugs are real: their tests fail before the fix."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from agents.evals import tasks
from agents.evals.task_fixtures import FIXTURES
from tests.conftest import make_settings


@pytest.fixture
def settings(fake_telegram, fake_anthropic, tmp_path: Path):
    return make_settings(fake_telegram, fake_anthropic, tmp_path, tmp_path / "unused")


def test_every_fixture_has_a_bug_its_tests_catch_and_a_fix_that_applies(tmp_path: Path) -> None:
    assert {f.language for f in FIXTURES} >= {"Python", "JavaScript"} and any(f.worker == "frontend" for f in FIXTURES)
    for fixture in FIXTURES:
        repo = tmp_path / fixture.name
        tasks.make_repository(repo, fixture.files)
        path, old, new = fixture.fix
        assert (repo / path).read_text().count(old) == 1, fixture.name
        if fixture.language == "Python":
            red = subprocess.run(
                ["python3", "-m", "pytest", "-q", "-p", "no:cacheprovider"], cwd=repo, capture_output=True
            )
            assert red.returncode != 0, f"{fixture.name}: its tests must fail before the fix"
        elif shutil.which("node"):
            red = subprocess.run(["node", "--test"], cwd=repo, capture_output=True)
            assert red.returncode != 0, f"{fixture.name}: its tests must fail before the fix"


@pytest.mark.skipif(shutil.which("node") is None, reason="the JavaScript fixtures need node")
async def test_the_scripted_eval_runs_fixtures_end_to_end_and_reports(settings, capsys) -> None:
    chosen = ("py-slug", "js-total")
    code = await tasks.main(settings, scripted=True, runs=1, only=chosen)
    out = capsys.readouterr().out
    assert code == 0, out
    assert "Task eval: 2 fixtures, 1 runs each, the scripted model" in out
    assert "✔ py-slug run 1: completed, 0 corrections, 1 steps" in out, out
    assert "✔ js-total run 1: completed, 0 corrections, 1 steps" in out, out
    assert "all: first try ✔ 2/2 · ✔ 2/2 · corrections 0.0 · steps 1.0" in out, out
    assert await tasks.main(settings, scripted=True, runs=1, only=["nope"]) == 2
