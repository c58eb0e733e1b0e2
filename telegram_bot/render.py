"""The model's Markdown as Telegram HTML, split into messages Telegram always accepts (pure functions, no I/O).

* `markdown_to_html` renders the subset of Markdown models write (emphasis, code, fences, links, headings,
  lists, quotes, tables, strike) to Telegram's HTML parse mode; all text is escaped, code is never formatted,
  unclosed markers stay literal.
* `split_html` cuts any HTML into chunks of at most `limit` UTF-16 units of *source* (an upper bound of what
  Telegram counts), preferring paragraph, then line, then word boundaries; a span cut in two is closed at the
  end of one chunk and reopened at the start of the next. It also sanitises its input (unknown tags and stray
  `<`, `>`, `&` become text, bad nesting is flattened), so every chunk parses.
* `split_plain` is the plain-text fallback; `summarize_for_document` the short text sent with a long answer.

Why one module over 400 lines: the Markdown renderer and the HTML-aware splitter share one tokenizer of Telegram's
HTML subset.
"""

from __future__ import annotations

import bisect
import html
import re
import unicodedata
from dataclasses import dataclass

TELEGRAM_LIMIT = 4096
MIN_LIMIT = 16
_MIN_FILL = 0.3  # a preferred boundary is used only if the chunk is at least this full

# ---------------------------------------------------------------------------------------------- helpers


def utf16_len(text: str) -> int:
    """Length in UTF-16 code units, the unit of Telegram's message limit."""
    return len(text.encode("utf-16-le", "surrogatepass")) // 2


def _esc(text: str) -> str:
    return html.escape(text, quote=False)


def _esc_attr(text: str) -> str:
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
    """Block structure line by line; `in_quote` renders no pre blocks and no nested quotes (Telegram forbids them)."""
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
                items.append(f'<pre><code class="language-{_esc_attr(language)}">{_esc(code)}</code></pre>')
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
                    out.append(f'<a href="{_esc_attr(url)}">{label}</a>')
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


# ---------------------------------------------------------------------------------------------- HTML tokens

_TEXT, _START, _END = 0, 1, 2
_SUPPORTED_TAGS = frozenset(
    {
        "a",
        "b",
        "strong",
        "i",
        "em",
        "u",
        "ins",
        "s",
        "strike",
        "del",
        "span",
        "tg-spoiler",
        "code",
        "pre",
        "blockquote",
        "tg-emoji",
    }
)
_BLOCK_TAGS = frozenset({"pre", "blockquote"})
_NOT_IN_LINK = frozenset({"a", "code", "pre", "blockquote", "tg-emoji"})
_TAG = re.compile(
    r"""<(/?)([A-Za-z][A-Za-z0-9-]*)((?:\s+[A-Za-z_:][-\w:.]*(?:\s*=\s*(?:"[^"]*"|'[^']*'|[^\s"'=<>`]+))?)*)\s*(/?)>"""
)
_ATTRIBUTE = re.compile(r"""([A-Za-z_:][-\w:.]*)(?:\s*=\s*(?:"([^"]*)"|'([^']*)'|([^\s"'=<>`]+)))?""")
_ENTITY = re.compile(r"&(#[0-9]{1,7}|#[xX][0-9a-fA-F]{1,6}|[A-Za-z][A-Za-z0-9]{1,31});")
_CANONICAL = {"<": "&lt;", ">": "&gt;", "&": "&amp;"}


@dataclass(slots=True)
class _Token:
    kind: int
    src: str  # canonical HTML source
    name: str = ""  # tag name for start/end tags
    char: str = ""  # decoded character for text
    size: int = 0  # UTF-16 length of `src`
    close_size: int = 0  # UTF-16 length of the matching end tag (start tags)

    @staticmethod
    def text(char: str) -> _Token:
        src = _CANONICAL.get(char, char)
        return _Token(_TEXT, src, char=char, size=utf16_len(src))

    @staticmethod
    def start(name: str, src: str) -> _Token:
        return _Token(_START, src, name=name, size=utf16_len(src), close_size=len(name) + 3)

    @staticmethod
    def end(name: str) -> _Token:
        return _Token(_END, f"</{name}>", name=name, size=len(name) + 3)


def _decode_entity(body: str) -> str | None:
    if body.startswith("#"):
        code = int(body[2:], 16) if body[1:2] in ("x", "X") else int(body[1:])
        if code == 0 or code > 0x10FFFF or 0xD800 <= code <= 0xDFFF:
            return None
        return chr(code)
    decoded = html.unescape(f"&{body};")
    return decoded if len(decoded) == 1 else None


def _canonical_start_tag(name: str, attributes: str) -> str | None:
    """A start tag rebuilt from its known attributes, or None if Telegram would refuse it."""
    values: dict[str, str] = {}
    for match in _ATTRIBUTE.finditer(attributes):
        value = next((v for v in match.group(2, 3, 4) if v is not None), "")
        values[match.group(1).lower()] = html.unescape(value)
    if name == "a":
        href = values.get("href")
        return f'<a href="{_esc_attr(href)}">' if href else "<a>"
    if name == "code" and values.get("class", "").startswith("language-"):
        return f'<code class="{_esc_attr(values["class"])}">'
    if name == "span":
        return '<span class="tg-spoiler">' if values.get("class") == "tg-spoiler" else None
    if name == "tg-emoji":
        emoji_id = values.get("emoji-id", "")
        valid = emoji_id.isascii() and emoji_id.isdigit() and int(emoji_id) != 0
        return f'<tg-emoji emoji-id="{emoji_id}">' if valid else None
    if name == "blockquote" and "expandable" in values:
        return "<blockquote expandable>"
    return f"<{name}>"


def _nesting_allowed(name: str, stack: list[_Token]) -> bool:
    for depth, parent in enumerate(reversed(stack)):
        if parent.name == "code":
            return False
        if parent.name == "pre" and not (name == "code" and depth == 0):
            return False
        if parent.name in ("a", "tg-emoji") and name in _NOT_IN_LINK:
            return False
        if parent.name == "blockquote" and name == "blockquote":
            return False
    return True


@dataclass
class _OpenElement:
    token: _Token | None  # None: the tag was dropped, its end tag is dropped too
    name: str
    cost: int  # UTF-16 cost of reopening and closing every kept element up to this one
    href: str | None = None
    label_from: int = 0


def _tokenize_html(source: str, limit: int) -> list[_Token]:
    """Canonical, balanced tokens; elements whose nesting cost would not leave room in a chunk are dropped."""
    tokens: list[_Token] = []
    stack: list[_OpenElement] = []
    budget = limit - 5  # room for at least one escaped character after reopening the tags

    def kept() -> list[_Token]:
        return [e.token for e in stack if e.token is not None]

    def close_top() -> None:
        element = stack.pop()
        if element.token is None:
            if element.href:
                label = "".join(t.char for t in tokens[element.label_from :] if t.kind == _TEXT)
                if label.strip() != element.href:
                    tokens.extend(_Token.text(c) for c in f" ({element.href})")
            return
        tokens.append(_Token.end(element.name))

    i, n = 0, len(source)
    while i < n:
        c = source[i]
        if c == "<":
            match = _TAG.match(source, i)
            name = match.group(2).lower() if match else ""
            if match and name in _SUPPORTED_TAGS:
                i = match.end()
                if match.group(1):  # end tag
                    if any(e.name == name for e in stack):
                        while stack[-1].name != name:
                            close_top()
                        close_top()
                    continue
                if match.group(4):  # self-closing: an empty element
                    continue
                src = _canonical_start_tag(name, match.group(3))
                parent_cost = stack[-1].cost if stack else 0
                token = None
                if src is not None and _nesting_allowed(name, kept()):
                    token = _Token.start(name, src)
                    if parent_cost + token.size + token.close_size > budget:
                        token = None
                href = None
                if name == "a" and token is None and src and 'href="' in src:
                    href = html.unescape(src[len('<a href="') : -2])
                cost = parent_cost + (token.size + token.close_size if token else 0)
                stack.append(_OpenElement(token, name, cost, href, len(tokens)))
                if token is not None:
                    tokens.append(token)
                continue
            tokens.append(_Token.text(c))
            i += 1
        elif c == "&":
            match = _ENTITY.match(source, i)
            decoded = _decode_entity(match.group(1)) if match else None
            if decoded is None:
                tokens.append(_Token.text("&"))
                i += 1
            else:
                tokens.append(_Token.text(decoded))
                i = match.end()
        else:
            tokens.append(_Token.text(c))
            i += 1
    while stack:
        close_top()
    return tokens


def _is_space(token: _Token) -> bool:
    return token.kind == _TEXT and token.char.isspace()


# ---------------------------------------------------------------------------------------------- splitting HTML

_PARAGRAPH, _LINE, _SPACE, _HARD = 0, 1, 2, 3


def split_html(html_text: str, limit: int = TELEGRAM_LIMIT) -> list[str]:
    """Chunks of at most `limit` UTF-16 units of HTML source, each valid and non-blank for Telegram."""
    if limit < MIN_LIMIT:
        raise ValueError(f"limit must be at least {MIN_LIMIT}")
    return _HtmlSplitter(_tokenize_html(html_text, limit), limit).chunks()


class _HtmlSplitter:
    def __init__(self, tokens: list[_Token], limit: int) -> None:
        self.tokens = tokens
        self.limit = limit

    def _quality(self, k: int) -> int:
        tokens, token = self.tokens, self.tokens[k]
        if token.char != "\n":
            return _SPACE
        before = tokens[k - 1] if k > 0 else None
        after = tokens[k + 1] if k + 1 < len(tokens) else None
        if (
            (before is not None and before.kind == _TEXT and before.char == "\n")
            or (before is not None and before.kind == _END and before.name in _BLOCK_TAGS)
            or (after is not None and after.kind == _START and after.name in _BLOCK_TAGS)
        ):
            return _PARAGRAPH
        return _LINE

    def _skip_space(self, pos: int, after_newline: bool) -> int:
        """Skip whitespace at a chunk start, keeping the indentation of the first line."""
        tokens, end = self.tokens, pos
        while end < len(tokens) and _is_space(tokens[end]):
            end += 1
        newlines = [k for k in range(pos, end) if tokens[k].char == "\n"]
        if newlines:
            return newlines[-1] + 1
        return pos if after_newline else end

    def _find_cut(self, pos: int, stack: list[_Token]) -> tuple[int, int]:
        """(end of this chunk's tokens, start of the next chunk's tokens)."""
        tokens, limit = self.tokens, self.limit
        acc = sum(t.size for t in stack)
        closing = sum(t.close_size for t in stack)
        open_tags = list(stack)
        best: list[tuple[int, int, int] | None] = [None, None, None, None]
        has_text = False
        k = pos
        while k < len(tokens):
            token = tokens[k]
            if has_text and acc + closing <= limit:
                if tokens[k - 1].kind != _START:
                    best[_HARD] = (k, k, acc)
                if _is_space(token):
                    best[self._quality(k)] = (k, k + 1, acc)
            acc += token.size
            if acc > limit:
                break
            if token.kind == _START:
                open_tags.append(token)
                closing += token.close_size
            elif token.kind == _END:
                closing -= open_tags.pop().close_size
            else:
                has_text = True
            k += 1
        else:
            if acc + closing <= limit:
                return len(tokens), len(tokens)
        for quality in (_PARAGRAPH, _LINE, _SPACE):
            candidate = best[quality]
            if candidate is not None and candidate[2] >= limit * _MIN_FILL:
                return candidate[0], candidate[1]
        candidates = [c for c in best if c is not None]
        if candidates:
            cut, nxt, _ = max(candidates, key=lambda c: c[0])
            return cut, nxt
        return pos + 1, pos + 1  # unreachable with the nesting budget of _tokenize_html; guarantees progress

    def chunks(self) -> list[str]:
        tokens = self.tokens
        result: list[str] = []
        stack: list[_Token] = []
        pos = self._skip_space(0, after_newline=False)
        while pos < len(tokens):
            cut, nxt = self._find_cut(pos, stack)
            body = tokens[pos:cut]
            prefix = list(stack)
            for token in body:
                if token.kind == _START:
                    stack.append(token)
                elif token.kind == _END:
                    stack.pop()
            _trim_trailing_space(body)
            chunk = _drop_empty_elements(prefix + body + [_Token.end(t.name) for t in reversed(stack)])
            if any(t.kind == _TEXT and not t.char.isspace() for t in chunk):
                result.append("".join(t.src for t in chunk))
            after_newline = nxt > cut and tokens[cut].char == "\n"
            pos = self._skip_space(nxt, after_newline) if nxt < len(tokens) else nxt
        return result


def _trim_trailing_space(body: list[_Token]) -> None:
    """Drop whitespace at the end of a chunk, also where only end tags follow it."""
    while True:
        k = len(body) - 1
        while k >= 0 and body[k].kind == _END:
            k -= 1
        if k < 0 or not _is_space(body[k]):
            return
        del body[k]


def _drop_empty_elements(tokens: list[_Token]) -> list[_Token]:
    keep = [True] * len(tokens)
    open_elements: list[list[int | bool]] = []  # [index of start tag, has content]
    for index, token in enumerate(tokens):
        if token.kind == _START:
            open_elements.append([index, False])
        elif token.kind == _END:
            start, has_content = open_elements.pop()
            if not has_content:
                keep[start] = keep[index] = False
            elif open_elements:
                open_elements[-1][1] = True
        elif open_elements:
            open_elements[-1][1] = True
    return [t for t, k in zip(tokens, keep) if k]


def render_chunks(md: str, limit: int = TELEGRAM_LIMIT) -> list[str]:
    """Markdown → HTML messages, each at most `limit` long and accepted by Telegram's HTML parse mode."""
    return split_html(markdown_to_html(md), limit)


# ---------------------------------------------------------------------------------------------- plain text


def _joins_previous(char: str) -> bool:
    """Characters that must stay with the one before them (combining marks, joiners, variation selectors)."""
    return unicodedata.combining(char) != 0 or char in "\u200d\ufe0e\ufe0f" or "\U0001f3fb" <= char <= "\U0001f3ff"


def _skip_plain_space(text: str, pos: int, after_newline: bool) -> int:
    end = pos
    while end < len(text) and text[end].isspace():
        end += 1
    last_newline = text.rfind("\n", pos, end)
    if last_newline != -1:
        return last_newline + 1
    return pos if after_newline else end


def split_plain(text: str, limit: int = TELEGRAM_LIMIT) -> list[str]:
    """Plain-text chunks of at most `limit` UTF-16 units, cut at paragraph, line or word boundaries when possible.

    Only whitespace at the cuts (and at both ends) is dropped; whitespace-only chunks are never returned.
    """
    if limit < 2:
        raise ValueError("limit must be at least 2")
    chunks: list[str] = []
    n = len(text)
    pos = _skip_plain_space(text, 0, after_newline=False)
    while pos < n:
        units, end = 0, pos
        while end < n:
            width = 2 if ord(text[end]) > 0xFFFF else 1
            if units + width > limit:
                break
            units += width
            end += 1
        if end == n:
            chunk = text[pos:].rstrip()
            if chunk:
                chunks.append(chunk)
            break
        min_fill = limit * _MIN_FILL
        cut = nxt = -1
        paragraph = text.rfind("\n\n", pos, end + 1)
        line = text.rfind("\n", pos + 1, end + 1)
        space = next((k for k in range(end, pos, -1) if text[k].isspace()), -1)
        for candidate in (paragraph + 1 if paragraph != -1 else -1, line, space):
            if candidate > pos and candidate - pos >= min_fill:
                cut, nxt = candidate, candidate + 1
                break
        if cut == -1:
            cut = end
            while cut > pos + 1 and (_joins_previous(text[cut]) or text[cut - 1] == "\u200d"):
                cut -= 1
            nxt = cut
        chunk = text[pos:cut].rstrip()
        if chunk:
            chunks.append(chunk)
        after_newline = nxt > cut and text[cut] == "\n"
        pos = _skip_plain_space(text, nxt, after_newline)
    return chunks


def html_to_text(html_text: str) -> str:
    """The plain text an HTML message shows (tags removed, entities decoded)."""
    return "".join(t.char for t in _tokenize_html(html_text, 1 << 30) if t.kind == _TEXT)


def summarize_for_document(md: str, max_chars: int = 600) -> str:
    """A short plain-text summary of a long answer: its first paragraphs (code blocks and tables left out),
    trimmed on a word boundary with "…" when longer than `max_chars`."""
    if max_chars < 2:
        raise ValueError("max_chars must be at least 2")
    tokens = _tokenize_html(markdown_to_html(md), 1 << 30)
    prose: list[str] = []
    depth_in_pre = 0
    for token in tokens:
        if token.kind == _START and token.name == "pre":
            depth_in_pre += 1
            prose.append("\n\n")
        elif token.kind == _END and token.name == "pre":
            depth_in_pre -= 1
        elif token.kind == _TEXT and not depth_in_pre:
            prose.append(token.char)
    paragraphs = [p.strip() for p in re.split(r"\n[ \t]*\n", "".join(prose)) if p.strip()]
    text = "\n\n".join(paragraphs) or html_to_text(markdown_to_html(md)).strip()
    if len(text) <= max_chars:
        return text
    budget = max_chars - 1  # room for the ellipsis
    cut = next((k for k in range(budget, 0, -1) if text[k].isspace()), -1)
    if cut < budget // 2:
        cut = budget
        while cut > 1 and _joins_previous(text[cut]):
            cut -= 1
    return text[:cut].rstrip() + "…"
