"""Which photo or file the Messages API refused: found from its 400 error, so the orchestrator can drop it
from this turn and every later one, instead of failing each request of the chat until /new.

The API usually names the block it refused (`messages.2.content.0.pdf.source.base64.data: The PDF specified was not
valid.`); then that block's attachment is the one. Some errors say only what kind it was ("Could not process PDF"):
then the suspects are the request's attachments of that kind, the new message's own first (older ones went through
in earlier turns), else all of them. An error that names no attachment and no kind of one refuses nothing here.
"""

from __future__ import annotations

import re
from typing import Any

import anthropic

from agents.core.models import Attachment, AttachmentKind
from agents.core.text import outside_text

_POINTER = re.compile(r"messages\.(\d+)\.content\.(\d+)")
_POINTER_PREFIX = re.compile(r"^messages\.\d+\.content\.\d+[\w.]*:\s*")
_KIND_WORDS = {
    AttachmentKind.PDF: ("pdf", "document"),
    AttachmentKind.TEXT: ("text document", "plain text"),  # a text file is shown as a plain-text document
    AttachmentKind.IMAGE: ("image",),
}

BlockOwners = dict[int, Attachment]  # id() of a content block in the request → the attachment it shows


def invalid_request_message(err: anthropic.APIError) -> str | None:
    """The message of a 400 `invalid_request_error`, else None."""
    if not isinstance(err, anthropic.BadRequestError):
        return None
    body = err.body if isinstance(err.body, dict) else {}
    inner = body.get("error")
    error = inner if isinstance(inner, dict) else body
    if error.get("type", "invalid_request_error") != "invalid_request_error":
        return None
    return str(error.get("message") or err.message)


def refused_attachments(
    message: str, messages: list[dict[str, Any]], owners: BlockOwners, current: list[Attachment]
) -> list[Attachment]:
    """The attachments the API refused, according to its error `message` about the request's `messages`."""
    pointer = _POINTER.search(message)
    if pointer:
        i, j = (int(n) for n in pointer.groups())
        content = messages[i].get("content") if i < len(messages) else None
        owner = owners.get(id(content[j])) if isinstance(content, list) and j < len(content) else None
        if owner is not None and not owner.refused:
            return [owner]
    lowered = message.lower()
    kinds = {kind for kind, words in _KIND_WORDS.items() if any(word in lowered for word in words)}
    sent = list({a.id: a for a in owners.values() if a.kind in kinds and not a.refused}.values())
    current_ids = {a.id for a in current}
    return [a for a in sent if a.id in current_ids] or sent


def reason_of(message: str) -> str:
    """The API's words without the field path: 'The PDF specified was not valid.'"""
    return _POINTER_PREFIX.sub("", message).strip()[:200] or "refused"


def refusal_note(refused: list[Attachment], reason: str) -> str:
    """One sentence for the user naming the refused files."""
    names = ", ".join(f"**{outside_text(a.name, one_line=True)}**" for a in refused)
    them = "it" if len(refused) == 1 else "them"
    return (
        f"Claude's API refused {names} ({reason}), so I've left {them} out of our conversation from now on "
        f"(send {them} again in another format if you need {them})."
    )


def too_big_note(left_out: list[Attachment]) -> str:
    """One sentence for the user naming the files of their message that did not fit in the request with it."""
    names = ", ".join(f"**{outside_text(a.name, one_line=True)}**" for a in left_out)
    them = "it" if len(left_out) == 1 else "them"
    return (
        f"{names} did not fit in what Claude can read at once (its context window) together with our conversation, "
        f"so I've answered your words without {them} and left {them} out of our conversation from now on (send a "
        f"smaller part, such as fewer pages or the text that matters, if you need {them} read)."
    )
