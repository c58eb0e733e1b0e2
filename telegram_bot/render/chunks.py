"""HTML and plain text cut into messages Telegram always accepts.

* `split_html` cuts any HTML into chunks of at most `limit` UTF-16 units of *source* (an upper bound of what
  Telegram counts), preferring paragraph, then line, then word boundaries; a span cut in two is closed at the
  end of one chunk and reopened at the start of the next. It also sanitises its input (unknown tags and stray
  `<`, `>`, `&` become text, bad nesting is flattened), so every chunk parses.
* `render_chunks` is Markdown → HTML → chunks; `split_plain` the plain-text fallback; `html_to_text` the one
  HTML-to-text; `summarize_for_document` the short text sent with a long answer.

Why one module over 400 lines: the splitter, `html_to_text` and the summary share one tokenizer of Telegram's HTML
subset.
"""

from __future__ import annotations

import html
import re
import unicodedata
from dataclasses import dataclass

from agents.core.text import utf16_len
from telegram_bot.render.markdown import esc_attr, markdown_to_html

TELEGRAM_LIMIT = 4096
MIN_LIMIT = 16
_MIN_FILL = 0.3  # a preferred boundary is used only if the chunk is at least this full


# ---------------------------------------------------------------------------------------------- helpers


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
        return f'<a href="{esc_attr(href)}">' if href else "<a>"
    if name == "code" and values.get("class", "").startswith("language-"):
        return f'<code class="{esc_attr(values["class"])}">'
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
            if match is None or decoded is None:
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
