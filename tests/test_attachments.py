"""agents/attachments: what is taken, how pictures are normalised, what is refused, and the blocks a model sees."""

from __future__ import annotations

import base64
import io
import random
import struct
import tracemalloc
import warnings
import zlib

import pytest
from PIL import Image

from agents.core.models import AttachmentKind
from agents.inputs.attachments import (
    API_IMAGE_MAX_BYTES,
    WORKTREE_FOLDER,
    AttachmentRefused,
    Attachments,
    Limits,
    normalise_image,
)
from agents.inputs.pdf_pages import GUESS_MAX_PAGES, STREAM_MAX_BYTES, pdf_pages
from tests.support.attachments import compressed_pdf


def picture(size: tuple[int, int], fmt: str = "PNG", mode: str = "RGB", **save: object) -> bytes:
    out = io.BytesIO()
    Image.new(mode, size, (10, 20, 30, 128)[: len(mode)] if mode != "P" else 3).save(out, fmt, **save)
    return out.getvalue()


def test_a_small_picture_in_an_api_format_is_kept_byte_for_byte() -> None:
    data = picture((300, 200), "WEBP")
    assert normalise_image(data, 1568) == (data, "image/webp", 300, 200)


def test_a_large_picture_is_scaled_to_the_long_edge_and_transparency_stays_png() -> None:
    data, media_type, width, height = normalise_image(picture((4000, 1000), "PNG", "RGBA"), 1568)
    assert (media_type, width, height) == ("image/png", 1568, 392)
    assert Image.open(io.BytesIO(data)).mode == "RGBA"


def test_other_formats_become_jpeg_and_noisy_pictures_fit_the_api_byte_limit() -> None:
    data, media_type, _, _ = normalise_image(picture((64, 64), "BMP"), 1568)
    assert media_type == "image/jpeg" and data.startswith(b"\xff\xd8")
    # 4 MB of incompressible pixels: within the edge limit but over the API's byte limit as PNG at full size
    noise = Image.frombytes("RGBA", (1000, 1000), random.Random(1).randbytes(1000 * 1000 * 4))
    out = io.BytesIO()
    noise.save(out, "PNG", compress_level=1)
    assert len(out.getvalue()) > API_IMAGE_MAX_BYTES
    data, media_type, width, _ = normalise_image(out.getvalue(), 1000)
    assert media_type == "image/png" and len(data) <= API_IMAGE_MAX_BYTES and width < 1000


def png_declaring(width: int, height: int) -> bytes:
    """A PNG whose header declares `width`×`height` (one bit a pixel) and whose pixels are never written: all that the
    limit reads. Drawing a 400-megapixel picture with Pillow to have that header cost a second or more of CPU."""

    def chunk(kind: bytes, body: bytes) -> bytes:
        return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))

    header = struct.pack(">IIBBBBB", width, height, 1, 0, 0, 0, 0)  # 1-bit greyscale, deflate, no interlace
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(b"\0")) + chunk(b"IEND", b"")


def test_damaged_and_gigantic_pictures_are_refused_with_a_sentence() -> None:
    with pytest.raises(AttachmentRefused, match="couldn't read"):
        normalise_image(b"\x89PNG\r\n\x1a\n" + b"\0" * 50, 1568)
    with pytest.raises(AttachmentRefused, match="megapixels"):
        normalise_image(png_declaring(10_000, 6_000), 1568)  # 60 megapixels in a header of a few dozen bytes


@pytest.mark.parametrize("size", [(10_000, 6_000), (10_000, 10_000), (20_000, 20_000)])
def test_the_picture_limit_changes_nothing_of_pillow_for_the_rest_of_the_process(size: tuple[int, int]) -> None:
    """60, 100 and 400 megapixels (under, between and past Pillow's own warning and error sizes) are all refused by
    our limit, and Pillow's process-wide guard (its module attribute, the warning filters) is as it was."""
    before = (Image.MAX_IMAGE_PIXELS, list(warnings.filters))
    with pytest.raises(AttachmentRefused, match="megapixels"):
        normalise_image(png_declaring(*size), 1568)
    assert (Image.MAX_IMAGE_PIXELS, list(warnings.filters)) == before


async def test_accept_sorts_files_by_content_and_refuses_what_it_cannot_read(tmp_path) -> None:
    keeper = Attachments(tmp_path / "att", Limits(text_max_bytes=1000, pdf_max_bytes=5000))
    text = await keeper.accept(1, "naïve,csv\n1,2\n".encode(), "data.csv")
    assert text.kind is AttachmentKind.TEXT and keeper.path_of(text).read_text() == "naïve,csv\n1,2\n"
    pdf = await keeper.accept(1, b"%PDF-1.7\n/Type /Page\n/Type /Page\n/Type /Pages\n", "spec.pdf")
    assert pdf.kind is AttachmentKind.PDF and pdf.tokens == 4000  # two pages
    image = await keeper.accept(1, picture((50, 40), "GIF"), "anim.gif")
    assert (image.kind, image.media_type, image.name) == (AttachmentKind.IMAGE, "image/gif", "anim.gif")
    with pytest.raises(AttachmentRefused, match="none of those"):
        await keeper.accept(1, b"\x7fELF\x02\x01\x01\0\0\0", "a.out")
    with pytest.raises(AttachmentRefused, match="2 KB, more than the 1 KB"):
        await keeper.accept(1, b"x" * 2000, "big.txt")
    with pytest.raises(AttachmentRefused, match="more than the 5 KB I read in a PDF"):
        await keeper.accept(1, b"%PDF-1.4" + b"\0" * 6000, "big.pdf")
    with pytest.raises(AttachmentRefused, match="couldn't read photo.jpg"):
        await keeper.accept(1, b"plain text", "photo.jpg", image_only=True)
    assert not any(p.name.endswith(".part") for p in (tmp_path / "att").rglob("*"))


async def test_a_pdf_with_its_pages_in_a_compressed_object_stream_is_counted_by_them(tmp_path) -> None:
    """Most PDFs of the last twenty years keep their page objects in compressed object streams: their raw bytes
    never show `/Type /Page`. Their pages still decide the API's page limit and the turn's token budget."""
    keeper = Attachments(tmp_path / "att")
    with pytest.raises(AttachmentRefused, match="has about 150 pages, more than the 100"):
        await keeper.accept(1, compressed_pdf(150), "paper.pdf")
    paper = await keeper.accept(1, compressed_pdf(40), "paper.pdf")
    assert paper.tokens == 40 * 2000


def test_pdf_pages_reads_the_page_tree_then_the_pages_then_guesses_high() -> None:
    tree = compressed_pdf(12)
    assert pdf_pages(tree) == 12, "the page tree's /Count"
    uncounted = tree.replace(b"/Count", b"/Kount")  # no count: its page objects, inflated from the object stream
    assert b"/Count" not in uncounted and pdf_pages(uncounted) == 12
    outline = b"%PDF-1.4\n1 0 obj << /Type /Outlines /Count 300 >> endobj\n2 0 obj << /Type /Page >> endobj\n"
    assert pdf_pages(outline) == 1, "an outline's /Count is not a page count"
    unreadable = b"%PDF-1.5\n" + random.Random(1).randbytes(999_991)  # 1 MB, encrypted, say: nothing to read
    assert pdf_pages(unreadable) == 20, "a guess from its size: one page per 50 KB"
    assert pdf_pages(b"%PDF-1.5\n" + bytes(10_000_000)) == GUESS_MAX_PAGES


def test_an_object_stream_that_inflates_without_end_is_read_only_so_far() -> None:
    """A few KB that inflate to hundreds of MB (a decompression bomb in an object stream) take no more memory than
    the bound on one stream."""
    squeezer = zlib.compressobj(9)
    bomb = b"".join(squeezer.compress(bytes(1_000_000)) for _ in range(200)) + squeezer.flush()  # 200 MB of zeros
    pages = b"".join(b"%d 0 obj << /Type /Page >> endobj\n" % n for n in range(3))
    data = b"%PDF-1.5\n9 0 obj << /Type /ObjStm /N 1 /First 4 /Filter /FlateDecode >>\nstream\n" + bomb + pages
    tracemalloc.start()
    try:
        assert pdf_pages(data) == 3
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 4 * STREAM_MAX_BYTES, f"{peak:,} bytes at the peak (the stream inflates to 200 MB)"


async def test_blocks_and_worktree_copies(tmp_path) -> None:
    keeper = Attachments(tmp_path / "att")
    image = await keeper.accept(1, picture((20, 10), "PNG"), "../../etc/logo.png")
    image.id = 4
    label, block = await keeper.blocks(image)
    assert label["text"] == "[attachment #4: logo.png (image)]"
    assert block["source"]["media_type"] == "image/png"
    assert base64.b64decode(block["source"]["data"]) == keeper.path_of(image).read_bytes()
    worktree = tmp_path / "tree"
    worktree.mkdir()
    assert await keeper.copy_into([image], worktree) == ([f"{WORKTREE_FOLDER}/4-logo.png"], None)
    assert (worktree / WORKTREE_FOLDER / ".gitignore").read_text() == "*\n"
    keeper.path_of(image).unlink()
    [gone] = await keeper.blocks(image)
    assert "no longer available" in gone["text"]


async def test_a_file_name_with_characters_no_file_may_have_is_kept_printable_and_saved(tmp_path) -> None:
    """A NUL, a control or an invisible format character in the name the user's app gave: the name is kept with `_`
    in their place, so it names a file in a worktree; an older attachment stored with such a name is said not
    saved, and the task goes on (a ValueError there once failed the whole task)."""
    keeper = Attachments(tmp_path / "att")
    notes = await keeper.accept(1, b"remember the milk\n", "notes\x00\x1b[2J\u202e.txt")
    assert notes.name == "notes__[2J_.txt"
    notes.id = 5
    worktree = tmp_path / "tree"
    worktree.mkdir()
    assert await keeper.copy_into([notes], worktree) == ([f"{WORKTREE_FOLDER}/5-notes__[2J_.txt"], None)
    older = notes.model_copy(update={"id": 6, "name": "old\x00.txt"})
    placed, problem = await keeper.copy_into([older], worktree)
    assert placed == [] and problem is not None and "could not be written" in problem


async def test_a_long_name_in_another_script_still_names_a_file_in_the_worktree(tmp_path) -> None:
    """A name is capped in bytes, not only characters: 120 Cyrillic letters are 240 bytes, and with the bot's
    `<id>-` prefix and its temporary suffix the file could not be written into the task's worktree (past Linux's 255
    bytes), so the worker never got it. The extension is kept, and no character is cut in half."""
    keeper = Attachments(tmp_path / "att")
    kept = await keeper.accept(1, b"%PDF-1.4\n/Type /Page\n%%EOF\n", "я" * 116 + ".pdf")
    assert kept.name.endswith(".pdf") and kept.name.startswith("яя") and len(kept.name.encode()) <= 150
    kept.id = 12
    worktree = tmp_path / "tree"
    worktree.mkdir()
    placed, problem = await keeper.copy_into([kept], worktree)
    assert problem is None and placed == [f"{WORKTREE_FOLDER}/12-{kept.name}"]
