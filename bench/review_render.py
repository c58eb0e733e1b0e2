"""What the review page costs for a 5 MB diff: finding its files, rendering one page (parse, Pygments, template), and
the single HTML file the chat gets for Diff's capped 1 MB document; time and memory. A page's text goes through the
bot's secrets filter before it is drawn, as in the bot (the single file's figure includes masking the document).

The diff is made by git in a throwaway repository (250 Python files, 360 lines each changed: about 5.3 MB of patch).
Printed: the patch size, page count, p50/max milliseconds of one page (first and last) over RUNS runs, the page's
HTML size, and the peak Python memory of one page (tracemalloc) against the patch's size.

Run: .venv/bin/python bench/review_render.py [--json]
"""

from __future__ import annotations

import io
import json
import statistics
import subprocess
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from agents.core.secrets_filter import SecretsFilter  # noqa: E402
from agents.git.diff import DIFF_MAX_BYTES, DiffReport  # noqa: E402
from agents.review.pages import diff_page, standalone_html, templates  # noqa: E402

FILES, LINES, RUNS, PAGE_BYTES = 250, 360, 5, 100_000
SECRETS = SecretsFilter()  # the bot's filter (its token shapes; no added values): each page's text goes through it


def git(cwd: Path, *args: str) -> bytes:
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True).stdout


def five_mb_patch(root: Path) -> bytes:
    git(root, "init", "-q", "-b", "main")
    for n in range(FILES):
        (root / f"module_{n:03}.py").write_text("".join(f"value_{i} = compute({i}, 'x')\n" for i in range(LINES)))
    git(root, "add", "-A")
    git(root, "-c", "user.name=b", "-c", "user.email=b@b", "commit", "-qm", "base")
    for n in range(FILES):
        (root / f"module_{n:03}.py").write_text("".join(f"value_{i} = compute({i + 1}, 'y')\n" for i in range(LINES)))
    return git(root, "diff", "--no-renames")


def one_page(patch: bytes, page: int) -> tuple[float, int, int]:
    started = time.perf_counter()
    shown = diff_page(io.BytesIO(patch), DiffReport(), page, PAGE_BYTES, SECRETS.mask)
    html = templates().load("diff_page.html").generate(**shown.namespace())
    return (time.perf_counter() - started) * 1000, len(html), shown.page_count


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        patch = five_mb_patch(Path(tmp))
    one_page(patch, 0)  # warm: Pygments' lexers and the templates compiled once
    first = [one_page(patch, 0) for _ in range(RUNS)]
    last = [one_page(patch, 10**6) for _ in range(RUNS)]
    tracemalloc.start()
    one_page(patch, 0)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    capped = patch[:DIFF_MAX_BYTES]
    started = time.perf_counter()
    masked = SECRETS.mask_bytes(capped)  # as the Diff button does, before the page is drawn from it
    mask_ms = (time.perf_counter() - started) * 1000
    single = standalone_html("Task #1", "Diff of task #1", masked)
    single_ms = (time.perf_counter() - started) * 1000
    figures = {
        "patch_bytes": len(patch),
        "pages": first[0][2],
        "page_first_p50_ms": statistics.median(t for t, _, _ in first),
        "page_first_max_ms": max(t for t, _, _ in first),
        "page_last_p50_ms": statistics.median(t for t, _, _ in last),
        "page_html_bytes": first[0][1],
        "page_peak_python_bytes": peak,
        "single_html_ms": single_ms,
        "single_html_mask_ms": mask_ms,
        "single_html_bytes": len(single),
    }
    if "--json" in sys.argv:
        print(json.dumps(figures))
        return
    mb = 1024 * 1024
    print(f"patch: {len(patch) / mb:.1f} MB in {FILES} files -> {figures['pages']} pages of ~{PAGE_BYTES // 1000} KB")
    print(
        f"one page (index + parse + highlight + template): p50 {figures['page_first_p50_ms']:.0f} ms, "
        f"max {figures['page_first_max_ms']:.0f} ms; last page p50 {figures['page_last_p50_ms']:.0f} ms"
    )
    print(f"page HTML: {first[0][1] / 1024:.0f} KB; peak Python memory for one page: {peak / mb:.1f} MB")
    print(
        f"single HTML file of Diff's {DIFF_MAX_BYTES / mb:.1f} MB document: {single_ms:.0f} ms "
        f"(of which masking the document first: {mask_ms:.0f} ms), {len(single) / mb:.1f} MB"
    )


if __name__ == "__main__":
    main()
