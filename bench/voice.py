"""Voice-note latency: this pipeline vs the naive whisper recipe, download (bytes in hand) to transcript.

(a) this pipeline: `agents.inputs.voice.Transcriber`, model resident (loaded before timing), PyAV decoding in process.
(b) the naive recipe: load the model for every note, write the note to a file, `whisper.transcribe(model, path)`,
    which spawns the `ffmpeg` binary. When `ffmpeg` is not on PATH nothing is installed: a `python -c` subprocess
    that decodes the file with PyAV and writes raw float32 to stdout stands in for it (the output says so).

Weights are random (none can be downloaded here) with the real dimensions of whisper tiny and base. Random weights
never emit end-of-text, so every 30 s window runs to the token cap; the cap is the same for (a) and (b) and, by
default, sized like real speech (3.5 tokens per second of audio, about 150 English words a minute). Both paths use
the same `transcribe_options`: temperature 0, no conditioning on previous text, no timestamps, language detection.

    python bench/voice.py                # table
    python bench/voice.py --json         # figures for bench/run_all.py (progress goes to stderr)
    python bench/voice.py --engines      # openai-whisper vs faster-whisper, table; add --json for figures

`--engines` compares the two engines in one run: the same 10 s note, the same random weights (faster-whisper's
CTranslate2 folder is converted from the very checkpoint openai-whisper loads), at tiny and base dims, each engine
a resident transcriber (`agents.inputs.voice`) loaded and warmed up before the clock, runs interleaved, English given,
and a fixed number of decoded tokens (the test weights never emit end-of-text, so every window runs to the cap).
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import math
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from agents.inputs.voice import FasterWhisperTranscriber, OpenAIWhisperTranscriber, Transcriber, transcribe_options
from tests.fakes.whisper_checkpoint import make_ogg_opus, sized_checkpoint, speech, tone_mix  # noqa: E402

CACHE = REPO / "bench" / ".cache"
CHECKPOINT_VERSION = 2  # 2: every parameter seeded, end-of-text never wins; older cached files are stale
NOTE_RATE = 48_000  # Telegram voice notes are 48 kHz Opus
TARGET_RATIO = 3.0
TARGET_NOTE_SECONDS = 10
PARAGRAPH = (
    "Please open the calculator project and run the whole test suite. "
    "If anything fails, read the traceback, find the function that is wrong and fix it with a small change. "
    "Then run the tests again and tell me which files you touched and why. "
    "After that, have a look at the readme and check that the install steps still work on a clean machine. "
)

# What stands in for `ffmpeg -i file -f s16le -ac 1 -ar 16000 -` when the binary is absent.
SUBPROCESS_DECODER = """
import sys, av
resampler = av.AudioResampler(format="flt", layout="mono", rate=16000)
out = sys.stdout.buffer
with av.open(sys.argv[1]) as container:
    for frame in container.decode(audio=0):
        for piece in resampler.resample(frame):
            out.write(piece.to_ndarray().tobytes())
for piece in resampler.resample(None):
    out.write(piece.to_ndarray().tobytes())
"""


def progress(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def make_note(seconds: int) -> tuple[bytes, str]:
    """An OGG/Opus note of exactly `seconds`: espeak-ng speech if installed, else a speech-like tone mix."""
    target = seconds * NOTE_RATE
    pieces: list[np.ndarray] = []
    while sum(p.size for p in pieces) < target:
        spoken = speech(PARAGRAPH, rate=NOTE_RATE)
        if spoken is None:
            return make_ogg_opus(tone_mix(seconds, rate=NOTE_RATE), NOTE_RATE), "tone mix (espeak-ng not installed)"
        pieces.append(spoken)
    return make_ogg_opus(np.concatenate(pieces)[:target], NOTE_RATE), "espeak-ng speech"


def decode_with_subprocess(path: Path) -> np.ndarray:
    """The ffmpeg stand-in: a separate process decodes the file and streams float32 samples back."""
    raw = subprocess.run(
        [sys.executable, "-c", SUBPROCESS_DECODER, str(path)], capture_output=True, check=True, timeout=300
    ).stdout
    return np.frombuffer(bytearray(raw), dtype=np.float32)  # writable, as torch wants


def naive_once(
    checkpoint: Path, data: bytes, options: dict[str, Any], workdir: Path, use_ffmpeg: bool
) -> dict[str, float]:
    """(b): load the model, write the file, decode it in another process, transcribe. Returns seconds per stage."""
    import whisper

    started = time.perf_counter()
    model = whisper.load_model(str(checkpoint), device="cpu")
    loaded = time.perf_counter()
    path = workdir / "voice-note.ogg"
    path.write_bytes(data)
    if use_ffmpeg:  # whisper.transcribe runs ffmpeg itself: its decode time is inside "transcribe"
        audio: str | np.ndarray = str(path)
    else:
        audio = decode_with_subprocess(path)
    decoded = time.perf_counter()
    result = whisper.transcribe(model, audio, **options)
    finished = time.perf_counter()
    assert isinstance(result["text"], str)
    del model
    gc.collect()
    return {
        "total": finished - started,
        "load": loaded - started,
        "decode": decoded - loaded,
        "transcribe": finished - decoded,
    }


async def measure(
    checkpoint: Path, data: bytes, tokens: int, repeats: int, workdir: Path, use_ffmpeg: bool
) -> tuple[list[dict[str, float]], list[dict[str, float]]]:
    """Interleave (a) and (b) runs (a, b, a, b, ...) so that both see the same machine load.

    (a) is one resident Transcriber, loaded and warmed up before the clock starts; (b) is warmed up once too.
    """
    options = transcribe_options(None, tokens, fp16=False)
    transcriber = Transcriber(str(checkpoint), None, max_seconds=600.0, device="cpu", max_tokens_per_window=tokens)
    try:
        await transcriber.wait_ready()
        await transcriber.transcribe(data)  # warm-up, untimed
        naive_once(checkpoint, data, options, workdir, use_ffmpeg)  # warm-up, untimed
        a_runs, b_runs = [], []
        for _ in range(repeats):
            started = time.perf_counter()
            transcript = await transcriber.transcribe(data)
            total = time.perf_counter() - started
            assert isinstance(transcript.text, str)
            a_runs.append(
                {"total": total, "decode": transcript.decode_seconds, "transcribe": transcript.transcribe_seconds}
            )
            b_runs.append(naive_once(checkpoint, data, options, workdir, use_ffmpeg))
        return a_runs, b_runs
    finally:
        transcriber.close()


def medians(runs: list[dict[str, float]]) -> dict[str, float]:
    return {stage: round(statistics.median(run[stage] for run in runs), 3) for stage in runs[0]}


def tokens_for(seconds: int, tokens_per_second: float, fixed: int | None) -> int:
    return fixed if fixed is not None else max(8, min(224, math.ceil(tokens_per_second * min(seconds, 30))))


def run(
    sizes: list[str], lengths: list[int], repeats: int, tokens_per_second: float, fixed_tokens: int | None
) -> dict[str, Any]:
    use_ffmpeg = shutil.which("ffmpeg") is not None
    load_before = os.getloadavg()[0]
    CACHE.mkdir(parents=True, exist_ok=True)
    notes = {seconds: make_note(seconds) for seconds in lengths}
    audio_kind = next(iter(notes.values()))[1]
    results = []
    with tempfile.TemporaryDirectory(prefix="voice-bench-") as tmp:
        workdir = Path(tmp)
        for size in sizes:
            progress(f"checkpoint: random weights, real whisper {size} dims ...")
            checkpoint = sized_checkpoint(CACHE / f"whisper-random-{size}-v{CHECKPOINT_VERSION}.pt", size)
            for seconds in lengths:
                data = notes[seconds][0]
                tokens = tokens_for(seconds, tokens_per_second, fixed_tokens)
                progress(f"{size}, {seconds} s note, <= {tokens} tokens per window: (a) and (b), interleaved ...")
                a_runs, b_runs = asyncio.run(measure(checkpoint, data, tokens, repeats, workdir, use_ffmpeg))
                a = statistics.median(run["total"] for run in a_runs)
                b = statistics.median(run["total"] for run in b_runs)
                results.append(
                    {
                        "model": size,
                        "note_seconds": seconds,
                        "tokens_per_window": tokens,
                        "a_seconds": round(a, 3),
                        "b_seconds": round(b, 3),
                        "ratio_b_over_a": round(b / a, 2),
                        "rtf_a": round(a / seconds, 3),
                        "rtf_b": round(b / seconds, 3),
                        "a_stages": medians(a_runs),
                        "b_stages": medians(b_runs),
                        "a_runs": [round(run["total"], 3) for run in a_runs],
                        "b_runs": [round(run["total"], 3) for run in b_runs],
                    }
                )
    checked = [r for r in results if r["note_seconds"] == TARGET_NOTE_SECONDS]
    return {
        "benchmark": "voice",
        "repeats": repeats,
        "statistic": "median",
        "audio": f"{audio_kind}, OGG/Opus {NOTE_RATE // 1000} kHz mono, generated in memory",
        "weights": "random, real whisper dims",
        "decoding": "temperature 0, no previous-text conditioning, no timestamps, same token cap in (a) and (b)",
        "machine": {
            "cpus": os.cpu_count(),
            "load_average_before": round(load_before, 2),
            "load_average_after": round(os.getloadavg()[0], 2),
        },
        "b_decoder": "ffmpeg binary (whisper.load_audio)"
        if use_ffmpeg
        else "ffmpeg not installed: `python -c` PyAV decoder subprocess writing float32 to stdout stands in for it",
        "results": results,
        "target": {
            "description": f"(a) >= {TARGET_RATIO:g}x faster than (b) for the {TARGET_NOTE_SECONDS} s note",
            "checked": bool(checked),
            "met": bool(checked) and all(r["ratio_b_over_a"] >= TARGET_RATIO for r in checked),
            "ratios": {r["model"]: r["ratio_b_over_a"] for r in checked},
        },
    }


def render(report: dict[str, Any]) -> str:
    lines = [
        f"voice notes, download to transcript ({report['statistic']} of {report['repeats']} interleaved runs)",
        f"  audio:    {report['audio']}",
        f"  weights:  {report['weights']}",
        f"  decoding: {report['decoding']}",
        "  (a) resident model + in-process PyAV decoding (agents.inputs.voice.Transcriber)",
        f"  (b) model loaded per note + file + {report['b_decoder']}",
        "",
        f"{'model':<6} {'note':>6} {'tokens':>6} {'(a) s':>8} {'(b) s':>8} {'b/a':>6} {'RTF (a)':>8} {'RTF (b)':>8}",
    ]
    for r in report["results"]:
        lines.append(
            f"{r['model']:<6} {r['note_seconds']:>4} s {r['tokens_per_window']:>6} {r['a_seconds']:>8.2f} "
            f"{r['b_seconds']:>8.2f} {r['ratio_b_over_a']:>5.2f}x {r['rtf_a']:>8.3f} {r['rtf_b']:>8.3f}"
        )
    machine = report["machine"]
    busiest = max(machine["load_average_before"], machine["load_average_after"])
    if machine["cpus"] and busiest > 0.5 * machine["cpus"]:
        lines += [
            "",
            f"note: the machine was busy (load average up to {busiest:.1f} on {machine['cpus']} CPUs); "
            "the figures are noisy",
        ]
    lines += ["", "stages (median s): (a) decode + transcribe | (b) model load + decode + transcribe"]
    for r in report["results"]:
        a, b = r["a_stages"], r["b_stages"]
        lines.append(
            f"{r['model']:<6} {r['note_seconds']:>4} s   (a) {a['decode']:.2f} + {a['transcribe']:.2f}"
            f"   | (b) {b['load']:.2f} + {b['decode']:.2f} + {b['transcribe']:.2f}"
        )
    target = report["target"]
    if target["checked"]:
        ratios = ", ".join(f"{model} {ratio:.2f}x" for model, ratio in target["ratios"].items())
        verdict = f"{'met' if target['met'] else 'not met'} ({ratios})"
    else:
        verdict = f"not measured (no {TARGET_NOTE_SECONDS} s note in this run)"
    lines += ["", f"target: {target['description']}: {verdict}"]
    return "\n".join(lines)


# --------------------------------------------------------------------------------------------------------------
# openai-whisper vs faster-whisper

ENGINE_TARGET_RATIO = 1.7
ENGINE_TARGET_RTF = 0.1


async def measure_engines(
    checkpoint: Path, data: bytes, tokens: int, repeats: int
) -> tuple[dict[str, list[float]], dict[str, list[int | None]]]:
    """Both engines resident and warmed up, then interleaved runs: model seconds per run, tokens decoded seen."""
    engines = {
        "openai-whisper": OpenAIWhisperTranscriber(str(checkpoint), "en", 600.0, "cpu", max_tokens_per_window=tokens),
        "faster-whisper": FasterWhisperTranscriber(
            str(checkpoint), "en", 600.0, "cpu", max_tokens_per_window=tokens, convert_root=CACHE / "ct2"
        ),
    }
    try:
        for name, transcriber in engines.items():
            started = time.perf_counter()
            await transcriber.wait_ready()
            progress(f"  {name} loaded in {time.perf_counter() - started:.1f} s")
            await transcriber.transcribe(data)  # warm-up, untimed
        runs: dict[str, list[float]] = {name: [] for name in engines}
        tokens_seen: dict[str, set[int | None]] = {name: set() for name in engines}
        for _ in range(repeats):
            for name, transcriber in engines.items():
                runs[name].append((await transcriber.transcribe(data)).transcribe_seconds)
                tokens_seen[name].add(transcriber.recent[-1].tokens)
        return runs, {name: sorted(seen) for name, seen in tokens_seen.items()}
    finally:
        for transcriber in engines.values():
            transcriber.close()


def run_engines(sizes: list[str], seconds: int, tokens: int, repeats: int) -> dict[str, Any]:
    load_before = os.getloadavg()[0]
    CACHE.mkdir(parents=True, exist_ok=True)
    data, audio_kind = make_note(seconds)
    results = []
    for size in sizes:
        progress(f"checkpoint: random weights, real whisper {size} dims ...")
        checkpoint = sized_checkpoint(CACHE / f"whisper-random-{size}-v{CHECKPOINT_VERSION}.pt", size)
        progress(f"{size}, {seconds} s note, {tokens} tokens: openai-whisper and faster-whisper, interleaved ...")
        runs, decoded = asyncio.run(measure_engines(checkpoint, data, tokens, repeats))
        openai = statistics.median(runs["openai-whisper"])
        faster = statistics.median(runs["faster-whisper"])
        results.append(
            {
                "model": size,
                "note_seconds": seconds,
                "tokens": tokens,
                "openai_seconds": round(openai, 3),
                "faster_seconds": round(faster, 3),
                "speedup": round(openai / faster, 2),
                "rtf_openai": round(openai / seconds, 3),
                "rtf_faster": round(faster / seconds, 3),
                "tokens_decoded": decoded,  # per engine, every run: the same fixed number is the point
                "runs": {name: [round(x, 3) for x in values] for name, values in runs.items()},
            }
        )
    base = [r for r in results if r["model"] == "base"]
    return {
        "benchmark": "voice engines",
        "repeats": repeats,
        "statistic": "median",
        "audio": f"{audio_kind}, OGG/Opus {NOTE_RATE // 1000} kHz mono, {seconds} s",
        "weights": "random, real whisper dims, the same checkpoint for both (CTranslate2 folder converted from it)",
        "decoding": f"greedy, temperature 0, English given, no timestamps, exactly {tokens} tokens decoded",
        "engines": "openai-whisper fp32 (torch) | faster-whisper int8 (CTranslate2)",
        "machine": {
            "cpus": os.cpu_count(),
            "load_average_before": round(load_before, 2),
            "load_average_after": round(os.getloadavg()[0], 2),
        },
        "results": results,
        "target": {
            "description": f"faster-whisper >= {ENGINE_TARGET_RATIO:g}x faster than openai-whisper at base dims, "
            f"RTF <= {ENGINE_TARGET_RTF:g}",
            "checked": bool(base),
            "met": bool(base)
            and all(r["speedup"] >= ENGINE_TARGET_RATIO and r["rtf_faster"] <= ENGINE_TARGET_RTF for r in base),
        },
    }


def render_engines(report: dict[str, Any]) -> str:
    lines = [
        f"voice engines, model time per note ({report['statistic']} of {report['repeats']} interleaved runs)",
        f"  audio:    {report['audio']}",
        f"  weights:  {report['weights']}",
        f"  decoding: {report['decoding']}",
        f"  engines:  {report['engines']}",
        "",
        f"{'model':<6} {'tokens':>6} {'openai s':>9} {'faster s':>9} {'speedup':>8} {'RTF openai':>11} "
        f"{'RTF faster':>11}",
    ]
    for r in report["results"]:
        decoded = {tuple(seen) for seen in r["tokens_decoded"].values()}
        if decoded != {(r["tokens"],)}:
            lines.append(
                f"warning: the engines did not both decode exactly {r['tokens']} tokens: {r['tokens_decoded']}"
            )
        lines.append(
            f"{r['model']:<6} {r['tokens']:>6} {r['openai_seconds']:>9.3f} {r['faster_seconds']:>9.3f} "
            f"{r['speedup']:>7.2f}x {r['rtf_openai']:>11.3f} {r['rtf_faster']:>11.3f}"
        )
    machine = report["machine"]
    lines += [
        "",
        f"machine: {machine['cpus']} CPUs, load average {machine['load_average_before']:.1f} before, "
        f"{machine['load_average_after']:.1f} after",
    ]
    target = report["target"]
    verdict = ("met" if target["met"] else "not met") if target["checked"] else "not measured (no base run)"
    lines.append(f"target: {target['description']}: {verdict}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true", help="print the figures as JSON (progress on stderr)")
    parser.add_argument("--sizes", nargs="+", default=["tiny", "base"], choices=["tiny", "base"])
    parser.add_argument("--lengths", nargs="+", type=int, default=None, help="note lengths in seconds (10 30)")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--tokens-per-second", type=float, default=3.5, help="token cap per second of audio")
    parser.add_argument("--tokens", type=int, default=None, help="a fixed token cap per window (1-224) instead")
    parser.add_argument("--engines", action="store_true", help="compare openai-whisper and faster-whisper instead")
    args = parser.parse_args(argv)
    if args.tokens is not None and not 1 <= args.tokens <= 224:
        parser.error("--tokens must be between 1 and 224")
    if args.engines:
        length = args.lengths[0] if args.lengths else TARGET_NOTE_SECONDS
        report = run_engines(args.sizes, length, args.tokens or 35, max(args.repeats, 5))
        print(json.dumps(report, indent=2) if args.json else render_engines(report))
        return 0
    report = run(args.sizes, args.lengths or [10, 30], args.repeats, args.tokens_per_second, args.tokens)
    print(json.dumps(report, indent=2) if args.json else render(report))
    return 0


if __name__ == "__main__":
    sys.exit(main())
