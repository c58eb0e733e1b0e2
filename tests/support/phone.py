"""A phone for the review page: headless Chromium with a phone's viewport, driven over the DevTools protocol (a
websocket, tornado's client), so a test opens a page with Telegram's launch data in its fragment, reads what a person
sees, presses a button and takes a screenshot. The phones of a test module share one Chromium (`close_browser` at the
module's end), each a page of its own."""

from __future__ import annotations

import asyncio
import atexit
import base64
import contextlib
import io
import json
import os
import signal
import subprocess
import tempfile
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

from tornado.websocket import WebSocketClientConnection, websocket_connect

from agents.review.launch_data import sign
from agents.tools.screenshot import find_chromium

CHROMIUM = find_chromium()
WIDTH, HEIGHT = 390, 844  # an iPhone 12-15's CSS pixels
FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--hide-scrollbars",
    "--mute-audio",
    "--disable-dev-shm-usage",
    f"--window-size={WIDTH},{HEIGHT}",
    "--remote-debugging-port=0",
]
THEME_DARK = {"bg_color": "#17212b", "text_color": "#f5f5f5", "button_color": "#5288c1", "hint_color": "#708499"}


def launch_data(token: str, user_id: int, *, signed_at: float, name: str = "owner", start_param: str = "") -> str:
    """initData as Telegram makes it for `user_id`, signed with `token` at `signed_at`."""
    fields = {
        "query_id": "AAHdF6IQAAAAAN0XohDhrOrc",
        "user": json.dumps({"id": user_id, "first_name": name, "username": name}, separators=(",", ":")),
        "auth_date": str(int(signed_at)),
        "signature": "FAKE-ed25519-signature-for-third-parties",  # Telegram adds one; the bot's hash covers it
    }
    if start_param:
        fields["start_param"] = start_param
    return sign(fields, token)


def mini_app_url(page: str, init_data: str, theme: dict[str, str] | None = None) -> str:
    """The URL Telegram opens: the page, with the launch data and theme in its fragment."""
    fragment = f"tgWebAppData={quote(init_data, safe='')}&tgWebAppVersion=8.0&tgWebAppPlatform=ios"
    if theme is not None:
        fragment += f"&tgWebAppThemeParams={quote(json.dumps(theme), safe='')}"
    return f"{page}#{fragment}"


NAVIGATED = ("Inspected target navigated or closed", "Execution context was destroyed", "Cannot find context")


class Navigated(RuntimeError):
    """A call into the page that was answered by the page going away (a navigation, a reload)."""


class Phone:
    """One Chromium page over the DevTools protocol."""

    def __init__(self, ws: WebSocketClientConnection) -> None:
        self.ws, self._next = ws, 0

    async def call(self, method: str, **params: Any) -> dict[str, Any]:
        self._next += 1
        ident = self._next
        await self.ws.write_message(json.dumps({"id": ident, "method": method, "params": params}))
        while True:
            raw = await asyncio.wait_for(self.ws.read_message(), 30)
            if raw is None:
                raise ConnectionError("Chromium closed the DevTools connection")
            message = json.loads(raw)
            if message.get("id") == ident:
                if "error" in message:
                    error = Navigated if any(m in str(message["error"]) for m in NAVIGATED) else RuntimeError
                    raise error(f"{method}: {message['error']}")
                return message.get("result", {})

    async def evaluate(self, expression: str) -> Any:
        result = await self.call("Runtime.evaluate", expression=expression, returnByValue=True, awaitPromise=True)
        return result.get("result", {}).get("value")

    async def open(self, url: str, timeout: float = 30) -> str:
        """Load `url` afresh, wait until the page's script has shown the task or refused; return what a person reads.

        The page shown is marked and left in one script, so the wait is for the new one. The same page with another
        fragment would not load again (the fragment changes at once, in place), so it is then reloaded: no detour
        through about:blank, whose way back costs a new renderer process each time."""
        with contextlib.suppress(Navigated):  # the page may be gone before the script's answer is sent
            await self.evaluate(
                "(url => { window.__phone_left = true; const page = u => u.split('#')[0];"
                " const same = page(new URL(url, location.href).href) === page(location.href);"
                f" location.replace(url); if (same) location.reload(); }})({json.dumps(url)})"
            )
        await self.until("!window.__phone_left && document.body && document.body.getAttribute('data-loaded')", timeout)
        return await self.text()

    async def until(self, expression: str, timeout: float = 30) -> Any:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while True:
            with contextlib.suppress(Navigated):  # asked while the page was being replaced: not yet
                if value := await self.evaluate(expression):
                    return value
            assert loop.time() < deadline, f"not true in the page within {timeout:g} s: {expression}"
            await asyncio.sleep(0.1)

    async def resize(self, width: int, height: int) -> None:
        await self.call(
            "Emulation.setDeviceMetricsOverride", width=width, height=height, deviceScaleFactor=1, mobile=width < 900
        )

    async def text(self) -> str:
        return str(await self.evaluate("document.body.innerText"))

    async def screenshot(self) -> bytes:
        shot = await self.call("Page.captureScreenshot", format="png")
        return base64.b64decode(shot["data"])


class _Browser:
    """The Chromium the phones of a test module share (a start costs about a second of CPU, a page a fraction of
    that), ended by `close_browser` when the module ends. Started by
    subprocess.Popen, not asyncio's: it outlives the event loop of the test that started it."""

    process: subprocess.Popen[bytes] | None = None
    profile: tempfile.TemporaryDirectory[str] | None = None
    endpoint = ""

    @classmethod
    async def endpoint_url(cls) -> str:
        """The browser's DevTools websocket, starting Chromium first when none runs."""
        assert CHROMIUM is not None
        if cls.process is not None and cls.process.poll() is None:
            return cls.endpoint
        close_browser()
        cls.profile = tempfile.TemporaryDirectory(prefix="agentlab-phone-")
        cls.process = subprocess.Popen(
            [CHROMIUM, *FLAGS, f"--user-data-dir={cls.profile.name}", "about:blank"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,  # its whole process group is ended at once
        )
        port_file = Path(cls.profile.name) / "DevToolsActivePort"
        loop = asyncio.get_running_loop()
        deadline = loop.time() + 60
        while not (port_file.exists() and port_file.read_text().strip()):
            assert loop.time() < deadline and cls.process.poll() is None, "Chromium did not start"
            await asyncio.sleep(0.1)
        port, path = port_file.read_text().split()[:2]
        cls.endpoint = f"ws://127.0.0.1:{port}{path}"
        return cls.endpoint


def close_browser() -> None:
    """End the shared Chromium (its whole process group) and remove its profile; the next phone starts another."""
    if _Browser.process is not None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(_Browser.process.pid, signal.SIGKILL)
        _Browser.process.wait()
        _Browser.process = None
    if _Browser.profile is not None:
        _Browser.profile.cleanup()
        _Browser.profile = None


atexit.register(close_browser)


@contextlib.asynccontextmanager
async def phone() -> AsyncIterator[Phone]:
    """A page of its own at a phone's size in the shared headless Chromium, closed when the block ends. It is a page of
    the browser's default context (a context of its own would cost half a CPU-second more for each): the review page
    keeps no cookies and no storage, and each test's bot listens on a port of its own, so no page sees another's."""
    endpoint = await _Browser.endpoint_url()
    browser = Phone(await websocket_connect(endpoint))
    try:
        target = (await browser.call("Target.createTarget", url="about:blank"))["targetId"]
        try:
            ws = await websocket_connect(
                endpoint.split("/devtools/")[0] + f"/devtools/page/{target}", max_message_size=64 * 1024 * 1024
            )
            device = Phone(ws)
            try:
                await device.call("Page.enable")
                await device.resize(WIDTH, HEIGHT)
                yield device
            finally:
                ws.close()
        finally:
            await browser.call("Target.closeTarget", targetId=target)
    finally:
        browser.ws.close()


def not_blank(png: bytes) -> int:
    """How many distinct colours the picture has (a blank page has one or two)."""
    from PIL import Image

    with Image.open(io.BytesIO(png)) as image:
        colours = image.convert("RGB").getcolors(maxcolors=1 << 20)
    return len(colours) if colours is not None else 1 << 20
