"""Voice notes: the whisper model (cached, to download, or a file), the engine that transcribes and how fast it was,
and whether the machine's memory holds the bot with its speech model and a task beside it.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import os
from pathlib import Path

from agents.core.settings import Settings
from agents.doctor.checks import Check, Level

# whisper model name -> (file name in the whisper cache, approximate download size in MB); mirrors whisper._MODELS
# (importing whisper would import torch, seconds of start-up for a look-up). tests/test_doctor.py checks the names.
WHISPER_DOWNLOADS: dict[str, tuple[str, int]] = {
    "tiny.en": ("tiny.en.pt", 75),
    "tiny": ("tiny.pt", 75),
    "base.en": ("base.en.pt", 145),
    "base": ("base.pt", 145),
    "small.en": ("small.en.pt", 485),
    "small": ("small.pt", 485),
    "medium.en": ("medium.en.pt", 1530),
    "medium": ("medium.pt", 1530),
    "large-v1": ("large-v1.pt", 3090),
    "large-v2": ("large-v2.pt", 3090),
    "large-v3": ("large-v3.pt", 3090),
    "large": ("large-v3.pt", 3090),
    "large-v3-turbo": ("large-v3-turbo.pt", 1620),
    "turbo": ("large-v3-turbo.pt", 1620),
}


def _size(num_bytes: int) -> str:
    for unit, scale in (("GB", 1 << 30), ("MB", 1 << 20), ("KB", 1 << 10)):
        if num_bytes >= scale:
            return f"{num_bytes / scale:.1f} {unit}"
    return f"{num_bytes} B"


def whisper_cache_dir() -> Path:
    """Where whisper.load_model downloads models by default."""
    default = Path.home() / ".cache"
    return Path(os.environ.get("XDG_CACHE_HOME") or default) / "whisper"


def check_whisper(settings: Settings, cache_dir: Path | None = None) -> Check:
    """WHISPER_MODEL: a checkpoint file that exists, or a model name that is cached or will be downloaded."""
    name = settings.voice.whisper_model.strip()
    if name in WHISPER_DOWNLOADS:
        filename, megabytes = WHISPER_DOWNLOADS[name]
        cached = (cache_dir or whisper_cache_dir()) / filename
        if cached.is_file():
            return Check(Level.ok, "whisper", f"model {name!r} cached at {cached} ({_size(cached.stat().st_size)})")
        smaller = list(
            dict.fromkeys(n.removesuffix(".en") for n, (_, mb) in WHISPER_DOWNLOADS.items() if mb < megabytes)
        )
        return Check(
            Level.warn,
            "whisper",
            f"model {name!r} is not downloaded yet: the speech process downloads it when the first voice note comes "
            f"(~{megabytes} MB; at start with VOICE_PRELOAD=true)",
            "nothing to do (that first note waits for it)"
            + (f"; on a small machine choose a smaller WHISPER_MODEL: {' or '.join(smaller)}" if smaller else ""),
        )
    path = Path(name).expanduser()
    if path.is_file():
        return Check(Level.ok, "whisper", f"checkpoint {path} ({_size(path.stat().st_size)})")
    if settings.voice.voice_engine == "faster-whisper" and path.is_dir():
        if (path / "model.bin").is_file() and (path / "config.json").is_file():
            return Check(Level.ok, "whisper", f"CTranslate2 model folder {path}")
        return Check(
            Level.fail,
            "whisper",
            f"WHISPER_MODEL {path} is a folder without a CTranslate2 model (model.bin, config.json)",
            "point WHISPER_MODEL at a CTranslate2 folder, a .pt checkpoint or a model name",
        )
    if path.exists():
        return Check(
            Level.fail, "whisper", f"WHISPER_MODEL {path} is not a file", "point WHISPER_MODEL at a .pt checkpoint"
        )
    if os.sep in name or "/" in name or name.endswith(".pt") or name.startswith("~"):
        return Check(
            Level.fail,
            "whisper",
            f"the checkpoint {path} does not exist (voice notes would be refused)",
            "fix the WHISPER_MODEL path, or set it to a model name such as base",
        )
    return Check(
        Level.fail,
        "whisper",
        f"WHISPER_MODEL {name!r} is neither a model name nor a file",
        f"use one of {', '.join(n for n in WHISPER_DOWNLOADS if '.' not in n)}, or a checkpoint path",
    )


def check_voice_engine(settings: Settings) -> Check:
    """VOICE_ENGINE: which engine transcribes, whether it is installed, and how fast the last notes were."""
    from agents.inputs.speed_log import read_speeds, summary

    engine = settings.voice.voice_engine
    package = "faster_whisper" if engine == "faster-whisper" else "whisper"
    recent = [s for s in read_speeds(settings.paths.voice_data_dir / "recent-notes.json") if s.engine == engine]
    if importlib.util.find_spec(package) is None:
        return Check(
            Level.fail,
            "voice engine",
            f"VOICE_ENGINE={engine} but {engine} is not installed (voice notes would be refused)",
            "pip install -e '.[faster]' in the venv, or set VOICE_ENGINE=openai-whisper"
            if engine == "faster-whisper"
            else "reinstall the project (pip install -e .)",
        )
    detail = f"{engine} {_version(engine)}"
    if engine == "faster-whisper":
        detail += f" (CTranslate2 {_version('ctranslate2')}); {_faster_device(settings)}"
    start = "at the bot's start (VOICE_PRELOAD)" if settings.voice.voice_preload else "by the first voice note"
    idle = settings.voice.voice_idle_minutes
    end = f"ended after {idle:g} min without notes" if idle > 0 else "kept until the bot stops (VOICE_IDLE_MINUTES=0)"
    where = f"in a process of its own, started {start}, {end}"
    return Check(Level.ok, "voice engine", f"{detail}; {where}; {summary(recent)}")


def _version(distribution: str) -> str:
    try:
        return importlib.metadata.version(distribution)
    except importlib.metadata.PackageNotFoundError:
        return "(version unknown)"


def _faster_device(settings: Settings) -> str:
    """Which device faster-whisper uses and why: as the bot found it at its last start, else what it will try."""
    from agents.inputs.voice_faster import read_device_record

    record = read_device_record(settings.paths.voice_data_dir / "recent-notes.json")
    if record and record.get("engine") == "faster-whisper":
        device = "int8 on the CPU" if record.get("device") == "cpu" else f"on {record.get('device')}"
        return f"{device} at the bot's last start: {record.get('reason', '?')}"
    try:
        import ctranslate2

        count = ctranslate2.get_cuda_device_count()
    except Exception as err:  # noqa: BLE001 - a broken install is reported by the line itself
        return f"no device known ({type(err).__name__})"
    if count:
        return (
            f"CTranslate2 counts {count} CUDA device{'' if count == 1 else 's'}: the bot proves it with a warm-up "
            "transcription at start and falls back to int8 on the CPU if it fails"
        )
    return "int8 on the CPU (no CUDA device)"


# Resident memory in MB, measured by bench/memory.py (the real bot, whisper base dims; 2-core x86-64 machine): the
# bot idle (no speech process), and the bot with its speech process of each engine after one note (their sum: what
# a voice note needs while the speech process runs). Other sizes scale by their weights: openai-whisper holds fp32
# (4 bytes a parameter), faster-whisper int8 (1 byte).
BOT_MEMORY_MB = 124


VOICE_MEMORY_MB = {"openai-whisper": 125 + 748, "faster-whisper": 125 + 305}


BYTES_PER_PARAMETER = {"openai-whisper": 4, "faster-whisper": 1}


WHISPER_PARAMETERS_M = {"tiny": 39, "base": 74, "small": 244, "medium": 769, "large": 1550, "turbo": 809}


TASK_HEADROOM_MB = 768  # what a task's git, commands and tests need beside the bot, at the least


def whisper_parameters_m(model: str) -> float | None:
    """Millions of parameters of WHISPER_MODEL: from its name, or from the size of its file (fp16: 2 bytes each)."""
    name = model.strip()
    if name in WHISPER_DOWNLOADS or name.startswith(("large", "turbo")):
        family = "turbo" if "turbo" in name else name.split(".")[0].split("-")[0]
        return WHISPER_PARAMETERS_M.get(family)
    path = Path(name).expanduser()
    weights = path / "model.bin" if path.is_dir() else path
    return weights.stat().st_size / 2 / 1e6 if weights.is_file() else None


def voice_memory_mb(engine: str, model: str) -> int | None:
    """About how much the bot holds with `engine` and `model` loaded (None: the model's size is unknown)."""
    parameters = whisper_parameters_m(model)
    if parameters is None:
        return None
    per = BYTES_PER_PARAMETER[engine]
    base = WHISPER_PARAMETERS_M["base"]
    return round(VOICE_MEMORY_MB[engine] + (parameters - base) * per)


def machine_memory_mb() -> int | None:
    """MemTotal of /proc/meminfo, in MB (None where there is none)."""
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                return int(line.split()[1]) // 1024
    except OSError:
        return None
    return None


def check_memory(settings: Settings, total_mb: int | None = None) -> Check | None:
    """Whether this machine's memory holds the bot with its speech model and a task beside it; names a lighter
    choice when it does not."""
    total_mb = total_mb if total_mb is not None else machine_memory_mb()
    engine, model = settings.voice.voice_engine, settings.voice.whisper_model.strip()
    need = voice_memory_mb(engine, model)
    if total_mb is None or need is None:
        return None
    holds = f"the bot with {engine} {model} holds about {need} MB while its speech process runs (bench/memory.py)"
    if total_mb >= need + TASK_HEADROOM_MB:
        return Check(Level.ok, "memory", f"{total_mb} MB on this machine; {holds}")
    lighter = []
    other = "faster-whisper" if engine == "openai-whisper" else None
    if other and (other_need := voice_memory_mb(other, model)) is not None and other_need < need:
        lighter.append(f"VOICE_ENGINE={other} (about {other_need} MB)")
    family = whisper_parameters_m(model)
    if family is not None and family > WHISPER_PARAMETERS_M["tiny"]:
        smaller = voice_memory_mb("faster-whisper" if other else engine, "tiny")
        lighter.append(f"WHISPER_MODEL=tiny (about {smaller} MB{' with faster-whisper' if other else ''})")
    return Check(
        Level.warn,
        "memory",
        f"{total_mb} MB on this machine; {holds}, leaving less than {TASK_HEADROOM_MB} MB for a task",
        f"a lighter choice: {' or '.join(lighter)}" if lighter else "run the bot on a machine with more memory",
    )
