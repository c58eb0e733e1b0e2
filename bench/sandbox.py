"""The cost of the sandbox: a trivial command and a small real test-suite run, with and without it.

All go through `agents.sandbox.shell.run_command`, the way worker commands and the bot's test runs do; the variants
alternate in the same run so load drift hits all alike. Figures: p50/p95 of `true` over 200 runs each, and the
median of 5 runs of a 20-test pytest suite each. Target: ≤ 15 ms added per command without network.

Variants of `true`: plain; sandboxed as a command outside a task (a pids cgroup of its own); sandboxed as a task's
command (joins the task's memory+pids cgroup, the task's disk budget watched); and that with the network
allowed (its own namespace, pasta attached under the public-only nftables rules; only where pasta is installed),
and with the network allowed for SANDBOX_NETWORK_DOMAINS (no pasta: the bot's proxy, reached through the rules'
helper, is its only way out; where the code has it). A task's command joins the task's
network namespace (`nsenter` + bwrap `--share-net`) where a command outside a task makes its own: "task" vs
"sandbox" is that cost, beside the cgroup; run the script of the commit before for today's "task" figure. Also: the
time to make a task's namespace (once per task, median of 20) and what holds it (no process: two open descriptors).

Run: .venv/bin/python bench/sandbox.py [--json] [--runs N]
"""

from __future__ import annotations

import asyncio
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import dataclasses

from agents.core.secrets_filter import SecretsFilter
from agents.sandbox.bwrap import SandboxProbe, SandboxSpec, spec_for
from agents.sandbox.shell import run_command
from agents.sandbox.task_cgroup import support
from agents.sandbox.task_limits import DiskBudget, TaskBounds

try:
    from agents.sandbox.task_net import TaskNet
except ImportError:  # before tasks had their own network namespace
    TaskNet = None
from agents.sandbox.user_net import available as pasta_available

PROBE = SandboxProbe()  # the bench's one bwrap probe, carried by its specs

try:
    from agents.sandbox.egress_rules import Egress
except ImportError:  # before the allowed network had domains
    Egress = None

RUNS = int(sys.argv[sys.argv.index("--runs") + 1]) if "--runs" in sys.argv else 200
SUITE_RUNS = 5
TARGET_MS = 15.0
SUITE = "\n".join(f"def test_{i}():\n    assert sum(range({i})) == {i * (i - 1) // 2}\n" for i in range(20))


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


async def timed(command: str, cwd: Path, sandbox: SandboxSpec | None, timeout: float = 120) -> float:
    started = time.perf_counter()
    result = await run_command(command, cwd=cwd, timeout=timeout, sandbox=sandbox)
    elapsed = (time.perf_counter() - started) * 1000
    if not result.ok:
        raise SystemExit(f"{command!r} failed ({'sandbox' if sandbox else 'plain'}): {result.output[-500:]}")
    return elapsed


async def main() -> dict:
    if reason := await PROBE.unavailable_reason():
        raise SystemExit(reason)
    with tempfile.TemporaryDirectory(prefix="agentlab-bench-sandbox-") as folder:
        root = Path(folder).resolve()
        (root / "test_suite.py").write_text(SUITE)
        bounds = TaskBounds("bench", 2 << 30, 512, DiskBudget(root, 1 << 30))
        command_only = spec_for(SecretsFilter(), PROBE, root)
        task = dataclasses.replace(command_only, task=bounds)
        variants: dict[str, SandboxSpec | None] = {"plain": None, "sandbox": command_only, "task": task}
        if pasta_available():
            variants["task+net"] = task.with_network(True)
        if Egress is not None:
            variants["task+domains"] = dataclasses.replace(task.with_network(True), egress=Egress(("pypi.org",)))
        times: dict[str, list[float]] = {name: [] for name in variants}
        for _ in range(5):  # warm-up
            for spec in variants.values():
                await timed("true", root, spec)
        for _ in range(RUNS):
            for name, spec in variants.items():
                times[name].append(await timed("true", root, spec))
        suite: dict[str, list[float]] = {"plain": [], "task": []}
        pytest = f"{sys.executable} -m pytest -q -p no:cacheprovider test_suite.py"
        for _ in range(SUITE_RUNS):
            for name in suite:
                suite[name].append(await timed(pytest, root, variants[name]))
        await bounds.close()
    figures: dict[str, float | str] = {"task_cgroup": support().description}
    if TaskNet is not None:
        made = []
        for _ in range(20):
            net = TaskNet()
            started = time.perf_counter()
            await net.ensure()
            made.append((time.perf_counter() - started) * 1000)
            net.close()
        figures["task_namespace_make_ms"] = statistics.median(made)
    for name, values in times.items():
        figures[f"{name}_p50_ms"] = percentile(values, 0.5)
        figures[f"{name}_p95_ms"] = percentile(values, 0.95)
    for name in times:
        if name != "plain":
            figures[f"{name}_added_p50_ms"] = figures[f"{name}_p50_ms"] - figures["plain_p50_ms"]
            figures[f"{name}_added_p95_ms"] = figures[f"{name}_p95_ms"] - figures["plain_p95_ms"]
    figures["suite_plain_ms"] = statistics.median(suite["plain"])
    figures["suite_task_ms"] = statistics.median(suite["task"])
    print(f"trivial command (`true`, {RUNS} runs each, interleaved); task cgroup: {figures['task_cgroup']}")
    for name in times:
        line = f"  {name:12} p50 {figures[f'{name}_p50_ms']:6.1f} ms   p95 {figures[f'{name}_p95_ms']:6.1f} ms"
        if name != "plain":
            line += (
                f"   added p50 {figures[f'{name}_added_p50_ms']:6.1f} ms  p95 {figures[f'{name}_added_p95_ms']:6.1f} ms"
            )
        print(line)
    added = figures["task_added_p50_ms"]
    print(
        f"  target ≤ {TARGET_MS:g} ms added at p50 for a task's command without network: "
        f"{'met' if added <= TARGET_MS else 'NOT met'}"
    )
    if "task+net" not in times:
        print("  (pasta is not installed: no figure for the network namespace)")
    if "task_namespace_make_ms" in figures:
        print(
            f"task network namespace: made in {figures['task_namespace_make_ms']:.1f} ms "
            "(once per task, median of 20); "
            "held by 2 open descriptors of the bot, no process (0 bytes of process memory)"
        )
    print(f"pytest, 20 tests (median of {SUITE_RUNS})")
    print(
        f"  plain {figures['suite_plain_ms']:.0f} ms · task sandbox {figures['suite_task_ms']:.0f} ms · "
        f"added {figures['suite_task_ms'] - figures['suite_plain_ms']:.0f} ms"
    )
    return figures


if __name__ == "__main__":
    result = asyncio.run(main())
    if "--json" in sys.argv[1:]:
        print(json.dumps({"bench": "sandbox", **result}))
