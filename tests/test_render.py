"""Markdown → Telegram HTML rendering and splitting, checked against the strict fake of Telegram's HTML parser."""

from __future__ import annotations

import re

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from telegram_bot.render.chunks import render_chunks, split_html, split_plain, summarize_for_document, utf16_len
from telegram_bot.render.markdown import markdown_to_html
from tests.fakes.telegram_html import (
    EntityParseError,
    parse_telegram_html,
    parse_telegram_html_entities,
    plain_length,
)

PROPERTY = settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def alnum(text: str) -> str:
    return "".join(c for c in text if c.isalnum())


def no_space(text: str) -> str:
    return "".join(c for c in text if not c.isspace())


def is_subsequence(needle: str, haystack: str) -> bool:
    it = iter(haystack)
    return all(c in it for c in needle)


def carried_text(html_chunk: str) -> str:
    """What a reader can get from a message: its plain text with link targets and code languages in place."""
    parsed = parse_telegram_html_entities(html_chunk)
    inserts: list[tuple[int, int, str]] = []
    for entity in parsed.entities:
        if entity.url and entity.url != parsed.text[entity.start : entity.end]:
            inserts.append((entity.end, 1, f" {entity.url} "))
        if entity.language:
            inserts.append((entity.start, 0, f" {entity.language} "))
    text = parsed.text
    for index, _, extra in sorted(inserts, reverse=True):
        text = text[:index] + extra + text[index:]
    return text


def assert_valid_chunks(chunks: list[str], limit: int) -> None:
    for chunk in chunks:
        assert utf16_len(chunk) <= limit, (limit, chunk)
        plain = parse_telegram_html(chunk)  # raises EntityParseError if Telegram would refuse it
        assert plain.strip(), chunk
        assert plain_length(plain) <= limit


# ---------------------------------------------------------------------------------------------- the validator


@pytest.mark.parametrize(
    ("source", "reason"),
    [
        ("<b>x", 'Can\'t find end tag corresponding to start tag "b"'),
        ("<x>y</x>", 'Unsupported start tag "x" at byte offset 0'),
        ("ab <foo>", 'Unsupported start tag "foo" at byte offset 3'),
        ("<b><i>x</b></i>", 'Unmatched end tag at byte offset 7, expected "</i>", found "</b>"'),
        ("x</b>", "Unexpected end tag at byte offset 1"),
        ("a < b", 'Unsupported start tag "" at byte offset 2'),
        ("a <b", "Unclosed start tag at byte offset 2"),
        ("a & b", 'Unescaped "&" at byte offset 2; it must be written as "&amp;"'),
        ("a &amp b", 'Unescaped "&" at byte offset 2; it must be written as "&amp;"'),
        ("&nbsp;", 'Unsupported HTML entity "&nbsp;" at byte offset 0'),
        ("&#0;", 'Invalid character reference "&#0;" at byte offset 0'),
        ("&#xD800;", 'Invalid character reference "&#xD800;" at byte offset 0'),
        ("a > b", 'Unescaped ">" at byte offset 2; it must be written as "&gt;"'),
        ("é<x>", 'Unsupported start tag "x" at byte offset 2'),  # offsets count UTF-8 bytes
        ("<span>x</span>", 'Tag "span" must have class "tg-spoiler" at byte offset 0'),
        ('<a href="x>y</a>', "Unclosed start tag at byte offset 3"),
        ("<code><b>x</b></code>", 'Entity "b" can\'t be nested inside "code" at byte offset 6'),
        ('<a href="https://x"><code>x</code></a>', 'Entity "code" can\'t be nested inside "a" at byte offset 20'),
        (
            "<blockquote><blockquote>x</blockquote></blockquote>",
            'Entity "blockquote" can\'t be nested inside "blockquote" at byte offset 12',
        ),
        ("<tg-emoji>x</tg-emoji>", "Custom emoji entity must contain a valid custom emoji identifier"),
    ],
)
def test_validator_rejects_what_telegram_refuses(source: str, reason: str) -> None:
    with pytest.raises(EntityParseError) as caught:
        parse_telegram_html(source)
    assert str(caught.value) == "Bad Request: can't parse entities: " + reason


def test_validator_accepts_nested_html_and_decodes_entities() -> None:
    source = (
        '<b>bold <i>both <u>all</u></i></b> <a href="https://e.com/?a=1&amp;b=2">link</a> '
        '<tg-spoiler>s</tg-spoiler> <span class="tg-spoiler">t</span> <s>x</s><del>y</del><strike>z</strike>'
        '<pre><code class="language-python">if a &lt; b: print(&quot;&#65;&#x42;&gt;&amp;&quot;)</code></pre>'
        "<blockquote expandable>q <b>b</b></blockquote><BLOCKQUOTE>r</BLOCKQUOTE>"
        '<tg-emoji emoji-id="5368324170671202286">👍</tg-emoji>'
    )
    parsed = parse_telegram_html_entities(source)
    assert parsed.text == 'bold both all link s t xyzif a < b: print("AB>&")q br👍'
    kinds = {e.type: e for e in parsed.entities}
    assert kinds["text_link"].url == "https://e.com/?a=1&b=2"
    assert kinds["pre"].language == "python" and "code" not in kinds
    assert kinds["expandable_blockquote"].length == 3 and kinds["blockquote"].length == 1
    assert kinds["custom_emoji"].custom_emoji_id == "5368324170671202286"
    bold = [(e.offset, e.length) for e in parsed.entities if e.type == "bold"]
    assert bold == [(0, 13), (51, 1)]
    assert (kinds["italic"].offset, kinds["underline"].offset, kinds["underline"].length) == (5, 10, 3)


def test_validator_measures_utf16() -> None:
    assert plain_length(parse_telegram_html("<b>😀</b>é")) == 3
    entity = parse_telegram_html_entities("😀<i>x</i>").entities[0]
    assert (entity.offset, entity.length, entity.start) == (2, 1, 1)


# ---------------------------------------------------------------------------------------------- Markdown → HTML


@pytest.mark.parametrize(
    ("md", "expected"),
    [
        ("**bold** and __bold__", "<b>bold</b> and <b>bold</b>"),
        ("*it* and _it_", "<i>it</i> and <i>it</i>"),
        ("***both***", "<b><i>both</i></b>"),
        ("**bold *inner***", "<b>bold <i>inner</i></b>"),
        ("snake_case_name and my_var_x", "snake_case_name and my_var_x"),
        ("2 * 3 * 4 and a * b", "2 * 3 * 4 and a * b"),
        ("~~gone~~ ~one~", "<s>gone</s> ~one~"),
        ("use `a < b && c` here", "use <code>a &lt; b &amp;&amp; c</code> here"),
        ("``code with ` tick``", "<code>code with ` tick</code>"),
        ("`**not bold**`", "<code>**not bold**</code>"),
        ("**unclosed and *also `tick", "**unclosed and *also `tick"),
        ("** spaced **", "** spaced **"),
        (r"\*literal\* and \_x\_", "*literal* and _x_"),
        ('x < y > z & w "q"', 'x &lt; y &gt; z &amp; w "q"'),
        ("[docs](https://e.com/a?b=1&c=2)", '<a href="https://e.com/a?b=1&amp;c=2">docs</a>'),
        ('[q](https://e.com/"x")', '<a href="https://e.com/&quot;x&quot;">q</a>'),
        ("[m](mailto:a@b.c) [tg](tg://user?id=1)", '<a href="mailto:a@b.c">m</a> <a href="tg://user?id=1">tg</a>'),
        ("[x](javascript:alert(1))", "x (javascript:alert(1))"),
        ("[file](src/app.py)", "file (src/app.py)"),
        ("[**b** `c`](https://e.com)", '<a href="https://e.com"><b>b</b> c</a>'),
        ("[no link] (x) [](https://e.com)", "[no link] (x) [](https://e.com)"),
        ("<https://e.com/x_y_z>", "https://e.com/x_y_z"),
        ("see https://e.com/_a_/b*c* ok", "see https://e.com/_a_/b*c* ok"),
        ("# Title *x*", "<b>Title <i>x</i></b>"),
        ("### Sub ###", "<b>Sub</b>"),
        ("#hashtag", "#hashtag"),
        ("- one\n* two\n+ three\n  - nested", "• one\n• two\n• three\n  • nested"),
        ("1. first\n2) second\n10. tenth", "1. first\n2) second\n10. tenth"),
        ("> quoted **b**\n> more", "<blockquote>quoted <b>b</b>\nmore</blockquote>"),
        ("> a\n> > nested", "<blockquote>a\nnested</blockquote>"),
        ("```py\nif a<b:\n  print(**x)\n```", '<pre><code class="language-py">if a&lt;b:\n  print(**x)</code></pre>'),
        ("```\nplain\n```", "<pre>plain</pre>"),
        ("~~~\ntilde\n~~~", "<pre>tilde</pre>"),
        ("```\nunclosed fence\n**x**", "<pre>unclosed fence\n**x**</pre>"),
        ("```python title\nx\n```", "<pre>python title\nx</pre>"),
        ("> ```\n> code *x*\n> ```", "<blockquote>code *x*</blockquote>"),
        ("---\n***", "──────────\n──────────"),
        ("| a | b |\n|---|---|\n| *1* | 2 |", "<pre>| a | b |\n|---|---|\n| *1* | 2 |</pre>"),
        ("a\n\n\n\nb", "a\n\nb"),
        ("**a\nb**", "<b>a\nb</b>"),
    ],
)
def test_markdown_to_html(md: str, expected: str) -> None:
    html = markdown_to_html(md)
    assert html == expected
    parse_telegram_html(html)


def test_formatting_is_never_applied_inside_code() -> None:
    html = markdown_to_html("```js\nconst a = `*x*` + [l](https://e.com) + <b>;\n```")
    parsed = parse_telegram_html_entities(html)
    assert [e.type for e in parsed.entities] == ["pre"]
    assert parsed.text == "const a = `*x*` + [l](https://e.com) + <b>;"


# ---------------------------------------------------------------------------------------------- splitting


def test_short_text_is_one_chunk() -> None:
    assert render_chunks("Hello **world**") == ["Hello <b>world</b>"]
    assert render_chunks("   \n\n  ") == []


def test_split_prefers_paragraphs_then_lines() -> None:
    paragraphs = ["alpha " * 8, "beta " * 8, "gamma " * 8]
    chunks = split_html("\n\n".join(p.strip() for p in paragraphs), 60)
    assert chunks == [paragraphs[0].strip(), paragraphs[1].strip(), paragraphs[2].strip()]
    lines = "\n".join(f"line {i} " + "x" * 20 for i in range(6))
    chunks = split_html(lines, 70)
    assert all(chunk.startswith("line ") for chunk in chunks)
    assert "\n".join(chunks) == lines


def test_split_long_code_block_reopens_tags() -> None:
    code = "\n".join(f"print({i})  # step {i}" for i in range(40))
    chunks = render_chunks(f"Intro.\n\n```python\n{code}\n```\n\nOutro.", 200)
    assert_valid_chunks(chunks, 200)
    assert len(chunks) >= 4
    opening, closing = '<pre><code class="language-python">', "</code></pre>"
    assert chunks[0].startswith("Intro.\n\n" + opening) and chunks[0].endswith(closing)
    assert all(c.startswith(opening) and c.endswith(closing) for c in chunks[1:-1])
    assert chunks[-1].startswith(opening) and chunks[-1].endswith(closing + "\n\nOutro.")
    lines = [line for c in chunks for line in parse_telegram_html(c).split("\n") if line]
    assert lines == ["Intro.", *code.split("\n"), "Outro."]


def test_split_long_formatted_span_and_long_word() -> None:
    chunks = render_chunks("**" + ("bold words " * 40).strip() + "**", 64)
    assert_valid_chunks(chunks, 64)
    assert len(chunks) > 5 and all(c.startswith("<b>") and c.endswith("</b>") for c in chunks)
    word = "x" * 300
    chunks = split_html(f"<i>{word}</i>", 64)
    assert_valid_chunks(chunks, 64)
    assert "".join(parse_telegram_html(c) for c in chunks) == word


def test_split_never_cuts_entities_and_counts_utf16() -> None:
    chunks = split_html("&lt;&gt;&amp;" * 50 + "😀" * 100, 64)
    assert_valid_chunks(chunks, 64)
    assert "".join(parse_telegram_html(c) for c in chunks) == "<>&" * 50 + "😀" * 100


def test_split_drops_a_link_too_long_to_reopen_but_keeps_its_target() -> None:
    url = "https://example.com/" + "p" * 80
    chunks = split_html(f'<a href="{url}">see</a> after', 64)
    assert_valid_chunks(chunks, 64)
    assert no_space("".join(parse_telegram_html(c) for c in chunks)) == no_space(f"see ({url}) after")


def test_split_sanitises_invalid_html() -> None:
    chunks = split_html("<b>bold <i>both</b> a & b <x>y</x> 1 > 0 </i> <code><b>c</b></code> &nbsp;&bogus;", 4096)
    assert_valid_chunks(chunks, 4096)
    assert parse_telegram_html(chunks[0]) == "bold both a & b <x>y</x> 1 > 0  c \xa0&bogus;"


def test_split_rejects_tiny_limits() -> None:
    with pytest.raises(ValueError):
        split_html("x", 4)


def test_split_plain_examples() -> None:
    assert split_plain("short") == ["short"]
    assert split_plain("") == [] and split_plain(" \n ") == []
    text = "first paragraph here\n\nsecond one\nwith two lines"
    assert split_plain(text, 25) == ["first paragraph here", "second one\nwith two lines"]
    assert split_plain("abcdefghij" * 3, 10) == ["abcdefghij"] * 3
    assert split_plain("one two three four", 9) == ["one two", "three", "four"]
    assert all(utf16_len(c) <= 5 for c in split_plain("😀" * 9, 5))


def test_summary() -> None:
    md = "# Report\n\nThe build **passed**.\n\n```\nlots of code\n```\n\nSecond paragraph."
    assert summarize_for_document(md) == "Report\n\nThe build passed.\n\nSecond paragraph."
    long = "word " * 300
    summary = summarize_for_document(long, max_chars=100)
    assert len(summary) <= 100 and summary.endswith("word…")
    assert summarize_for_document("```\nonly code\n```") == "only code"
    assert summarize_for_document("x" * 50, max_chars=10) == "x" * 9 + "…"


# ---------------------------------------------------------------------------------------------- properties

METACHARS = "*_`[]()<>&#~\\-+|!. :/\n"
any_markdown = st.text(alphabet=st.one_of(st.sampled_from(METACHARS), st.characters(codec="utf-8")), max_size=400)
plain_alphabet = st.characters(codec="utf-8", exclude_characters="*_`[]()<>&#~\\-+|!\r")
plain_text = st.text(alphabet=plain_alphabet, max_size=600)
words = st.text(alphabet=st.characters(categories=("L", "N")), min_size=1, max_size=12)

fragments = st.one_of(
    words,
    st.just(" "),
    st.just("\n"),
    st.just("\n\n"),
    words.map(lambda w: f"**{w}**"),
    words.map(lambda w: f"*{w}*"),
    words.map(lambda w: f"_{w}_"),
    words.map(lambda w: f"~~{w}~~"),
    words.map(lambda w: f"`{w} <&>`"),
    st.tuples(words, words).map(lambda t: f"[{t[0]}](https://e.com/{t[1]}?a=1&b=2)"),
    st.tuples(words, words).map(lambda t: f"[{t[0]}]({t[1]}.md)"),
    st.tuples(st.sampled_from(["", "py", "python", "c++"]), st.lists(words, max_size=30)).map(
        lambda t: f"\n```{t[0]}\n" + "\n".join(f"    {w} = <{w}> & *{w}*" for w in t[1]) + "\n```\n"
    ),
    words.map(lambda w: f"\n# {w}\n"),
    words.map(lambda w: f"\n- item {w}\n"),
    words.map(lambda w: f"\n> quote **{w}**\n"),
    st.tuples(words, st.integers(20, 200)).map(lambda t: " ".join([t[0]] * t[1])),
    words.map(lambda w: w * 40),
    st.sampled_from(["*", "**", "_", "`", "```", "[", "](", "<", ">", "&", "~~", "#", "\\"]),
)
built_markdown = st.lists(fragments, max_size=40).map("".join)
limits = st.one_of(st.integers(64, 300), st.just(4096))


def check_render(md: str, limit: int) -> list[str]:
    chunks = render_chunks(md, limit)
    assert_valid_chunks(chunks, limit)
    shown = "".join(parse_telegram_html(c) for c in chunks)
    carried = "".join(carried_text(c) for c in chunks)
    # Nothing invented: the visible text only holds characters of the source, in order.
    assert is_subsequence(alnum(shown), alnum(md))
    # Nothing lost: every letter and digit of the source reaches the reader, in order (link targets and
    # code languages count where Telegram keeps them: in the entity).
    assert is_subsequence(alnum(md), alnum(carried))
    return chunks


@PROPERTY
@given(md=any_markdown, limit=limits)
def test_any_text_renders_to_valid_chunks(md: str, limit: int) -> None:
    check_render(md, limit)


@PROPERTY
@given(md=built_markdown, limit=limits)
def test_built_markdown_renders_to_valid_chunks(md: str, limit: int) -> None:
    check_render(md, limit)


@PROPERTY
@given(text=plain_text, limit=limits)
def test_text_without_markdown_is_carried_exactly(text: str, limit: int) -> None:
    chunks = check_render(text, limit)
    assert no_space("".join(parse_telegram_html(c) for c in chunks)) == no_space(text)


@PROPERTY
@given(md=built_markdown)
def test_one_chunk_when_it_fits(md: str) -> None:
    html = markdown_to_html(md)
    chunks = split_html(html, 4096)
    if utf16_len(html) <= 4096 and parse_telegram_html(html).strip():
        assert len(chunks) == 1
        assert no_space(parse_telegram_html(chunks[0])) == no_space(parse_telegram_html(html))


@PROPERTY
@given(text=st.one_of(any_markdown, built_markdown), limit=st.integers(2, 300))
def test_split_plain_keeps_everything_but_whitespace_at_cuts(text: str, limit: int) -> None:
    chunks = split_plain(text, limit)
    for chunk in chunks:
        assert 0 < utf16_len(chunk) <= limit
        assert chunk.strip() and chunk == chunk.rstrip()
    # The chunks are consecutive pieces of the text, separated only by whitespace.
    pattern = r"\s*" + r"\s*".join(re.escape(c) for c in chunks) + r"\s*"
    assert re.fullmatch(pattern, text, flags=re.DOTALL)
