"""The openai-whisper engine (`VOICE_ENGINE=openai-whisper`, the default): PyTorch whisper, resident on its thread.

`WHISPER_MODEL` is a whisper model name (downloaded by whisper into its cache) or the path of a checkpoint file.
Decoding is bounded so that garbage never runs for long: one temperature (no fallback loop), no conditioning on
the previous window, no timestamps (each 30 s window is decoded exactly once) and at most `max_tokens_per_window`
tokens per window. The work is therefore at most ceil(seconds / 30) windows of that many tokens.

torch and whisper are imported lazily, inside the worker thread, so importing this module is cheap.
"""

from __future__ import annotations

import os
import urllib.error
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # numpy comes with the model, not with the bot's start
    import numpy as np

from agents.inputs.audio import ModelUnavailable
from agents.inputs.resident import ResidentTranscriber, first_line, looks_like_path

WHISPER_MODEL_NAMES = ("tiny", "base", "small", "medium", "large", "turbo")


def transcribe_options(language: str | None, max_tokens_per_window: int, fp16: bool) -> dict[str, Any]:
    """The keyword arguments for `whisper.transcribe` that bound decoding (shared with bench/voice.py)."""
    return {
        "verbose": None,  # no printing, no progress bar
        "temperature": 0.0,  # a single temperature: no fallback loop
        "condition_on_previous_text": False,
        "without_timestamps": True,  # every 30 s window is decoded once, then the next one
        "sample_len": max_tokens_per_window,
        "language": language,
        "fp16": fp16,
    }


class OpenAIWhisperTranscriber(ResidentTranscriber):
    """openai-whisper behind the shared resident transcriber; `device` is a torch device (default: cuda if any)."""

    engine = "openai-whisper"

    def _load_model(self) -> Any:
        label = self.model_name
        name = self.model_name.strip()
        if looks_like_path(name) and not Path(name).expanduser().is_file():  # said before torch is imported (~0.4 s)
            raise ModelUnavailable(f"The speech model '{label}' could not be loaded: there is no such file.")
        try:
            import torch
            import whisper
            from whisper.tokenizer import LANGUAGES, TO_LANGUAGE_CODE
        except Exception as exc:  # a broken install: say so rather than crash the worker
            raise ModelUnavailable(
                f"The speech model '{label}' could not be loaded: whisper is not usable ({exc})."
            ) from exc

        if self.language is not None:
            code = self.language.lower()
            code = code if code in LANGUAGES else TO_LANGUAGE_CODE.get(code, "")
            if not code:
                raise ModelUnavailable(
                    f"The speech model '{label}' could not be loaded: "
                    f"'{self.language}' is not a language whisper knows."
                )
            self._language_code = code

        source = self._resolve_source()
        if self._device is None:
            self._device = "cuda" if torch.cuda.is_available() else "cpu"
        try:
            return whisper.load_model(source, device=self._device, download_root=self.download_root)
        except (urllib.error.URLError, OSError, TimeoutError) as exc:
            if source in WHISPER_MODEL_NAMES or source in whisper.available_models():
                reason = getattr(exc, "reason", None) or exc
                raise ModelUnavailable(
                    f"The speech model '{label}' could not be loaded: it is not downloaded yet and downloading it "
                    f"failed ({reason})."
                ) from exc
            raise ModelUnavailable(f"The speech model '{label}' could not be loaded: {exc}.") from exc
        except Exception as exc:
            if os.path.isfile(source):
                raise ModelUnavailable(
                    f"The speech model '{label}' could not be loaded: the file is not a valid whisper checkpoint "
                    f"({type(exc).__name__}: {first_line(exc)})."
                ) from exc
            raise ModelUnavailable(
                f"The speech model '{label}' could not be loaded: {type(exc).__name__}: {first_line(exc)}."
            ) from exc

    def _resolve_source(self) -> str:
        """The name or checkpoint path to hand to `whisper.load_model`; ModelUnavailable for a missing file."""
        import whisper

        name = self.model_name.strip()
        if name in whisper.available_models():
            return name
        path = Path(name).expanduser()
        if path.is_file():
            return str(path)
        if looks_like_path(name):
            raise ModelUnavailable(f"The speech model '{self.model_name}' could not be loaded: there is no such file.")
        raise ModelUnavailable(
            f"The speech model '{self.model_name}' could not be loaded: it is neither a checkpoint file nor a whisper "
            f"model name ({', '.join(WHISPER_MODEL_NAMES)})."
        )

    def _run(self, model: Any, samples: np.ndarray) -> tuple[str, str | None, int]:
        import whisper

        options = transcribe_options(self._language_code, self.max_tokens_per_window, fp16=self._device != "cpu")
        result = whisper.transcribe(model, samples, **options)
        tokens = sum(len(segment.get("tokens", ())) for segment in result.get("segments", ()))
        return str(result.get("text", "")), result.get("language"), tokens
