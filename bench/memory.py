"""The bot's resident memory with each speech engine: what the owner of a small machine needs to choose.

The real bot (`python -m telegram_bot`, a process of its own, configured by its environment as a `.env` would)
runs against the loopback fakes of Telegram and Anthropic held by this script. For each engine it reads the bot's
resident set (VmRSS, from /proc) and its speech process's:

- idle: started, start-up work done, no voice note yet (the speech process is not running);
- one note: after one 3 s note was transcribed and answered (the speech process is resident);
- after idle: once VOICE_IDLE_MINUTES passed without notes (the speech process has ended).

It also times a note from its arrival to the "I heard" echo: cold (the speech process starts and loads the model)
and warm (the model resident). The checkpoint has the real dimensions of whisper `--size` with random weights
(none can be downloaded here; memory depends on the shapes, not the values); faster-whisper converts it once into
the bot's data folder (before the measurement: the bot converts once too and later starts load the folder).

    python bench/memory.py                  # table, base dims
    python bench/memory.py --size tiny      # tiny dims
    python bench/memory.py --json           # figures for bench/run_all.py

`agentlab doctor` warns from these figures (agents/doctor/voice.py, VOICE_MEMORY_MB) when a machine is short of memory.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

CACHE = REPO / "bench" / ".cache"
ENGINES = ("openai-whisper", "faster-whisper")
IDLE_MINUTES = 0.25  # the bench's VOICE_IDLE_MINUTES: 15 s


def rss_mb(pid: int | None) -> float | None:
    """A process's resident set in MB; None when it does not run."""
    if pid is None:
        return None
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return round(int(line.split()[1]) / 1024)
    except OSError:
        return None
    return None


def children(pid: int) -> list[int]:
    try:
        found = []
        for task in Path(f"/proc/{pid}/task").iterdir():
            found += [int(c) for c in (task / "children").read_text().split()]
        return found
    except OSError:
        return []


def speech_process(bot: int) -> int | None:
    """The bot's speech process (a child running agents.inputs.speech_server), if one runs."""
    for child in children(bot):
        try:
            if b"agents.inputs.speech_server" in Path(f"/proc/{child}/cmdline").read_bytes():
                return child
        except OSError:
            continue
    return None


def wait(predicate: Any, timeout: float, what: str) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if value := predicate():
            return value
        time.sleep(0.05)
    raise TimeoutError(f"gave up waiting for {what}")


def echoes(tg: Any) -> int:
    from tests.conftest import USER_ID

    return sum("I heard" in (m.text or "") for m in tg.messages(USER_ID))


def measure_engine(engine: str, checkpoint: Path, note: bytes, tg: Any, claude: Any, root: Path) -> dict[str, Any]:
    """One bot process with `engine`: its memory idle, after one note, after the idle period; note latencies."""
    from agents.core.settings import env_keys
    from tests.conftest import USER_ID

    data = root / engine / "data"
    data.mkdir(parents=True)
    if engine == "faster-whisper":  # converted once before the bot starts, as a running bot would have done
        from agents.inputs.ct2_convert import convert_checkpoint

        convert_checkpoint(checkpoint, data / "voice" / "models")
    keys = env_keys()
    env = {k: v for k, v in os.environ.items() if k.upper() not in keys}
    env.update(
        TELEGRAM_BOT_TOKEN=tg.token,
        TELEGRAM_API_BASE_URL=tg.url,
        ANTHROPIC_API_KEY="sk-bench",
        ANTHROPIC_BASE_URL=claude.url,
        ALLOWED_USER_IDS=str(USER_ID),
        WORKSPACE_PATH=str(root / "workspaces"),
        DATABASE_PATH=str(data / "agentlab.db"),
        WHISPER_MODEL=str(checkpoint),
        WHISPER_LANGUAGE="en",
        VOICE_ENGINE=engine,
        VOICE_IDLE_MINUTES=str(IDLE_MINUTES),
        PYTHONPATH=str(REPO),
    )
    calls = len(tg.calls("getUpdates"))
    with open(root / f"{engine}.log", "w") as log:
        bot = subprocess.Popen(
            [sys.executable, "-m", "telegram_bot"], cwd=root, env=env, stdout=log, stderr=subprocess.STDOUT
        )
    try:
        wait(lambda: len(tg.calls("getUpdates")) > calls, 120, "the bot to poll")
        time.sleep(8)  # START_UP_GRACE_SECONDS and the start-up work (the workspace index) pass
        idle = rss_mb(bot.pid)
        assert speech_process(bot.pid) is None, "no speech process before a note"
        latencies = []
        for _ in range(2):
            before = echoes(tg)
            started = time.perf_counter()
            tg.send_voice(USER_ID, note, duration=3)
            wait(lambda before=before: echoes(tg) > before, 600, "the note's echo")
            latencies.append(time.perf_counter() - started)
        speech = speech_process(bot.pid)
        one_note = {"bot": rss_mb(bot.pid), "speech process": rss_mb(speech)}
        wait(lambda: speech_process(bot.pid) is None, IDLE_MINUTES * 60 + 60, "the idle speech process to end")
        after_idle = rss_mb(bot.pid)
    finally:
        bot.send_signal(signal.SIGTERM)
        try:
            bot.wait(30)
        except subprocess.TimeoutExpired:
            bot.kill()
    return {
        "engine": engine,
        "idle_mb": idle,
        "one_note_bot_mb": one_note["bot"],
        "one_note_speech_mb": one_note["speech process"],
        "after_idle_mb": after_idle,
        "cold_note_s": round(latencies[0], 2),
        "warm_note_s": round(latencies[1], 2),
    }


def measure(size: str, engines: tuple[str, ...]) -> list[dict]:
    from bench._harness import quiet_logging, running_fakes, temp_workspace
    from tests.fakes import anthropic_server as claude_says
    from tests.fakes.whisper_checkpoint import make_ogg_opus, sized_checkpoint, tone_mix

    quiet_logging()
    CACHE.mkdir(parents=True, exist_ok=True)
    checkpoint = sized_checkpoint(CACHE / f"memory-{size}-random.pt", size)
    note = make_ogg_opus(tone_mix(3.0))
    rows = []
    with running_fakes() as (tg, claude), temp_workspace() as root:
        claude.handler = lambda _body: claude_says.text("Heard you.")
        for engine in engines:
            if engine == "faster-whisper":
                try:
                    import faster_whisper  # noqa: F401
                except ImportError as err:
                    print(f"faster-whisper is not installed ({err}): its line is left out", file=sys.stderr)
                    continue
            rows.append({**measure_engine(engine, checkpoint, note, tg, claude, root), "size": size})
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--size", choices=("tiny", "base"), default="base")
    parser.add_argument("--engine", choices=ENGINES, action="append", help="only this engine (repeatable)")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    rows = measure(args.size, tuple(args.engine or ENGINES))
    if args.json:
        print(json.dumps({"memory": rows}))
        return
    print(f"the bot's resident memory (MB), a 3 s note's time to its echo; whisper {args.size} dims, random weights")
    print(
        f"{'engine':<16} {'idle':>6} {'1 note: bot':>12} {'+ speech':>9} {'after idle':>11} {'cold s':>7} {'warm s':>7}"
    )
    for r in rows:
        print(
            f"{r['engine']:<16} {r['idle_mb']:>6} {r['one_note_bot_mb']:>12} {r['one_note_speech_mb']:>9} "
            f"{r['after_idle_mb']:>11} {r['cold_note_s']:>7} {r['warm_note_s']:>7}"
        )


if __name__ == "__main__":
    main()
