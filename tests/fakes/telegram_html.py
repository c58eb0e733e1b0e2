"""A strict re-implementation of Telegram Bot API's HTML parse mode (for the fake Telegram server).

It follows TDLib's `parse_html` (tag and attribute syntax, error texts, byte offsets in UTF-8) and is
*stricter* where Telegram silently repairs or drops things, so a reply that passes here is accepted by
Telegram with all of its formatting intact:

* every ``&`` must start a supported entity terminated by ``;`` (``&lt; &gt; &amp; &quot; &#NN; &#xHH;``);
  Telegram would keep a bare ``&`` as text, the Bot API documentation says to escape it;
* a bare ``>`` in text is rejected (the documentation says to escape it as ``&gt;``);
* nesting that Telegram would silently flatten is rejected: nothing inside ``<code>``, only one ``<code>``
  inside ``<pre>``, no ``a``/``code``/``pre``/``blockquote``/``tg-emoji`` inside ``a`` or ``tg-emoji``, and
  no ``blockquote`` inside ``blockquote``.

`parse_telegram_html` returns the plain text; `parse_telegram_html_entities` also returns the entities.
Error messages read like Telegram's: ``Bad Request: can't parse entities: <reason>``.
"""

from __future__ import annotations

from dataclasses import dataclass

PREFIX = "Bad Request: can't parse entities: "

SUPPORTED_TAGS = frozenset(
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
ENTITY_TYPES = {
    "a": "text_link",
    "b": "bold",
    "strong": "bold",
    "i": "italic",
    "em": "italic",
    "u": "underline",
    "ins": "underline",
    "s": "strikethrough",
    "strike": "strikethrough",
    "del": "strikethrough",
    "span": "spoiler",
    "tg-spoiler": "spoiler",
    "code": "code",
    "pre": "pre",
    "blockquote": "blockquote",
    "tg-emoji": "custom_emoji",
}
NAMED_ENTITIES = {"lt": "<", "gt": ">", "amp": "&", "quot": '"'}
_SPACES = " \t\r\n\v\f"
_CONTINUOUS = frozenset({"a", "tg-emoji"})
_NOT_IN_CONTINUOUS = frozenset({"a", "code", "pre", "blockquote", "tg-emoji"})


class EntityParseError(ValueError):
    """Telegram's 400 answer to HTML it cannot parse; `str(error)` is the full description."""

    def __init__(self, reason: str) -> None:
        self.reason = reason
        self.message = PREFIX + reason
        super().__init__(self.message)


@dataclass(frozen=True)
class Entity:
    """A parsed MessageEntity: `offset`/`length` in UTF-16 code units (as Telegram), `start`/`end` index the str."""

    type: str
    offset: int
    length: int
    start: int
    end: int
    url: str | None = None
    language: str | None = None
    custom_emoji_id: str | None = None


@dataclass(frozen=True)
class ParsedHtml:
    text: str
    entities: tuple[Entity, ...]


@dataclass
class _OpenTag:
    name: str
    argument: str
    start: int
    byte_offset: int


def utf16_length(text: str) -> int:
    """Length in UTF-16 code units, the unit of Telegram's limits and entity offsets."""
    return len(text.encode("utf-16-le", "surrogatepass")) // 2


def plain_length(text: str) -> int:
    """Length of a plain text in UTF-16 code units (Telegram's 4096 limit applies to the text after parsing)."""
    return utf16_length(text)


def html_plain_length(html_text: str) -> int:
    """UTF-16 length of the plain text an HTML message shows."""
    return utf16_length(parse_telegram_html(html_text))


def parse_telegram_html(text: str) -> str:
    """The plain text of an HTML message, or `EntityParseError` as Telegram would answer."""
    return parse_telegram_html_entities(text).text


def parse_telegram_html_entities(text: str) -> ParsedHtml:
    return _Parser(text).parse()


class _Parser:
    def __init__(self, source: str) -> None:
        self.src = source
        self.n = len(source)
        self.out: list[str] = []
        self.out_len = 0
        self.stack: list[_OpenTag] = []
        self.entities: list[Entity] = []

    # ------------------------------------------------------------------ helpers
    def byte_offset(self, index: int) -> int:
        return len(self.src[:index].encode("utf-8", "surrogatepass"))

    def char(self, index: int) -> str:
        """The character at `index`, or "" past the end (TDLib's terminating NUL)."""
        return self.src[index] if index < self.n else ""

    def is_space(self, index: int) -> bool:
        c = self.char(index)
        return c != "" and c in _SPACES

    def emit(self, piece: str) -> None:
        self.out.append(piece)
        self.out_len += len(piece)

    def decode_entity(self, pos: int) -> tuple[str, int]:
        """Decode the entity at `pos` (which holds '&'); returns (character, index after it) or raises."""
        src = self.src
        semicolon = src.find(";", pos + 1, pos + 16)
        body = src[pos + 1 : semicolon] if semicolon != -1 else ""
        offset = self.byte_offset(pos)
        if semicolon == -1 or not body:
            raise EntityParseError(f'Unescaped "&" at byte offset {offset}; it must be written as "&amp;"')
        if body.startswith("#"):
            digits = body[1:]
            try:
                if digits[:1] in ("x", "X"):
                    if not digits[1:] or not all(c in "0123456789abcdefABCDEF" for c in digits[1:]):
                        raise ValueError
                    code = int(digits[1:], 16)
                else:
                    if not digits.isascii() or not digits.isdigit():
                        raise ValueError
                    code = int(digits, 10)
            except ValueError:
                raise EntityParseError(
                    f'Unescaped "&" at byte offset {offset}; it must be written as "&amp;"'
                ) from None
            if code == 0 or code > 0x10FFFF or 0xD800 <= code <= 0xDFFF:
                raise EntityParseError(f'Invalid character reference "&{body};" at byte offset {offset}')
            return chr(code), semicolon + 1
        if body.isascii() and body.isalpha():
            if body in NAMED_ENTITIES:
                return NAMED_ENTITIES[body], semicolon + 1
            raise EntityParseError(f'Unsupported HTML entity "&{body};" at byte offset {offset}')
        raise EntityParseError(f'Unescaped "&" at byte offset {offset}; it must be written as "&amp;"')

    # ------------------------------------------------------------------ main loop
    def parse(self) -> ParsedHtml:
        i = 0
        src = self.src
        while i < self.n:
            c = src[i]
            if c == "&":
                decoded, i = self.decode_entity(i)
                self.emit(decoded)
            elif c == ">":
                raise EntityParseError(
                    f'Unescaped ">" at byte offset {self.byte_offset(i)}; it must be written as "&gt;"'
                )
            elif c != "<":
                start = i
                while i < self.n and src[i] not in "<>&":
                    i += 1
                self.emit(src[start:i])
            elif self.char(i + 1) == "/":
                i = self.end_tag(i)
            else:
                i = self.start_tag(i)
        if self.stack:
            raise EntityParseError(f'Can\'t find end tag corresponding to start tag "{self.stack[-1].name}"')
        text = "".join(self.out)
        entities = tuple(sorted(self.entities, key=lambda e: (e.start, -e.end)))
        return ParsedHtml(text, entities)

    def start_tag(self, begin: int) -> int:
        i = begin + 1
        while self.char(i) != "" and not self.is_space(i) and self.char(i) != ">":
            i += 1
        if self.char(i) == "":
            raise EntityParseError(f"Unclosed start tag at byte offset {self.byte_offset(begin)}")
        tag_name = self.src[begin + 1 : i].lower()
        offset = self.byte_offset(begin)
        if tag_name not in SUPPORTED_TAGS:
            raise EntityParseError(f'Unsupported start tag "{tag_name}" at byte offset {offset}')
        argument = ""
        has_argument = False
        while self.char(i) != ">":
            while self.is_space(i):
                i += 1
            if self.char(i) == ">":
                break
            attribute_begin = i
            while self.char(i) != "" and not self.is_space(i) and self.char(i) not in "=>":
                i += 1
            attribute_name = self.src[attribute_begin:i].lower()
            if not attribute_name:
                raise EntityParseError(f'Empty attribute name in the tag "{tag_name}" at byte offset {offset}')
            while self.is_space(i):
                i += 1
            if self.char(i) != "=":
                if tag_name == "blockquote" and attribute_name == "expandable":
                    # HTML boolean attribute: <blockquote expandable>
                    argument, has_argument = "1", True
                    continue
                raise EntityParseError(
                    "Expected equal sign in declaration of an attribute of the tag "
                    f'"{tag_name}" at byte offset {offset}'
                )
            i += 1
            while self.is_space(i):
                i += 1
            if self.char(i) == "":
                raise EntityParseError(f'Unclosed start tag "{tag_name}" at byte offset {offset}')
            value_chars: list[str] = []
            quote = self.char(i)
            if quote not in ("'", '"'):
                while (c := self.char(i)) and c.isascii() and (c.isalnum() or c in ".-"):
                    value_chars.append(c)
                    i += 1
                if not value_chars:
                    raise EntityParseError(
                        f'Expected quote in declaration of an attribute of the tag "{tag_name}" at byte offset {offset}'
                    )
            else:
                i += 1
                while self.char(i) != "" and self.char(i) != quote:
                    if self.char(i) == "&":
                        decoded, i = self.decode_entity(i)
                        value_chars.append(decoded)
                    else:
                        value_chars.append(self.char(i))
                        i += 1
                if self.char(i) == quote:
                    i += 1
            if self.char(i) == "":
                raise EntityParseError(f"Unclosed start tag at byte offset {self.byte_offset(attribute_begin)}")
            value = "".join(value_chars)
            if tag_name == "a" and attribute_name == "href":
                argument, has_argument = value, True
            elif tag_name == "code" and attribute_name == "class" and value.startswith("language-"):
                argument, has_argument = value[len("language-") :], True
            elif tag_name == "span" and attribute_name == "class" and value.startswith("tg-"):
                argument, has_argument = value[len("tg-") :], True
            elif tag_name == "tg-emoji" and attribute_name == "emoji-id":
                argument, has_argument = value, True
            elif tag_name == "blockquote" and attribute_name == "expandable":
                argument, has_argument = "1", True
        if tag_name == "span" and argument != "spoiler":
            raise EntityParseError(f'Tag "span" must have class "tg-spoiler" at byte offset {offset}')
        valid_emoji_id = has_argument and argument.isascii() and argument.isdigit() and int(argument) != 0
        if tag_name == "tg-emoji" and not valid_emoji_id:
            raise EntityParseError("Custom emoji entity must contain a valid custom emoji identifier")
        self.check_nesting(tag_name, offset)
        self.stack.append(_OpenTag(tag_name, argument, self.out_len, offset))
        return i + 1

    def check_nesting(self, tag_name: str, offset: int) -> None:
        """Reject nesting Telegram would silently flatten (the fake is strict so formatting is never lost)."""
        for depth, parent in enumerate(reversed(self.stack)):
            bad = False
            if parent.name == "code":
                bad = True
            elif parent.name == "pre":
                bad = not (tag_name == "code" and depth == 0)
            elif parent.name in _CONTINUOUS:
                bad = tag_name in _NOT_IN_CONTINUOUS
            elif parent.name == "blockquote":
                bad = tag_name == "blockquote"
            if bad:
                raise EntityParseError(
                    f'Entity "{tag_name}" can\'t be nested inside "{parent.name}" at byte offset {offset}'
                )

    def end_tag(self, begin: int) -> int:
        offset = self.byte_offset(begin)
        if not self.stack:
            raise EntityParseError(f"Unexpected end tag at byte offset {offset}")
        i = begin + 2
        while self.char(i) != "" and not self.is_space(i) and self.char(i) != ">":
            i += 1
        end_tag_name = self.src[begin + 2 : i].lower()
        while self.is_space(i):
            i += 1
        if self.char(i) != ">":
            raise EntityParseError(f"Unclosed end tag at byte offset {offset}")
        open_tag = self.stack[-1]
        if end_tag_name and end_tag_name != open_tag.name:
            raise EntityParseError(
                f'Unmatched end tag at byte offset {offset}, expected "</{open_tag.name}>", found "</{end_tag_name}>"'
            )
        self.stack.pop()
        self.add_entity(open_tag)
        return i + 1

    def add_entity(self, tag: _OpenTag) -> None:
        start, end = tag.start, self.out_len
        if start == end:
            return  # Telegram drops empty entities
        text_so_far = "".join(self.out)
        self.out = [text_so_far]
        offset = utf16_length(text_so_far[:start])
        length = utf16_length(text_so_far[start:end])
        kind = ENTITY_TYPES[tag.name]
        url = language = emoji = None
        if tag.name == "a":
            url = tag.argument or text_so_far[start:end]
        elif tag.name == "code" and tag.argument and self.stack and self.stack[-1].name == "pre":
            language = tag.argument
        elif tag.name == "tg-emoji":
            emoji = tag.argument
        elif tag.name == "blockquote" and tag.argument:
            kind = "expandable_blockquote"
        if tag.name == "pre":
            inner = [e for e in self.entities if e.type == "code" and e.start == start and e.end == end]
            if inner:
                self.entities.remove(inner[0])
                language = inner[0].language
        self.entities.append(
            Entity(kind, offset, length, start, end, url=url, language=language, custom_emoji_id=emoji)
        )
