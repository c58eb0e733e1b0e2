"""Benchmark of the repo map on synthetic Python repositories (default: 2,000 and 20,000 files) and on real checkouts.

For each size: full index build, refresh with nothing changed, refresh after one file changed, a map render for a
request (index already fresh) and with its own refresh, the map's size in tokens, and a symbol look-up.

For each real checkout given with `--checkout PATH` (any git work tree or folder; it is only read): full build,
no-change refresh, a task-style refresh of a copy of the index against a fresh `git worktree` of the checkout
(new mtimes, same bytes: nothing should be parsed), memory during the build, and the map for each `--request`
(printed whole, with the rank of every file named in `--expect`).

Memory of a build (Linux): the bench process's RSS before the build and its peak during it (the kernel's high-water
mark, reset just before the build through /proc/self/clear_refs), and the peak of the bench process and its child
processes together (a big build parses in one child process per core), sampled every 10 ms from /proc: the figure to
hold against a memory target, as the parse processes run at the same time as the bot's own storing. That peak is
given as RSS summed (the interpreter's and libraries' pages each process shares with the others are counted in
each: an upper bound) and as PSS summed (shared pages divided among their sharers: the memory the build really
holds), and each process's RSS in the sample of that peak. (Not getrusage's largest child: a child forked from
this process counts the parent's pages it shared until it exec'd, so that figure is this process's size, not a
parse process's.)

`--sympy` indexes a sympy-sized tree: a git repository made from the `sympy` package installed in this Python
(about 1,560 files, 26 MB of Python: the size of a sympy checkout's package), skipped with a note when sympy is not
installed. For it and for each checkout, also the wait of a task's first turn on a cold workspace: a fresh index,
a background build started as the bot does on first seeing a workspace, then `RepoMap.task_map` with the wait budget
of REPO_MAP_WAIT_SECONDS (default 1 s): the time until the first turn has its map, and whether that map was partial.

Busy: for each checkout, `--builds` more cold builds run beside a child process spinning on a core (the machine's
other work: on 2 cores the build has one left), their median printed beside the quiet one (`--no-busy` skips them).
The timed builds are refreshes awaited directly, as a map or a worker's look-up awaits one: their parse processes run
at this process's priority (a background build nobody waits on runs them at nice 10; agents/repo_map/parse_pool.py).
Each timed build also gives its CPU seconds (this process and its parse processes, from getrusage) and the run its
load average: on a shared machine the wall time stretches with other processes' load, the work done does not.
A task's map: the worktree's index seeded from the workspace's, then its map drawn, with this process's peak RSS
during the two (the high-water mark reset just before: what a task's first map costs the bot's process).

    .venv/bin/python bench/repo_map.py [--sizes 2000 20000] [--budget 2000] [--json]
    .venv/bin/python bench/repo_map.py --sizes --sympy
    .venv/bin/python bench/repo_map.py --sizes --checkout /tmp/flask --request "add a config option to disable the
        debug reloader" --expect src/flask/cli.py

`--json` prints one JSON object with every figure as the last line.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import importlib.util
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from agents.core.text import estimate_tokens
from agents.repo_map.maps import RepoMap
from agents.store.database import Store

FILES_PER_FOLDER = 100

MODULE = '''"""Synthetic module {n}: totals and records."""

from pkg_{dep_folder:04d}.mod_{dep:06d} import compute_{dep}
import os


def compute_{n}(values: list[int], scale: float = 1.0) -> float:
    """Sum the values, scaled."""
    return sum(values) * scale


async def fetch_{n}(key: str, *, retries: int = 3) -> dict[str, int]:
    return {{key: retries}}


class Record{n}:
    """A record."""

    def __init__(self, name: str, size: int = 0) -> None:
        self.name = name
        self.size = size

    def total(self, other: "Record{n}") -> int:
        return self.size + other.size + compute_{dep}([1, 2])


def _helper_{n}(x):
    return os.path.join(str(x), "y")
'''


def module_path(n: int) -> str:
    return f"pkg_{n // FILES_PER_FOLDER:04d}/mod_{n:06d}.py"


def generate(root: Path, count: int) -> None:
    """Write `count` small modules, each importing its predecessor, in folders of 100."""
    for folder in range(0, (count + FILES_PER_FOLDER - 1) // FILES_PER_FOLDER):
        (root / f"pkg_{folder:04d}").mkdir(parents=True)
        (root / f"pkg_{folder:04d}" / "__init__.py").write_text("")
    for n in range(count):
        dep = max(n - 1, 0)
        (root / module_path(n)).write_text(MODULE.format(n=n, dep=dep, dep_folder=dep // FILES_PER_FOLDER))


async def timed(label: str, figures: dict[str, float], awaitable):
    started = time.perf_counter()
    result = await awaitable
    figures[label] = round(time.perf_counter() - started, 3)
    return result


async def bench_size(count: int, budget: int) -> dict[str, float | int]:
    figures: dict[str, float | int] = {"files": count}
    with tempfile.TemporaryDirectory(prefix="repo_map_bench_") as tmp:
        root = Path(tmp) / "repo"
        started = time.perf_counter()
        generate(root, count)
        figures["generate_s"] = round(time.perf_counter() - started, 3)
        store = await Store.open(Path(tmp) / "state.sqlite")
        try:
            repo_map = RepoMap(store)
            before = reset_peak_rss_mb()
            build = await timed("full_build_s", figures, repo_map.refresh("bench", root))
            figures["build_peak_rss_growth_mb"] = round(process_peak_rss_mb() - before, 1)
            figures["indexed_files"] = build.files_seen
            unchanged = await timed("refresh_no_change_s", figures, repo_map.refresh("bench", root))
            figures["no_change_parsed"] = unchanged.parsed

            target = count // 2
            changed = root / module_path(target)
            changed.write_text(changed.read_text() + "\n\ndef added_later(flag: bool) -> bool:\n    return not flag\n")
            stat = changed.stat()
            os.utime(changed, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000))
            one = await timed("refresh_one_changed_s", figures, repo_map.refresh("bench", root))
            figures["one_changed_parsed"] = one.parsed

            request = f"fix the bug in {module_path(target)}: compute_{target} returns wrong totals"
            text = await timed("render_s", figures, repo_map.render("bench", root, request, budget, refresh=False))
            await timed("render_with_refresh_s", figures, repo_map.render("bench", root, request, budget))
            figures["map_tokens"] = estimate_tokens(text)
            figures["budget_tokens"] = budget
            figures["map_first_file_is_named"] = int(text.split("\n")[1].startswith(module_path(target)))
            await timed("find_symbols_s", figures, repo_map.find_symbols_by_name("bench", f"compute_{target}"))
        finally:
            await store.close()
    return figures


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def reset_peak_rss_mb() -> float:
    """This process's RSS now, its high-water mark reset to it where Linux allows (else the peak so far): a build's
    growth is then measured from here, not hidden under an earlier, bigger peak (a map of sympy drawn before)."""
    try:
        with open("/proc/self/clear_refs", "w") as clear:
            clear.write("5")
        return _status_mb("self", "VmRSS")
    except OSError:
        return peak_rss_mb()


def process_peak_rss_mb() -> float:
    """This process's peak RSS since the last reset (reset_peak_rss_mb), or since it started."""
    try:
        return _status_mb("self", "VmHWM")
    except OSError:
        return peak_rss_mb()


def _status_mb(pid: int | str, field: str, source: str = "status") -> float:
    with open(f"/proc/{pid}/{source}") as status:
        for line in status:
            if line.startswith(field + ":"):
                return int(line.split()[1]) / 1024
    return 0.0


def _rollup_mb(pid: int) -> dict[str, float]:
    """The Rss and Pss lines of a process's smaps_rollup, in MB."""
    with open(f"/proc/{pid}/smaps_rollup") as rollup:
        return {
            name.rstrip(":"): int(value) / 1024
            for name, value, *_ in (line.split() for line in rollup)
            if name in ("Rss:", "Pss:")
        }


def _descendants(pid: int) -> list[int]:
    found: list[int] = []
    try:
        threads = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return found
    for thread in threads:
        try:
            with open(f"/proc/{pid}/task/{thread}/children") as children:
                found += [int(child) for child in children.read().split()]
        except OSError:
            continue
    return found + [grandchild for child in found for grandchild in _descendants(child)]


class MemoryWatch:
    """This process's RSS before a block and its peak during it, and the peak RSS of this process and all its
    descendants together (sampled every 10 ms). Linux only: elsewhere every figure is None."""

    def __init__(self, wanted: bool = True) -> None:
        self.available = wanted and all(os.path.exists(f"/proc/self/{name}") for name in ("clear_refs", "smaps_rollup"))
        self.before_mb = self.peak_mb = self.tree_peak_mb = self.tree_peak_pss_mb = None
        self.tree_peak_each_mb: list[float] = []  # each process's RSS in the sample of the summed peak
        self._stop = threading.Event()

    def _tree_mb(self) -> tuple[float, float, list[float]]:
        """RSS and PSS (shared pages divided among the processes sharing them) of this process and its descendants,
        and each one's RSS (this process first). One read of smaps_rollup per process: the kernel walks the page
        tables for it, and the sampler shares the 2 cores with the build it measures."""
        rss = pss = 0.0
        each: list[float] = []
        for pid in [os.getpid(), *_descendants(os.getpid())]:
            try:
                fields = _rollup_mb(pid)
            except OSError:  # ended meanwhile
                continue
            rss += fields.get("Rss", 0.0)
            pss += fields.get("Pss", 0.0)
            each.append(round(fields.get("Rss", 0.0), 1))
        return rss, pss, each

    def _note(self) -> None:
        rss, pss, each = self._tree_mb()
        if rss > (self.tree_peak_mb or 0.0):
            self.tree_peak_mb, self.tree_peak_each_mb = rss, each
        self.tree_peak_pss_mb = max(self.tree_peak_pss_mb or 0.0, pss)

    def _sample(self) -> None:
        while not self._stop.is_set():
            self._note()
            self._stop.wait(0.01)

    def __enter__(self) -> MemoryWatch:
        if self.available:
            with open("/proc/self/clear_refs", "w") as clear:
                clear.write("5")  # resets the high-water mark (VmHWM) to the current RSS
            self.before_mb = _status_mb("self", "VmRSS")
            self._sampler = threading.Thread(target=self._sample, daemon=True)
            self._sampler.start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self.available:
            self._stop.set()
            self._sampler.join()
            self.peak_mb = _status_mb("self", "VmHWM")
            self._note()


def sympy_tree(target: Path) -> Path | None:
    """A git repository holding a copy of the installed sympy package (no caches), or None when it is not installed."""
    spec = importlib.util.find_spec("sympy")
    if spec is None or not spec.submodule_search_locations:
        return None
    shutil.copytree(
        next(iter(spec.submodule_search_locations)), target / "sympy", ignore=shutil.ignore_patterns("__pycache__")
    )
    for command in (["init", "-q"], ["add", "-A"], ["-c", "user.name=b", "-c", "user.email=b@b", "commit", "-qm", "s"]):
        subprocess.run(["git", "-C", str(target), *command], check=True, capture_output=True)
    return target


async def first_task_wait(checkout: Path, request: str, budget: int, wait_seconds: float) -> dict[str, object]:
    """A task arriving as the bot first sees the workspace: how long its first turn waits for the map."""
    with tempfile.TemporaryDirectory(prefix="repo_map_first_") as tmp:
        store = await Store.open(Path(tmp) / "state.sqlite")
        repo_map = RepoMap(store)
        try:
            repo_map.index_in_background("ws", checkout)  # start-up / create_workspace
            started = time.perf_counter()
            text = await repo_map.task_map("ws", checkout, request, budget, wait_seconds)
            waited = time.perf_counter() - started
            build = repo_map.building("ws")
            assert build is not None
            await build
            return {
                "first_turn_wait_s": round(waited, 3),
                "first_map": "partial" if "still being built" in text else "whole" if text else "none yet",
                "first_map_tokens": estimate_tokens(text),
                "cold_build_in_background_s": round(time.perf_counter() - started, 3),
            }
        finally:
            await repo_map.close()
            await store.close()


def fresh_worktree(checkout: Path, target: Path) -> Path | None:
    """A detached `git worktree` of the checkout's HEAD in `target` (every file with a new mtime), or None."""
    done = subprocess.run(
        ["git", "-C", str(checkout), "worktree", "add", "-q", "--detach", str(target)],
        check=False,
        capture_output=True,
        text=True,
    )
    return target if done.returncode == 0 else None


def remove_worktree(checkout: Path, target: Path) -> None:
    subprocess.run(
        ["git", "-C", str(checkout), "worktree", "remove", "--force", str(target)], check=False, capture_output=True
    )
    shutil.rmtree(target, ignore_errors=True)


def cpu_seconds() -> float:
    """CPU seconds (user + system) of this process and of its children that have ended (the parse processes, git)."""
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


async def timed_cold_build(checkout: Path) -> tuple[float, float]:
    """The wall seconds and CPU seconds (this process and its children together) of one cold build of the checkout
    into a fresh store, without the memory sampler. CPU seconds are the steadier figure on a shared machine: other
    processes' load stretches the wall time but not the work done."""
    with tempfile.TemporaryDirectory(prefix="repo_map_timed_") as tmp:
        store = await Store.open(Path(tmp) / "state.sqlite")
        try:
            cpu, started = cpu_seconds(), time.perf_counter()
            await RepoMap(store).refresh("real", checkout)
            return time.perf_counter() - started, cpu_seconds() - cpu
        finally:
            await store.close()


@contextlib.contextmanager
def cpu_burner() -> Iterator[None]:
    """Another process busy on a core for the block (a child spinning in pure Python): the build then has the other
    core(s) only, as on a machine where something else is running. It leads a session of its own, as the machine's
    other work does (where the kernel shares the CPU between sessions first, one in the bench's session would be
    weighed against the build's processes alone)."""
    burner = subprocess.Popen([sys.executable, "-c", "while True: pass"], start_new_session=True)
    try:
        yield
    finally:
        burner.kill()
        burner.wait()


async def bench_checkout(
    checkout: Path,
    requests: list[str],
    expect: list[str],
    budget: int,
    memory_watch: bool = True,
    builds: int = 3,
    busy: bool = True,
) -> dict[str, object]:
    figures: dict[str, object] = {"checkout": str(checkout)}
    # The build's memory: the first cold build in this process, with the memory sampler on (its time is printed
    # too, as "sampled"). The build's time: the median of `builds` more cold builds, each into a fresh store, with
    # nothing else running in this process (the sampler's reads of /proc take CPU from the cores the build runs on).
    with tempfile.TemporaryDirectory(prefix="repo_map_real_") as tmp:
        store = await Store.open(Path(tmp) / "state.sqlite")
        worktree = None
        try:
            repo_map = RepoMap(store)
            with MemoryWatch(memory_watch) as memory:
                build = await timed("full_build_sampled_s", figures, repo_map.refresh("real", checkout))
            runs = [await timed_cold_build(checkout) for _ in range(builds)]
            figures["full_build_runs_s"] = [round(wall, 3) for wall, _ in runs]
            figures["full_build_s"] = round(statistics.median(wall for wall, _ in runs), 3)
            figures["full_build_cpu_s"] = round(statistics.median(cpu for _, cpu in runs), 3)
            if busy:
                with cpu_burner():
                    busy_runs = [await timed_cold_build(checkout) for _ in range(builds)]
                figures["full_build_busy_runs_s"] = [round(wall, 3) for wall, _ in busy_runs]
                figures["full_build_busy_s"] = round(statistics.median(wall for wall, _ in busy_runs), 3)
                figures["full_build_busy_cpu_s"] = round(statistics.median(cpu for _, cpu in busy_runs), 3)
            figures["load_average"] = [round(load, 2) for load in os.getloadavg()]
            if memory.available:
                figures["build_rss_before_mb"] = round(memory.before_mb, 1)
                figures["build_peak_rss_mb"] = round(memory.peak_mb, 1)
                figures["build_peak_rss_with_children_mb"] = round(memory.tree_peak_mb, 1)
                figures["build_peak_pss_with_children_mb"] = round(memory.tree_peak_pss_mb, 1)
                figures["build_peak_rss_each_mb"] = memory.tree_peak_each_mb
            figures["indexed_files"] = build.files_seen
            await timed("refresh_no_change_s", figures, repo_map.refresh("real", checkout))
            worktree = await asyncio.to_thread(fresh_worktree, checkout, Path(tmp) / "task-worktree")
            if worktree is not None:
                # A task's map as the bot draws it: the worktree's index seeded from the workspace's, then the map.
                with MemoryWatch(memory_watch) as task_memory:
                    seeded = await timed(
                        "task_refresh_seeded_s", figures, repo_map.refresh("real@task-1", worktree, seed_from="real")
                    )
                    await timed(
                        "task_render_s",
                        figures,
                        repo_map.render("real@task-1", worktree, (requests or ["a task"])[0], budget, refresh=False),
                    )
                figures["task_refresh_parsed"] = seeded.parsed
                if task_memory.available:
                    figures["task_map_rss_before_mb"] = round(task_memory.before_mb, 1)
                    figures["task_map_peak_rss_mb"] = round(task_memory.peak_mb, 1)
                    figures["task_map_peak_pss_with_children_mb"] = round(task_memory.tree_peak_pss_mb, 1)
            maps: dict[str, object] = {}
            for request in requests:
                started = time.perf_counter()
                text = await repo_map.render("real", checkout, request, budget, refresh=False)
                shown = [
                    line.split(" — ")[0]
                    for line in text.split("\n")
                    if line and not line.startswith((" ", "…", "Repository map of "))
                ]
                maps[request] = {
                    "render_s": round(time.perf_counter() - started, 3),
                    "tokens": estimate_tokens(text),
                    "ranks": {path: (shown.index(path) + 1 if path in shown else None) for path in expect},
                    "map": text,
                }
            figures["maps"] = maps
            figures["peak_rss_mb"] = round(peak_rss_mb(), 1)
        finally:
            await store.close()
            if worktree is not None:
                await asyncio.to_thread(remove_worktree, checkout, worktree)
    return figures


TARGET_BUILD_S, TARGET_MEMORY_MB, TARGET_WAIT_S = 2.0, 100.0, 1.0  # targets: a sympy-sized tree, 2 cores


def print_sympy_targets(figures: dict[str, object]) -> None:
    """The sympy-sized tree against the repo map's targets (memory: the build's peak, bench process and parse processes
    together, as PSS, the pages they hold; their RSS summed counts the interpreter's shared pages once per process)."""

    def verdict(value: object, target: float) -> str:
        return "-" if not isinstance(value, int | float) else "met" if value <= target else "not met"

    build, wait, busy = figures["full_build_s"], figures["first_turn_wait_s"], figures.get("full_build_busy_s")
    task_peak = figures.get("task_map_peak_rss_mb")
    pss, rss = figures.get("build_peak_pss_with_children_mb"), figures.get("build_peak_rss_with_children_mb")
    print(
        f"sympy-sized tree, the targets on {os.cpu_count()} cores: cold build {build}s (≤ {TARGET_BUILD_S:g}s:"
        f" {verdict(build, TARGET_BUILD_S)}) · its memory peak {pss} MB PSS (≤ {TARGET_MEMORY_MB:g} MB:"
        f" {verdict(pss, TARGET_MEMORY_MB)}; {rss} MB as RSS summed: {verdict(rss, TARGET_MEMORY_MB)})"
        f" · first task's wait {wait}s (≤ {TARGET_WAIT_S:g}s: {verdict(wait, TARGET_WAIT_S)})"
        f" · busy cold build {busy}s (≤ {TARGET_BUILD_S:g}s: {verdict(busy, TARGET_BUILD_S)})"
        f" · a task's seeded map peak {task_peak} MB RSS (≤ {TARGET_MEMORY_MB:g} MB:"
        f" {verdict(task_peak, TARGET_MEMORY_MB)})",
        flush=True,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument(
        "--sizes",
        type=int,
        nargs="*",
        default=[2000, 20000],
        help="synthetic repository sizes in files (none: real checkouts only)",
    )
    parser.add_argument("--budget", type=int, default=2000, help="map budget in tokens")
    parser.add_argument("--json", action="store_true", help="print one JSON object of figures as the last line")
    parser.add_argument("--checkout", type=Path, action="append", default=[], help="a real checkout to index")
    parser.add_argument("--request", action="append", default=[], help="a request to draw the map of a checkout for")
    parser.add_argument("--expect", action="append", default=[], help="a file whose rank in each map is printed")
    parser.add_argument("--sympy", action="store_true", help="also index a copy of the installed sympy package")
    parser.add_argument("--wait", type=float, default=1.0, help="a task's wait budget on a cold build (seconds)")
    parser.add_argument(
        "--no-memory", action="store_true", help="no memory sampling (the build after the timed ones runs without it)"
    )
    parser.add_argument("--builds", type=int, default=3, help="timed cold builds per checkout (their median is shown)")
    parser.add_argument(
        "--no-busy", action="store_true", help="no timed cold builds beside a CPU-burning process (quiet ones only)"
    )
    args = parser.parse_args()
    sympy_dir = None
    if args.sympy:
        sympy_dir = sympy_tree(Path(tempfile.mkdtemp(prefix="repo_map_sympy_")))
        if sympy_dir is None:
            print("sympy is not installed here: no sympy-sized tree", flush=True)
        else:
            args.checkout.append(sympy_dir)
            args.request = args.request or ["fix the bug in solveset for trigonometric equations"]
            args.expect = args.expect or ["sympy/solvers/solveset.py"]
    results: dict[str, dict[str, float | int]] = {}
    real: dict[str, dict[str, object]] = {}
    for checkout in args.checkout:
        figures = asyncio.run(
            bench_checkout(
                checkout.resolve(),
                args.request,
                args.expect,
                args.budget,
                not args.no_memory,
                max(1, args.builds),
                not args.no_busy,
            )
        )
        first = asyncio.run(
            first_task_wait(checkout.resolve(), (args.request or ["a task"])[0], args.budget, args.wait)
        )
        figures.update(first)
        real[str(checkout)] = figures
        for request, drawn in figures["maps"].items():
            print(
                f"\n--- map for {request!r}: {drawn['tokens']} tokens, render {drawn['render_s']:.3f}s,"
                f" ranks {drawn['ranks']}\n{drawn['map']}\n",
                flush=True,
            )
        print(
            f"{checkout}: {figures['indexed_files']} files · full build {figures['full_build_s']:.2f}s"
            f" (median of {len(figures['full_build_runs_s'])} cold builds: {figures['full_build_runs_s']} s;"
            f" {figures['full_build_sampled_s']:.2f}s with the memory sampler on)"
            f" · busy (another process spinning on a core): {figures.get('full_build_busy_s', '-')}s"
            f" (median of {figures.get('full_build_busy_runs_s', '-')} s)"
            f" · CPU seconds of a cold build (this process and its parse processes, median): quiet"
            f" {figures['full_build_cpu_s']} s, busy {figures.get('full_build_busy_cpu_s', '-')} s"
            f" (load average {figures['load_average']})"
            f" (memory: bench process {figures.get('build_rss_before_mb', '-')} MB before the build, peak"
            f" {figures.get('build_peak_rss_mb', '-')} MB during it; with its parse processes, peak"
            f" {figures.get('build_peak_rss_with_children_mb', '-')} MB RSS together"
            f" (each: {figures.get('build_peak_rss_each_mb', '-')})"
            f" ({figures.get('build_peak_pss_with_children_mb', '-')} MB PSS: shared pages counted once), sampled"
            " every 10 ms;"
            f" {figures['peak_rss_mb']} MB peak of the"
            " bench process over the whole run)"
            f" · no-change refresh {figures['refresh_no_change_s']:.3f}s"
            f" · task worktree refresh from the workspace index {figures.get('task_refresh_seeded_s', '-')}s"
            f" ({figures.get('task_refresh_parsed', '-')} parsed), then its map {figures.get('task_render_s', '-')}s;"
            f" memory of the task's map: bench process {figures.get('task_map_rss_before_mb', '-')} MB before,"
            f" peak {figures.get('task_map_peak_rss_mb', '-')} MB RSS"
            f" ({figures.get('task_map_peak_pss_with_children_mb', '-')} MB PSS with its children)"
            f" · first task on the cold workspace: map after {figures['first_turn_wait_s']:.2f}s"
            f" ({figures['first_map']}, {figures['first_map_tokens']} tokens;"
            f" wait budget {args.wait:g}s), build done in the background after"
            f" {figures['cold_build_in_background_s']}s",
            flush=True,
        )
    for count in args.sizes:
        figures = asyncio.run(bench_size(count, args.budget))
        results[str(count)] = figures
        print(
            f"{count:>6} files: generate {figures['generate_s']:.2f}s · full build {figures['full_build_s']:.2f}s"
            f" (bench process peak RSS +{figures['build_peak_rss_growth_mb']} MB; its parse processes not counted)"
            f" · no-change refresh {figures['refresh_no_change_s']:.3f}s"
            f" · one-file refresh {figures['refresh_one_changed_s']:.3f}s ({figures['one_changed_parsed']} parsed)"
            f" · render {figures['render_s']:.3f}s (with refresh {figures['render_with_refresh_s']:.3f}s)"
            f" · map {figures['map_tokens']} / {figures['budget_tokens']} tokens"
            f" · find_symbols {figures['find_symbols_s']:.3f}s",
            flush=True,
        )
    if sympy_dir is not None and str(sympy_dir) in real:
        print_sympy_targets(real[str(sympy_dir)])
    if sympy_dir is not None:
        shutil.rmtree(sympy_dir.parent if sympy_dir.parent.name.startswith("repo_map_sympy_") else sympy_dir, True)
    if args.json:
        print(json.dumps({"repo_map": results, **({"repo_map_real": real} if real else {})}))


if __name__ == "__main__":
    main()
