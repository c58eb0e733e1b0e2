"""Test and bench material for voice notes: random-weight whisper checkpoints, audio made in memory, a fake transcriber.

Nothing here touches the network. torch and whisper are imported only by the checkpoint builders, numpy and PyAV
only by the functions that make or read audio, so handler tests (the `bot` fixture) that just need `FakeTranscriber`
stay light.
"""

from __future__ import annotations

import asyncio
import io
import os
import shutil
import struct
import subprocess
from collections import deque
from collections.abc import Iterable
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agents.core.protocols import ModelState, Transcript
from agents.inputs.voice import SAMPLE_RATE, ModelUnavailable, decode_audio

if TYPE_CHECKING:
    import numpy as np

# (layers, width, heads) of the real checkpoints; both use the 51865-token multilingual vocabulary.
REAL_DIMS = {"tiny": (4, 384, 6), "base": (6, 512, 8)}
N_VOCAB_MULTILINGUAL = 51865


# --------------------------------------------------------------------------------------------------------------
# checkpoints


def build_tiny_checkpoint(
    path: str | Path,
    n_layer: int = 1,
    n_state: int = 64,
    n_head: int = 2,
    *,
    n_vocab: int = N_VOCAB_MULTILINGUAL,
    n_mels: int = 80,
    n_audio_ctx: int = 1500,
    n_text_ctx: int = 448,
    seed: int = 0,
    never_ends: bool = True,
) -> Path:
    """Save a seeded random-weight whisper checkpoint that `whisper.load_model(path)` accepts; returns the path.

    Stored in fp16 like the published checkpoints ({"dims": ..., "model_state_dict": ...}). Every parameter is
    drawn under `seed`, so the same arguments give the same weights and the same transcript of the same audio.
    `never_ends`: the embedding rows (tied to the output) of end-of-text, no-speech and no-timestamps are zero, so
    their logits are 0 while the best of 51k random logits is well above: the model decodes every window to the
    token cap, never has its text dropped as "no speech" and does not echo the prompt's last token (a small random
    model repeats its input), in both engines; a note costs a known number of tokens and gives non-empty text.
    """
    import torch
    from whisper.model import ModelDimensions, Whisper

    dims = ModelDimensions(
        n_mels=n_mels,
        n_audio_ctx=n_audio_ctx,
        n_audio_state=n_state,
        n_audio_head=n_head,
        n_audio_layer=n_layer,
        n_vocab=n_vocab,
        n_text_ctx=n_text_ctx,
        n_text_state=n_state,
        n_text_head=n_head,
        n_text_layer=n_layer,
    )
    generator_state = torch.random.get_rng_state()
    torch.manual_seed(seed)
    try:
        model = Whisper(dims)
        # whisper makes the decoder's positional embedding with torch.empty (the real weights overwrite it): left
        # alone it holds whatever memory held (seen: 1.6e37, inf, 1.9e-40), so fill it under the seed too
        with torch.no_grad():
            model.decoder.positional_embedding.normal_(0.0, 0.02)
            if never_ends:
                for token in _unwanted_tokens(n_vocab):
                    model.decoder.token_embedding.weight[token].zero_()
    finally:
        torch.random.set_rng_state(generator_state)
    state = {name: t.half() if t.is_floating_point() else t for name, t in model.state_dict().items()}
    bad = [name for name, t in state.items() if t.is_floating_point() and not bool(torch.isfinite(t).all())]
    if bad:
        raise AssertionError(f"non-finite values in the test checkpoint: {bad}")
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    torch.save({"dims": asdict(dims), "model_state_dict": state}, path)
    return path


def _unwanted_tokens(n_vocab: int) -> tuple[int, int, int]:
    """The ids of end-of-text, no-speech and no-timestamps in whisper's tokenizer for `n_vocab` tokens."""
    from whisper.tokenizer import get_tokenizer

    multilingual = n_vocab >= N_VOCAB_MULTILINGUAL
    tokenizer = get_tokenizer(multilingual, num_languages=n_vocab - 51765 - int(multilingual))
    return tokenizer.eot, tokenizer.no_speech, tokenizer.no_timestamps


def sized_checkpoint(path: str | Path, size: str = "tiny", *, seed: int = 0) -> Path:
    """A random-weight checkpoint with the real dimensions of whisper `size` ("tiny" or "base").

    Built once: an existing file at `path` is reused (the bench keeps them in bench/.cache/).
    """
    if size not in REAL_DIMS:
        raise ValueError(f"size must be one of {sorted(REAL_DIMS)}, not {size!r}")
    path = Path(path)
    if path.is_file():
        return path
    n_layer, n_state, n_head = REAL_DIMS[size]
    partial = path.with_name(f"{path.name}.{os.getpid()}.partial")  # two processes building at once never mix
    build_tiny_checkpoint(partial, n_layer=n_layer, n_state=n_state, n_head=n_head, seed=seed)
    partial.replace(path)
    return path


def shared_checkpoint(folder: str | Path, name: str, **build: Any) -> Path:
    """`build_tiny_checkpoint(folder / name, **build)`, built once for every process that asks for it in `folder`.

    The tests' xdist workers share one temporary folder per run: the first to ask builds the file (torch imported in
    that worker, about 1.5 s of CPU, and the build) while the others wait on a lock, then all read the same file.
    """
    import fcntl

    path = Path(folder) / name
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path.with_name(f"{name}.lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not path.is_file():
            partial = path.with_name(f"{name}.partial")
            build_tiny_checkpoint(partial, **build)
            partial.replace(path)
    return path


# --------------------------------------------------------------------------------------------------------------
# signals (float32 samples in [-1, 1])


def tone(seconds: float, freq: float = 440.0, *, rate: int = SAMPLE_RATE, amplitude: float = 0.3) -> np.ndarray:
    """A sine tone."""
    import numpy as np

    t = np.arange(int(round(seconds * rate))) / rate
    return (amplitude * np.sin(2 * np.pi * freq * t)).astype(np.float32)


def tone_mix(seconds: float, *, rate: int = SAMPLE_RATE, seed: int = 0) -> np.ndarray:
    """Speech-like stand-in: a few harmonics, switched on and off in syllable-sized bursts, over faint noise."""
    import numpy as np

    rng = np.random.default_rng(seed)
    n = int(round(seconds * rate))
    t = np.arange(n) / rate
    pitch = 140 + 30 * np.sin(2 * np.pi * 0.7 * t)
    phase = 2 * np.pi * np.cumsum(pitch) / rate
    voice = sum(np.sin(k * phase) / k for k in (1, 2, 3, 5))
    syllables = (np.sin(2 * np.pi * 4.0 * t) > -0.2).astype(np.float64)
    signal = 0.2 * voice * syllables + rng.normal(0, 0.005, n)
    return np.clip(signal, -1, 1).astype(np.float32)


def silence(seconds: float, *, rate: int = SAMPLE_RATE) -> np.ndarray:
    import numpy as np

    return np.zeros(int(round(seconds * rate)), dtype=np.float32)


def speech(text: str, *, rate: int = SAMPLE_RATE, timeout: float = 30.0) -> np.ndarray | None:
    """`text` spoken by the `espeak-ng` binary, as mono float32 at `rate`; None when espeak-ng is not installed."""
    binary = shutil.which("espeak-ng")
    if binary is None:
        return None
    wav = subprocess.run([binary, "--stdout", text], capture_output=True, check=True, timeout=timeout).stdout
    return _decode_to_rate(wav, rate)


def _decode_to_rate(data: bytes, rate: int) -> np.ndarray:
    import av
    import numpy as np

    resampler = av.AudioResampler(format="flt", layout="mono", rate=rate)
    chunks = []
    with av.open(io.BytesIO(data)) as container:
        for frame in container.decode(audio=0):
            chunks.extend(out.to_ndarray().reshape(-1) for out in resampler.resample(frame))
    chunks.extend(out.to_ndarray().reshape(-1) for out in resampler.resample(None))
    return np.concatenate(chunks).astype(np.float32)


# --------------------------------------------------------------------------------------------------------------
# files (bytes made with PyAV in memory)


def encode_audio(samples: np.ndarray, rate: int, container_format: str, codec: str) -> bytes:
    """Encode float32 `samples` at `rate` into a file of `container_format` with `codec`.

    `samples` is 1-D for mono or (2, n) for stereo.
    """
    import av
    import numpy as np

    pcm = (np.clip(np.asarray(samples, dtype=np.float32), -1, 1) * 32767).astype(np.int16)
    planar = pcm[None, :] if pcm.ndim == 1 else pcm
    layout = {1: "mono", 2: "stereo"}[planar.shape[0]]
    buffer = io.BytesIO()
    with av.open(buffer, mode="w", format=container_format) as container:
        stream = container.add_stream(codec, rate=rate)
        stream.layout = layout
        block = 4096
        for start in range(0, planar.shape[1], block):
            piece = np.ascontiguousarray(planar[:, start : start + block])
            frame = av.AudioFrame.from_ndarray(piece, format="s16p", layout=layout)
            frame.sample_rate = rate
            for packet in stream.encode(frame):
                container.mux(packet)
        for packet in stream.encode(None):
            container.mux(packet)
    return buffer.getvalue()


def make_ogg_opus(samples: np.ndarray, rate: int = SAMPLE_RATE) -> bytes:
    """An OGG/Opus file, like a Telegram voice note (Opus takes 8, 12, 16, 24 or 48 kHz)."""
    return encode_audio(samples, rate, "ogg", "libopus")


def make_wav(samples: np.ndarray, rate: int = SAMPLE_RATE) -> bytes:
    """A 16-bit PCM WAV file."""
    return encode_audio(samples, rate, "wav", "pcm_s16le")


def make_mp3(samples: np.ndarray, rate: int = SAMPLE_RATE) -> bytes:
    return encode_audio(samples, rate, "mp3", "libmp3lame")


def make_m4a(samples: np.ndarray, rate: int = SAMPLE_RATE) -> bytes:
    """AAC in an MPEG-4 (.m4a) container."""
    return encode_audio(samples, rate, "ipod", "aac")


def make_video_without_audio(frames: int = 5) -> bytes:
    """A small Matroska file holding only a video stream."""
    import av
    import numpy as np

    buffer = io.BytesIO()
    with av.open(buffer, mode="w", format="matroska") as container:
        stream = container.add_stream("mpeg4", rate=10)
        stream.width, stream.height, stream.pix_fmt = 32, 32, "yuv420p"
        for i in range(frames):
            image = np.full((32, 32, 3), i * 40, dtype=np.uint8)
            for packet in stream.encode(av.VideoFrame.from_ndarray(image, format="rgb24")):
                container.mux(packet)
        for packet in stream.encode(None):
            container.mux(packet)
    return buffer.getvalue()


def make_wav_with_unknown_codec(seconds: float = 1.0, rate: int = SAMPLE_RATE) -> bytes:
    """A well-formed RIFF/WAVE file whose format tag (0x5A5A) no decoder knows."""
    body = bytes(int(seconds * rate) * 2)
    fmt = struct.pack("<HHIIHH", 0x5A5A, 1, rate, rate * 2, 2, 16)
    chunks = b"fmt " + struct.pack("<I", len(fmt)) + fmt + b"data" + struct.pack("<I", len(body)) + body
    return b"RIFF" + struct.pack("<I", 4 + len(chunks)) + b"WAVE" + chunks


# --------------------------------------------------------------------------------------------------------------
# a fake transcriber for handler tests


class FakeTranscriber:
    """Same public surface as `agents.inputs.voice.Transcriber` (the `SpeechToText` protocol), with scripted results.

    `script`: one text returned for every note, or a sequence consumed in order whose items are texts or
    exceptions to raise (e.g. `AudioError(...)`); running out of a sequence is an AssertionError.
    `load_error`: the model "fails" to load with this message. `validate_audio`: run the real `decode_audio`
    first, so bad bytes raise the real AudioError. `delay`: seconds each transcription takes (asyncio.sleep).
    Every `transcribe` call's bytes are kept in `received`.
    """

    def __init__(
        self,
        script: str | Iterable[str | BaseException] = "hello from a voice note",
        *,
        language: str | None = "en",
        load_error: str | None = None,
        validate_audio: bool = False,
        max_seconds: float = 600.0,
        delay: float = 0.0,
    ) -> None:
        self._repeat: str | None = script if isinstance(script, str) else None
        self._script: deque[str | BaseException] = deque() if isinstance(script, str) else deque(script)
        self.language = language
        self.validate_audio = validate_audio
        self.max_seconds = max_seconds
        self.delay = delay
        self._planned_load_error = load_error
        self._state = ModelState.not_loaded
        self._load_error: str | None = None
        self.received: list[bytes] = []
        self.closed = False

    @property
    def state(self) -> ModelState:
        return self._state

    @property
    def load_error(self) -> str | None:
        return self._load_error

    def speed_summary(self) -> str | None:
        return None  # it times nothing

    def start_loading(self) -> None:
        if self._state is not ModelState.not_loaded:
            return
        if self._planned_load_error is not None:
            self._state, self._load_error = ModelState.failed, self._planned_load_error
        else:
            self._state = ModelState.ready

    async def wait_ready(self) -> None:
        self.start_loading()
        if self._state is not ModelState.ready:
            raise ModelUnavailable(self._load_error or "The speech model is not available.")

    async def transcribe(self, data: bytes) -> Transcript:
        if self.closed:
            raise ModelUnavailable("The speech model has been shut down.")
        self.received.append(bytes(data))
        self.start_loading()
        audio_seconds = 0.0
        if self.validate_audio:
            samples = await asyncio.to_thread(decode_audio, data, self.max_seconds)
            audio_seconds = samples.size / SAMPLE_RATE
        await self.wait_ready()
        if self.delay:
            await asyncio.sleep(self.delay)
        item = self._next_item()
        if isinstance(item, BaseException):
            raise item
        return Transcript(
            text=item,
            language=self.language,
            audio_seconds=audio_seconds,
            decode_seconds=0.0,
            transcribe_seconds=self.delay,
        )

    def close(self) -> None:
        self.closed = True

    def _next_item(self) -> str | BaseException:
        if self._repeat is not None:
            return self._repeat
        if not self._script:
            raise AssertionError("FakeTranscriber: more voice notes were transcribed than the script has results for")
        return self._script.popleft()
