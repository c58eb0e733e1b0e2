"""Files sent to the chat: a minimal PDF, a decompression-bomb PNG, the blocks a request carried, an answer awaited."""

from __future__ import annotations

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


def png_chunk(kind: bytes, body: bytes) -> bytes:
    return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body) & 0xFFFFFFFF)


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


async def answered(bot: BotHarness, text: str) -> Any:
    """The bot's message whose text is exactly `text`, once it is there."""
    return await bot.tg.await_for(
        lambda: next((m for m in bot.tg.messages(USER_ID) if m.text == text), None), timeout=20
    )
