"""Voice notes to text: which speech engine the bot runs, and the names the rest of the code imports.

The work is in `agents/inputs/`: `audio` (PyAV decoding, the errors with their one-sentence messages), `resident`
(the one-model, one-thread transcriber both engines share), `voice_openai` (openai-whisper, the default),
`voice_faster` (faster-whisper / CTranslate2, an optional extra) and `ct2_convert` (an openai checkpoint turned
into a CTranslate2 folder without network). `make_transcriber` picks the engine from `VOICE_ENGINE`.
"""

from __future__ import annotations

from pathlib import Path

from agents.core.settings import Settings
from agents.inputs.audio import (
    DAMAGED_MESSAGE,
    EMPTY_MESSAGE,
    NO_AUDIO_MESSAGE,
    SAMPLE_RATE,
    SILENCE_MESSAGE,
    TOO_LONG_MESSAGE,
    TOO_LONG_UNKNOWN_MESSAGE,
    UNREADABLE_MESSAGE,
    UNSUPPORTED_MESSAGE,
    AudioError,
    ModelUnavailable,
    TranscriptionFailed,
    VoiceError,
    decode_audio,
    format_duration,
)
from agents.inputs.resident import DEFAULT_MAX_TOKENS_PER_WINDOW, DaemonExecutor, ResidentTranscriber
from agents.inputs.voice_faster import FasterWhisperTranscriber
from agents.inputs.voice_openai import WHISPER_MODEL_NAMES, OpenAIWhisperTranscriber, transcribe_options

# The default engine under its old name (tests, bench and older callers).
Transcriber = OpenAIWhisperTranscriber

ENGINES: dict[str, type[ResidentTranscriber]] = {
    OpenAIWhisperTranscriber.engine: OpenAIWhisperTranscriber,
    FasterWhisperTranscriber.engine: FasterWhisperTranscriber,
}

__all__ = [
    "DAMAGED_MESSAGE",
    "DEFAULT_MAX_TOKENS_PER_WINDOW",
    "EMPTY_MESSAGE",
    "ENGINES",
    "NO_AUDIO_MESSAGE",
    "SAMPLE_RATE",
    "SILENCE_MESSAGE",
    "TOO_LONG_MESSAGE",
    "TOO_LONG_UNKNOWN_MESSAGE",
    "UNREADABLE_MESSAGE",
    "UNSUPPORTED_MESSAGE",
    "WHISPER_MODEL_NAMES",
    "AudioError",
    "DaemonExecutor",
    "FasterWhisperTranscriber",
    "ModelUnavailable",
    "OpenAIWhisperTranscriber",
    "ResidentTranscriber",
    "Transcriber",
    "TranscriptionFailed",
    "VoiceError",
    "decode_audio",
    "format_duration",
    "make_transcriber",
    "speed_log_path",
    "transcribe_options",
]


def speed_log_path(settings: Settings) -> Path:
    """Where the transcriber keeps the timing of the last notes (read by `agentlab doctor`)."""
    return settings.voice_data_dir / "recent-notes.json"


def make_transcriber(settings: Settings) -> ResidentTranscriber:
    """The transcriber `VOICE_ENGINE` names, configured from the settings (not loading yet)."""
    if settings.voice_engine == FasterWhisperTranscriber.engine:
        return FasterWhisperTranscriber(
            settings.whisper_model,
            settings.whisper_language,
            settings.voice_max_seconds,
            convert_root=settings.voice_data_dir / "models",
            speed_log=speed_log_path(settings),
        )
    return OpenAIWhisperTranscriber(
        settings.whisper_model,
        settings.whisper_language,
        settings.voice_max_seconds,
        speed_log=speed_log_path(settings),
    )
