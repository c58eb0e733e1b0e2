"""The fake Anthropic server in a process of its own, as the real API is: its work (JSON parsing, validation, the
prompt-cache simulation, the SSE framing of a streamed answer) does not share the measured bot's GIL, so a bench
measures the bot, not the bot plus its stand-in server competing for one interpreter.

    python bench/_fake_anthropic_process.py ANSWER   → prints its URL; serves until stdin closes; then prints the
                                                        server's own time per /v1/messages call as one JSON line,
                                                        overall and by request kind (streamed or not: agentlab's
                                                        requests stream, the bare bot's do not)
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.fakes import anthropic_server as claude_says  # noqa: E402
from tests.fakes.anthropic_server import FakeAnthropic  # noqa: E402


def main(answer: str) -> None:
    seconds: list[float] = []
    by_kind: dict[str, list[float]] = {"streamed": [], "not_streamed": []}
    with FakeAnthropic() as claude:
        claude.handler = lambda _body: claude_says.text(answer)
        answer_call = claude._answer

        def timed(path: str, raw: bytes, headers: dict[str, str]):  # noqa: ANN202 - the fake's own answer tuple
            started = time.perf_counter()
            try:
                return answer_call(path, raw, headers)
            finally:
                took = time.perf_counter() - started
                seconds.append(took)
                by_kind["streamed" if b'"stream":true' in raw.replace(b" ", b"") else "not_streamed"].append(took)

        claude._answer = timed
        print(claude.url, flush=True)
        sys.stdin.read()  # the bench closes it when done
    figures = {"calls": len(seconds), "mean_ms": 1000 * sum(seconds) / max(1, len(seconds))}
    for kind, took in by_kind.items():
        figures[f"{kind}_mean_ms"] = 1000 * sum(took) / len(took) if took else None
        figures[f"{kind}_p50_ms"] = 1000 * sorted(took)[len(took) // 2] if took else None
    print(json.dumps(figures), flush=True)


if __name__ == "__main__":
    main(sys.argv[1])
