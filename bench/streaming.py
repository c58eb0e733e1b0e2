"""Streamed answers: time to the first visible words and to the persisted answer, against the model's own tokens.

The real bot polls the fake Telegram server; the fake Anthropic server plays a model that takes 0.5 s to its first
token and 50 ms per word (`--per-word`), for answers of 50, 200 and 1,000 words (Markdown with a code block and a
link). For each answer, from the fake's own clocks (time.monotonic() in one process):
- first words: the first draft frame with text (private chat) or the first preview message (group), minus the
  moment the fake wrote the answer's first token; target ≤ 0.3 s;
- persisted: the final answer message stored by the fake, minus the moment it wrote the last token; target ≤ 1 s;
- refused: Bot API calls answered with an error (getUpdates aside: PTB's shutdown poll meets the previous long
  poll with a 409, which has nothing to do with answers); target 0.
A row with streaming off (STREAM_ANSWERS=false) shows what the user waited before.

Run: .venv/bin/python bench/streaming.py [--json] [--repeats N]
"""

from __future__ import annotations

import asyncio
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench._harness import (  # noqa: E402
    agentlab_settings,
    emit_json,
    machine,
    quiet_logging,
    running_fakes,
    temp_workspace,
    wait_indexing_idle,
)
from telegram_bot.app import stop_polling  # noqa: E402
from telegram_bot.render.chunks import render_chunks
from tests.conftest import USER_ID, start_bot  # noqa: E402
from tests.fakes import anthropic_server as claude_says  # noqa: E402
from tests.fakes.telegram_html import parse_telegram_html  # noqa: E402
from tests.fakes.telegram_server import FakeTelegram  # noqa: E402

FIRST_TOKEN = 0.5
PER_WORD = 0.05  # the case the streaming targets were set on: a 200-word answer is a 10 s stream
SIZES = (50, 200, 1000)
GROUP_ID = -100777
TARGET_FIRST = 0.3
TARGET_PERSISTED = 1.0


def answer_of(words: int) -> str:
    """Markdown of about `words` words: prose with `code`, a link, a fenced block with < and &, a list."""
    prose = (
        "The **parser** reads each line, checks `a < b && c`, and keeps [the spec](https://example.com/?a=1&b=2) "
        "in mind while it works through the file step by step. "
    ).split(" ")
    out: list[str] = []
    while len(out) < words:
        out += prose
        if len(out) % 120 < len(prose):
            out += ["\n\n```python\nif a < b and c & d:\n    print('<ok>')\n```\n\n-", "one", "item\n\n"]
    return " ".join(out[:words]).strip()


def _wait_stored(tg: FakeTelegram, predicate, timeout: float = 120.0) -> float:
    """Block (in a thread) on the fake's condition until predicate holds; the moment it did."""
    tg.wait_for(predicate, timeout=timeout)
    return time.monotonic()


async def one_answer(tg: FakeTelegram, claude, words: int, chat_id: int, asked: int) -> dict[str, float]:
    text = answer_of(words)
    claude.script({**claude_says.text(text, delay=FIRST_TOKEN), "token_delay": PER_WORD})
    expected = sum(len(parse_telegram_html(chunk)) for chunk in render_chunks(text))  # the answer as stored
    before_messages = len(tg.messages(chat_id))
    before_drafts = len(tg.drafts)
    before_requests = len(claude.requests)
    if chat_id == USER_ID:
        tg.send_text(USER_ID, f"question {asked}")
    else:
        tg.send_text(USER_ID, f"@test_bot question {asked}", chat_id=chat_id)

    def first_visible() -> bool:
        if chat_id == USER_ID and any(d.text for d in tg.drafts[before_drafts:]):
            return True
        return len(tg.messages(chat_id)) > before_messages

    def persisted() -> bool:  # the answer's messages hold (about) all of its text; a group's preview is not one
        new = tg.messages(chat_id)[before_messages:]
        finals = new[1:] if chat_id != USER_ID else new
        return sum(len(m.text or "") for m in finals) >= expected

    seen_first = asyncio.create_task(asyncio.to_thread(_wait_stored, tg, first_visible))
    seen_final = asyncio.create_task(asyncio.to_thread(_wait_stored, tg, persisted))
    first_at, final_at = await seen_first, await seen_final
    request = claude.requests[before_requests]
    draft_times = [d.at for d in tg.drafts[before_drafts:] if d.text]
    new = tg.messages(chat_id)[before_messages:]
    frames = len(draft_times) if chat_id == USER_ID else len(new[0].edits) if new else 0
    if chat_id == USER_ID and draft_times:
        first_at = min(first_at, draft_times[0])
    await asyncio.sleep(0.3)  # let the preview be deleted before the next question
    return {
        "first": first_at - request.first_token_at,
        "persisted": final_at - request.last_token_at,
        "generation": request.last_token_at - request.first_token_at,
        "frames": frames,
    }


async def run(repeats: int) -> dict[str, object]:
    rows: dict[str, object] = {}
    refused: list[str] = []
    for label, chat_id, overrides in (
        ("private", USER_ID, {}),
        ("group", GROUP_ID, {}),
        ("off", USER_ID, {"stream_answers": False}),
    ):
        with running_fakes() as (tg, claude), temp_workspace() as tmp:  # fresh fakes: one bot polls each
            harness = await start_bot(agentlab_settings(tg, claude, tmp, **overrides), tg, claude)
            await wait_indexing_idle(harness.runtime)
            asked = 0
            try:
                for words in SIZES if label == "private" else (200,):
                    samples = []
                    for _ in range(repeats):
                        asked += 1
                        samples.append(await one_answer(tg, claude, words, chat_id, asked))
                    rows[f"{label}_{words}"] = {
                        "first_words_after_first_token_s": round(max(s["first"] for s in samples), 3),
                        "persisted_after_last_token_s": round(max(s["persisted"] for s in samples), 3),
                        "generation_s": round(sum(s["generation"] for s in samples) / len(samples), 3),
                        "frames": round(sum(s["frames"] for s in samples) / len(samples), 1),
                    }
            finally:
                await stop_polling(harness.app)
            # getUpdates 409: PTB's last poll at shutdown meets the previous long poll; not an answer's call
            refused += [
                f"{label}: {r.method} {r.error_code} {r.description}" for r in tg.refused if r.method != "getUpdates"
            ]
    rows["refused_telegram_calls"] = refused
    return rows


def main() -> None:
    import argparse

    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--per-word", type=float, default=0.05, help="seconds between the model's words")
    args = parser.parse_args()
    global PER_WORD
    PER_WORD = args.per_word
    quiet_logging()
    figures = asyncio.run(run(args.repeats))
    print(
        f"streamed answers: model {FIRST_TOKEN} s to first token, {PER_WORD * 1000:.0f} ms a word; worst of "
        f"{args.repeats} per row; {machine()['nproc']} CPUs"
    )
    print(f"{'row':<14}{'first words':>14}{'persisted':>12}{'generation':>12}{'frames':>8}")
    ok = True
    for key, row in figures.items():
        if not isinstance(row, dict):
            continue
        first, final = row["first_words_after_first_token_s"], row["persisted_after_last_token_s"]
        streaming = not key.startswith("off")
        ok &= (first <= TARGET_FIRST and final <= TARGET_PERSISTED) if streaming else True
        print(f"{key:<14}{first:>+13.3f}s{final:>+11.3f}s{row['generation_s']:>11.2f}s{row['frames']:>8}")
    refused = figures["refused_telegram_calls"]
    print(f"refused Telegram calls: {len(refused)} {refused if refused else ''}")
    print(
        f"targets: first words ≤ first token + {TARGET_FIRST} s, persisted ≤ last token + {TARGET_PERSISTED} s, "
        f"no refused call → {'MET' if ok and not refused else 'NOT MET'}"
    )
    if args.json:
        emit_json(figures)


if __name__ == "__main__":
    threading.current_thread().name = "bench"
    main()
