"""From starting the bot's process to its first `getUpdates`: what a user waits for after `make run` (venv ready).

The real `python -m telegram_bot` against the loopback fakes (Telegram and Anthropic), ROUNDS times on a fresh
database, and ROUNDS times on the same database again (a restart); for each, the time from `Popen` to the fake
Telegram's first `getUpdates` call (medians and the spread). `--imports` also prints the slowest imports of one start
(`python -X importtime`), which is where most of a start goes.

Run: .venv/bin/python bench/startup.py [--json] [--imports]
"""

from __future__ import annotations

import os
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench._harness import emit_json, machine, parse_args, quiet_logging, running_fakes  # noqa: E402
from tests.conftest import make_repo  # noqa: E402
from tests.support.processes import bot_env  # noqa: E402

ROUNDS = 5
REPO = {"calc.py": "def add(a, b):\n    return a + b\n"}


def one_start(env: dict[str, str], folder: Path, tg, importtime: bool = False) -> tuple[float, str]:
    """Seconds from Popen to the first getUpdates, and the process's log (its import times with `importtime`).
    Bytecode is written and kept between starts, as on a user's machine (a CI machine's PYTHONDONTWRITEBYTECODE
    would make every start compile the bot's modules again)."""
    env = {k: v for k, v in env.items() if k != "PYTHONDONTWRITEBYTECODE"}
    before = len(tg.calls("getUpdates"))
    args = [sys.executable, *(["-X", "importtime"] if importtime else []), "-m", "telegram_bot"]
    started = time.perf_counter()
    log = folder / "bot.log"
    with open(log, "w") as out:  # a file, not a pipe: a full pipe would stop the bot
        proc = subprocess.Popen(args, cwd=folder, env=env, stdout=out, stderr=subprocess.STDOUT)
    try:
        while len(tg.calls("getUpdates")) == before:
            if proc.poll() is not None:
                raise RuntimeError(f"the bot exited ({proc.returncode}): {log.read_text()[-2000:]}")
            time.sleep(0.01)
        took = time.perf_counter() - started
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(30)
    return took, log.read_text()


def slowest_imports(stderr: str, count: int = 12) -> list[tuple[str, float]]:
    """The top-level packages by cumulative import time (ms), from `-X importtime` output."""
    totals: dict[str, float] = {}
    for line in stderr.splitlines():
        found = re.match(r"import time:\s+\d+ \|\s+(\d+) \| (\s*)(\S+)", line)
        if found and not found.group(2):  # a top-level import: its cumulative time covers its children
            name = found.group(3).split(".")[0]
            totals[name] = totals.get(name, 0.0) + int(found.group(1)) / 1000
    return sorted(totals.items(), key=lambda kv: -kv[1])[:count]


def main(imports: bool) -> dict:
    figures: dict = {"machine": machine(), "rounds": ROUNDS}
    with running_fakes() as (tg, claude), tempfile.TemporaryDirectory(prefix="agentlab-bench-") as tmp_name:
        tmp = Path(tmp_name)
        (tmp / "workspaces").mkdir()
        make_repo(tmp / "workspaces" / "calc", REPO)
        fresh = []
        for n in range(ROUNDS):
            folder = tmp / f"fresh-{n}"
            folder.mkdir()
            fresh.append(one_start(bot_env(tg, claude, folder, tmp / "workspaces"), folder, tg)[0])
        again = []
        folder = tmp / "again"
        folder.mkdir()
        env = bot_env(tg, claude, folder, tmp / "workspaces")
        one_start(env, folder, tg)
        for _ in range(ROUNDS):
            again.append(one_start(env, folder, tg)[0])
        figures["fresh_s"] = {"median": statistics.median(fresh), "min": min(fresh), "max": max(fresh)}
        figures["restart_s"] = {"median": statistics.median(again), "min": min(again), "max": max(again)}
        if imports:
            _, err = one_start(env, folder, tg, importtime=True)
            figures["imports_ms"] = dict(slowest_imports(err))
    return figures


def report(f: dict) -> None:
    print(f"process start to the first getUpdates ({f['rounds']} rounds each, median [min–max]):")
    for key, label in (("fresh_s", "fresh database"), ("restart_s", "the same database again")):
        r = f[key]
        print(f"  {label:24} {r['median']:.2f} s [{r['min']:.2f}–{r['max']:.2f}]")
    if "imports_ms" in f:
        print("slowest top-level imports of one start (cumulative ms):")
        for name, ms in f["imports_ms"].items():
            print(f"  {name:24} {ms:7.0f}")
    print(f"(machine: {f['machine']})")


if __name__ == "__main__":
    args = parse_args(__doc__.splitlines()[0], ("--imports", "also list the slowest imports of one start"))
    quiet_logging()
    os.environ.pop("PYTHONPROFILEIMPORTTIME", None)
    figures = main(args.imports)
    report(figures)
    if args.json:
        emit_json(figures)
