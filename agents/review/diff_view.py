"""A unified diff as a person reads it on a phone: split per file, paged, each line highlighted (Pygments, at render
time, nothing loaded from elsewhere) with its old and new line numbers, the unchanged lines between hunks collapsed
into one row, binary and huge files named, and Unicode bidi controls shown as visible marks instead of being obeyed.

`index_files` finds where each file's part of the patch starts (one pass over the file git wrote, one line in memory
at a time); `pages` groups them into pages of about `page_bytes`; `render_files` parses and highlights one page's
files. A 5 MB diff is never parsed, highlighted or sent at once.
"""

from __future__ import annotations

import functools
import html
import itertools
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import BinaryIO

from pygments import highlight
from pygments.formatters import HtmlFormatter
from pygments.lexer import Lexer
from pygments.lexers import TextLexer, get_lexer_for_filename
from pygments.util import ClassNotFound

from agents.core.secrets_filter import MASK
from agents.git.diff import masked_additions, masked_note

LINE_SHOWN_CHARS = 2_000  # a longer line (minified code) is cut, and says so
HIGHLIGHT_BUDGET = 120_000  # characters of patch coloured per render; the files past it are shown plain (Pygments
# colours ~100 KB of Python a second on a busy core: bench/review_render.py), so no page or file takes long
CONTEXT_SHOWN = 3  # unchanged lines kept around a change inside a hunk; longer runs fold into one row

# Unicode's bidirectional controls (Trojan Source): each is shown as a visible mark, never applied to the text
BIDI = re.compile("[\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")
FILE_START = b"diff --git "


@dataclass
class Line:
    kind: str  # "add", "del", "ctx", "note" (\\ No newline at end of file), "fold" (unchanged lines hidden)
    old: int | None
    new: int | None
    html: str  # highlighted, escaped, bidi marks visible
    folded: int = 0  # for "fold": how many lines


@dataclass
class FileDiff:
    path: str
    change: str = "modified"  # added, deleted, modified, mode, binary
    added: int = 0
    removed: int = 0
    lines: list[Line] = field(default_factory=list)
    note: str = ""


@dataclass(frozen=True)
class SplitRow:
    """A row of the side-by-side view: the old side's line and the new side's (None where a side has none)."""

    kind: str  # "ctx", "change", "fold", "note"
    left: Line | None
    right: Line | None


def split_rows(lines: list[Line]) -> list[SplitRow]:
    """The unified lines side by side: unchanged lines on both sides, a run of removed lines beside the added lines
    that follow it, folds and notes across."""
    rows: list[SplitRow] = []
    i = 0
    while i < len(lines):
        line = lines[i]
        if line.kind == "ctx":
            rows.append(SplitRow("ctx", line, line))
            i += 1
            continue
        if line.kind in ("fold", "note"):
            rows.append(SplitRow(line.kind, line, None))
            i += 1
            continue
        removed, added = [], []
        while i < len(lines) and lines[i].kind == "del":
            removed.append(lines[i])
            i += 1
        while i < len(lines) and lines[i].kind == "add":
            added.append(lines[i])
            i += 1
        rows += [SplitRow("change", a, b) for a, b in itertools.zip_longest(removed, added)]
    return rows


@dataclass(frozen=True)
class FileSpan:
    """Where one file's part of the patch lies in the diff file."""

    path: str
    start: int
    length: int


def index_files(diff: BinaryIO) -> list[FileSpan]:
    """Every file's part of the patch (offset and length), read line by line."""
    diff.seek(0)
    spans: list[FileSpan] = []
    offset, current, current_start = 0, "", -1
    for raw in diff:
        if raw.startswith(FILE_START):
            if current_start >= 0:
                spans.append(FileSpan(current, current_start, offset - current_start))
            current, current_start = _path_of(raw), offset
        offset += len(raw)
    if current_start >= 0:
        spans.append(FileSpan(current, current_start, offset - current_start))
    return spans


def pages(spans: list[FileSpan], page_bytes: int) -> list[list[FileSpan]]:
    """Consecutive files, about `page_bytes` a page; a file bigger than that has a page of its own."""
    grouped: list[list[FileSpan]] = []
    size = 0
    for span in spans:
        if not grouped or (size + span.length > page_bytes and grouped[-1]):
            grouped.append([])
            size = 0
        grouped[-1].append(span)
        size += span.length
    return grouped


def read_span(diff: BinaryIO, span: FileSpan) -> str:
    diff.seek(span.start)
    return diff.read(span.length).decode("utf-8", errors="replace")


def _path_of(header: bytes) -> str:
    text = header.decode("utf-8", errors="replace").rstrip("\n")[len("diff --git ") :]
    # `a/x b/x`: both sides name the same path (--no-renames), so the second half is the path
    half = len(text) // 2
    if text[half : half + 1] == " " and text[:half].removeprefix("a/") == text[half + 1 :].removeprefix("b/"):
        return text[half + 1 :].removeprefix("b/")
    return text.rpartition(" b/")[2] or text


# rows of one file shown on the page: a patch of 100,000 short lines is a few hundred KB, but as rows of HTML it would
# be megabytes a phone must draw, and seconds of the bot's CPU to highlight
MAX_FILE_ROWS = 4000
HUNK = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@(.*)$")


def parse_file(text: str, colour: bool = True) -> FileDiff:
    """One file's part of a unified diff (`diff --git` … hunks) as lines with numbers, highlighted unless `colour`
    is False (then escaped only)."""
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    fd = FileDiff(_path_of(lines[0].encode()) if lines else "?")
    raw: list[tuple[str, int | None, int | None, str]] = []  # kind, old, new, text
    old = new = 0
    last_old_end = 0  # the old side's last line number shown, to count the unchanged lines skipped
    in_hunk = False
    for line in lines[1:]:
        match = HUNK.match(line) if line.startswith("@@") else None
        if match:
            old, new = int(match.group(1)), int(match.group(3))
            gap = old - 1 - last_old_end if old else 0
            if gap > 0:
                raw.append(("fold", None, None, str(gap)))
            in_hunk = True
            continue
        if not in_hunk:
            if line.startswith("new file mode"):
                fd.change = "added"
            elif line.startswith("deleted file mode"):
                fd.change = "deleted"
            elif line.startswith("Binary files") or line.startswith("GIT binary patch"):
                fd.change, fd.note = "binary", "binary file: not shown"
            elif line.startswith("old mode") and fd.change == "modified":
                fd.change = "mode"
            continue
        sign, body = line[:1], line[1:]
        if sign == "+":
            raw.append(("add", None, new, body))
            new += 1
            fd.added += 1
        elif sign == "-":
            raw.append(("del", old, None, body))
            last_old_end = old
            old += 1
            fd.removed += 1
        elif sign == " ":
            raw.append(("ctx", old, new, body))
            last_old_end = old
            old, new = old + 1, new + 1
        elif sign == "\\":
            raw.append(("note", None, None, body.strip()))
        elif line.startswith("Binary files"):
            fd.change, fd.note = "binary", "binary file: not shown"
    shown = _folded(raw)
    if len(shown) > MAX_FILE_ROWS:  # the page stays a page: the rest is in Diff's document
        left_out = len(shown) - MAX_FILE_ROWS
        shown = [*shown[:MAX_FILE_ROWS], ("note", None, None, f"{left_out:,} more rows not shown here: Diff has them")]
    fd.lines = _highlighted(fd.path, shown, colour)
    return fd


def _folded(raw: list[tuple[str, int | None, int | None, str]]) -> list[tuple[str, int | None, int | None, str]]:
    """Runs of unchanged lines longer than twice CONTEXT_SHOWN keep CONTEXT_SHOWN on each side, the rest one row."""
    out: list[tuple[str, int | None, int | None, str]] = []
    i = 0
    while i < len(raw):
        if raw[i][0] != "ctx":
            out.append(raw[i])
            i += 1
            continue
        j = i
        while j < len(raw) and raw[j][0] == "ctx":
            j += 1
        run = raw[i:j]
        if len(run) > 2 * CONTEXT_SHOWN + 1:
            out += run[:CONTEXT_SHOWN]
            out.append(("fold", None, None, str(len(run) - 2 * CONTEXT_SHOWN)))
            out += run[-CONTEXT_SHOWN:]
        else:
            out += run
        i = j
    return out


@functools.lru_cache(maxsize=256)
def _lexer(path: str) -> Lexer:
    try:
        return get_lexer_for_filename(path, stripnl=False, ensurenl=False, stripall=False)
    except ClassNotFound:
        return TextLexer(stripnl=False, ensurenl=False)


_FORMATTER = HtmlFormatter(nowrap=True)


def _colour(lexer: Lexer | None, texts: list[str]) -> list[str]:
    """Each text line highlighted as part of one block (a string's or comment's colour carries across lines)."""
    if not texts:
        return []
    shown = [t if len(t) <= LINE_SHOWN_CHARS else t[:LINE_SHOWN_CHARS] for t in texts]
    block = "\n".join(shown)
    if lexer is not None:
        out = highlight(block, lexer, _FORMATTER).split("\n")
        if out and out[-1] == "" and len(out) == len(shown) + 1:
            out.pop()
        if len(out) == len(shown):
            return [_cut_note(h, t) for h, t in zip(out, texts, strict=True)]
    return [_cut_note(html.escape(s), t) for s, t in zip(shown, texts, strict=True)]


def _cut_note(coloured: str, original: str) -> str:
    if len(original) <= LINE_SHOWN_CHARS:
        return coloured
    return coloured + f'<span class="cut"> … {len(original) - LINE_SHOWN_CHARS} more characters</span>'


def show_bidi(coloured: str) -> str:
    """Bidi controls as visible marks (⟨U+202E⟩): the text reads as stored, in its stored order."""
    return BIDI.sub(lambda m: f'<span class="bidi" title="bidi control">⟨U+{ord(m.group()):04X}⟩</span>', coloured)


def _highlighted(path: str, raw: list[tuple[str, int | None, int | None, str]], colour: bool = True) -> list[Line]:
    """The old side (context and removed lines) and the new side (context and added lines) are each highlighted as a
    whole, so a line is coloured with what came before it on its own side."""
    lexer = _lexer(path) if colour else None
    old_idx = [i for i, r in enumerate(raw) if r[0] in ("ctx", "del")]
    new_idx = [i for i, r in enumerate(raw) if r[0] == "add"]
    coloured: dict[int, str] = {}
    for idx in (old_idx, new_idx):
        for i, h in zip(idx, _colour(lexer, [raw[i][3] for i in idx]), strict=True):
            coloured[i] = h
    lines = []
    for i, (kind, old, new, text) in enumerate(raw):
        if kind == "fold":
            n = int(text)
            lines.append(Line("fold", None, None, f"{n} unchanged line{'s' if n != 1 else ''}", folded=n))
        elif kind == "note":
            lines.append(Line("note", None, None, html.escape(text)))
        else:
            lines.append(Line(kind, old, new, show_bidi(coloured.get(i, html.escape(text)))))
    return lines


def render_files(
    diff: BinaryIO, spans: list[FileSpan], mask: Callable[[str], str], budget: int = HIGHLIGHT_BUDGET
) -> Iterator[FileDiff]:
    """The files of `spans`, coloured while the highlighting budget lasts, then plain (each says which). Each file's
    patch goes through `mask` (the bot's secrets filter) before it is parsed: once highlighted, a token is cut into
    spans and `&` and quotes are escaped, where no filter finds it any more. A file whose added lines hold a mask says
    so first (`masked_additions`: code can hide behind a credential-shaped line)."""
    for span in spans:
        colour = span.length <= budget
        budget -= span.length if colour else 0
        shown = mask(read_span(diff, span))
        fd = parse_file(shown, colour)
        if not colour and fd.lines:
            fd.note = fd.note or "shown without colours (a long diff: the colours stop after the first files)"
        if warning := masked_note(masked_additions(shown, MASK)):
            fd.note = f"⚠ {warning}" + (f"; {fd.note}" if fd.note else "")
        yield fd


@functools.cache
def highlight_css() -> str:
    """Pygments' colours for light and dark pages, scoped under `.light` and `.dark` (the page picks one from
    Telegram's theme)."""
    light = HtmlFormatter(style="default").get_style_defs(".light .code")
    dark = HtmlFormatter(style="monokai").get_style_defs(".dark .code")
    return f"{light}\n{dark}\n"
