"""Voice notes to text: which speech engine the bot runs, and the names the rest of the code imports.

The work is in `agents/inputs/`: `audio` (PyAV decoding, the errors with their one-sentence messages), `resident`
(the one-model, one-thread transcriber both engines share), `voice_openai` (openai-whisper, the default),
`voice_faster` (faster-whisper / CTranslate2, an optional extra) and `ct2_convert` (an openai checkpoint turned
into a CTranslate2 folder without network). The bot runs the model in a process of its own (`speech_process`, the
client, and `speech_server`, the process): `make_transcriber` builds that from the settings, `make_engine` the
in-process transcriber of the engine `VOICE_ENGINE` names (what the speech process runs; tests and benches too).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

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
from agents.inputs.speech_process import SpeechProcess
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
    "SpeechProcess",
    "Transcriber",
    "TranscriptionFailed",
    "VoiceError",
    "decode_audio",
    "engine_config",
    "format_duration",
    "make_engine",
    "make_transcriber",
    "speed_log_path",
    "transcribe_options",
]


def speed_log_path(settings: Settings) -> Path:
    """Where the transcriber keeps the timing of the last notes (read by `agentlab doctor`)."""
    return settings.paths.voice_data_dir / "recent-notes.json"


def engine_config(settings: Settings, **extra: Any) -> dict[str, Any]:
    """`make_engine`'s keyword arguments from the settings (JSON: they are handed to the speech process)."""
    return {
        "engine": settings.voice.voice_engine,
        "model": settings.voice.whisper_model,
        "language": settings.voice.whisper_language,
        "max_seconds": settings.voice.voice_max_seconds,
        "convert_root": str(settings.paths.voice_data_dir / "models"),
        "speed_log": str(speed_log_path(settings)),
        **extra,
    }


def make_engine(
    engine: str,
    model: str,
    language: str | None,
    max_seconds: float,
    convert_root: str | None = None,
    speed_log: str | None = None,
    device: str | None = None,
    max_tokens_per_window: int = DEFAULT_MAX_TOKENS_PER_WINDOW,
) -> ResidentTranscriber:
    """The in-process transcriber of `engine` (not loading yet): what the speech process runs."""
    log = Path(speed_log) if speed_log else None
    if engine == FasterWhisperTranscriber.engine:
        return FasterWhisperTranscriber(
            model,
            language,
            max_seconds,
            device,
            convert_root=convert_root,
            speed_log=log,
            max_tokens_per_window=max_tokens_per_window,
        )
    return OpenAIWhisperTranscriber(
        model, language, max_seconds, device, speed_log=log, max_tokens_per_window=max_tokens_per_window
    )


def make_transcriber(settings: Settings, **extra: Any) -> SpeechProcess:
    """The bot's transcriber: the engine `VOICE_ENGINE` names in a speech process of its own, started by the first
    note (or `start_loading`) and ended after VOICE_IDLE_MINUTES without notes. `extra`: more `make_engine`
    arguments (tests: `max_tokens_per_window`)."""
    return SpeechProcess(engine_config(settings, **extra), settings.voice.voice_idle_minutes)
