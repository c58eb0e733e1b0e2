"""The one output filter: every text a model or the chat sees from tools and commands passes `SecretsFilter.mask`.

Known token shapes become `«masked»`: the regexes of the maintained `detect-secrets` plugins (AWS, GitHub, GitLab,
Slack, npm, PyPI, OpenAI, Stripe, SendGrid, Discord, Azure, JWT, Telegram, Twilio, URL passwords), plus shapes it
lacks (Anthropic and current OpenAI/GitHub/npm keys, `Authorization:`/`Bearer` values, git's `http.extraHeader`, an
inline `credential.helper`, URL credentials without a password, whole private-key blocks). Values are also masked
verbatim: the bot's own secrets (added at start-up to the process's one `SecretsFilter`, which its owner builds and
passes to each part that shows text, kept for its life) and the values found in a workspace's credential files
(`.npmrc`, `.env.production`, ...: added to the task's `SecretScope`, forgotten when the task ends, so the set stays
as small as the running tasks need), so `cat .npmrc` shows neither.

Folded spellings: a token with zero-width characters inside it, percent-escaped (`%3A`) or JSON-escaped (`\\u003a`,
`\\/`) is found in a folded view of the text and masked where it stands; an added value is also known in its
common encodings (base64 at every alignment, JSON string escapes, URL encoding). The folded view is built only for a
text that holds such a character or escape, so ordinary output costs one extra scan.

A token split over lines (`fold`, a line-wrapping program, two `echo`s of its halves) is found by joining the token
runs on both sides of each line break that has token characters right before and after it (at least 8 of them
together, not counting `/` and `.`, so paths and file names on consecutive lines are not looked at): the joined runs
are searched for every token shape and added value, and a match across the break masks both halves.

What it cannot do: a command that re-encodes a secret some other way (reversed, split with spaces or indentation
between its parts, encrypted) prints something no filter knows.
"""

from __future__ import annotations

import asyncio
import base64
import bisect
import functools
import html
import json
import re
import threading
from collections.abc import Iterable
from typing import Any
from urllib.parse import quote, quote_plus

MASK = "«masked»"
REMEMBERED_CHARS = 4_000_000  # texts `mask_messages` remembers masked, in all (a conversation's turns come back)
REMEMBERED_TEXT_CHARS = 65_536  # a longer one is masked each time
OFF_LOOP_CHARS = 16_384  # longer text is masked in a worker thread by those that may wait (`SecretsFilter.mask_soon`)
_MIN_VERBATIM = 8  # shorter values ("true", "1234") would mask ordinary text
# detect-secrets plugins whose regexes are token shapes (not keyword or entropy heuristics, which fire on code)
_PLUGINS = (
    "aws.AWSKeyDetector",
    "github_token.GitHubTokenDetector",
    "gitlab_token.GitLabTokenDetector",
    "slack.SlackDetector",
    "npm.NpmDetector",
    "pypi_token.PypiTokenDetector",
    "openai.OpenAIDetector",
    "stripe.StripeDetector",
    "sendgrid.SendGridDetector",
    "discord.DiscordBotTokenDetector",
    "azure_storage_key.AzureStorageKeyDetector",
    "jwt.JwtTokenDetector",
    "telegram_token.TelegramBotTokenDetector",
    "twilio.TwilioKeyDetector",
    "basic_auth.BasicAuthDetector",
)
# Where a plugin's regex has a group that is the secret itself (the rest of the match is context), mask only it.
_SECRET_GROUP = {"basic_auth.BasicAuthDetector", "aws.AWSKeyDetector", "npm.NpmDetector"}
# Shapes detect-secrets does not know: (regex, a lower-case word the text must contain for it to be tried: a
# case-insensitive regex is ~50 times slower than one starting with a literal). A group named `secret` is masked,
# otherwise the whole match.
_OWN_SHAPES = (
    (r"sk-ant-[A-Za-z0-9_-]{8,}", None),  # Anthropic
    (r"sk-(?:proj-|svcacct-|admin-)?[A-Za-z0-9_-]{32,}", None),  # OpenAI (current shapes)
    (r"github_pat_[A-Za-z0-9_]{22,}", None),  # GitHub fine-grained
    (r"npm_[A-Za-z0-9]{36}(?![A-Za-z0-9])", None),
    (r"pypi-[A-Za-z0-9_-]{40,}", None),
    (r"glpat-[A-Za-z0-9_-]{20,}", None),
    (r"xox[abposr]-[A-Za-z0-9-]{10,}", None),
    (r"(?i)\b(?:proxy-)?authorization\s*[:=]\s*(?P<secret>[^\r\n\"']+)", "authorization"),
    (r"(?i)\bbearer\s+(?P<secret>[A-Za-z0-9._~+/=-]{8,})", "bearer"),
    (r"(?im)\bextraheader\s*[=:]\s*(?P<secret>[^\r\n]+)", "extraheader"),  # git's http.extraHeader
    (r"(?im)\bhelper\s*=\s*(?P<secret>[\"']?!.*)$", "helper"),  # inline credential.helper: a shell snippet
    (r"(?i)aws_secret_access_key\s*[=:]\s*(?P<secret>\S+)", "aws_secret_access_key"),
    (
        r"(?s)-----BEGIN [A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----.*?(?:-----END [A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----|\Z)",
        None,
    ),
    (r"PuTTY-User-Key-File-\d:[^\n]*(?:\n[^\n]*){0,40}?Private-MAC: \S+", None),
)


# Shapes that name a key only at the start of a word: `sk-…` inside `agentlab/task-1-fix-…` (a branch name) is no key.
# Checked on the match, not with a look-behind in the regex, which would cost the regex its fast literal scan.
_AT_WORD_START = re.compile(r"sk-")
_WORD_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-")


def _inside_a_word(match: re.Match[str]) -> bool:
    """The match is a word-start shape that begins inside a longer word (so it is no secret)."""
    start = match.start()
    return start > 0 and match.string[start - 1] in _WORD_CHARS and _AT_WORD_START.match(match.group(0)) is not None


def _mask_whole(match: re.Match[str]) -> str:
    return match.group(0) if _inside_a_word(match) else MASK


@functools.cache
def _shapes() -> tuple[tuple[re.Pattern[str], bool, str | None], ...]:
    """(regex, mask the `secret` group only, needle) for every shape: detect-secrets' plugins, then our own.

    Cached for the process: a pure function of the installed detect-secrets and this module's constants (the same
    for every filter), compiled once because it costs about half a second."""
    import importlib

    found: list[tuple[re.Pattern[str], bool, str | None]] = []
    for dotted in _PLUGINS:
        module, _, name = dotted.rpartition(".")
        try:
            plugin = getattr(importlib.import_module(f"detect_secrets.plugins.{module}"), name)()
        except (ImportError, AttributeError):  # detect-secrets absent or changed: our own shapes still apply
            continue
        for regex in plugin.denylist:
            grouped = dotted in _SECRET_GROUP and regex.groups >= 1
            found.append((_named_first_group(regex) if grouped else regex, grouped, None))
    found += [(re.compile(pattern), "(?P<secret>" in pattern, needle) for pattern, needle in _OWN_SHAPES]
    return tuple(found)


def load_shapes() -> int:
    """Import detect-secrets and compile every shape now (blocking, about half a second on a slow machine), so the
    first text masked (the first frame of the first answer) does not pay for it; how many shapes there are."""
    return len(_shapes())


def _named_first_group(regex: re.Pattern[str]) -> re.Pattern[str]:
    """The same regex with its first capturing group named `secret` (detect-secrets' groups are unnamed)."""
    pattern = re.sub(r"(?<!\\)\((?!\?)", "(?P<secret>", regex.pattern, count=1)
    return re.compile(pattern, regex.flags)


def _mask_group(match: re.Match[str]) -> str:
    if _inside_a_word(match):
        return match.group(0)
    start, end = match.span("secret")
    if start < 0:
        return MASK
    offset = match.start()
    text = match.group(0)
    return text[: start - offset] + MASK + text[end - offset :]


class _Verbatim:
    """Secret values masked wherever they appear, each held by an owner: the bot's own (None: for the bot's life) and
    those of a running task (its `SecretScope`: dropped when the task ends, so the set does not grow task by task)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._owned: dict[object, frozenset[str]] = {}
        self._values: frozenset[str] = frozenset()
        self._regex: re.Pattern[str] | None = None

    def add(self, values: Iterable[str], owner: object = None) -> None:
        plain = {v.strip() for v in values if v and len(v.strip()) >= _MIN_VERBATIM}
        new = plain | {e for v in plain for e in encodings(v) if len(e) >= _MIN_VERBATIM}
        with self._lock:
            held = self._owned.get(owner, frozenset())
            if new <= held:
                return
            self._owned[owner] = held | new
            self._rebuild()

    def drop(self, owner: object) -> None:
        """Forget what `owner` added (a value another owner holds too stays masked)."""
        with self._lock:
            if self._owned.pop(owner, None) is not None:
                self._rebuild()

    def _rebuild(self) -> None:
        values = frozenset[str]().union(*self._owned.values())
        if values == self._values:
            return
        self._values = values
        ordered = sorted(values, key=len, reverse=True)  # longest first: a value containing another
        self._regex = re.compile("|".join(re.escape(v) for v in ordered)) if ordered else None

    def __len__(self) -> int:
        return len(self._values)

    @property
    def values(self) -> frozenset[str]:
        return self._values

    def sub(self, text: str) -> str:
        regex = self._regex
        return regex.sub(MASK, text) if regex is not None else text

    @property
    def regex(self) -> re.Pattern[str] | None:
        return self._regex


def encodings(value: str) -> set[str]:
    """How `value` is commonly re-encoded on the way out: JSON string escapes (both `ensure_ascii` forms), URL
    encoding, hexadecimal (`xxd -p`, both cases), and base64 (standard and URL-safe) at each of the
    three byte alignments it can have inside a longer encoded text (the characters that depend only on the value's
    own bytes)."""
    raw = value.encode("utf-8")
    found = {
        json.dumps(value)[1:-1],
        json.dumps(value, ensure_ascii=False)[1:-1],
        quote(value, safe=""),
        quote_plus(value),
        raw.hex(),
        raw.hex().upper(),
    }
    for offset in range(3):
        padded = bytes(offset) + raw
        whole = (len(padded) // 3) * 4  # the groups made of the value's bytes alone end here
        for encode in (base64.b64encode, base64.urlsafe_b64encode):
            text = encode(padded).decode("ascii")
            core = text[(4 if offset else 0) : whole]
            if len(core) >= 16:
                found.add(core)
    found.discard(value)
    return found


class SecretsFilter:
    """The one output filter of a process: the token shapes, and the values added to it (the bot's own secrets for
    its life, a running task's while its `SecretScope` is open). Built once by the process's owner (the bot's
    `Runtime`, a runner's `RunnerNode`) and given to every part that shows text to a model or a chat in its
    constructor: a part nobody gave it cannot be built, so no text passes an empty filter by mistake."""

    def __init__(self) -> None:
        self._verbatim = _Verbatim()
        self._remembered_lock = threading.Lock()
        self._remembered_values: frozenset[str] | None = None
        self._remembered: dict[str, str] = {}  # text → masked, under `_remembered_values` (mask_messages)
        self._remembered_chars = 0

    def add(self, values: Iterable[str]) -> None:
        """Mask these values verbatim from now on, in every task's output, for the process's life (the bot's own
        secrets, an MCP server's); a task's values go to its `scope` instead. Values shorter than 8 characters are
        ignored."""
        self._verbatim.add(values, None)

    def scope(self, name: str) -> SecretScope:
        """A scope for one task's values (`SecretScope.add`), forgotten when it closes."""
        return SecretScope(self._verbatim, name)

    def value_count(self) -> int:
        """How many spellings of added values are masked now (the bot's own and those of running tasks)."""
        return len(self._verbatim)

    def fingerprint(self) -> frozenset[str]:
        """The values masked now, as one hashable value: texts masked under equal fingerprints are masked alike (the
        token shapes never change), so a masked copy made under one stands while it is the same."""
        return self._verbatim.values

    def mask(self, text: str) -> str:
        """`text` with every known secret replaced by `«masked»`, in plain or folded spellings."""
        if not text:
            return text
        text = self._verbatim.sub(text)
        text = _URL_CREDENTIALS.sub(_mask_url_credentials, text)
        lowered = text.lower()
        for regex, grouped, needle in _shapes():
            if needle is not None and needle not in lowered:
                continue
            if grouped:
                text = regex.sub(_mask_group, text)
            else:
                text = regex.sub(_mask_whole if regex.pattern.startswith("sk-") else MASK, text)
        return _mask_split(_mask_folded(text, self._verbatim), self._verbatim)

    async def mask_soon(self, text: str) -> str:
        """`mask` for text that may be big (a document sent to a chat: a diff, a log): past OFF_LOOP_CHARS the work
        (about 5-9 ms per 64 KB, bench/secret_filter.py; a third of a second per megabyte) runs in a worker thread,
        so the bot's event loop goes on answering meanwhile. The filter is safe to use from several threads."""
        if len(text) <= OFF_LOOP_CHARS:
            return self.mask(text)
        return await asyncio.to_thread(self.mask, text)

    def mask_bytes(self, data: bytes) -> bytes:
        """`mask` for a file's bytes (a diff, a log): read as UTF-8, any other byte kept as it is (surrogateescape),
        so a byte that is not UTF-8 never turns the masking off for the rest, and what is not masked comes back
        byte for byte."""
        return self.mask(data.decode("utf-8", "surrogateescape")).encode("utf-8", "surrogateescape")

    async def mask_bytes_soon(self, data: bytes) -> bytes:
        """`mask_bytes` in a worker thread past OFF_LOOP_CHARS bytes (as `mask_soon`)."""
        if len(data) <= OFF_LOOP_CHARS:
            return self.mask_bytes(data)
        return await asyncio.to_thread(self.mask_bytes, data)

    def mask_json(self, value: object) -> object:
        """`mask` applied to every string inside a JSON-like value (tool results made of content blocks); image and
        document blocks of encoded data are left as they are (a plain-text document's text is masked)."""
        if isinstance(value, str):
            return self.mask(value)
        if isinstance(value, list):
            return [self.mask_json(v) for v in value]
        if isinstance(value, dict):
            if value.get("type") in ("image", "document") and not is_text_document(value):
                return value
            return {k: self.mask_json(v) for k, v in value.items()}
        return value

    def mask_messages(self, messages: list[dict[str, Any]]) -> None:
        """`mask` applied in place to the text of API messages' content blocks (text blocks, plain-text documents
        and their titles): what the user sent (a message, a caption, a `.env` file) reaches the model masked like
        everything else. The blocks stay the same objects, so what points at one (which attachment it shows) still
        does; image and encoded document blocks are left as they are.

        A conversation's turns come back at every turn: a text masked once under the same values is not masked
        again (the newest texts of at most REMEMBERED_TEXT_CHARS each are remembered, REMEMBERED_CHARS in all)."""
        mask = self._remembered_mask
        for message in messages:
            content = message.get("content")
            if isinstance(content, str):
                message["content"] = mask(content)
                continue
            for block in content if isinstance(content, list) else ():
                if not isinstance(block, dict):
                    continue
                if block.get("type") == "text" and isinstance(block.get("text"), str):
                    block["text"] = mask(block["text"])
                elif is_text_document(block):
                    source = block["source"]
                    if isinstance(source, dict) and isinstance(source.get("data"), str):
                        source["data"] = mask(source["data"])
                    if isinstance(block.get("title"), str):
                        block["title"] = mask(block["title"])

    def _remembered_mask(self, text: str) -> str:
        if len(text) > REMEMBERED_TEXT_CHARS:
            return self.mask(text)
        values = self.fingerprint()
        with self._remembered_lock:
            if values is not self._remembered_values:
                self._remembered_values, self._remembered, self._remembered_chars = values, {}, 0
            found = self._remembered.pop(text, None)
            if found is not None:
                self._remembered_chars -= len(text)
        if found is None:
            found = self.mask(text)
        with self._remembered_lock:
            if values is self._remembered_values and text not in self._remembered:
                self._remembered[text] = found  # the newest last: the oldest go first
                self._remembered_chars += len(text)
                while self._remembered_chars > REMEMBERED_CHARS:
                    oldest = next(iter(self._remembered))
                    del self._remembered[oldest]
                    self._remembered_chars -= len(oldest)
        return found

    def without_url_credentials(self, text: str) -> str:
        """`https://user:token@host` → `https://host`, then `mask`: for a config a program still reads (the sandbox's
        copy of `.git/config`: `git remote -v` works and shows a plain URL)."""
        return self.mask(_URL_USERINFO.sub("://", text))

    def looks_like_it_holds_a_secret(self, text: str) -> bool:
        """Whether `mask` would change `text`: a question to the owner says so beside the text it shows unmasked."""
        return bool(text) and self.mask(text) != text


class SecretScope:
    """The values one task added (`add`): masked in every output while the task runs, and forgotten by `close` when
    it ends, unless the bot or another running task added them too. Made by `SecretsFilter.scope`."""

    def __init__(self, verbatim: _Verbatim, name: str) -> None:
        self._verbatim = verbatim
        self.name = name

    def add(self, values: Iterable[str]) -> None:
        self._verbatim.add(values, self)

    def close(self) -> None:
        self._verbatim.drop(self)

    def __repr__(self) -> str:
        return f"SecretScope({self.name!r})"


# What a folded view undoes: a percent escape, a JSON `\uXXXX` or `\/` escape, an HTML character reference
# (`&#45;`, `&#x2d;`, `&colon;`: a page or a GitHub comment shows the character), an invisible character (zero-width
# space, joiners, word joiner, byte-order mark, soft hyphen, Mongolian vowel separator, the direction marks and
# isolates, invisible operators, the combining grapheme joiner, variation selectors, tag characters, Hangul fillers).
_INVISIBLE = (
    "\u200b-\u200f\u2060-\u2064\ufeff\u00ad\u180e\u034f\u061c\u202a-\u202e\u2066-\u2069\ufe00-\ufe0f"
    "\U000e0000-\U000e007f\U000e0100-\U000e01ef\u115f\u1160\u3164\uffa0"
)
_INVISIBLE_CHAR = re.compile(f"[{_INVISIBLE}]")
_CHARACTER_REFERENCE = r"&#[0-9]{1,7};|&#[xX][0-9A-Fa-f]{1,6};|&[A-Za-z][A-Za-z0-9]{1,31};"
_FOLDS = re.compile(
    r"%([0-9A-Fa-f]{2})|\\u([0-9A-Fa-f]{4})|\\(/)|(" + _CHARACTER_REFERENCE + r")|([" + _INVISIBLE + r"])"
)
_PERCENT_ESCAPE = re.compile(r"%[0-9A-Fa-f]{2}")  # each of these starts with a literal: a fast scan
_JSON_ESCAPE = re.compile(r"\\(?:u[0-9A-Fa-f]{4}|/)")
_REFERENCE = re.compile(_CHARACTER_REFERENCE)


def _folded(text: str) -> tuple[str, list[int]] | None:
    """The text with escapes decoded and invisible characters removed, and for each of its characters the index in
    `text` where it starts; None when there is nothing to fold (the common case, found by cheap scans)."""
    if not (
        (not text.isascii() and _INVISIBLE_CHAR.search(text))  # instant for an ASCII text
        or ("%" in text and _PERCENT_ESCAPE.search(text))
        or ("\\" in text and _JSON_ESCAPE.search(text))
        or ("&" in text and _REFERENCE.search(text))
    ):
        return None
    parts: list[str] = []
    origin: list[int] = []
    position = 0
    for match in _FOLDS.finditer(text):
        start = match.start()
        parts.append(text[position:start])
        origin.extend(range(position, start))
        percent, unicode_escape, slash, reference, _invisible = match.groups()
        if reference:
            decoded = html.unescape(reference)  # an unknown name stays as written
        else:
            decoded = chr(int(percent or unicode_escape, 16)) if (percent or unicode_escape) else (slash or "")
        if decoded:
            parts.append(decoded)
            origin.append(start)
        position = match.end()
    if position == 0:
        return None
    parts.append(text[position:])
    origin.extend(range(position, len(text)))
    return "".join(parts), origin


def _mask_folded(text: str, verbatim: _Verbatim) -> str:
    """Mask, in `text`, what is a secret only once its escapes and invisible characters are folded away."""
    folded = _folded(text)
    if folded is None:
        return text
    view, origin = folded
    spans: list[tuple[int, int]] = []
    regexes = [(r, g) for r, g, needle in _shapes() if needle is None or needle in view.lower()]
    if verbatim.regex is not None:
        regexes.append((verbatim.regex, False))
    for regex, grouped in regexes:
        for match in regex.finditer(view):
            if _inside_a_word(match):
                continue
            start, end = match.span("secret") if grouped and match.start("secret") >= 0 else match.span()
            if end > start:
                spans.append((origin[start], origin[end] if end < len(origin) else len(text)))
    if not spans:
        return text
    for start, end in reversed(_merged(spans)):
        text = text[:start] + MASK + text[end:]
    return text


# A token split over lines: a line break with token characters right before and after it. Which breaks are looked at
# is decided with the narrow class (no `/` or `.`: a path or a file name on each side of a break is ordinary output),
# and what is then searched around such a break is the wide class (base64, JWTs, escapes).
_SPLIT_REACH = 256  # characters searched on each side of a break
_SPLIT_WIDE_RUN = re.compile(r"[A-Za-z0-9_\-:+=/.%~\\]{1," + str(_SPLIT_REACH) + "}")


def _split_breaks(breaking: str) -> re.Pattern[str]:
    """A line break (`breaking`) with narrow token characters right before and after it, at least `_MIN_VERBATIM`
    together: one alternative per length on the left (fixed-width look-behinds), so the search stays in C and starts
    with a literal."""
    narrow = "[A-Za-z0-9_:+=-]"
    sides = [f"(?<={narrow}{{{tail}}}{breaking}){narrow}{{{_MIN_VERBATIM - tail}}}" for tail in range(1, _MIN_VERBATIM)]
    sides.append(f"(?<={narrow}{{{_MIN_VERBATIM}}}{breaking}){narrow}")
    # the cheap test first: a token character on both sides (most lines start with a space, or end in a bracket)
    return re.compile(f"{breaking}(?={narrow})(?<={narrow}{breaking})(?:{'|'.join(sides)})")


_SPLIT_LF = _split_breaks("\n")
_SPLIT_CRLF = _split_breaks("\r\n")


def _split_candidates(text: str) -> list[tuple[int, int, int]]:
    """(start of the token run before, the break, the first character after it) for each line break that may cut a
    token in two (`_split_breaks`), in the order they stand."""
    if "\n" not in text:
        return []
    found = [match.start() for match in _SPLIT_LF.finditer(text)]
    if "\r\n" in text:
        found = sorted(found + [match.start() for match in _SPLIT_CRLF.finditer(text)])
    candidates: list[tuple[int, int, int]] = []
    for cut in found:
        before = _SPLIT_WIDE_RUN.match(text[max(0, cut - _SPLIT_REACH) : cut][::-1])  # the run, read backwards
        start = cut - (before.end() if before is not None else 0)
        candidates.append((start, cut, cut + (2 if text[cut] == "\r" else 1)))
    return candidates


def _mask_split(text: str, verbatim: _Verbatim) -> str:
    """Mask a token shape or an added value that is whole only once the line breaks inside it are taken out (a
    token folded over several lines too); each of its parts becomes `«masked»` (the breaks stay)."""
    candidates = _split_candidates(text)
    if not candidates:
        return text
    # one text of all the joined pieces, a line apart, so each regex runs once; `segments` maps its spans back:
    # (offset in the view, start in `text`, end in `text`, piece) for each line's part of a piece
    segments: list[tuple[int, int, int, int]] = []
    pieces: list[str] = []
    by_cut = {cut: (cut, after) for _start, cut, after in candidates}
    offset = 0
    chained = -1
    for start, cut, after in candidates:
        if cut <= chained:
            continue  # a later break of a piece already joined
        parts = [(start, cut)]
        while True:
            run = _SPLIT_WIDE_RUN.match(text, after)
            end = run.end() if run is not None else after
            parts.append((after, end))
            if end not in by_cut or len(parts) > _SPLIT_REACH:
                break
            cut, after = by_cut[end]  # the token goes on over the next line break
            chained = cut
        for low, high in parts:
            segments.append((offset, low, high, len(pieces)))
            offset += high - low
        pieces.append("".join(text[low:high] for low, high in parts))
        offset += 1
    view = "\n".join(pieces)
    regexes = [(r, g) for r, g, needle in _shapes() if needle is None]
    if verbatim.regex is not None:
        regexes.append((verbatim.regex, False))
    spans: list[tuple[int, int]] = []
    for regex, grouped in regexes:
        for match in regex.finditer(view):
            low, high = match.span("secret") if grouped and match.start("secret") >= 0 else match.span()
            first = bisect.bisect_right(segments, (low, len(text) + 1)) - 1
            last = bisect.bisect_right(segments, (high - 1, len(text) + 1)) - 1
            # a match within one line was masked by the ordinary pass already; none reaches into the next piece
            if first == last or segments[first][3] != segments[last][3]:
                continue
            if _inside_a_word(match) and match.start() != segments[first][0]:  # a line's start is a word's start
                continue
            for at, start, end, _piece in segments[first : last + 1]:
                spans.append((start + max(low - at, 0), start + min(high - at, end - start)))
    if not spans:
        return text
    for start, end in reversed(_merged(spans)):
        text = text[:start] + MASK + text[end:]
    return text


def _merged(spans: list[tuple[int, int]]) -> list[tuple[int, int]]:
    merged: list[tuple[int, int]] = []
    for start, end in sorted(spans):
        if merged and start <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(end, merged[-1][1]))
        else:
            merged.append((start, end))
    return merged


_URL_CREDENTIALS = re.compile(r"://(?P<secret>[^\s/@'\"<>]+)@")


def _mask_url_credentials(match: re.Match[str]) -> str:
    """`user:password@` always; a bare `token@` only when it looks like a token (not `ssh://git@github.com`)."""
    userinfo = match.group("secret")
    if ":" in userinfo or (len(userinfo) >= 12 and _looks_secret(userinfo)):
        return f"://{MASK}@"
    return match.group(0)


_URL_USERINFO = re.compile(r"://[^\s/@'\"<>]+@")


_ASSIGNMENT = re.compile(r"""^\s*(?:export\s+)?[^\s=:#]+\s*[=:]\s*(?P<value>.+?)\s*$""")
_NETRC = re.compile(r"\b(?:password|passwd|login|account)\s+(?P<value>\S+)")


def credential_values(text: str) -> list[str]:
    """The values a credential file (`.env*`, `.npmrc`, `.netrc`, `.pypirc`, `.git-credentials`, ...) assigns:
    those that look like secrets (8+ characters mixing at least two of lower case, upper case, digits, symbols),
    so that `NODE_ENV=production` does not mask the word `production` everywhere."""
    found: list[str] = []
    for line in text.splitlines():
        if line.lstrip().startswith(("#", ";", "[")):
            continue
        candidates = [m.group("value") for m in _NETRC.finditer(line)]
        if (m := _ASSIGNMENT.match(line)) is not None:
            value = m.group("value").strip().strip("'\"")
            candidates += [value, value.rpartition("=")[2]]
        candidates += [u.group("secret") for u in re.finditer(r"://(?P<secret>[^\s/@]+)@", line)]
        found += [c for c in candidates if _looks_secret(c)]
    return list(dict.fromkeys(found))


def _looks_secret(value: str) -> bool:
    if len(value) < _MIN_VERBATIM or " " in value:
        return False
    classes = (
        any(c.islower() for c in value),
        any(c.isupper() for c in value),
        any(c.isdigit() for c in value),
        any(not c.isalnum() for c in value),
    )
    return sum(classes) >= 2


def is_text_document(block: dict[str, object]) -> bool:
    """A document block whose source is plain text (a text file shown to the model), not encoded data."""
    source = block.get("source")
    return block.get("type") == "document" and isinstance(source, dict) and source.get("type") == "text"
