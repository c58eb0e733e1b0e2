"""Photos and files the user sends: checked by content, images normalised with Pillow, kept as files under the
data folder (the store keeps a reference), and turned into Messages API content blocks: image, document, text.

Limits (settings, `.env.example`): an image is scaled to at most ATTACHMENT_IMAGE_MAX_EDGE px on its long edge (the
API scales anything larger down to ~1568 px anyway) and ≤ 3.75 MB (5 MB once base64-encoded, the API's limit); a
PDF ≤ ATTACHMENT_PDF_MAX_BYTES and 100 pages (the API's page limit); a text file (code, logs, JSON, CSV, Markdown:
anything that is UTF-8 without NUL bytes) ≤ ATTACHMENT_TEXT_MAX_BYTES.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import io
import math
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agents.core.models import Attachment, AttachmentKind
from agents.core.settings import Settings
from agents.inputs.pdf_pages import pdf_pages
from agents.sandbox.safe_paths import UnsafePath, write_file

API_IMAGE_MAX_BYTES = 3_750_000  # 5 MB after base64 encoding: the Messages API's per-image limit
API_IMAGE_MAX_EDGE = 8000  # the API refuses images larger than this on either side
API_PDF_MAX_PAGES = 100
# Larger pictures are refused before they are decoded (decompression bombs), and Pillow's own guard is set to it:
# 50 MP is more than any phone or camera photo (a 48-MP phone picture fits) and decodes to at most 200 MB (RGBA).
MAX_SOURCE_PIXELS = 50_000_000
IMAGE_FORMATS = {"JPEG": "image/jpeg", "PNG": "image/png", "GIF": "image/gif", "WEBP": "image/webp"}
DECODED_FORMATS = (*IMAGE_FORMATS, "BMP", "TIFF")  # what a picture is read as (the others re-encoded), never EPS
WORKTREE_FOLDER = ".agentlab/attachments"  # where a task's files land; ignored by git (a `*` .gitignore inside)


class AttachmentRefused(Exception):
    """A file we cannot take; `str(err)` is one sentence for the user (without its final full stop)."""


class NotAPicture(AttachmentRefused):
    """Pillow does not recognise the bytes as a picture at all (for a document: not a kind of file we read)."""


@dataclass(frozen=True)
class Limits:
    image_max_edge: int = 1568
    pdf_max_bytes: int = 10_000_000
    text_max_bytes: int = 200_000

    @classmethod
    def from_settings(cls, settings: Settings) -> Limits:
        return cls(
            settings.attachments.attachment_image_max_edge,
            settings.attachments.attachment_pdf_max_bytes,
            settings.attachments.attachment_text_max_bytes,
        )


def _megabytes(size: int) -> str:
    return f"{size / 1e6:.1f} MB".replace(".0 MB", " MB") if size >= 1_000_000 else f"{size / 1e3:.0f} KB"


def _too_large(name: str, pixels: str) -> AttachmentRefused:
    return AttachmentRefused(
        f"I can't take {name}: it is {pixels} pixels, more than my limit of {MAX_SOURCE_PIXELS // 1_000_000} megapixels"
    )


MAX_NAME_BYTES = 150  # a file name on Linux is at most 255 bytes; the bot's prefixes and temporary suffixes need room


def file_name(name: str | None) -> str:
    """The name a user's app gave a file, as the bot uses and shows it: its last part, each character that is not
    printable (a NUL, a line break, a control or an invisible format character such as a direction override) made
    `_`, at most 120 characters and MAX_NAME_BYTES bytes in UTF-8 (the extension kept: 120 Cyrillic letters are 240
    bytes, and with the bot's prefix the file could not be written into the task's worktree)."""
    name = "".join(ch if ch.isprintable() else "_" for ch in Path(name or "file").name)[:120] or "file"
    if len(name.encode()) <= MAX_NAME_BYTES:
        return name
    stem, dot, extension = name.rpartition(".")
    if not dot or not stem or len(extension.encode()) > 16:
        stem, extension = name, ""
    room = MAX_NAME_BYTES - len(extension.encode()) - (1 if extension else 0)
    stem = stem.encode()[:room].decode(errors="ignore")  # never half a character
    return f"{stem}.{extension}" if extension else stem


def normalise_image(data: bytes, max_edge: int, name: str = "that picture") -> tuple[bytes, str, int, int]:
    """(bytes, media type, width, height) of a picture the API takes; re-encoded and scaled down only when needed.

    CPU work: run it in an executor. Raises NotAPicture for what Pillow does not recognise, AttachmentRefused (one
    sentence) for a picture too large to decode safely or that fails to decode: every Pillow error ends here.

    Memory: the picture is scaled in place while it is decoded (`thumbnail` asks a JPEG decoder for a reduced size
    with `draft()`, then `reduce`s by an integer factor before resampling), and only the small result is copied,
    transposed and re-encoded, so the peak stays near one decoded picture (bench/attachments.py measures it).
    """
    from PIL import Image, UnidentifiedImageError

    # The limit is ours, checked on the size the header declares before anything is decoded. Pillow's own guard
    # (a module attribute and a warning filter, both process-wide) is left at its defaults: it still refuses a
    # declared size past twice its limit on open, and nothing here changes it for the rest of the process.
    # Only formats Pillow decodes itself (the API's, and BMP and TIFF re-encoded): other plugins hand the data to
    # outside programs (an EPS file is rendered by running Ghostscript on the sender's PostScript, outside any sandbox)
    try:
        image = Image.open(io.BytesIO(data), formats=DECODED_FORMATS)
    except UnidentifiedImageError as err:
        raise NotAPicture(f"I couldn't read {name} (it may be damaged or in a format I don't know)") from err
    except (Image.DecompressionBombError, Image.DecompressionBombWarning) as err:
        declared = re.search(r"\((\d+) pixels\)", str(err))
        raise _too_large(name, f"{int(declared.group(1)) / 1e6:,.0f} million" if declared else "too many") from err
    except Exception as err:  # any other Pillow error on a header it recognised
        raise AttachmentRefused(f"I couldn't read {name} (it looks damaged)") from err
    with image:
        width, height = image.size
        if width * height > MAX_SOURCE_PIXELS:
            raise _too_large(name, f"{width}×{height}")
        try:
            return _scaled(image, data, max_edge)
        except AttachmentRefused:
            raise
        except Exception as err:  # truncated or corrupt data shows up on decoding; so does a bomb inside a frame
            raise AttachmentRefused(f"I couldn't read {name} (it looks damaged)") from err


def _scaled(image: Any, data: bytes, max_edge: int) -> tuple[bytes, str, int, int]:
    """The picture as the API takes it: as sent when it already fits, else scaled down and re-encoded."""
    from PIL import Image, ImageOps

    width, height = image.size
    media_type = IMAGE_FORMATS.get(image.format or "")
    animated = getattr(image, "is_animated", False)
    if media_type and not animated and max(width, height) <= max_edge and len(data) <= API_IMAGE_MAX_BYTES:
        image.verify()
        return data, media_type, width, height
    # In place, and decoded at a reduced size where the format allows it: a JPEG decoder scales by 1/2, 1/4 or 1/8
    # (`draft`, asked here for twice the final size, as `thumbnail` would with its square box only when both sides
    # are large), then `thumbnail` reduces by an integer factor and resamples. The square box makes the EXIF
    # rotation, applied after on the small picture, give the same result.
    shrink = max_edge / max(width, height)
    if shrink < 1:
        image.draft(None, (math.ceil(width * shrink * 2), math.ceil(height * shrink * 2)))
    image.thumbnail((max_edge, max_edge), Image.Resampling.LANCZOS)
    picture = ImageOps.exif_transpose(image)
    edge = max_edge
    while True:
        frame = picture if edge == max_edge else picture.copy()
        if edge != max_edge:
            frame.thumbnail((edge, edge), Image.Resampling.LANCZOS)
        out = io.BytesIO()
        if frame.mode in ("RGBA", "LA") or (frame.mode == "P" and "transparency" in frame.info):
            frame.convert("RGBA").save(out, "PNG")
            media_type = "image/png"
        else:
            frame.convert("RGB").save(out, "JPEG", quality=85, optimize=True)
            media_type = "image/jpeg"
        if out.tell() <= API_IMAGE_MAX_BYTES or edge <= 256:
            return out.getvalue(), media_type, frame.width, frame.height
        edge = int(edge * 0.75)


def image_tokens(width: int, height: int) -> int:
    return max(1, width * height // 750)  # the API's own rule of thumb


def text_of(data: bytes) -> str | None:
    """The text of a UTF-8 file (a BOM is fine), or None for anything binary."""
    if b"\x00" in data:
        return None
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError:
        return None


class Attachments:
    """Takes files in (`accept`), keeps them under `folder`, and gives them back as API blocks or as files."""

    def __init__(self, folder: Path, limits: Limits = Limits()) -> None:
        self.folder = folder
        self.limits = limits

    @classmethod
    def from_settings(cls, settings: Settings) -> Attachments:
        return cls(settings.paths.database_path.parent.resolve() / "attachments", Limits.from_settings(settings))

    def path_of(self, attachment: Attachment) -> Path:
        return self.folder / attachment.path

    async def accept(self, chat_id: int, data: bytes, name: str, image_only: bool = False) -> Attachment:
        """Check a file by its content and keep it; raises AttachmentRefused with one sentence for the user. The
        name the user's app gave is kept as its last part, each character that is not printable (a NUL, a control
        or an invisible format character) made `_`: it names a file in a worktree later, and is shown in the chat."""
        name = file_name(name)
        if data.startswith(b"%PDF-") and not image_only:
            return await self._keep_pdf(chat_id, data, name)
        text = None if image_only else text_of(data)
        if text is not None:
            if len(data) > self.limits.text_max_bytes:
                raise AttachmentRefused(
                    f"{name} is {_megabytes(len(data))}, more than the "
                    f"{_megabytes(self.limits.text_max_bytes)} of text I read (send the part "
                    "that matters, e.g. the end of the log)"
                )
            return await self._store(
                chat_id, AttachmentKind.TEXT, name, "text/plain", text.encode("utf-8"), tokens=len(text) // 4 + 1
            )
        try:
            picture, media_type, width, height = await asyncio.to_thread(
                normalise_image, data, self.limits.image_max_edge, name
            )
        except NotAPicture:
            if image_only:
                raise
            raise AttachmentRefused(
                f"I read pictures (JPEG, PNG, GIF, WebP), PDFs and text files (code, logs, JSON, "
                f"CSV, Markdown), and {name} is none of those"
            ) from None
        if media_type != "image/jpeg" or not name.lower().endswith((".jpg", ".jpeg")):
            name = f"{Path(name).stem}.{media_type.split('/')[1].replace('jpeg', 'jpg')}"
        return await self._store(
            chat_id, AttachmentKind.IMAGE, name, media_type, picture, tokens=image_tokens(width, height)
        )

    async def _keep_pdf(self, chat_id: int, data: bytes, name: str) -> Attachment:
        if len(data) > self.limits.pdf_max_bytes:
            raise AttachmentRefused(
                f"{name} is {_megabytes(len(data))}, more than the "
                f"{_megabytes(self.limits.pdf_max_bytes)} I read in a PDF"
            )
        pages = await asyncio.to_thread(pdf_pages, data)  # compressed object streams are inflated to count
        if pages > API_PDF_MAX_PAGES:
            raise AttachmentRefused(
                f"{name} has about {pages} pages, more than the {API_PDF_MAX_PAGES} I read in a PDF"
            )
        return await self._store(chat_id, AttachmentKind.PDF, name, "application/pdf", data, tokens=pages * 2000)

    async def _store(
        self, chat_id: int, kind: AttachmentKind, name: str, media_type: str, data: bytes, tokens: int
    ) -> Attachment:
        digest = hashlib.sha256(data).hexdigest()[:32]
        suffix = re.sub(r"[^a-z0-9.]", "", Path(name).suffix.lower())[:10]
        relative = f"{chat_id}/{digest}{suffix if len(suffix) > 1 else '.bin'}"
        target = self.folder / relative

        def write() -> None:  # same content, same file: writing it again is harmless
            # the users' files are the bot's user's alone (folders 0700, files 0600), whatever the process's umask
            for folder in (self.folder, target.parent):
                folder.mkdir(mode=0o700, parents=True, exist_ok=True)
            partial = target.with_suffix(target.suffix + ".part")
            fd = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            with os.fdopen(fd, "wb") as out:
                out.write(data)
            os.chmod(partial, 0o600)  # one left by an older bot, made with the umask's mode
            partial.replace(target)

        await asyncio.to_thread(write)
        return Attachment(
            chat_id=chat_id, kind=kind, name=name, media_type=media_type, path=relative, size=len(data), tokens=tokens
        )

    async def blocks(self, attachment: Attachment) -> list[dict[str, Any]]:
        """The content blocks that show the attachment to a model: a label with its id, then the image/document/text."""
        label = {"type": "text", "text": f"[attachment #{attachment.id}: {attachment.name} ({attachment.kind.value})]"}
        if attachment.refused:  # the API refused it once: sending it again would fail every request that carries it
            return [
                {
                    "type": "text",
                    "text": f"[attachment #{attachment.id}: {attachment.name} ({attachment.kind.value}) is left out: "
                    f"the API refused it ({attachment.refused})]",
                }
            ]
        try:
            data = await asyncio.to_thread(self.path_of(attachment).read_bytes)
        except OSError:
            return [
                {"type": "text", "text": f"[attachment #{attachment.id}: {attachment.name} is no longer available]"}
            ]
        if attachment.kind is AttachmentKind.TEXT:  # a plain-text document: the API's own block for a text file
            text = data.decode("utf-8", errors="replace") or "(the file is empty)"  # the API takes no empty document
            return [
                label,
                {
                    "type": "document",
                    "title": attachment.name[:200],
                    "source": {"type": "text", "media_type": "text/plain", "data": text},
                },
            ]
        encoded = base64.standard_b64encode(data).decode("ascii")
        if attachment.kind is AttachmentKind.PDF:
            return [
                label,
                {
                    "type": "document",
                    "title": attachment.name[:200],
                    "source": {"type": "base64", "media_type": "application/pdf", "data": encoded},
                },
            ]
        return [
            label,
            {"type": "image", "source": {"type": "base64", "media_type": attachment.media_type, "data": encoded}},
        ]

    async def blocks_of(self, attachments: list[Attachment]) -> list[dict[str, Any]]:
        blocks: list[dict[str, Any]] = []
        for attachment in attachments:
            blocks += await self.blocks(attachment)
        return blocks

    async def copy_into(self, attachments: list[Attachment], worktree: Path) -> tuple[list[str], str | None]:
        """Put the files under WORKTREE_FOLDER of a task's worktree (git ignores that folder): (their paths, why some
        or all could not be saved). Nothing is written through a symlink the repository or a worker placed on the
        way (`safe_paths`): such a path is refused and the reason names it."""
        base = Path(worktree)

        def copy() -> tuple[list[str], str | None]:
            try:
                write_file(base, f"{WORKTREE_FOLDER}/.gitignore", b"*\n")
            except OSError as err:
                return [], _why_not_saved(err)
            placed: list[str] = []
            problems: list[str] = []
            for attachment in attachments:
                relative = f"{WORKTREE_FOLDER}/{attachment.id}-{attachment.name}"
                try:
                    write_file(base, relative, self.path_of(attachment).read_bytes())
                except (OSError, ValueError) as err:  # ValueError: a name no file may have (a NUL, stored before)
                    problems.append(_why_not_saved(err))
                    continue
                placed.append(relative)
            return placed, "; ".join(problems) or None

        return await asyncio.to_thread(copy)


def _why_not_saved(err: OSError | ValueError) -> str:
    if isinstance(err, UnsafePath):
        return f"{err} in the repository, and I never write through links"
    return f"it could not be written ({getattr(err, 'strerror', None) or err})"
