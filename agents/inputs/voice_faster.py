"""The faster-whisper engine (`VOICE_ENGINE=faster-whisper`): CTranslate2 whisper, int8 on the CPU, resident.

`WHISPER_MODEL` means what it means for openai-whisper, plus one more form:
- a model size ("base"): faster-whisper downloads the converted model from the hub, as its library does;
- a CTranslate2 model folder (model.bin, config.json, tokenizer.json): used as is;
- an openai-whisper checkpoint file ("base.pt"): converted once, with no network, into `convert_root` (the data
  folder) by `ct2_convert`, then loaded from there; later starts reuse the converted folder.

Decoding is bounded like the openai engine's: greedy, one temperature, no conditioning on the previous window, no
timestamps, at most `max_tokens_per_window` new tokens per 30 s window, no VAD. faster-whisper is an optional
extra; it is imported lazily in the worker thread, and its absence is a ModelUnavailable sentence.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # numpy comes with the model, not with the bot's start
    import numpy as np

from agents.inputs.audio import ModelUnavailable
from agents.inputs.ct2_convert import convert_checkpoint, is_ct2_folder
from agents.inputs.resident import ResidentTranscriber, first_line, looks_like_path

DEFAULT_CONVERT_ROOT = Path("~/.cache/agentlab/whisper-ct2")
log = logging.getLogger(__name__)


def transcribe_options(
    language: str | None, max_tokens_per_window: int, *, multilingual: bool = True
) -> dict[str, Any]:
    """The keyword arguments for `WhisperModel.transcribe` that bound decoding (shared with bench/voice.py).

    CTranslate2 stops at (prompt + max_new_tokens) / 2 generated tokens (CTranslate2 issue #1856; measured here:
    max_new_tokens 24 gives 14 tokens after the 4-token prompt), so `max_new_tokens` is chosen to make the cap
    exactly `max_tokens_per_window`, as openai-whisper's `sample_len` does. The prompt is <|startoftranscript|>,
    the language, the task and <|notimestamps|> (multilingual), or the first and last of these (English-only).
    """
    prompt = 4 if multilingual else 2
    return {
        "language": language,
        "task": "transcribe",
        "beam_size": 1,  # greedy, like the openai engine at temperature 0
        "best_of": 1,
        "temperature": 0.0,  # a single temperature: no fallback loop
        "condition_on_previous_text": False,
        "without_timestamps": True,
        "max_new_tokens": 2 * max_tokens_per_window - prompt,
        "vad_filter": False,
        "log_progress": False,
    }


def device_record_path(speed_log: Path) -> Path:
    """Where the bot notes the device faster-whisper uses and why (beside the speed log; doctor reads it)."""
    return speed_log.with_name("device.json")


def read_device_record(speed_log: Path) -> dict[str, Any] | None:
    """The last device record, or None when there is none (or it cannot be read)."""
    try:
        record = json.loads(device_record_path(speed_log).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return record if isinstance(record, dict) else None


def warm_up(model: Any) -> None:
    """One short transcription (a second of silence, a few tokens): proves the device runs the model."""
    import numpy as np

    segments, _ = model.transcribe(np.zeros(16_000, dtype=np.float32), **transcribe_options("en", 4))
    list(segments)


class FasterWhisperTranscriber(ResidentTranscriber):
    """faster-whisper behind the shared resident transcriber; `device` is "cpu" or "cuda" (default: cuda if any).

    `convert_root`: where an openai checkpoint is converted to a CTranslate2 folder (the data folder in the bot).
    `compute_type`: CTranslate2's ("int8" on the CPU by default, "float16" on a GPU).
    """

    engine = "faster-whisper"

    def __init__(
        self,
        *args: Any,
        convert_root: str | os.PathLike[str] | None = None,
        compute_type: str | None = None,
        cpu_threads: int | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(*args, **kwargs)
        self.convert_root = Path(convert_root or DEFAULT_CONVERT_ROOT).expanduser()
        self.compute_type = compute_type
        self.cpu_threads = cpu_threads if cpu_threads is not None else min(4, os.cpu_count() or 1)
        self.model_folder: Path | None = None  # the CTranslate2 folder in use, once known
        self.device_reason = ""  # why the device in use was chosen (or fallen back to), once loaded

    def _load_model(self) -> Any:
        label = self.model_name
        try:
            import ctranslate2
            from faster_whisper import WhisperModel, available_models
        except Exception as exc:  # not installed (an optional extra) or broken: one sentence
            raise ModelUnavailable(
                f"The speech model '{label}' could not be loaded: faster-whisper is not usable ({first_line(exc)}); "
                "install it (pip install 'agentlab[faster]') or set VOICE_ENGINE=openai-whisper."
            ) from exc

        self._language_code = self._resolve_language()
        if self._device is None:
            count = ctranslate2.get_cuda_device_count()
            self._device = "cuda" if count > 0 else "cpu"
            why = f"CTranslate2 counts {count} CUDA device{'' if count == 1 else 's'}" if count else "no CUDA device"
        else:
            why = f"the device {self._device} was asked for"
        name = self.model_name.strip()
        source = name if name in available_models() else self._resolve_path()
        if self._device != "cpu":
            # a GPU is proven with a warm-up transcription: CTranslate2 counts a device, and a missing CUDA library
            # (libcublas of another CUDA version) only shows at the first transcription, which would fail every note
            try:
                model = self._build(WhisperModel, source, self._device, self.compute_type or "float16")
                warm_up(model)
            except ModelUnavailable:
                raise
            except Exception as exc:  # noqa: BLE001 - any CUDA failure: the CPU still transcribes
                failure = f"{type(exc).__name__}: {first_line(exc)}"
                log.warning(
                    "faster-whisper: %s failed at load (%s); falling back to the CPU (int8)", self._device, failure
                )
                self._record_device("cpu", f"{self._device} failed its warm-up transcription ({failure})")
                self._device = "cpu"
            else:
                self._record_device(self._device, f"{why}; a warm-up transcription ran on it")
                return model
        else:
            self._record_device("cpu", why)
            return self._build(WhisperModel, source, "cpu", self.compute_type or "int8")
        return self._build(WhisperModel, source, "cpu", "int8")  # a GPU's compute type may not run on the CPU

    def _build(self, model_class: Any, source: str, device: str, compute_type: str) -> Any:
        """The WhisperModel on `device`; a failure that is no device's is a ModelUnavailable sentence."""
        label = self.model_name
        name = self.model_name.strip()
        try:
            return model_class(
                source,
                device=device,
                compute_type=compute_type,
                cpu_threads=self.cpu_threads,
                download_root=self.download_root,
            )
        except Exception as exc:
            if device != "cpu":
                raise  # the caller falls back to the CPU
            if source == name and not looks_like_path(name):
                raise ModelUnavailable(
                    f"The speech model '{label}' could not be loaded: it is not downloaded yet and downloading it "
                    f"failed ({type(exc).__name__}: {first_line(exc)})."
                ) from exc
            raise ModelUnavailable(
                f"The speech model '{label}' could not be loaded: the folder is not a valid CTranslate2 whisper model "
                f"({type(exc).__name__}: {first_line(exc)})."
            ) from exc

    def _record_device(self, device: str, reason: str) -> None:
        """Which device transcribes and why: kept on the transcriber and, beside the speed log, for doctor."""
        self.device_reason = reason
        if self.speed_log is None:
            return
        record = {"engine": self.engine, "device": device, "reason": reason, "at": time.time()}
        with contextlib.suppress(OSError):
            path = device_record_path(self.speed_log)
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(json.dumps(record) + "\n", encoding="utf-8")

    def _resolve_path(self) -> str:
        """The CTranslate2 folder for a path: as is, or converted from an openai checkpoint file (once)."""
        label = self.model_name
        path = Path(self.model_name.strip()).expanduser()
        if path.is_dir():
            if not is_ct2_folder(path):
                raise ModelUnavailable(
                    f"The speech model '{label}' could not be loaded: the folder holds no CTranslate2 model "
                    "(model.bin and config.json)."
                )
            self.model_folder = path
            return str(path)
        if path.is_file():
            try:
                folder = convert_checkpoint(path, self.convert_root)
            except Exception as exc:
                raise ModelUnavailable(
                    f"The speech model '{label}' could not be loaded: the file is not a valid whisper checkpoint "
                    f"({type(exc).__name__}: {first_line(exc)})."
                ) from exc
            self.model_folder = folder
            return str(folder)
        if looks_like_path(self.model_name):
            raise ModelUnavailable(f"The speech model '{label}' could not be loaded: there is no such file.")
        from faster_whisper import available_models

        raise ModelUnavailable(
            f"The speech model '{label}' could not be loaded: it is neither a checkpoint file, a CTranslate2 folder "
            f"nor a faster-whisper model name ({', '.join(available_models()[:8])}, ...)."
        )

    def _resolve_language(self) -> str | None:
        if self.language is None:
            return None
        from faster_whisper.tokenizer import _LANGUAGE_CODES

        code = self.language.lower()
        if code not in _LANGUAGE_CODES:
            try:
                from whisper.tokenizer import TO_LANGUAGE_CODE  # language names ("german"): openai-whisper's table
            except Exception:
                TO_LANGUAGE_CODE = {}
            code = TO_LANGUAGE_CODE.get(code, "")
        if code not in _LANGUAGE_CODES:
            raise ModelUnavailable(
                f"The speech model '{self.model_name}' could not be loaded: "
                f"'{self.language}' is not a language whisper knows."
            )
        return code

    def _run(self, model: Any, samples: np.ndarray) -> tuple[str, str | None, int]:
        options = transcribe_options(
            self._language_code, self.max_tokens_per_window, multilingual=model.model.is_multilingual
        )
        segments, info = model.transcribe(samples, **options)
        decoded = list(segments)  # the generator decodes here, on this thread
        return "".join(segment.text for segment in decoded), info.language, sum(len(s.tokens) for s in decoded)
