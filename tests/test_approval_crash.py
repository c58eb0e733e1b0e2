"""A SIGKILL between approving a proposal and creating its task never strands the proposal as `approved`."""

from __future__ import annotations

import asyncio
import sqlite3
import warnings

import pytest

from agents.core.models import Proposal, ProposalStatus, Task, WorkerKind
from agents.store.database import Store
from agents.work.task_proposals import proposal_buttons
from tests.conftest import USER_ID, make_settings, start_bot
from tests.fakes import anthropic_server as claude_says
from tests.scripted import RoleScript


async def test_approval_and_its_task_are_one_transaction(tmp_path) -> None:
    store = await Store.open(tmp_path / "db.sqlite")
    proposal = await store.add_proposal(Proposal(chat_id=1, workspace="w", request="r", body="b"))
    bad = Task(chat_id=1, workspace="w", worker=WorkerKind.CODE, title="t", instructions="i", proposal_id=proposal.id)
    bad.__dict__["status"] = object()  # the task insert fails after the proposal's UPDATE ran in the transaction
    with pytest.raises(sqlite3.Error), warnings.catch_warnings():
        warnings.simplefilter("ignore")  # pydantic warns about serialising the bogus status
        await store.approve_proposal(proposal.id, bad, ["step"])
    assert (await store.get_proposal(proposal.id)).status is ProposalStatus.PENDING, "rolled back together"
    assert await store.list_tasks() == []
    good = Task(chat_id=1, workspace="w", worker=WorkerKind.CODE, title="t", instructions="i", proposal_id=proposal.id)
    task = await store.approve_proposal(proposal.id, good, ["step"])
    again = await store.approve_proposal(proposal.id, good.model_copy(update={"id": None}), [])
    assert task is not None and again is None
    assert (await store.get_proposal(proposal.id)).task_id == task.id
    assert len(await store.list_tasks()) == 1
    await store.close()


async def test_restart_after_a_kill_mid_approval_lets_the_user_approve_again(
    fake_telegram, fake_anthropic, tmp_path, workspace_root
) -> None:
    from telegram_bot.app import stop_application

    settings = make_settings(fake_telegram, fake_anthropic, tmp_path, workspace_root)
    store = await Store.open(settings.paths.database_path)  # what a bot SIGKILLed between the two steps left behind
    proposal = await store.add_proposal(
        Proposal(chat_id=USER_ID, workspace="group-therapy", request="add logging", body="## Plan\n1. import logging")
    )
    assert await store.decide_proposal(proposal.id, ProposalStatus.APPROVED)
    await store.close()

    model = RoleScript()
    fake_anthropic.handler = model
    # the proposal's plan is the task's criterion: a worker that ends without verifying it gets one nudge turn
    model.add("code", claude_says.text("Implemented."), claude_says.text("Implemented; nothing more to check."))
    bot = await start_bot(settings, fake_telegram, fake_anthropic)
    try:
        # the proposal as the earlier run showed it (its buttons recorded with it); the user taps Approve again
        shown = await bot.runtime.notifier.send(USER_ID, "Proposal #1", buttons=proposal_buttons(1))
        fake_telegram.press_button(USER_ID, shown, "proposal:approve:1")
        reply = await fake_telegram.await_for(
            lambda: next(
                (
                    m.text
                    for m in fake_telegram.messages(USER_ID)
                    if "Proposal #1 approved" in (m.text or "") or "already" in (m.text or "")
                ),
                None,
            )
        )
        assert "code task #1 started" in reply, reply
        task = await bot.runtime.store.get_task(1)
        assert task is not None and task.proposal_id == proposal.id
        assert (await bot.runtime.store.get_proposal(proposal.id)).task_id == 1
        while not (await bot.runtime.store.get_task(1)).status.is_final:
            await asyncio.sleep(0.05)
    finally:
        await stop_application(bot.app)
