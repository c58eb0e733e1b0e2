"""How fast the last voice notes were transcribed: kept in memory by the transcriber and in a small JSON file in
the data folder, so `agentlab doctor` (another process) can say it.

The file holds the last `KEEP` notes; it is written by the transcriber's worker thread (never the event loop),
atomically (a temporary file renamed over it).
"""

from __future__ import annotations

import json
import logging
import os
import time
from pathlib import Path

from pydantic import BaseModel, Field, ValidationError

log = logging.getLogger(__name__)

KEEP = 10


class NoteSpeed(BaseModel):
    """One transcribed note: which engine and model, how long the audio was, how long the model took."""

    engine: str
    model: str
    audio_seconds: float = Field(ge=0)
    transcribe_seconds: float = Field(ge=0)
    tokens: int | None = Field(default=None, ge=0)  # text tokens decoded (bench/voice.py checks both engines agree)
    at: float = Field(default_factory=time.time)

    @property
    def real_time_factor(self) -> float:
        """Seconds of model time per second of audio (below 1: faster than real time)."""
        return self.transcribe_seconds / self.audio_seconds if self.audio_seconds > 0 else 0.0


def read_speeds(path: Path) -> list[NoteSpeed]:
    """The notes in the file, oldest first; none when it is missing or unreadable."""
    try:
        rows = json.loads(path.read_text())
        return [NoteSpeed.model_validate(row) for row in rows][-KEEP:]
    except (OSError, ValueError, TypeError, ValidationError):
        return []


def append_speed(path: Path, speed: NoteSpeed) -> None:
    """Add one note to the file, keeping the last KEEP; a failure is logged, never raised (it is only a figure)."""
    try:
        rows = [s.model_dump() for s in read_speeds(path)] + [speed.model_dump()]
        path.parent.mkdir(parents=True, exist_ok=True)
        partial = path.with_name(f"{path.name}.{os.getpid()}.tmp")
        partial.write_text(json.dumps(rows[-KEEP:]))
        partial.replace(path)
    except OSError as exc:
        log.warning("voice speed not recorded in %s: %s", path, exc)


def summary(speeds: list[NoteSpeed]) -> str:
    """`last 3 notes: real-time factor 0.08 (median), 0.8 s for 10 s of audio (latest, faster-whisper)`."""
    if not speeds:
        return "no voice notes transcribed yet"
    factors = sorted(s.real_time_factor for s in speeds)
    median = factors[len(factors) // 2]
    last = speeds[-1]
    count = "last note" if len(speeds) == 1 else f"last {len(speeds)} notes"
    return (
        f"{count}: real-time factor {median:.2f} (median), {last.transcribe_seconds:.1f} s for "
        f"{last.audio_seconds:.0f} s of audio (latest, {last.engine})"
    )
