"""What the one output filter (agents/core/secrets_filter.py) costs per 64 KB of command output.

Three inputs of 64 KB: ordinary build/test output (no secret), source code, and output with a dozen secrets in it
(token shapes, an `http.extraHeader`, a private-key block, remembered values). Printed: p50/p95 milliseconds of
`mask` over 200 runs each, and how many `«masked»` each output came back with.

Run: .venv/bin/python bench/secret_filter.py [--json] [--against OLD_secrets_filter.py]

`--against` times another version of the module (e.g. `git show main:agents/core/secrets_filter.py > /tmp/old.py`)
interleaved with this one, in CPU time, so load on a shared machine hits both alike: p50 of each and the change.
"""

from __future__ import annotations

import importlib.util
import json
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, cast

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


BOT_VALUES = ["Zq7-NPMRC-VALUE-4471", "123456:BOT-TOKEN-VALUE-abc", "sk-ant-bot-key-value-123"]


def masker(module: Any) -> Callable[[str], str]:
    """The `mask` of a version of the module, with the bot's values added: a `SecretsFilter` object's, or (an older
    version, `--against`) the module-level registry's."""
    if hasattr(module, "SecretsFilter"):
        secrets = module.SecretsFilter()
        secrets.add(BOT_VALUES)
        return cast(Callable[[str], str], secrets.mask)
    module.remember(BOT_VALUES)
    return cast(Callable[[str], str], module.mask)


def main() -> None:
    mask = masker(secrets_filter)
    mask("warm up")  # compiles the detect-secrets regexes once
    figures: dict[str, dict[str, float]] = {}
    for name, text in inputs().items():
        times = []
        for _ in range(RUNS):
            started = time.perf_counter()
            masked = mask(text)
            times.append((time.perf_counter() - started) * 1000)
        times.sort()
        p50, p95 = statistics.median(times), times[int(len(times) * 0.95)]
        figures[name] = {"p50_ms": round(p50, 3), "p95_ms": round(p95, 3), "masked": masked.count("«masked»")}
        print(f"{name:>13}: p50 {p50:6.2f} ms  p95 {p95:6.2f} ms per 64 KB  ({figures[name]['masked']} masked)")
    if "--json" in sys.argv:
        print(json.dumps({"secret_filter": figures}))


def against(path: str) -> None:
    """This module against the one at `path`, interleaved, CPU time."""
    spec = importlib.util.spec_from_file_location("old_secrets_filter", path)
    assert spec is not None and spec.loader is not None, path
    old = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(old)
    versions = {"before": masker(old), "after": masker(secrets_filter)}
    for mask in versions.values():
        mask("warm up")
    for name, text in inputs().items():
        times: dict[str, list[float]] = {label: [] for label in versions}
        for _ in range(RUNS):
            for label, mask in versions.items():
                started = time.process_time()
                mask(text)
                times[label].append((time.process_time() - started) * 1000)
        before, after = (statistics.median(times[label]) for label in versions)
        print(
            f"{name:>13}: before {before:6.2f} ms  after {after:6.2f} ms CPU p50  ({(after / before - 1) * 100:+.1f}%)"
        )


if __name__ == "__main__":
    if "--against" in sys.argv:
        against(sys.argv[sys.argv.index("--against") + 1])
    else:
        main()
