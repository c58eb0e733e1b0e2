"""A `git` that holds one chosen subcommand of the bot's (before or after the real git runs), so a test can SIGKILL
the bot exactly there; and what the owner then finds in their checkout."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

from tests.conftest import git

REAL_GIT = shutil.which("git") or "/usr/bin/git"

WRAPPER = r"""#!/bin/bash
# the subcommand: the first argument that is no option (a -c/-C takes the next one)
sub=""; skip=0
for a in "$@"; do
  if [ $skip = 1 ]; then skip=0; continue; fi
  case "$a" in
    -c|-C) skip=1 ;;
    -*) ;;
    *) sub="$a"; break ;;
  esac
done
ctl=__CTL__
arm="$ctl/arm-$sub"
if [ -n "$sub" ] && [ -e "$arm" ]; then
  want="$(cat "$arm")"
  if [ -z "$want" ] || printf '%s\n' "$*" | grep -q -- "$want"; then
    if mv "$arm" "$arm.taken" 2>/dev/null; then
      when="$(cat "$ctl/when-$sub" 2>/dev/null || echo before)"
      if [ "$when" = before ]; then
        echo $$ > "$ctl/hit-$sub"
        sleep "$(cat "$ctl/delay" 2>/dev/null || echo 4)"
        exec __GIT__ "$@"
      fi
      __GIT__ "$@"; rc=$?
      echo $$ > "$ctl/hit-$sub"
      sleep 600
      exit $rc
    fi
  fi
fi
exec __GIT__ "$@"
"""


class GitHold:
    """A wrapper `git` (put `bin` first on the bot's PATH) and its control folder: arm a subcommand (with a pattern its arguments must hold), see it hit."""

    def __init__(self, tmp_path: Path) -> None:
        self.ctl = tmp_path / "gitctl"
        self.bin = tmp_path / "gitbin"
        self.ctl.mkdir()
        self.bin.mkdir()
        script = self.bin / "git"
        script.write_text(WRAPPER.replace("__CTL__", str(self.ctl)).replace("__GIT__", REAL_GIT))
        script.chmod(0o755)

    def arm(self, sub: str, pattern: str = "", when: str = "before", delay: float = 4) -> None:
        (self.ctl / f"when-{sub}").write_text(when)
        (self.ctl / "delay").write_text(str(delay))
        (self.ctl / f"arm-{sub}").write_text(pattern)

    def hit(self, sub: str) -> int | None:
        try:
            return int((self.ctl / f"hit-{sub}").read_text().strip())
        except (OSError, ValueError):
            return None


def alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat[stat.rindex(")") + 2] != "Z"


def owner_state(repo: Path) -> dict[str, object]:
    """What the owner finds in their checkout."""
    gitdir = repo / ".git"
    locks = sorted(str(p.relative_to(gitdir)) for p in gitdir.rglob("*.lock"))
    status = subprocess.run(
        [REAL_GIT, "status", "--porcelain", "--untracked-files=no"], cwd=repo, capture_output=True, text=True
    )
    return {
        "locks": locks,
        "merge_head": (gitdir / "MERGE_HEAD").exists(),
        "status": status.stdout.strip(),
        "status_rc": status.returncode,
        "status_err": status.stderr.strip(),
        "head": git(repo, "rev-parse", "HEAD").strip() if not locks else "?",
    }
