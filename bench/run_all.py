"""Run every benchmark and write one Markdown report, `bench/RESULTS.md` (figure, value, target, ratio vs baseline).

    .venv/bin/python bench/run_all.py            # all benches (several minutes on 2 cores)
    .venv/bin/python bench/run_all.py --quick    # smaller voice and repo-map runs

Each bench is run as its own process with `--json`; its figures are read from its output and its human-readable
output is kept in the report's appendix. A bench that fails is reported as failed, with its output.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
Row = tuple[str, str, str, str]  # figure, value, target, ratio vs baseline


def run(script: str, *args: str, timeout: float = 1800) -> tuple[dict[str, Any] | None, str, float]:
    """Run one bench with --json; returns its figures (or None), its output, and seconds taken."""
    started = time.monotonic()
    proc = subprocess.run(
        [sys.executable, str(BENCH / script), *args, "--json"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    seconds = time.monotonic() - started
    output = (proc.stdout + ("\n" + proc.stderr if proc.stderr.strip() else "")).strip()
    figures = None
    if proc.returncode == 0:
        try:
            figures = json.loads(proc.stdout)  # benches that print only JSON (possibly indented)
        except json.JSONDecodeError:
            lines = [line for line in proc.stdout.splitlines() if line.strip()]
            try:
                figures = json.loads(lines[-1]) if lines else None
            except json.JSONDecodeError:
                figures = None
            if figures is not None:  # its last line: the figures, already in the table (a map's text can be in it)
                shown = proc.stdout.rstrip()[: -len(lines[-1])]
                output = (shown + ("\n" + proc.stderr if proc.stderr.strip() else "")).strip()
    return figures, output, seconds


def ms(value: float) -> str:
    return f"{value:.1f} ms"


def overhead_rows(f: dict[str, Any]) -> list[Row]:
    a, b = f["agentlab"], f["bare"]
    return [
        (
            "direct answer, bot overhead p50 (fakes at zero latency)",
            f"{ms(a['p50_ms'])} vs bare {ms(b['p50_ms'])}",
            "≤ 1.3×",
            f"{f['ratio_p50']:.2f}×",
        ),
        (
            "direct answer, bot overhead p95",
            f"{ms(a['p95_ms'])} vs bare {ms(b['p95_ms'])}",
            "≤ 1.3×",
            f"{f['ratio_p95']:.2f}×",
        ),
        (
            "direct answer p50, idle (80 ms between messages): agentlab minus the bare bot",
            f"+{f['idle_extra_p50_ms']:.2f} ms",
            f"≤ +{f['target_extra_ms']:g} ms",
            "",
        ),
        (
            "direct answer p50, back-to-back: agentlab minus the bare bot",
            f"+{f['back_to_back']['extra_p50_ms']:.2f} ms",
            f"≤ +{f['target_extra_ms']:g} ms",
            "",
        ),
        (
            "start-up to first getUpdates",
            f"{f['startup_ms']['agentlab']:.0f} ms vs bare {f['startup_ms']['bare']:.0f} ms",
            "",
            f"{f['startup_ms']['agentlab'] / max(f['startup_ms']['bare'], 0.001):.2f}×",
        ),
    ]


def background_rows(f: dict[str, Any]) -> list[Row]:
    idle, busy = (
        f["idle"]["latency"] if "latency" in f["idle"] else f["idle"],
        f["busy"]["latency"] if "latency" in f["busy"] else f["busy"],
    )
    paced = f["busy_paced"]["latency"] if "latency" in f["busy_paced"] else f["busy_paced"]
    return [
        (
            f"direct answer p50 with {f['tasks']} background tasks (worker model at 0.5 s a call) vs none",
            f"{ms(paced['p50_ms'])} vs {ms(idle['p50_ms'])}",
            "≤ 1.5×",
            f"{f['ratio_paced_p50']:.2f}×",
        ),
        (
            f"direct answer p95 with {f['tasks']} background tasks (worker model at 0.5 s a call) vs none",
            f"{ms(paced['p95_ms'])} vs {ms(idle['p95_ms'])}",
            "≤ 1.5×",
            f"{f['ratio_paced_p95']:.2f}×",
        ),
        (
            f"direct answer p50 with {f['tasks']} busy-looping tasks (worker model at zero latency) vs none",
            f"{ms(busy['p50_ms'])} vs {ms(idle['p50_ms'])}",
            "≤ 1.5×",
            f"{f['ratio_p50']:.2f}×",
        ),
        (
            f"direct answer p95 with {f['tasks']} busy-looping tasks (worker model at zero latency) vs none",
            f"{ms(busy['p95_ms'])} vs {ms(idle['p95_ms'])}",
            "≤ 1.5×",
            f"{f['ratio_p95']:.2f}×",
        ),
    ]


def voice_rows(f: dict[str, Any]) -> list[Row]:
    rows = []
    for r in f["results"]:
        target = "(a) ≥ 3× faster than (b)" if r["note_seconds"] == 10 else ""
        rows.append(
            (
                f"voice {r['note_seconds']} s note, {r['model']} size: (a) resident+PyAV vs (b) naive",
                f"{r['a_seconds']:.2f} s vs {r['b_seconds']:.2f} s (RTF {r['rtf_a']:.2f} / {r['rtf_b']:.2f})",
                target,
                f"{r['ratio_b_over_a']:.2f}× faster",
            )
        )
    return rows


def repo_map_rows(f: dict[str, Any]) -> list[Row]:
    rows: list[Row] = []
    rows += sympy_rows(f)
    for size, g in f["repo_map"].items():
        rows += [
            (f"repo map, {int(size):,} files: full build", f"{g['full_build_s']:.2f} s", "a few seconds (2,000)", ""),
            (
                f"repo map, {int(size):,} files: refresh, one file changed",
                f"{g['refresh_one_changed_s']:.3f} s ({g['one_changed_parsed']} parsed)",
                "",
                "",
            ),
            (
                f"repo map, {int(size):,} files: map size",
                f"{g['map_tokens']:,} tokens",
                f"≤ {g['budget_tokens']:,}",
                "",
            ),
        ]
    return rows


def sympy_rows(f: dict[str, Any]) -> list[Row]:
    """The sympy-sized tree (`--sympy`), against the repo map's targets."""
    rows: list[Row] = []
    for g in (f.get("repo_map_real") or {}).values():
        wait = g["first_turn_wait_s"]
        rows += [
            (
                f"repo map, sympy-sized tree ({g['indexed_files']:,} files): cold build, median of"
                f" {len(g['full_build_runs_s'])}",
                f"{g['full_build_s']:.2f} s",
                "≤ 2 s",
                "",
            ),
            (
                "repo map, sympy-sized tree: memory peak of the build (bench + parse processes)",
                f"{g.get('build_peak_pss_with_children_mb', '-')} MB PSS"
                f" ({g.get('build_peak_rss_with_children_mb', '-')} MB RSS summed)",
                "≤ 100 MB",
                "",
            ),
            (
                "repo map, sympy-sized tree: first task's wait for its map",
                f"{wait:.2f} s ({g['first_map']} map)",
                "≤ 1 s",
                "",
            ),
        ]
    return rows


def scenario_rows(f: dict[str, Any]) -> list[Row]:
    rows = []
    for s in f["scenarios"]:
        total_in = s["input_tokens"] + s["cache_read_input_tokens"] + s["cache_creation_input_tokens"]
        rows.append(
            (
                f"scenario: {s['scenario']}",
                f"{s['api_calls']} API calls, {total_in:,} input tokens "
                f"({s['cache_read_input_tokens']:,} from cache), {s['output_tokens']:,} output",
                "",
                "",
            )
        )
    c = f["cache"]
    rows.append(
        (f"orchestrator input from the prompt cache, messages 2..{c['messages']}", f"{c['share']:.1%}", "≥ 80%", "")
    )
    return rows


def streaming_rows(f: dict[str, Any]) -> list[Row]:
    rows = []
    for key, r in f.items():
        if not isinstance(r, dict) or key == "cold_start":
            continue
        mode, words = key.rsplit("_", 1)
        rows.append(
            (
                f"streamed answer, {words} words ({mode}): first words after the model's first token",
                f"{r['first_words_after_first_token_s']:+.3f} s",
                "≤ +0.3 s" if mode != "off" else "(unstreamed)",
                "",
            )
        )
        rows.append(
            (
                f"streamed answer, {words} words ({mode}): persisted after the model's last token",
                f"{r['persisted_after_last_token_s']:+.3f} s",
                "≤ +1 s",
                "",
            )
        )
    rows.append(("streamed answers: refused Telegram calls", str(len(f["refused_telegram_calls"])), "0", ""))
    if isinstance(cold := f.get("cold_start"), dict):
        n = cold["starts"]
        for i, when in ((1, "sent as soon as the bot polls"), (2, "sent right after the first answer")):
            asked, frame = cold[f"asked_{i}"], cold[f"frame_{i}"]
            rows.append(
                (
                    f"cold start (bot as its own process), message {i} {when}: Claude asked after the message",
                    f"{asked['median']:+.3f} s (max {asked['max']:+.3f} s, {n} starts)",
                    "≤ +0.03 s",
                    "",
                )
            )
            rows.append(
                (
                    f"cold start, message {i}: first frame after the model's first token",
                    f"{frame['median']:+.3f} s (max {frame['max']:+.3f} s)",
                    "≤ +0.05 s",
                    "",
                )
            )
        rows.append(
            (
                "cold start: process start to first getUpdates (speech model and indexes deferred)",
                f"{cold['startup']['median']:.2f} s (max {cold['startup']['max']:.2f} s)",
                "",
                "",
            )
        )
    return rows


def baseline_rows(f: dict[str, Any]) -> list[Row]:
    rows = []
    for name in ("flask-sized", "express-sized"):
        if not isinstance(r := f.get(name), dict):
            continue
        rows.append(
            (
                f"{name} suite, worker done → verdict: first task vs second task on the same base (kept base run)",
                f"{r['first_wait_s']:.2f} s vs {r['second_wait_s']:.2f} s (base runs {r['first_base_runs']} vs "
                f"{r['second_base_runs']} of {r['rounds']}; test CPU {r['first_cpu_s']:.1f} s vs "
                f"{r['second_cpu_s']:.1f} s)",
                "second: no base run",
                f"{r['first_wait_s'] / r['second_wait_s']:.2f}× faster" if r["second_wait_s"] else "",
            )
        )
    return rows


def browser_rows(f: dict[str, Any]) -> list[Row]:
    rows = [
        (
            "frontend task start → browser's first page (dev server + chrome-devtools-mcp in the task sandbox)",
            f"{f['first_page_s']['median']:.2f} s (max {f['first_page_s']['max']:.2f} s)",
            "",
            "",
        ),
        ("memory of browser + dev server per task (PSS)", f"{f['pss_mib']['median']:.0f} MiB", "", ""),
    ]
    if f.get("cgroup_mib"):
        rows.append(("memory of the browser task's cgroup", f"{f['cgroup_mib']['median']:.0f} MiB", "", ""))
    return rows


def attempts_rows(f: dict[str, Any]) -> list[Row]:
    return [
        ("three attempts: wall, request to summary", f"{f['three_wall_s']:.2f} s", "≤ 1.15× one try", ""),
        ("one try (the slowest attempt's part)", f"{f['single_wall_s']:.2f} s", "", ""),
        ("three attempts over one try", f"{f['three_over_single']:.2f}×", "≤ 1.15×", ""),
        ("peak memory per attempt (bot + its processes)", f"{f['three_peak_mb_per_attempt']:.0f} MB", "", ""),
        ("git processes per attempt", f"{f['three_git_processes_per_attempt']:.1f}", "", ""),
    ]


def review_rows(f: dict[str, Any]) -> list[Row]:
    mb = 1024 * 1024
    return [
        (
            f"review page: one page of a {f['patch_bytes'] / mb:.1f} MB diff ({f['pages']} pages)",
            f"{ms(f['page_first_p50_ms'])} (max {ms(f['page_first_max_ms'])})",
            "",
            "",
        ),
        ("review page: one page's HTML", f"{f['page_html_bytes'] / 1024:.0f} KB", "", ""),
        ("review page: peak Python memory of one page", f"{f['page_peak_python_bytes'] / mb:.1f} MB", "", ""),
        ("long Diff as one HTML file (1 MB document)", ms(f["single_html_ms"]), "", ""),
    ]


BENCHES: list[tuple[str, Callable[[bool], list[str]], Callable[[dict[str, Any]], list[Row]]]] = [
    ("overhead.py", lambda quick: [], overhead_rows),
    ("background.py", lambda quick: [], background_rows),
    ("scenarios.py", lambda quick: [], scenario_rows),
    ("streaming.py", lambda quick: ["--repeats", "1", "--starts", "3"] if quick else [], streaming_rows),
    ("repo_map.py", lambda quick: ["--sizes", "2000"] if quick else ["--sympy"], repo_map_rows),
    ("voice.py", lambda quick: ["--sizes", "tiny", "--repeats", "1"] if quick else [], voice_rows),
    ("browser.py", lambda quick: ["--runs", "2"] if quick else [], browser_rows),
    ("baseline.py", lambda quick: ["--rounds", "1"] if quick else [], baseline_rows),
    ("attempts.py", lambda quick: [], attempts_rows),
    ("review_render.py", lambda quick: [], review_rows),
]


def machine() -> str:
    cpu = "?"
    try:
        cpu = next(
            line.split(":", 1)[1].strip()
            for line in Path("/proc/cpuinfo").read_text().splitlines()
            if line.startswith("model name")
        )
    except (OSError, StopIteration):
        pass
    return (
        f"{platform.node() or 'host'}: {os.cpu_count()} CPUs ({cpu}), Python {platform.python_version()}, "
        f"{platform.system()} {platform.release()}"
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="smaller voice and repo-map runs")
    parser.add_argument("--out", default=str(BENCH / "RESULTS.md"))
    parser.add_argument("--only", nargs="*", help="bench scripts to run (default: all)")
    args = parser.parse_args()
    rows: list[Row] = []
    appendix: list[str] = []
    failures = 0
    for script, extra, to_rows in BENCHES:
        if args.only and script not in args.only:
            continue
        print(f"running {script} …", flush=True)
        figures, output, seconds = run(script, *extra(args.quick))
        appendix += [f"### {script} ({seconds:.0f} s)", "", "```", output[-6000:], "```", ""]
        if figures is None:
            failures += 1
            rows.append((f"{script}", "FAILED (see its output below)", "", ""))
            continue
        try:
            rows += to_rows(figures)
        except (KeyError, TypeError, ValueError) as err:
            failures += 1
            rows.append((f"{script}", f"figures not understood ({err!r})", "", ""))
    lines = [
        "# Benchmark results",
        "",
        f"Generated by `bench/run_all.py{' --quick' if args.quick else ''}` on {dt.date.today().isoformat()}.",
        f"Machine: {machine()}.",
        "",
        "Telegram and Anthropic are the loopback fakes of `tests/fakes/` (zero latency unless a bench says otherwise);",
        "token counts are the fake server's estimates (≈ 4 characters a token, prompt caching simulated by prefix",
        "hashing). Whisper runs random weights with the real tiny/base sizes. Figures are medians or percentiles",
        "as each bench states; the machine may have been shared, so treat small differences as noise.",
        "",
        "| figure | value | target | ratio vs baseline |",
        "| --- | --- | --- | --- |",
        *[f"| {a} | {b} | {c} | {d} |" for a, b, c, d in rows],
        "",
        "## Output of each bench",
        "",
        *appendix,
    ]
    Path(args.out).write_text("\n".join(lines))
    print(f"wrote {args.out}" + (f" ({failures} bench(es) failed)" if failures else ""))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
