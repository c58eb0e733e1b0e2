"""What the review page shows, rendered by tornado templates (agents/review/templates/): a task's verdict, tests,
pictures and actions, and its diff a page at a time; the same diff renderer makes the single HTML file the chat gets
for a long diff when there is no review server.

The diff comes from the crew under the Diff button's roles (`BranchDecisions.write_diff`), streamed by git into a
temporary file; finding the files, parsing and highlighting one page run in a worker thread, never on the event loop.
"""

from __future__ import annotations

import asyncio
import functools
import io
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO, cast

from tornado.escape import xhtml_escape
from tornado.template import Loader

from agents.core.errors import ToolError
from agents.core.models import Caller, Task
from agents.core.secrets_filter import MASK, SecretsFilter
from agents.core.text import human_size
from agents.git.command import GitError
from agents.git.diff import DiffReport, masked_additions, masked_note
from agents.review import diff_view
from agents.review.diff_view import BIDI
from agents.store.database import Store
from agents.work.crew import Crew
from agents.work.pull_requests import PullRequests
from agents.work.task_outcome import MERGE_LABELS

HERE = Path(__file__).resolve().parent
TEMPLATES = HERE / "templates"
STATIC = HERE / "static"
PAGE_DIFF_MAX_BYTES = 64 * 1024 * 1024  # what git may write for the page; past it the patch is cut, and says so
JUDGED = ("broken", "target", "failed", "unknown", "flaky", "fixed", "pre-existing", "disappeared", "skipped")


def escape_shown(value: str | bytes) -> str:
    """How every `{{ }}` of the pages is written: HTML-escaped, and each bidi control as a visible ⟨U+202E⟩ (a file
    name, a test id or the worker's report written with one would show text in an order other than its own; plain
    text, so it is safe in an attribute too)."""
    escaped = xhtml_escape(value)
    if value.isascii():  # most of a page (numbers, code, ASCII names): no bidi control to look for
        return escaped
    return BIDI.sub(lambda m: f"⟨U+{ord(m.group()):04X}⟩", escaped)


@functools.cache
def templates() -> Loader:
    """The page templates, loaded once per process: a pure function of the files shipped with the code."""
    return Loader(str(TEMPLATES), autoescape="escape_shown", namespace={"escape_shown": escape_shown})


async def render(name: str, **namespace: Any) -> bytes:
    """A template filled in a worker thread: a page of highlighted diff is a megabyte of HTML to write."""
    return await asyncio.to_thread(lambda: templates().load(name).generate(**namespace))


@dataclass(frozen=True)
class DiffPage:
    """One page of a diff, ready for the templates."""

    page: int
    page_count: int
    files: list[diff_view.FileDiff]
    named_binary: list[str]
    named_huge: list[tuple[str, str]]
    truncated: bool
    split: bool = False  # side by side (a wide screen) rather than unified
    gone: str = ""  # why there is no diff to show (no branch, or it was discarded)

    def namespace(self) -> dict[str, Any]:
        return {
            "split": self.split,
            "gone": self.gone,
            "split_rows": diff_view.split_rows,
            "page": self.page,
            "page_count": self.page_count,
            "files": self.files,
            "named_binary": self.named_binary,
            "named_huge": self.named_huge,
            "truncated": self.truncated,
        }


def diff_page(
    diff: BinaryIO, report: DiffReport, page: int, page_bytes: int, mask: Callable[[str], str], split: bool = False
) -> DiffPage:
    """Page `page` (clamped to the pages there are) of the diff in `diff`, every text of it through `mask` (the bot's
    secrets filter, before any of it becomes HTML); CPU work: run it in a thread."""
    grouped = diff_view.pages(diff_view.index_files(diff), page_bytes)
    count = max(1, len(grouped))
    page = min(max(0, page), count - 1)
    files = list(diff_view.render_files(diff, grouped[page], mask)) if grouped else []
    last = page == count - 1  # the files git named but did not inline are listed once, after the last file
    return DiffPage(
        page,
        count,
        files,
        [mask(p) for p in report.binary] if last else [],
        [(mask(p), human_size(n)) for p, n in report.huge] if last else [],
        report.truncated and last,
        split,
    )


def already_masked(text: str) -> str:
    """The `mask` of a diff the caller masked whole already (`standalone_html`)."""
    return text


def page_css() -> str:
    return (STATIC / "review.css").read_text() + "\n" + diff_view.highlight_css()


def flag_masked(masked_diff: bytes, caption: str) -> tuple[bytes, str]:
    """Diff's document and caption, warned when added lines hold a mask (`masked_additions`): a line on top of the
    document names them, the caption says how many."""
    places = masked_additions(masked_diff.decode("utf-8", errors="replace"), MASK)
    if not places:
        return masked_diff, caption
    return (
        f"# ⚠ {masked_note(places)}\n".encode() + masked_diff,
        f"{caption}; ⚠ {len(places)} added line(s) masked: read them in the branch before merging",
    )


LONG_DIFF_LINES = 80  # a Diff longer than this also comes as one HTML page (without a review server)


def is_long(diff: bytes) -> bool:
    return diff.count(b"\n") > LONG_DIFF_LINES


def standalone_html(title: str, caption: str, masked_diff: bytes) -> bytes:
    """The whole diff (Diff's capped document, masked whole by the caller: `SecretsFilter.mask_bytes`) as one HTML
    file a phone opens, with no script and no outside asset: what the chat gets for a long diff when there is no
    review server. The document's `#` header (the stat, the files named but not shown) comes first, as written."""
    head, marker, _ = masked_diff.partition(diff_view.FILE_START)
    header = (head if marker else masked_diff).decode("utf-8", errors="replace")
    whole = diff_page(io.BytesIO(masked_diff), DiffReport(), 0, max(len(masked_diff), 1), already_masked)
    return (
        templates()
        .load("standalone.html")
        .generate(title=title, caption=caption, header=header.strip(), css=page_css(), **whole.namespace())
    )


class TaskPages:
    """The review page's parts for a task its viewer may see (the server checked that before)."""

    def __init__(
        self,
        store: Store,
        crew: Crew,
        pull_requests: PullRequests | None,
        page_bytes: int,
        secrets: SecretsFilter,
    ) -> None:
        """`secrets`: the bot's output filter. A page shows what the chat shows (a diff, the worker's report, the tests'
        names, captions), masked the same way, before any of it becomes HTML."""
        self.store, self.crew, self.pull_requests, self.page_bytes = store, crew, pull_requests, page_bytes
        self.secrets = secrets

    async def diff(self, caller: Caller, task: Task, page: int, split: bool = False) -> DiffPage:
        with tempfile.TemporaryFile() as out:  # git streams into the file; one page is read back from it
            _, report = await self.crew.branches.write_diff(caller, task.stored_id, out, max_bytes=PAGE_DIFF_MAX_BYTES)
            return await asyncio.to_thread(diff_page, out, report, page, self.page_bytes, self.secrets.mask, split)

    async def diff_html(self, caller: Caller, task: Task, page: int, split: bool = False) -> bytes:
        shown = await self.diff(caller, task, page, split)
        return await render("diff_page.html", **shown.namespace())

    async def actions(self, task: Task) -> list[tuple[str, str]]:
        """The summary's buttons, as the page offers them (the crew checks the roles when one is pressed)."""
        if task.status.is_active or not task.branch or not task.commit_sha:
            return []
        shown = [("merge", MERGE_LABELS.get(task.status, "Merge anyway")), ("discard", "Discard")]
        if self.pull_requests is not None and self.pull_requests.enabled and await self.pull_requests.offered_for(task):
            shown.append(("pr", "Open PR"))
        return shown

    async def task_html(self, caller: Caller, task: Task, page: int = 0, split: bool = False) -> bytes:
        stored = await self.store.reviews.review(task.stored_id) or {}
        review = cast(dict[str, Any], self.secrets.mask_json(stored))  # the same shape, each of its strings masked
        task = task.model_copy(update={"title": self.secrets.mask(task.title)})  # a title may be the model's words
        tests = review.get("tests", [])
        judged = sorted(
            (t for t in tests if t["outcome"] != "passed"),
            key=lambda t: JUDGED.index(t["outcome"]) if t["outcome"] in JUDGED else len(JUDGED),
        )
        pictures = [
            (kind, self.secrets.mask(caption)) for kind, caption in await self.store.reviews.captions(task.stored_id)
        ]
        try:
            shown = (
                await self.diff(caller, task, page, split)
                if task.branch and task.base_commit
                else DiffPage(0, 1, [], [], [], False, gone="This task has no branch, so no diff.")
            )
        except (ToolError, GitError) as err:  # discarded meanwhile: the verdict is still worth showing
            shown = DiffPage(0, 1, [], [], [], False, gone=f"No diff: {err}")
        return await render(
            "task.html",
            task=task,
            review=review,
            tests=judged,
            passed=[t for t in tests if t["outcome"] == "passed"],
            pictures=list(enumerate(pictures)),
            actions=await self.actions(task),
            **shown.namespace(),
        )

    async def picture(self, task: Task, index: int) -> bytes | None:
        return await self.store.reviews.picture(task.stored_id, index)
