"""The frontend worker's eyes: headless Chromium (Debian's `chromium`) renders a workspace file or URL to PNG, one
Chromium for every picture of a screenshot (shoot_pages.py)."""

from __future__ import annotations

import asyncio
import base64
import dataclasses
import ipaddress
import json
import os
import shlex
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from agents.core.errors import ToolError
from agents.sandbox.bwrap import SandboxSpec
from agents.sandbox.safe_paths import open_regular
from agents.sandbox.shell import child_env, run_command
from agents.sandbox.temp_folders import temp_prefix
from agents.tools.toolbox import ToolResult
from agents.workspaces.folders import confine

VIEWPORTS = {"desktop": (1280, 800), "phone": (390, 844)}
CHROMIUM_FLAGS = (
    "--headless --no-sandbox --disable-gpu --disable-quic --no-first-run --disable-background-networking "
    "--disable-component-update --disable-sync --hide-scrollbars --mute-audio --disable-dev-shm-usage"
)
CHROMIUM_ADDRESS_SPACE = 1 << 40  # V8 and Chromium reserve far more address space than they use


def find_chromium(configured: str | None = None) -> str | None:
    candidates = [configured] if configured else ["chromium", "chromium-browser", "google-chrome", "chrome"]
    for name in candidates:
        path = shutil.which(name) if name else None
        if path:
            return path
    return None


def on_loopback(url: str) -> bool:
    """Whether an http(s) URL names this machine's loopback (in a task: its own services, its network namespace)."""
    host = (urlsplit(url).hostname or "").lower()
    if host in ("localhost", "localhost.") or host.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def target_url(root: Path, target: str, sandbox: SandboxSpec | None = None) -> str:
    if target.startswith(("http://", "https://", "file://")):
        if target.startswith("file://"):
            raise ToolError("give a path relative to the workspace instead of a file:// URL")
        if sandbox is not None and not sandbox.network and not on_loopback(target):
            raise ToolError(
                "screenshots run in the task's sandbox without network, so only the workspace's files and the "
                "task's own services (run_command background=true, on localhost) can be shown"
            )
        return target
    path = confine(root, target)
    if not path.is_file():
        raise ToolError(f"{target!r} is not a file in the workspace")
    return path.as_uri()


SHOOTER = Path(__file__).with_name("shoot_pages.py")  # run by the sandbox's python3: one Chromium, every picture
MAX_PICTURE_BYTES = 16 << 20  # a PNG of the biggest viewport is a few MB at most


def _picture(folder: Path, name: str) -> bytes | None:
    """A picture the sandbox wrote: a regular file only (never through a link to a file of the machine, never
    waiting on a FIFO), not empty, at most MAX_PICTURE_BYTES; else None."""
    try:
        fd = open_regular(folder, name)
    except OSError:
        return None
    with os.fdopen(fd, "rb") as source:
        data = source.read(MAX_PICTURE_BYTES + 1)
    return data if 0 < len(data) <= MAX_PICTURE_BYTES else None


async def capture_all(
    chromium: str,
    shots: list[tuple[str, int, int]],
    timeout: float = 60.0,
    sandbox: SandboxSpec | None = None,
    read_only: tuple[Path, ...] = (),
) -> list[bytes]:
    """One PNG per (url, width, height), all taken by one Chromium (a start costs about a second of CPU, each further
    picture a fraction of that); raises ToolError with Chromium's output when one fails.

    With `sandbox`, Chromium runs inside it like every process of a task: the page's scripts reach no network and no
    file outside the worktree (only the folder the pictures are written to and `read_only` are added)."""
    with tempfile.TemporaryDirectory(prefix=temp_prefix("shot", "page")) as tmp:
        files = [Path(tmp) / f"shot-{n}.png" for n in range(len(shots))]
        plan = [
            {"url": url, "width": width, "height": height, "file": str(file)}
            for (url, width, height), file in zip(shots, files, strict=True)
        ]
        python = "python3" if sandbox is not None else sys.executable
        flags = [*CHROMIUM_FLAGS.split(), f"--user-data-dir={tmp}/profile"]
        # -I: no PYTHON* variable, user site or script folder of the sandbox's python3 changes what the driver runs
        command = shlex.join([python, "-I", str(SHOOTER), json.dumps(plan), chromium, *flags])
        confined = None
        if sandbox is not None:
            limits = dataclasses.replace(sandbox.limits, max_memory_bytes=CHROMIUM_ADDRESS_SPACE)
            confined = dataclasses.replace(
                sandbox.for_own_program(),  # `python3` and Chromium's own script's commands are never the worker's
                writable=(*sandbox.writable, Path(tmp)),
                read_only=(*sandbox.read_only, SHOOTER, *read_only),
                limits=limits,
            )
        result = await run_command(command, cwd=Path(tmp), timeout=timeout, env=child_env(), sandbox=confined)
        pictures = await asyncio.to_thread(lambda: [_picture(Path(tmp), file.name) for file in files])
        if not all(pictures):
            raise ToolError(f"Chromium produced no screenshot: {result.output[-800:]}")
        return [picture for picture in pictures if picture]


async def screenshot_tool_result(
    chromium: str | None, root: Path, target: str, sandbox: SandboxSpec | None = None
) -> tuple[ToolResult, list[tuple[str, bytes]]]:
    """The tool's answer to the model (text + images) and the pictures to send to the chat."""
    if chromium is None:
        return ToolResult(
            "Chromium is not installed on this machine, so no screenshot can be taken; "
            "continue without visual validation and say so in your report."
        ), []
    url = target_url(root, target, sandbox)
    content: list[dict[str, Any]] = []
    pictures: list[tuple[str, bytes]] = []
    sizes = list(VIEWPORTS.items())
    pngs = await capture_all(chromium, [(url, width, height) for _, (width, height) in sizes], sandbox=sandbox)
    for (name, (width, height)), png in zip(sizes, pngs, strict=True):
        pictures.append((f"{target} at {name} width ({width}px)", png))
        content.append({"type": "text", "text": f"{name} ({width}×{height}):"})
        content.append(
            {
                "type": "image",
                "source": {"type": "base64", "media_type": "image/png", "data": base64.b64encode(png).decode("ascii")},
            }
        )
    return ToolResult(content), pictures
