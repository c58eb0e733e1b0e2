"""The speech process: one resident transcriber (`agents.inputs.voice.make_engine`) serving the bot over a pipe.

Run by `agents.inputs.speech_process.SpeechProcess` as `python -m agents.inputs.speech_server CONFIG_JSON`. It loads
the model, says so with one JSON line on stdout, then answers each request from stdin, in order, until stdin closes
(the bot ended it, or the bot died: either way this process ends and its memory is returned).

A request is one JSON line `{"size": N}` followed by N bytes of audio; each answer is one JSON line: the transcript
(`text`, `language`, the seconds, the note's `speed`) or `{"error": CLASS, "message": ONE_SENTENCE}` with the
class of the `VoiceError` the bot raises again. Anything else printed (a library's progress output) goes to
stderr, the bot's log: stdout carries the answers only.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import sys
from typing import Any, BinaryIO

from agents.inputs.audio import VoiceError


def _answer(out: BinaryIO, message: dict[str, Any]) -> None:
    out.write(json.dumps(message).encode() + b"\n")
    out.flush()


def _error(exc: VoiceError) -> dict[str, Any]:
    return {"error": type(exc).__name__, "message": exc.user_message}


async def serve(config: dict[str, Any], requests: BinaryIO, out: BinaryIO) -> None:
    """Load the model the config names, then transcribe each request until `requests` ends."""
    from agents.inputs.voice import make_engine

    transcriber = make_engine(**config)
    try:
        await transcriber.wait_ready()
    except VoiceError as exc:
        _answer(out, _error(exc))
        return
    _answer(out, {"ready": True, "device": transcriber.device})
    while header := await asyncio.to_thread(requests.readline):
        size = int(json.loads(header)["size"])
        data = await asyncio.to_thread(requests.read, size)
        if len(data) < size:
            return  # the bot went away mid-request
        try:
            transcript = await transcriber.transcribe(data)
        except VoiceError as exc:
            _answer(out, _error(exc))
            continue
        speed = transcriber.recent[-1].model_dump() if transcriber.recent else None
        _answer(
            out,
            {
                "text": transcript.text,
                "language": transcript.language,
                "audio_seconds": transcript.audio_seconds,
                "decode_seconds": transcript.decode_seconds,
                "transcribe_seconds": transcript.transcribe_seconds,
                "speed": speed,
            },
        )
    transcriber.close()


def main() -> None:
    logging.basicConfig(level=logging.INFO, format="speech process: %(levelname)s %(name)s: %(message)s")
    config = json.loads(sys.argv[1])
    out = os.fdopen(os.dup(1), "wb")  # the answers' own descriptor; fd 1 (print, progress bars) goes to stderr
    os.dup2(2, 1)
    asyncio.run(serve(config, sys.stdin.buffer, out))


if __name__ == "__main__":
    main()
