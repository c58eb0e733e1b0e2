"""Files sent to the chat: a minimal PDF, one with its pages in a compressed object stream, a tiny PNG, a
decompression-bomb PNG, the blocks a request carried, an answer awaited."""

from __future__ import annotations

import os
import struct
import zlib
from typing import Any

from tests.conftest import USER_ID, BotHarness


def minimal_pdf() -> bytes:
    return (
        b"%PDF-1.4\n1 0 obj << /Type /Catalog /Pages 2 0 R >> endobj\n"
        b"2 0 obj << /Type /Pages /Kids [3 0 R] /Count 1 >> endobj\n"
        b"3 0 obj << /Type /Page /Parent 2 0 R /MediaBox [0 0 200 200] >> endobj\ntrailer << /Root 1 0 R >>\n%%EOF\n"
    )


def compressed_pdf(pages: int, padding: int = 0) -> bytes:
    """A PDF 1.5 whose page objects sit in a compressed object stream (as pdfTeX, Word, Acrobat and most modern
    producers write them): its raw bytes never show `/Type /Page`. `padding`: bytes of a scanned page's weight."""
    kids = b" ".join(b"%d 0 R" % (3 + i) for i in range(pages))
    objects = [b"<< /Type /Catalog /Pages 2 0 R >>", b"<< /Type /Pages /Kids [%s] /Count %d >>" % (kids, pages)]
    objects += [
        b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents %d 0 R >>" % (3 + pages + i)
        for i in range(pages)
    ]
    header, body, offset = [], b"", 0
    for n, obj in enumerate(objects, start=1):
        header.append(b"%d %d" % (n, offset))
        body += obj + b"\n"
        offset = len(body)
    head = b" ".join(header) + b"\n"
    packed = zlib.compress(head + body)
    out = b"%PDF-1.5\n%\xe2\xe3\xcf\xd3\n"
    out += b"%d 0 obj\n<< /Type /ObjStm /N %d /First %d /Filter /FlateDecode /Length %d >>\nstream\n" % (
        len(objects) + pages + 1,
        len(objects),
        len(head),
        len(packed),
    )
    out += packed + b"\nendstream\nendobj\n"
    for i in range(pages):  # each page's content stream, compressed
        content = zlib.compress(b"BT /F1 11 Tf 72 720 Td (" + b"lorem ipsum dolor sit amet " * 80 + b") Tj ET")
        out += b"%d 0 obj\n<< /Length %d /Filter /FlateDecode >>\nstream\n" % (3 + pages + i, len(content))
        out += content + b"\nendstream\nendobj\n"
    if padding:
        out += b"%d 0 obj\n<< /Length %d >>\nstream\n" % (3 + 2 * pages, padding) + os.urandom(padding)
        out += b"\nendstream\nendobj\n"
    return out + b"trailer\n<< /Root 1 0 R >>\n%%EOF\n"


def png_chunk(kind: bytes, body: bytes) -> bytes:
    return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body) & 0xFFFFFFFF)


def tiny_png(width: int = 4, height: int = 4) -> bytes:
    """A valid red RGB PNG of width × height pixels (a screenshot as small as it gets)."""
    raw = b"".join(b"\x00" + b"\xff\x00\x00" * width for _ in range(height))
    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + png_chunk(b"IHDR", header)
        + png_chunk(b"IDAT", zlib.compress(raw))
        + png_chunk(b"IEND", b"")
    )


def decompression_bomb(width: int = 20_000, height: int = 20_000) -> bytes:
    """A valid 1-bit grey PNG of width × height pixels, all black: 400 megapixels in about 48 KB."""
    row = b"\x00" + b"\x00" * ((width + 7) // 8)
    compressor = zlib.compressobj(9)
    idat = b"".join(compressor.compress(row) for _ in range(height)) + compressor.flush()
    header = struct.pack(">IIBBBBB", width, height, 1, 0, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + png_chunk(b"IHDR", header) + png_chunk(b"IDAT", idat) + png_chunk(b"IEND", b"")


def blocks_of(request: dict[str, Any]) -> list[dict[str, Any]]:
    """The content blocks of a request's last message."""
    return list(request["messages"][-1]["content"])


async def answer_or_apology(bot: BotHarness, text: str) -> list[str | None]:
    """The chat's texts once the bot said `text` or apologised ("something went wrong"), whichever comes first."""

    def said() -> list[str | None]:
        return [m.text for m in bot.tg.messages(USER_ID)]

    await bot.tg.await_for(lambda: any(t == text or "went wrong" in (t or "") for t in said()) or None, timeout=20)
    return said()


async def answered(bot: BotHarness, text: str) -> Any:
    """The bot's message whose text is exactly `text`, once it is there."""
    return await bot.tg.await_for(
        lambda: next((m for m in bot.tg.messages(USER_ID) if m.text == text), None), timeout=20
    )
