"""Ending the speech process: what the bot waits for when its speech process will not end."""

from __future__ import annotations

import asyncio
import logging
import os
import signal

import pytest

from agents.inputs import speech_process
from agents.inputs.speech_process import SpeechProcess
from tests.support.processes import own_sleep

HANG_GUARD = 30.0  # the old wait after the kill had no bound: this guard is what fails then


async def test_a_killed_process_that_does_not_end_is_left_after_a_bounded_wait(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """A process stuck in the kernel (a hung GPU driver) does not end when killed: the reaper gives it STOP_SECONDS
    after the kill and goes on, so that the note waiting behind it gets a new speech process instead of a hang."""
    monkeypatch.setattr(speech_process, "STOP_SECONDS", 0.2)
    process = await asyncio.create_subprocess_exec("sleep", own_sleep("1"), stdin=asyncio.subprocess.PIPE)
    kills: list[int] = []
    monkeypatch.setattr(process, "kill", lambda: kills.append(process.pid))  # the kill does not end it
    try:
        with caplog.at_level(logging.WARNING, logger=speech_process.__name__):
            async with asyncio.timeout(HANG_GUARD):
                await SpeechProcess._reap(process)
        assert kills == [process.pid], "it was killed once its stdin's close did not end it"
        assert process.returncode is None, "the stand-in for a process stuck in the kernel is still running"
        assert f"speech process {process.pid}: killed, and still not ended" in caplog.text
    finally:
        os.kill(process.pid, signal.SIGKILL)
        await process.wait()


async def test_a_process_that_ends_when_its_stdin_closes_is_never_killed(monkeypatch: pytest.MonkeyPatch) -> None:
    process = await asyncio.create_subprocess_exec("cat", stdin=asyncio.subprocess.PIPE)
    monkeypatch.setattr(process, "kill", lambda: pytest.fail("a process that ended on its own was killed"))
    async with asyncio.timeout(HANG_GUARD):
        await SpeechProcess._reap(process)
    assert process.returncode == 0
