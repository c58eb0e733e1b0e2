"""The frontend worker's browser: time from a task's start to the browser's first page, and the memory of
browser + dev server per task.

Each run is one task as TaskExecutor runs it: fresh TaskBounds (cgroup, network namespace), the page's server started
as a task service (`python3 -m http.server`, run_command(background=true)'s path), the browser started as the task's
MCP server `browser` (chrome-devtools-mcp + Chromium in the task's sandbox, egress forwarder beside it), then
`mcp__browser__new_page` on the server's page. Times: service up, browser's tools listed, first page loaded (all from
the task's start), and a screenshot. Memory after the first page: the proportional set size (PSS, shared pages split
between their users) of every process of the task's sandboxes, and the task cgroup's memory.current where the machine
gives tasks a cgroup (it also counts the page cache the task touched). Median (and max) over the runs.

Run: .venv/bin/python bench/browser.py [--runs 5] [--json]
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from agents.core.secrets_filter import SecretsFilter
from agents.sandbox.bwrap import SandboxProbe, spec_for  # noqa: E402
from agents.sandbox.services import TaskServices  # noqa: E402
from agents.sandbox.task_limits import TaskBounds  # noqa: E402
from agents.tools import browser  # noqa: E402
from agents.tools.mcp_tasks import McpTimeouts, Planned, connector, open_task_servers  # noqa: E402
from agents.tools.screenshot import find_chromium  # noqa: E402

PROBE = SandboxProbe()  # the bench's one bwrap probe, carried by its specs

PORT = 8177
PAGE = "<!doctype html><title>Bench</title><h1>Hello</h1><p>" + "text " * 200 + "</p>"


def children() -> dict[int, list[int]]:
    tree: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            tree.setdefault(int(fields[1]), []).append(int(entry.name))
    return tree


def pss_kib(roots: list[int]) -> tuple[int, int]:
    """PSS (KiB) summed over the process trees under `roots`, and how many processes that is."""
    tree, seen, stack, total = children(), set(), list(roots), 0
    while stack:
        pid = stack.pop()
        if pid in seen:
            continue
        seen.add(pid)
        stack += tree.get(pid, [])
        try:
            for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
                if line.startswith("Pss:"):
                    total += int(line.split()[1])
        except OSError:
            continue
    return total, len(seen)


async def one_run(install: browser.BrowserInstall) -> dict:
    with tempfile.TemporaryDirectory(prefix="agentlab-bench-browser-") as folder:
        root = Path(folder).resolve()
        (root / "index.html").write_text(PAGE)
        bounds = TaskBounds("bench-browser", 8 << 30, 1024, max_services=4)
        spec = dataclasses.replace(spec_for(SecretsFilter(), PROBE, root), task=bounds)
        try:
            started = time.perf_counter()
            said = await TaskServices.of(bounds).start(spec, f"python3 -m http.server {PORT} --bind 127.0.0.1", {})
            if "started" not in said:
                raise SystemExit(f"the page's server did not start: {said}")
            served = time.perf_counter()
            run = browser.BrowserRun(install, may_go_out=True)

            async def gate(tool: str, arguments: dict) -> None:
                return None

            async def pictures(found: list) -> None:
                return None

            plan = Planned(run.config, run.connector(spec, bounds, connector), gate)
            tools = {t.name: t for t in await open_task_servers([plan], bounds, pictures, McpTimeouts(120, 120))}
            if "mcp__browser__new_page" not in tools:
                raise SystemExit(f"the browser did not start: {[t.description for t in tools.values()]}")
            listed = time.perf_counter()
            page = await tools["mcp__browser__new_page"].handler(url=f"http://localhost:{PORT}/index.html")
            first_page = time.perf_counter()
            if page.is_error or "Bench" not in str(page.content):
                raise SystemExit(f"the page did not load: {page.content}")
            shot = await tools["mcp__browser__take_screenshot"].handler(pageId=2)
            screenshot = time.perf_counter()
            roots = [s.process.pid for s in TaskServices.of(bounds).running()]
            pss, processes = pss_kib(roots)
            cgroup = bounds.cgroup()
            current = None
            if cgroup is not None:
                name = "memory.current" if cgroup.version == 2 else "memory.usage_in_bytes"
                current = int((cgroup.memory / name).read_text()) // 1024
            return {
                "service_up_s": served - started,
                "browser_tools_s": listed - started,
                "first_page_s": first_page - started,
                "screenshot_s": screenshot - first_page,
                "screenshot_ok": not shot.is_error,
                "pss_mib": pss / 1024,
                "processes": processes,
                "cgroup_mib": None if current is None else current / 1024,
            }
        finally:
            await bounds.close()


async def main(runs: int) -> dict:
    if reason := await PROBE.unavailable_reason():
        raise SystemExit(reason)
    install, why = browser.find(None, find_chromium())
    if install is None:
        raise SystemExit(f"no browser: {why}")
    results = [await one_run(install) for _ in range(runs)]

    def summary(key: str) -> dict | None:
        values = [r[key] for r in results if r[key] is not None]
        return {"median": statistics.median(values), "max": max(values)} if values else None

    keys = ("service_up_s", "browser_tools_s", "first_page_s", "screenshot_s", "pss_mib", "cgroup_mib")
    return {"runs": runs, "browser": why, **{k: summary(k) for k in keys}, "processes": results[-1]["processes"]}


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    figures = asyncio.run(main(args.runs))
    if args.json:
        print(json.dumps(figures))
    else:
        print(f"{figures['browser']}, {figures['runs']} runs (median / max)")
        for key, label in (
            ("service_up_s", "task start → dev server up"),
            ("browser_tools_s", "task start → browser's tools listed"),
            ("first_page_s", "task start → browser's first page"),
            ("screenshot_s", "one screenshot after it"),
        ):
            print(f"  {label:40} {figures[key]['median']:.2f} s / {figures[key]['max']:.2f} s")
        print(
            f"  {'memory, PSS of browser + server':40} {figures['pss_mib']['median']:.0f} MiB / "
            f"{figures['pss_mib']['max']:.0f} MiB ({figures['processes']} processes)"
        )
        if figures["cgroup_mib"]:
            print(f"  {'memory, task cgroup (with page cache)':40} {figures['cgroup_mib']['median']:.0f} MiB")
