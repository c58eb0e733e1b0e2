"""How many pages a PDF has, read from its bytes without a PDF library: the page tree's `/Count`, else its page
objects, also where they sit in compressed object streams (PDF 1.5+), else a conservative guess from its size.

Most PDFs written since about 2005 (pdfTeX, Word, Acrobat, browsers' "save as PDF") keep their page objects in
`/ObjStm` object streams, compressed with FlateDecode: the file's raw bytes never show `/Type /Page`. Those streams
are inflated here, each to a bounded size and all of them together to a bounded total, so a small file that inflates
to gigabytes costs no more than the bound.
"""

from __future__ import annotations

import math
import re
import zlib

_PAGE = re.compile(rb"/Type\s*/Page(?![a-zA-Z])")
_PAGES_TYPE = re.compile(rb"/Type\s*/Pages(?![a-zA-Z])")
_COUNT = re.compile(rb"/Count\s+(\d{1,7})(?!\d)")
_OBJECT_STREAM = re.compile(rb"/Type\s*/ObjStm(?![a-zA-Z])")
_STREAM_START = re.compile(rb"stream(?:\r\n|\n|\r)")
STREAM_DICT_MAX_BYTES = 4_000  # how far from `/Type /ObjStm` the stream's data may start (its dictionary between)
STREAM_MAX_BYTES = 8_000_000  # one object stream inflated to at most this ...
INFLATED_MAX_BYTES = 32_000_000  # ... and all of them together to at most this
BYTES_PER_PAGE_GUESS = 50_000  # a file whose pages cannot be found: one page per this many bytes (a text page is less)
GUESS_MAX_PAGES = 100  # ... and no more than the API reads (a file past it is the API's to refuse, with its reason)


def _object_streams(data: bytes) -> list[bytes]:
    """The inflated contents of the file's FlateDecode object streams, within the bounds above."""
    found: list[bytes] = []
    left = INFLATED_MAX_BYTES
    for match in _OBJECT_STREAM.finditer(data):
        if left <= 0:
            break
        start = _STREAM_START.search(data, match.end(), match.end() + STREAM_DICT_MAX_BYTES)
        if start is None or b"/FlateDecode" not in data[match.start() : start.start()]:
            continue
        inflater = zlib.decompressobj()
        try:
            # zlib stops at the end of the stream's own data, so its /Length (maybe an indirect object) is not needed
            inflated = inflater.decompress(memoryview(data)[start.end() :], min(left, STREAM_MAX_BYTES))
        except zlib.error:
            continue
        found.append(inflated)
        left -= len(inflated)
    return found


def _page_tree_count(text: bytes) -> int:
    """The largest `/Count` of a `/Type /Pages` dictionary in `text` (the root's: every page), 0 when none is seen.
    Only the dictionary around each `/Type /Pages` is read, and only when none is nested in it: an outline's
    `/Count` is not a page count, and nested dictionaries (inherited resources) are rare in a page tree node."""
    counts = [0]
    for node in _PAGES_TYPE.finditer(text):
        start, end = text.rfind(b"<<", 0, node.start()), text.find(b">>", node.end())
        if start < 0 or end < 0:
            continue
        before, after = text[start + 2 : node.start()], text[node.end() : end]
        if b">>" in before or b"<<" in after:
            continue
        count = _COUNT.search(before) or _COUNT.search(after)
        if count is not None:
            counts.append(int(count.group(1)))
    return max(counts)


def pdf_pages(data: bytes) -> int:
    """The pages of the PDF in `data`: the page tree's count when it can be read, else its page objects, else a
    guess from the file's size that errs high (a file's pages decide its cost to the model and its page limit)."""
    parts = [data, *_object_streams(data)]
    counted = max(_page_tree_count(part) for part in parts)
    if counted:
        return counted
    objects = sum(len(_PAGE.findall(part)) for part in parts)
    if objects:
        return objects
    return max(1, min(GUESS_MAX_PAGES, math.ceil(len(data) / BYTES_PER_PAGE_GUESS)))
