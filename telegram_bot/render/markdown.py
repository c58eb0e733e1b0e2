"""`markdown_to_html` renders the subset of Markdown models write (emphasis, code, fences, links, headings, lists,
quotes, tables, strike) to Telegram's HTML parse mode; all text is escaped, code is never formatted, unclosed markers
stay literal. The result may exceed Telegram's limit: chunks.py cuts it.

Why one module over 400 lines: block and inline rendering are one pass with one set of escaping rules.
"""

from __future__ import annotations

import bisect
import html
import re


def _esc(text: str) -> str:
    return html.escape(text, quote=False)


def esc_attr(text: str) -> str:
    return html.escape(text, quote=True)


# ---------------------------------------------------------------------------------------------- Markdown → HTML

_FENCE_OPEN = re.compile(r"^[ \t]{0,3}(?P<fence>`{3,}|~{3,})[ \t]*(?P<info>.*?)[ \t]*$")
_LANGUAGE = re.compile(r"^[A-Za-z0-9_+#.-]{1,16}$")
_HEADING = re.compile(r"^[ \t]{0,3}(#{1,6})[ \t]+(?P<text>.*?)(?:[ \t]+#+)?[ \t]*$")
_RULE = re.compile(r"^[ \t]{0,3}([-*_])[ \t]*(?:\1[ \t]*){2,}$")
_BULLET = re.compile(r"^(?P<indent>[ \t]*)[-*+][ \t]+(?P<body>.*)$")
_NUMBERED = re.compile(r"^(?P<indent>[ \t]*)(?P<num>\d{1,9})(?P<delim>[.)])[ \t]+(?P<body>.*)$")
_QUOTE = re.compile(r"^[ \t]{0,3}>[ \t]?")
_TABLE_SEPARATOR = re.compile(r"^[ \t]*\|?[ \t]*:?-+:?[ \t]*(?:\|[ \t]*:?-+:?[ \t]*)*\|?[ \t]*$")


def markdown_to_html(md: str) -> str:
    """Render Markdown to Telegram HTML (the result may exceed Telegram's limit: see `split_html`)."""
    lines = md.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    return _render_blocks(lines, in_quote=False)


def _fence_open(line: str) -> tuple[str, str] | None:
    match = _FENCE_OPEN.match(line)
    if not match:
        return None
    fence, info = match.group("fence"), match.group("info")
    if fence[0] == "`" and "`" in info:
        return None
    return fence, info


def _is_fence_close(line: str, fence: str) -> bool:
    stripped = line.strip(" \t")
    return len(line) - len(line.lstrip(" \t")) <= 3 and len(stripped) >= len(fence) and set(stripped) == {fence[0]}


def _is_table_start(lines: list[str], i: int) -> bool:
    return (
        i + 1 < len(lines)
        and "|" in lines[i]
        and "|" in lines[i + 1]
        and "-" in lines[i + 1]
        and _TABLE_SEPARATOR.match(lines[i + 1]) is not None
    )


def _render_blocks(lines: list[str], *, in_quote: bool) -> str:
    """Block structure line by line; `in_quote` renders no pre blocks and no nested quotes (Telegram forbids them).

    Why long: one pass over the lines with a little state (paragraph, list, fence, quote) reads as the grammar it
    implements; helpers are the nested functions."""
    items: list[str] = []
    paragraph: list[str] = []

    def flush_paragraph() -> None:
        if paragraph:
            items.append(_render_inline("\n".join(paragraph)))
            paragraph.clear()

    def add_blank() -> None:
        if items and items[-1] != "":
            items.append("")

    i = 0
    n = len(lines)
    while i < n:
        line = lines[i]
        fence = _fence_open(line)
        if fence is not None:
            flush_paragraph()
            marker, info = fence
            body: list[str] = []
            i += 1
            while i < n and not _is_fence_close(lines[i], marker):
                body.append(lines[i])
                i += 1
            i += 1  # the closing fence (an unclosed fence runs to the end, as in CommonMark)
            language = info if _LANGUAGE.match(info) else None
            if info and language is None:
                body.insert(0, info)  # not a language name: keep it visible rather than lose it
            code = "\n".join(body)
            if in_quote:
                text = "\n".join(([language] if language else []) + ([code] if code else []))
                if text.strip():
                    items.append(_esc(text))
            elif language and code.strip():
                items.append(f'<pre><code class="language-{esc_attr(language)}">{_esc(code)}</code></pre>')
            elif language:
                items.append(_esc(language))  # an empty block: Telegram would drop it, keep its name visible
            elif code.strip():
                items.append(f"<pre>{_esc(code)}</pre>")
            continue
        if not line.strip():
            flush_paragraph()
            add_blank()
            i += 1
            continue
        if not in_quote and _QUOTE.match(line):
            flush_paragraph()
            quoted: list[str] = []
            while i < n and _QUOTE.match(lines[i]):
                inner = lines[i]
                while _QUOTE.match(inner):
                    inner = _QUOTE.sub("", inner, count=1)
                quoted.append(inner)
                i += 1
            body_html = _render_blocks(quoted, in_quote=True)
            if body_html.strip():
                items.append(f"<blockquote>{body_html}</blockquote>")
            continue
        if _RULE.match(line):
            flush_paragraph()
            items.append("──────────")
            i += 1
            continue
        heading = _HEADING.match(line)
        if heading:
            flush_paragraph()
            text = heading.group("text").strip()
            if text:
                items.append(f"<b>{_render_inline(text)}</b>")
            i += 1
            continue
        if not in_quote and _is_table_start(lines, i):
            flush_paragraph()
            table: list[str] = []
            while i < n and "|" in lines[i] and lines[i].strip():
                table.append(lines[i])
                i += 1
            items.append(f"<pre>{_esc(chr(10).join(table))}</pre>")
            continue
        bullet = _BULLET.match(line)
        if bullet:
            flush_paragraph()
            body_text = _render_inline(bullet.group("body"))
            items.append(f"{bullet.group('indent')}• {body_text}".rstrip())
            i += 1
            continue
        numbered = _NUMBERED.match(line)
        if numbered:
            flush_paragraph()
            prefix = f"{numbered.group('indent')}{numbered.group('num')}{numbered.group('delim')}"
            items.append(f"{prefix} {_render_inline(numbered.group('body'))}".rstrip())
            i += 1
            continue
        paragraph.append(line)
        i += 1
    flush_paragraph()
    while items and items[-1] == "":
        items.pop()
    return "\n".join(items)


# ---------------------------------------------------------------------------------------------- inline Markdown

_ESCAPABLE = frozenset("!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~")
_ALLOWED_LINK = re.compile(r"^(?:https?://|tg://|mailto:)", re.IGNORECASE)
_AUTOLINK = re.compile(r"<((?:https?://|tg://|mailto:)[^\s<>]*)>", re.IGNORECASE)
_BARE_URL = re.compile(r"https?://[^\s<>\[\]`\"]+", re.IGNORECASE)
_UNESCAPE = re.compile(r"\\([!-/:-@\[-`{-~])")
_PLAIN_RUN = re.compile(r"[^\\`\[<*_~hH]+")
_MAX_DEPTH = 6
_MAX_URL = 2048
_URL_TRAILING = ".,;:!?*_~'\""


def _render_inline(text: str) -> str:
    return _InlineRenderer(text).render(0, len(text), 0, in_link=False)


def _trim_bare_url(url: str) -> str:
    while url and (url[-1] in _URL_TRAILING or (url[-1] == ")" and url.count("(") < url.count(")"))):
        url = url[:-1]
    return url


class _InlineRenderer:
    """Emphasis, code spans and links of one paragraph; spans are matched recursively, so tags always nest."""

    def __init__(self, text: str) -> None:
        self.s = text
        self.brackets, self.parens = self._match_brackets()
        self.tick_runs: dict[int, list[int]] = {}
        for match in re.finditer(r"`+", text):
            self.tick_runs.setdefault(len(match.group()), []).append(match.start())
        self.no_closer: dict[tuple[str, int, int], int] = {}

    def _match_brackets(self) -> tuple[dict[int, int], dict[int, int]]:
        """Matching `[`→`]` and `(`→`)` positions (backslash-escaped ones excluded), found in one pass."""
        s, brackets, parens = self.s, {}, {}
        open_brackets: list[int] = []
        open_parens: list[int] = []
        i = 0
        while i < len(s):
            c = s[i]
            if c == "\\" and i + 1 < len(s) and s[i + 1] in _ESCAPABLE:
                i += 2
                continue
            if c == "[":
                open_brackets.append(i)
            elif c == "]" and open_brackets:
                brackets[open_brackets.pop()] = i
            elif c == "(":
                open_parens.append(i)
            elif c == ")" and open_parens:
                parens[open_parens.pop()] = i
            i += 1
        return brackets, parens

    def _run_length(self, i: int, end: int) -> int:
        s, c, j = self.s, self.s[i], i
        while j < end and s[j] == c:
            j += 1
        return j - i

    def _code_close(self, i: int, length: int, end: int) -> int | None:
        """Start of the backtick run closing the code span opened at `i`, if any before `end`."""
        starts = self.tick_runs.get(length, [])
        k = bisect.bisect_right(starts, i)
        if k < len(starts) and starts[k] + length <= end:
            return starts[k]
        return None

    def _match_link(self, i: int, end: int) -> tuple[int, int, str, int] | None:
        """`[label](url)` at `i`: (label start, label end, url, index after the link)."""
        s = self.s
        close = self.brackets.get(i)
        if close is None or close == i + 1 or close + 1 >= end or s[close + 1] != "(":
            return None
        opening = close + 1
        if opening + 1 < end and s[opening + 1] == "<":  # [label](<url>)
            stop = s.find(">", opening + 2, min(end, opening + 2 + _MAX_URL))
            if stop == -1 or stop + 1 >= end or s[stop + 1] != ")":
                return None
            url = s[opening + 2 : stop]
            after = stop + 2
        else:
            paren = self.parens.get(opening)
            if paren is None or paren >= end or paren - opening > _MAX_URL:
                return None
            url = _UNESCAPE.sub(r"\1", s[opening + 1 : paren].rstrip(" \t"))
            after = paren + 1
        if not url or "<" in url or any(ch.isspace() for ch in url):
            return None
        return i + 1, close, url, after

    def _can_open(self, i: int, length: int, end: int) -> bool:
        s, c = self.s, self.s[i]
        if c == "~":
            if length != 2:
                return False
        elif length > 3:
            return False
        if i + length >= end or s[i + length].isspace():
            return False
        return not (c == "_" and i > 0 and s[i - 1].isalnum())

    def _find_closer(self, i: int, length: int, end: int, in_link: bool) -> int | None:
        """Start of the `length` delimiter characters closing the span opened at `i`."""
        s, c = self.s, self.s[i]
        key = (c, length, end)
        j = i + length
        if key in self.no_closer and j >= self.no_closer[key]:
            return None
        while j < end:
            ch = s[j]
            if ch == "\\" and j + 1 < end and s[j + 1] in _ESCAPABLE:
                j += 2
                continue
            if ch == "`":
                run = self._run_length(j, end)
                close = self._code_close(j, run, end)
                j = close + run if close is not None else j + run
                continue
            if ch == "[" and not in_link:
                link = self._match_link(j, end)
                if link is not None:
                    j = link[3]
                    continue
            if ch == c:
                run = self._run_length(j, end)
                fits = run == 2 if c == "~" else run >= length
                after = j + run
                if (
                    fits
                    and not s[j - 1].isspace()
                    and not (c == "_" and after < end and s[after].isalnum())
                    and s[i + length : after - length].strip()
                ):
                    return after - length
                j = after
                continue
            j += 1
        self.no_closer[key] = i + length
        return None

    def render(self, start: int, end: int, depth: int, *, in_link: bool) -> str:
        """HTML of the inline Markdown in `s[start:end]` (`depth`: nesting so far, bounded; `in_link`: no nested
        links). Why long: one scanner loop over the inline grammar (code, links, emphasis pairs), each branch a few
        lines; split, the branches would share the cursor and output through more state."""
        s = self.s
        out: list[str] = []
        text: list[str] = []

        def flush() -> None:
            if text:
                out.append(_esc("".join(text)))
                text.clear()

        i = start
        while i < end:
            plain = _PLAIN_RUN.match(s, i, end)
            if plain:
                text.append(plain.group())
                i = plain.end()
                continue
            ch = s[i]
            if ch == "\\":
                if i + 1 < end and s[i + 1] in _ESCAPABLE:
                    text.append(s[i + 1])
                    i += 2
                else:
                    text.append(ch)
                    i += 1
                continue
            if ch == "`":
                run = self._run_length(i, end)
                close = self._code_close(i, run, end)
                if close is None:
                    text.append(s[i : i + run])
                    i += run
                    continue
                code = s[i + run : close]
                if len(code) >= 2 and code[0] == " " and code[-1] == " " and code.strip(" "):
                    code = code[1:-1]
                flush()
                out.append(_esc(code) if in_link else f"<code>{_esc(code)}</code>")
                i = close + run
                continue
            if ch == "[":
                link = None if in_link or depth >= _MAX_DEPTH else self._match_link(i, end)
                if link is None:
                    text.append(ch)
                    i += 1
                    continue
                label_start, label_end, url, after = link
                label = self.render(label_start, label_end, depth + 1, in_link=True)
                flush()
                if _ALLOWED_LINK.match(url):
                    out.append(f'<a href="{esc_attr(url)}">{label}</a>')
                else:
                    out.append(f"{label} ({_esc(url)})")
                i = after
                continue
            if ch == "<":
                auto = _AUTOLINK.match(s, i, end)
                if auto:
                    text.append(auto.group(1))
                    i = auto.end()
                else:
                    text.append(ch)
                    i += 1
                continue
            if ch in "hH":
                bare = _BARE_URL.match(s, i, end) if i == 0 or not s[i - 1].isalnum() else None
                url = _trim_bare_url(bare.group()) if bare else ""
                if url and len(url) > url.index("://") + 3:
                    text.append(url)  # verbatim: no emphasis inside URLs; Telegram links them itself
                    i += len(url)
                else:
                    text.append(ch)
                    i += 1
                continue
            # ch in "*_~"
            run = self._run_length(i, end)
            close = None
            if depth < _MAX_DEPTH and self._can_open(i, run, end):
                close = self._find_closer(i, run, end, in_link)
            if close is None:
                text.append(s[i : i + run])
                i += run
                continue
            inner = self.render(i + run, close, depth + 1, in_link=in_link)
            flush()
            if ch == "~":
                out.append(f"<s>{inner}</s>")
            elif run == 1:
                out.append(f"<i>{inner}</i>")
            elif run == 2:
                out.append(f"<b>{inner}</b>")
            else:
                out.append(f"<b><i>{inner}</i></b>")
            i = close + run
        flush()
        return "".join(out)
