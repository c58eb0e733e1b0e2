"""What the one output filter (agents/core/secrets_filter.py) costs per 64 KB of command output.

Three inputs of 64 KB: ordinary build/test output (no secret), source code, and output with a dozen secrets in it
(token shapes, an `http.extraHeader`, a private-key block, remembered values). Printed: p50/p95 milliseconds of
`mask` over 200 runs each, and how many `«masked»` each output came back with.

Run: .venv/bin/python bench/secret_filter.py [--json]
"""

from __future__ import annotations

import json
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from agents.core import secrets_filter  # noqa: E402

SIZE = 64 * 1024
RUNS = 200


def _fill(line: str) -> str:
    return (line * (SIZE // len(line) + 1))[:SIZE]


def inputs() -> dict[str, str]:
    log = _fill("tests/test_calc.py::test_add PASSED [ 12%] compiled src/module_0042.c -> build/obj/module_0042.o\n")
    code = (ROOT / "agents" / "sandbox" / "bwrap.py").read_text()  # source code (the module moved from agents/tools)
    secrets = (
        "token sk-ant-api03-AbCdEfGhIjKlMnOpQrStUvWx and ghp_" + "a" * 36 + "\n"
        "\textraHeader = AUTHORIZATION: basic dXNlcjpwYXNzd29yZA==\n"
        "remote https://user:hunter2@github.com/o/r.git AKIAABCDEFGHIJKLMNOP\n"
        "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAA\n-----END OPENSSH PRIVATE KEY-----\n"
        "the npmrc value Zq7-NPMRC-VALUE-4471 again\n"
    )
    return {"build log": log, "source code": _fill(code), "with secrets": _fill(log[:2000] + secrets)}


def main() -> None:
    secrets_filter.remember(["Zq7-NPMRC-VALUE-4471", "123456:BOT-TOKEN-VALUE-abc", "sk-ant-bot-key-value-123"])
    secrets_filter.mask("warm up")  # compiles the detect-secrets regexes once
    figures: dict[str, dict[str, float]] = {}
    for name, text in inputs().items():
        times = []
        for _ in range(RUNS):
            started = time.perf_counter()
            masked = secrets_filter.mask(text)
            times.append((time.perf_counter() - started) * 1000)
        times.sort()
        p50, p95 = statistics.median(times), times[int(len(times) * 0.95)]
        figures[name] = {"p50_ms": round(p50, 3), "p95_ms": round(p95, 3), "masked": masked.count("«masked»")}
        print(f"{name:>13}: p50 {p50:6.2f} ms  p95 {p95:6.2f} ms per 64 KB  ({figures[name]['masked']} masked)")
    if "--json" in sys.argv:
        print(json.dumps({"secret_filter": figures}))


if __name__ == "__main__":
    main()
