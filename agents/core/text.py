"""Text helpers shared by every layer: a cheap token estimate, a head-and-tail cut, a code block nothing can close, and
`outside_text`, the one rendering of text the bot did not write."""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Sequence

from agents.core.secrets_filter import SecretsFilter


def estimate_tokens(text: str) -> int:
    """A cheap token estimate (characters / 4, rounded up) for budgets and history; never used for billing."""
    return -(-len(text) // 4)


def keep_head_and_tail(text: str, limit: int, what: str = "output") -> str:
    """`text` if it fits in `limit` characters, else its beginning and end with a note of what was left out."""
    if len(text) <= limit:
        return text
    head = limit * 2 // 3
    tail = limit - head
    cut = len(text) - head - tail
    return (
        f"{text[:head]}\n\n[… {cut:,} characters of this {what} left out ({len(text):,} in all); the beginning and "
        f"the end are shown. Narrow the call (offset/limit, a grep, a shorter command output) to see the middle. …]"
        f"\n\n{text[-tail:]}"
    )


def some_of(items: Sequence[str], limit: int, uncounted: int = 0) -> str:
    """The first `limit` of `items` joined with commas, and how many more there are ('a, b and 3 more');
    `uncounted`: more still, not in `items` (a list kept short)."""
    more = max(0, len(items) - limit) + uncounted
    return ", ".join(items[:limit]) + (f" and {more} more" if more > 0 else "")


def fenced(text: str) -> str:
    """`text` as a Markdown code block it cannot close: the fence is longer than any run of backticks inside it
    (CommonMark closes a fence only with one at least as long), so a command or file with ``` in it stays code."""
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    fence = "`" * max(3, longest + 1)
    return f"{fence}\n{text}\n{fence}"


def utf16_len(text: str) -> int:
    """Length in UTF-16 code units, the unit of Telegram's message limit (an emoji is two)."""
    return len(text.encode("utf-16-le", "surrogatepass")) // 2


def utf16_cut(text: str, limit: int) -> str:
    """The longest start of `text` that is at most `limit` UTF-16 code units (Telegram's unit: a caption's limit
    counts an emoji as two), never half a character."""
    if utf16_len(text) <= limit:
        return text
    units = 0
    for i, c in enumerate(text):
        units += 2 if ord(c) > 0xFFFF else 1
        if units > limit:
            return text[:i]
    return text


def visible(text: str) -> str:
    """Control and invisible formatting characters (a right-to-left override that reverses what the owner reads, a
    zero-width space, a carriage return) shown as `\\u202e` marks; newlines and tabs stay as they are."""
    return "".join(
        f"\\u{ord(c):04x}" if c not in "\n\t" and unicodedata.category(c) in ("Cc", "Cf", "Zl", "Zp") else c
        for c in text
    )


def literal_block(text: str) -> str:
    """`text` shown exactly as written inside the bot's Markdown, whatever it holds: invisible characters made
    visible, in a code block it cannot close. How a question to the owner quotes what will run."""
    return fenced(visible(text))


def secret_warning(text: str, secrets: SecretsFilter, noun: str = "command") -> str:
    """A line for beside a quoted `text` that holds what looks like a token or password to `secrets` (empty
    otherwise): a question to the owner shows it as it will run rather than masking it, which would hide what the
    owner allows."""
    if not secrets.looks_like_it_holds_a_secret(text):
        return ""
    return f"\n⚠️ This {noun} contains what looks like a token or password (shown as it will run, unmasked)."


def human_size(size: int) -> str:
    """`5 MB`, `812 KB`, `37 B` (binary units)."""
    if size < 1024:
        return f"{size} B"
    for unit, scale in (("GB", 1024**3), ("MB", 1024**2), ("KB", 1024)):
        if size >= scale:
            value = size / scale
            return f"{value:.0f} {unit}" if value >= 10 or value == int(value) else f"{value:.1f} {unit}"
    return f"{size} B"


_MARKDOWN_SPECIALS = re.compile(r"([\\`*_~\[\]()<>|#])")
# what starts a block at a line's start: a rule's or list item's dash, a `+` item, a numbered item's `1.`
_LINE_START_MARKERS = re.compile(r"(?m)^([ \t]*)(-|\+(?=[ \t]|$)|\d{1,9}(?=[.)](?:[ \t]|$)))")


_BOLD = re.compile(r"(\*\*|__)(?=\S)(.+?)(?<=\S)\1")
_HEADING_MARK = re.compile(r"^[ \t]{0,3}#{1,6}[ \t]+")


def quoted(markdown: str) -> str:
    """A worker's own Markdown (its report, a proposal's plan) as a quote inside a message of the bot's, set apart so
    no line of it reads as the bot's own: no bold and no headings (the bot's headline and its "Tests:" line are
    bold: a report's "✔ **Task #1 done**" is plain text in the quote), an unclosed code fence ends with the quote
    instead of swallowing the bot's lines after it, and no link hides its address behind a label (`[Merge](https://…)`
    stays literal text, the address shown). Lists, italics and code stay."""
    text = visible(markdown.replace("\r\n", "\n").replace("\r", "\n")).replace("](", "]\\(")
    lines = [_HEADING_MARK.sub("", _BOLD.sub(r"\2", line)) for line in text.split("\n")]
    return "\n".join(f"> {line}" for line in lines)


def outside_text(text: str, *, markdown: bool = True, one_line: bool = False) -> str:
    """Text the bot did not write (a GitHub title, comment or check name, a worker's question and its options, a
    member's name, schedule or note) as literal text, wherever it is shown: the one way such text reaches a person or
    a model's quote. Control and invisible formatting characters (bidi overrides that reverse what is read,
    zero-width characters, the U+2028 / U+2029 / U+0085 line separators that start a line outside a quote) become
    visible `\\u202e` marks; `one_line` shows a newline as ⏎. With `markdown` (the bot's chat messages, rendered
    from Markdown to Telegram HTML), every character that could start formatting, code or a link is backslash-escaped,
    so the text is shown as written and never becomes a link; without it (a model's quote, a button's label), the
    marks alone."""
    shown = visible(text.replace("\r\n", "\n").replace("\r", "\n"))
    if one_line:
        shown = " ⏎ ".join(line.strip() for line in shown.split("\n") if line.strip())
    if not markdown:
        return shown
    escaped = _MARKDOWN_SPECIALS.sub(r"\\\1", shown).replace("://", "\\://")  # `://`: no bare link either
    return _LINE_START_MARKERS.sub(_escape_marker, escaped)


def _escape_marker(match: re.Match[str]) -> str:
    indent, marker = match.group(1), match.group(2)
    return f"{indent}{marker}\\" if marker[0].isdigit() else f"{indent}\\{marker}"
