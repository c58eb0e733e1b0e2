"""The bot's resident memory with each speech engine: what the owner of a small machine needs to choose.

Each case is a fresh Python process that imports what the bot imports at start (PTB, the SDK, the runtime), then,
for an engine, loads its resident transcriber from a checkpoint with the real dimensions of whisper `--size`
(random weights: none can be downloaded here; memory depends on the shapes, not the values) and transcribes one
3 s note. It prints its resident set (VmRSS) and peak (VmHWM) from /proc. faster-whisper loads the CTranslate2
folder converted from the same checkpoint (converted once, in a process of its own, before the measurement: the
bot converts once too and later starts load the folder), int8 on the CPU.

    python bench/memory.py                  # table, base dims
    python bench/memory.py --size tiny      # tiny dims
    python bench/memory.py --json           # figures for bench/run_all.py

`agentlab doctor` warns from these figures (agents/doctor.py, VOICE_MEMORY_MB) when the machine is short of memory.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

CACHE = REPO / "bench" / ".cache"
CASES = ("no speech model", "openai-whisper", "faster-whisper")


def _status_mb(field: str) -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) / 1024
    return float("nan")


def child(case: str, checkpoint: str, convert_root: str) -> None:
    """One measurement, in this process: the bot's imports, then the engine loaded and one note transcribed."""
    import agents.runtime  # noqa: F401  (what the bot imports at start)
    import telegram_bot.app  # noqa: F401

    if case != "no speech model":
        from agents.inputs.voice import FasterWhisperTranscriber, OpenAIWhisperTranscriber
        from tests.fakes.whisper_checkpoint import make_ogg_opus, tone_mix

        note = make_ogg_opus(tone_mix(3.0))
        if case == "faster-whisper":
            transcriber = FasterWhisperTranscriber(
                checkpoint, "en", 60.0, "cpu", convert_root=convert_root, max_tokens_per_window=8
            )
        else:
            transcriber = OpenAIWhisperTranscriber(checkpoint, "en", 60.0, "cpu", max_tokens_per_window=8)
        asyncio.run(transcriber.transcribe(note))
    print(json.dumps({"case": case, "rss_mb": round(_status_mb("VmRSS")), "peak_mb": round(_status_mb("VmHWM"))}))


def measure(size: str) -> list[dict]:
    from tests.fakes.whisper_checkpoint import sized_checkpoint

    CACHE.mkdir(parents=True, exist_ok=True)
    checkpoint = sized_checkpoint(CACHE / f"memory-{size}-random.pt", size)
    with tempfile.TemporaryDirectory(prefix="agentlab-memory-") as convert_root:
        try:  # convert once, outside the measured process (as the bot does once; later starts load the folder)
            from agents.inputs.ct2_convert import convert_checkpoint

            convert_checkpoint(checkpoint, Path(convert_root))
            cases = CASES
        except ImportError as err:
            print(f"faster-whisper is not installed ({err}): its line is left out", file=sys.stderr)
            cases = CASES[:2]
        rows = []
        for case in cases:
            out = subprocess.run(
                [sys.executable, __file__, "--child", case, str(checkpoint), convert_root],
                capture_output=True,
                text=True,
                check=True,
                cwd=REPO,
                timeout=600,
            ).stdout
            rows.append({**json.loads(out.strip().splitlines()[-1]), "size": size})
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--size", choices=("tiny", "base"), default="base")
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--child", nargs=3, metavar=("CASE", "CHECKPOINT", "CONVERT_ROOT"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(*args.child)
        return
    rows = measure(args.size)
    if args.json:
        print(json.dumps({"memory": rows}))
        return
    print(f"the bot's resident memory after start-up and one 3 s note, whisper {args.size} dims (random weights)")
    print(f"{'case':<20} {'RSS MB':>8} {'peak MB':>8}")
    for row in rows:
        print(f"{row['case']:<20} {row['rss_mb']:>8} {row['peak_mb']:>8}")


if __name__ == "__main__":
    main()
