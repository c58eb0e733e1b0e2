"""Voice notes to samples: in-process audio decoding with PyAV, and the errors every speech engine raises.

`decode_audio` turns the bytes of a voice note (OGG/Opus, mp3, m4a, wav, ...) into 16 kHz mono float32 samples
without the `ffmpeg` binary, and rejects unusable input with an `AudioError` whose message is one sentence meant
for the user. Both engines (voice_openai, voice_faster) take these samples, so bad audio is answered the same way
whichever engine is set.
"""

from __future__ import annotations

import io
import logging
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # PyAV and numpy are imported by the first note decoded, not by the bot's start (~0.1 s of CPU)
    import numpy as np

log = logging.getLogger(__name__)

SAMPLE_RATE = 16_000
# Container durations are estimates (Opus pre-skip, mp3 bitrate guesses): allow this much over the limit.
DURATION_GRACE_SECONDS = 0.5
# A note is silent when its loudest 100 ms stretch stays below -50 dBFS.
SILENCE_FRAME_SAMPLES = SAMPLE_RATE // 10
SILENCE_RMS = 10 ** (-50 / 20)
# whisper's own ceiling is n_text_ctx // 2 = 224 tokens per 30 s window; real speech needs far fewer.

EMPTY_MESSAGE = "The voice note is empty."
UNREADABLE_MESSAGE = "I couldn't read that file as audio; it may be damaged or in a format I don't support."
DAMAGED_MESSAGE = "That voice note seems damaged or cut off; please send it again."
NO_AUDIO_MESSAGE = "That file has no audio track in it."
UNSUPPORTED_MESSAGE = "That audio is in a format I can't decode; please send a regular voice note."
TOO_LONG_MESSAGE = "That voice note is {length} long, and I can only transcribe up to {limit}."
TOO_LONG_UNKNOWN_MESSAGE = "That voice note is longer than {limit}, the most I can transcribe."
SILENCE_MESSAGE = "I couldn't hear anything in that voice note."


class VoiceError(Exception):
    """A voice note could not be turned into text; `user_message` is one sentence to show the user."""

    def __init__(self, user_message: str) -> None:
        super().__init__(user_message)
        self.user_message = user_message


class AudioError(VoiceError):
    """The audio itself is unusable: empty, damaged, not audio, too long or silent."""


class ModelUnavailable(VoiceError):
    """The speech model cannot be loaded (or has been shut down)."""


class TranscriptionFailed(VoiceError):
    """The model was loaded but failed while transcribing (e.g. out of memory)."""


# --------------------------------------------------------------------------------------------------------------
# decoding


def decode_audio(data: bytes, max_seconds: float) -> np.ndarray:
    """Decode an audio file held in memory to 16 kHz mono float32 samples in [-1, 1].

    Raises AudioError (with a one-sentence user message) for empty, damaged, truncated or non-audio input, an
    unsupported codec, audio longer than `max_seconds` (checked from the container up front when it states a
    duration, and while decoding otherwise, stopping early) and silence.
    """
    if not data:
        raise AudioError(EMPTY_MESSAGE)
    if _ogg_is_truncated(data):
        raise AudioError(DAMAGED_MESSAGE)
    try:
        samples = _decode(data, max_seconds)
    except AudioError:
        raise
    except Exception as exc:  # anything PyAV/FFmpeg throws: the user gets one sentence, the log gets the detail
        log.warning("audio decoding failed: %s: %s", type(exc).__name__, exc)
        raise AudioError(UNREADABLE_MESSAGE) from exc
    if _is_silent(samples):
        raise AudioError(SILENCE_MESSAGE)
    return samples


def _decode(data: bytes, max_seconds: float) -> np.ndarray:
    import av

    try:
        container = av.open(io.BytesIO(data), mode="r", metadata_errors="ignore")
    except av.error.EOFError as exc:  # the headers end early: cut off
        raise AudioError(DAMAGED_MESSAGE) from exc
    except (av.error.FFmpegError, ValueError, OSError) as exc:
        raise AudioError(UNREADABLE_MESSAGE) from exc
    with container:
        if not container.streams.audio:
            raise AudioError(NO_AUDIO_MESSAGE)
        stream = container.streams.audio[0]
        if stream.codec_context is None:
            raise AudioError(UNSUPPORTED_MESSAGE)
        limit = max_seconds + DURATION_GRACE_SECONDS
        declared = _declared_seconds(container, stream)
        if declared is not None and declared > limit:
            length, most = format_duration(declared), format_duration(max_seconds)
            raise AudioError(TOO_LONG_MESSAGE.format(length=length, limit=most))
        return _decode_stream(container, stream, max_samples=int(limit * SAMPLE_RATE), max_seconds=max_seconds)


def _decode_stream(container: Any, stream: Any, *, max_samples: int, max_seconds: float) -> np.ndarray:
    """Decode and resample `stream`, stopping as soon as it runs past `max_samples`."""
    import av
    import numpy as np

    resampler = av.AudioResampler(format="flt", layout="mono", rate=SAMPLE_RATE)
    chunks: list[np.ndarray] = []
    total = 0
    too_long = AudioError(TOO_LONG_UNKNOWN_MESSAGE.format(limit=format_duration(max_seconds)))
    try:
        for frame in container.decode(stream):
            for out in resampler.resample(frame):
                chunks.append(out.to_ndarray().reshape(-1))
                total += chunks[-1].size
            if total > max_samples:
                raise too_long
        for out in resampler.resample(None):
            chunks.append(out.to_ndarray().reshape(-1))
            total += chunks[-1].size
    except av.error.DecoderNotFoundError as exc:
        raise AudioError(UNSUPPORTED_MESSAGE) from exc
    except av.error.FFmpegError as exc:
        raise AudioError(DAMAGED_MESSAGE if chunks else UNREADABLE_MESSAGE) from exc
    if total > max_samples:
        raise too_long
    if not chunks:
        return np.zeros(0, dtype=np.float32)
    return np.ascontiguousarray(np.concatenate(chunks), dtype=np.float32)


def _declared_seconds(container: Any, stream: Any) -> float | None:
    """The duration the container states (or estimates), in seconds; None when it states none."""
    import av

    if stream.duration is not None and stream.time_base is not None and stream.duration > 0:
        return float(stream.duration * stream.time_base)
    if container.duration is not None and container.duration > 0:
        return float(container.duration / av.time_base)
    return None


def _ogg_is_truncated(data: bytes) -> bool:
    """True when `data` is an Ogg stream whose last page runs past the end of the data (it was cut off).

    FFmpeg silently decodes such a file up to the cut; we would rather ask for the whole note. Walks page headers
    only (27 bytes + segment table each); gives up (False) at anything that isn't a clean page boundary.
    """
    if not data.startswith(b"OggS"):
        return False
    size, pos = len(data), 0
    while pos < size:
        remaining = size - pos
        if remaining < 4:
            return b"OggS".startswith(data[pos:])
        if data[pos : pos + 4] != b"OggS":
            return False
        if remaining < 27:
            return True
        segments = data[pos + 26]
        body_start = pos + 27 + segments
        if body_start > size:
            return True
        pos = body_start + sum(data[pos + 27 : body_start])
    return pos > size


def _is_silent(samples: np.ndarray) -> bool:
    """True when no 100 ms stretch of `samples` is louder than SILENCE_RMS (also for no samples at all)."""
    import numpy as np

    if samples.size == 0:
        return True
    usable = samples.size - samples.size % SILENCE_FRAME_SAMPLES
    frames = samples[:usable].reshape(-1, SILENCE_FRAME_SAMPLES) if usable else samples.reshape(1, -1)
    loudest = float(np.sqrt(np.mean(np.square(frames, dtype=np.float64), axis=1)).max())
    return loudest < SILENCE_RMS


def format_duration(seconds: float) -> str:
    """`45 seconds`, `1 minute`, `10 minutes`, `12:05 minutes`."""
    whole = max(0, int(round(seconds)))
    if whole < 60:
        return f"{whole} second" if whole == 1 else f"{whole} seconds"
    minutes, rest = divmod(whole, 60)
    if rest:
        return f"{minutes}:{rest:02d} minutes"
    return "1 minute" if minutes == 1 else f"{minutes} minutes"
