"""A hostile worker (the scripted model through the real bot and bwrap) reads what the sandbox shows of the owner's
git metadata besides `config`: a submodule's config, a file `config` includes, a reflog line. Each holds the same
owner's credentials and is shown masked, as `config` is, so no encoding the worker picks gets them out."""

from __future__ import annotations

import base64
import json
import re
from pathlib import Path

import pytest

from tests.conftest import BotHarness, git
from tests.fakes import anthropic_server as claude_says
from tests.scripted import RoleScript
from tests.support.sandbox import needs_bwrap
from tests.support.tasks import ended, everything_said, start_task, tool_results

pytestmark = needs_bwrap

SUBMODULE_TOKEN = "ghp_SUBMODULETOKEN0123456789abcdef"
INCLUDED_SECRET = "INCLUDED-HEADER-SECRET-8812"
REFLOG_TOKEN = "ghp_REFLOGTOKEN0123456789abcdefABCDEF"


def _decoded(texts: list[str]) -> str:
    """Every base64 run in the tool results, decoded (what a worker reads back from an encoded dump)."""
    out = []
    for text in texts:
        for run in re.findall(r"[A-Za-z0-9+/=]{24,}", str(json.loads(text))):
            try:
                out.append(base64.b64decode(run + "=" * (-len(run) % 4)).decode(errors="replace"))
            except ValueError:
                pass
    return "\n".join(out)


@pytest.mark.untested_calc  # neither the verdict nor the task's end is what this test is about
async def test_git_credentials_outside_the_main_config_are_not_readable_in_the_sandbox(
    bot: BotHarness, model: RoleScript, workspace_root: Path
) -> None:
    """The sandbox shows a masked copy of `.git/config`; a submodule's `.git/modules/<name>/config` (its own
    `remote.origin.url`, with the credentials it was cloned with) and a file `.git/config` includes are the same
    owner's credentials, bound raw. Dumped encoded, the output filter never sees them."""
    calc = workspace_root / "calc"
    common = calc / ".git"
    (common / "modules" / "lib").mkdir(parents=True)
    (common / "modules" / "lib" / "config").write_text(
        f'[core]\n\tbare = false\n[remote "origin"]\n\turl = https://bob:{SUBMODULE_TOKEN}@github.com/o/lib.git\n'
    )
    (common / "auth.inc").write_text(
        f'[http "https://example.com/"]\n\textraheader = AUTHORIZATION: basic {INCLUDED_SECRET}\n'
    )
    git(calc, "config", "include.path", "auth.inc")
    with (common / "logs" / "HEAD").open("a") as reflog:  # a pull from a URL typed with its token
        head = git(calc, "rev-parse", "HEAD")
        reflog.write(f"{head} {head} o <o@x> 1700000000 +0000\tpull https://bob:{REFLOG_TOKEN}@github.com/o/r.git\n")
    attacks = [
        "C=$(git rev-parse --git-common-dir); base64 -w0 $C/modules/lib/config; echo; echo done-modules",
        "C=$(git rev-parse --git-common-dir); base64 -w0 $C/auth.inc; echo; echo done-include",
        "C=$(git rev-parse --git-common-dir); base64 -w0 $C/logs/HEAD; echo; echo done-reflog",
    ]
    model.add("orchestrator", start_task("calc", "Look around."), claude_says.text("Started."))
    model.add(
        "code",
        *[claude_says.tool_use("run_command", {"command": c}) for c in attacks],
        claude_says.text("Done."),
    )
    bot.say("look around calc")
    await ended(bot, 1, timeout=120)
    results = tool_results(model)
    assert all(any(f"done-{what}" in r for r in results) for what in ("modules", "include", "reflog")), results
    seen = everything_said(bot, model) + json.dumps(model.requests) + _decoded(results)
    leaked = [s for s in (SUBMODULE_TOKEN, INCLUDED_SECRET, REFLOG_TOKEN) if s in seen]
    assert not leaked, f"owner's git credentials read raw from the sandbox's view of .git: {leaked}"
