"""A task's worktree is a file system of its own (SANDBOX_DISK_FS=auto): a burst of writes meets a hard ceiling.

Attacks through the real bot and bwrap, the worker played by the scripted model: one command reserves five files of
nearly the whole budget each and deletes them before the budget's poll looks again (the poll alone lets the host's
disk take them all); the start-up recovery after a machine restart (the worktree's mount gone) and of an image left
with no worktree. A bot SIGKILLed mid-task (its worktree's mount survives it; the next bot mounts an image again after
a machine restart and Discard deletes it) is checked by the restart test (tests/test_restart.py), whose bots run with
a file system per worktree where the machine allows one. Every test here checks that no loop mount is left under its
folder (a leftover one would make pytest's clean-up delete through it) and unmounts what it finds. A resumed task's
budget, with or without a file system of its own, still counts what its first run wrote.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from agents import doctor as dr
from agents.doctor import Level
from agents.git.worktrees import create_task_worktree, remove_worktree_keep_branch
from agents.sandbox import task_disk
from tests.conftest import USER_ID, BotHarness, git, make_settings, running_bot
from tests.fakes import anthropic_server as claude_says
from tests.scripted import RoleScript
from tests.support.mounts import mounts_under, unmount_under
from tests.support.processes import host_pids, own_sleep
from tests.support.tasks import ended, start_task, tool_results

needs_bwrap = pytest.mark.skipif(
    shutil.which("bwrap") is None or not sys.platform.startswith("linux"),
    reason="bubblewrap (bwrap) is not installed: scripts/install-system-deps.sh",
)
needs_own_fs = pytest.mark.skipif(
    not task_disk.support().available, reason=f"no file system of its own per task here: {task_disk.support().reason}"
)

BUDGET_MB = 16
# five reservations of nearly the whole budget each (under the per-file bound, which is the budget), then deleted:
# together five times the budget, gone before the poll's next look
BURST = (
    "for i in 1 2 3 4 5; do fallocate -l 15M burst$i.bin && echo reserved-$i; done; "
    "sleep 0.3; rm -f burst*.bin; echo burst-over"
)


@pytest.fixture(autouse=True)
def no_leftover_mounts(tmp_path: Path) -> Iterator[None]:
    """After each test: no mount is left under its folder (what is left is unmounted lazily, and the test fails)."""
    yield
    left = unmount_under(tmp_path)
    assert not left, f"mounts left behind: {left}"


def worktree_of_task(worktrees: Path, task_id: int) -> Path:
    found = [p for p in worktrees.glob(f"*-task-{task_id}-*") if p.is_dir()]
    assert len(found) == 1, f"expected one worktree of task #{task_id} in {worktrees}: {found}"
    return found[0]


class ImageUse:
    """Samples, from a thread every 2 ms, the bytes the host's disk gives the task images in `worktrees` (all that a
    task's worktree can take there), and keeps the largest."""

    def __init__(self, worktrees: Path) -> None:
        self.images = worktrees / task_disk.IMAGES_FOLDER
        self.most = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)
        self._thread.start()

    def _sample(self) -> None:
        while not self._stop.wait(0.002):
            with contextlib.suppress(OSError):
                self.most = max([self.most, *(image.stat().st_blocks * 512 for image in self.images.glob("*.img"))])

    def stop(self) -> int:
        self._stop.set()
        self._thread.join()
        return self.most


@needs_bwrap
@needs_own_fs
@pytest.mark.settings(sandbox_max_disk_mb=BUDGET_MB, sandbox_max_file_mb=4096, sandbox_disk_fs="auto")
@pytest.mark.quick_tests  # the verdict is not what this test is about
async def test_a_burst_of_reservations_meets_the_worktrees_own_file_system(bot: BotHarness) -> None:
    worktrees = bot.settings.paths.worktrees_dir
    model = RoleScript()
    bot.claude.handler = model
    seen: dict[str, object] = {}

    def look_then_go_on(body: dict) -> dict:
        """Between the burst and the next command: the worktree is mounted from its image, which took little."""
        worktree = worktree_of_task(worktrees, 1)
        image = task_disk.image_for(worktree)
        seen["mounted"] = os.path.ismount(worktree)
        if image.exists():
            seen.update(image_size=image.stat().st_size, image_on_disk=image.stat().st_blocks * 512)
        return claude_says.tool_use("run_command", {"command": "echo after > after.txt && echo still-working"})

    model.add("orchestrator", start_task("calc", "Fill the disk."), claude_says.text("Started."))
    model.add(
        "code",
        claude_says.tool_use("run_command", {"command": BURST}),
        look_then_go_on,
        claude_says.text("Done: after.txt written."),
    )
    worktrees.mkdir(parents=True, exist_ok=True)
    images = ImageUse(worktrees)
    try:
        bot.say("fill the disk in calc")
        task = await ended(bot, 1, timeout=90)
    finally:
        took = images.stop()
    burst, after, *_ = [*tool_results(model), ""]
    assert "No space left on device" in burst, f"the burst was not refused: {burst}"
    assert "reserved-2" not in burst, f"two reservations of 15 MB passed a 16 MB budget: {burst}"
    assert seen["mounted"], "the worktree was not a file system of its own"
    room = (BUDGET_MB + BUDGET_MB // 8 + 16) << 20  # the budget, an eighth of it, ext4's records and the checkout
    assert seen["image_size"] <= room + (16 << 20) and seen["image_on_disk"] <= room, seen
    assert 0 < took <= room, f"the worktree took {took:,} bytes of the host's disk during a burst of 75 MB"
    # the task went on after the refused burst, and ended as usual: its work committed, its file system gone
    assert "still-working" in after, after
    assert task.status.is_final and task.branch
    repo = bot.settings.paths.workspace_path / "calc"
    assert git(repo, "show", f"{task.branch}:after.txt").strip() == "after"
    worktree = Path(task.worktree)
    await bot.tg.await_for(lambda: not worktree.exists(), timeout=30)  # its status is stored first, then it goes
    assert not os.path.ismount(worktree)
    assert not task_disk.image_for(worktree).exists(), "the ended task's image was not deleted"
    summary = await bot.tg.await_for(
        lambda: next((m for m in bot.tg.messages(USER_ID) if "task:merge:1" in (m.callback_data or [])), None)
    )
    bot.tg.press_button(USER_ID, summary.message_id, "task:merge:1")  # its branch merges as it always did
    await bot.tg.await_for(lambda: (repo / "after.txt").exists(), timeout=30)


async def _until_cancelled(name: str) -> None:
    """Wait until the task named `name` is cancelled: this one (a git command's start), or, where this is the start
    of a process leading a group of its own (`start_group` runs it as a task of its own under the caller's name),
    the caller, whose start then ends and is killed with its group."""
    this = asyncio.current_task()
    while not any(task.cancelling() for task in asyncio.all_tasks() if task is not this and task.get_name() == name):
        await asyncio.sleep(0.02)


@needs_bwrap
@needs_own_fs
@pytest.mark.settings(sandbox_max_disk_mb=BUDGET_MB, sandbox_disk_fs="auto")
@pytest.mark.quick_tests  # the set-up still makes its base test run (one of the points a cancel meets), a quick one
async def test_a_cancel_at_any_point_of_the_set_up_leaves_nothing_mounted(
    bot: BotHarness, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Task after task, the set-up stops at the next point after its image was mounted (the k-th process the task
    starts after `mount`: a git command, a test run's start, …) until /cancel comes: each time, nothing is left mounted
    and no loop device holds an image. The last task reaches its worker (the set-up had no later point)."""
    real = asyncio.create_subprocess_exec
    point = {"task": "", "k": 0, "seen": 0, "mounted": False}
    stuck = asyncio.Event()

    async def stalling(*args: str, **kwargs: object) -> asyncio.subprocess.Process:
        process = await real(*args, **kwargs)  # type: ignore[arg-type]  # the stand-in passes the caller's keywords on as they came
        current = asyncio.current_task()
        # only the set-up is stopped: once the worker has asked the model, the task's later processes (its commit,
        # its test runs) run on, and the task is left to end
        if current is not None and current.get_name() == point["task"] and not model.requests["code"]:
            if args[0] == "mount":
                point["mounted"] = True
            elif point["mounted"]:
                point["seen"] += 1
                if point["seen"] == point["k"]:
                    stuck.set()
                    await _until_cancelled(point["task"])  # the set-up stays here until /cancel cancels it
        return process

    model = RoleScript()
    monkeypatch.setattr(asyncio, "create_subprocess_exec", stalling)
    bot.claude.handler = model
    worktrees = bot.settings.paths.worktrees_dir
    model.add("code", claude_says.text("Nothing to change."))  # for the one task whose set-up is not stopped
    for k in range(1, 40):
        point.update(task=f"task-{k}", k=k, seen=0, mounted=False)
        stuck.clear()
        model.add("orchestrator", start_task("calc", f"Look at calc.py ({k})."), claude_says.text("Started."))
        bot.say(f"look at calc, take {k}")
        await bot.tg.await_for(lambda: stuck.is_set() or model.requests["code"], timeout=60)
        if model.requests["code"]:
            point["task"] = ""  # the set-up had no k-th point: this task's worker started, and is left to end
            break
        bot.tg.send_command(USER_ID, "/cancel")
        task = await ended(bot, k)
        assert task.status.value == "cancelled", task
        # a process the stalled step started may still hold a file there (the unmount is then lazy): it ends soon
        await bot.tg.await_for(lambda: not mounts_under(worktrees) and not loop_devices_of(tmp_path), timeout=30)
        assert point["mounted"], "the task's worktree was a file system of its own"
    assert k > 3, f"the set-up passed only {k - 1} points after its mount"
    await ended(bot, k)
    await bot.tg.await_for(lambda: not mounts_under(worktrees), timeout=30)  # its status is stored, then it goes


@needs_bwrap
@needs_own_fs
@pytest.mark.quick_tests  # the verdict is not what this test is about
async def test_a_graceful_stop_unmounts_its_tasks_file_systems_and_the_next_start_mounts_them_to_resume(
    fake_telegram, fake_anthropic, tmp_path: Path, workspace_root: Path, bot_repo: Path
) -> None:
    """The bot stops as on SIGTERM mid-task: the interrupted task's worktree is unmounted (no mount, no loop device
    outlives the bot), its image kept; the next start mounts it again, the draft is there, and the task resumes."""
    sleeper = own_sleep("7")
    settings = dict(sandbox_max_disk_mb=BUDGET_MB, sandbox_disk_fs="auto")
    model = RoleScript()
    async with running_bot(fake_telegram, fake_anthropic, tmp_path, workspace_root, bot_repo, **settings) as bot:
        bot.claude.handler = model
        model.add("orchestrator", start_task("calc", "Write the notes."), claude_says.text("Started."))
        model.add(
            "code", claude_says.tool_use("run_command", {"command": f"echo draft > draft.txt; exec sleep {sleeper}"})
        )
        bot.say("write the notes in calc")
        await fake_telegram.await_for(lambda: host_pids(sleeper), timeout=60)
        worktree = worktree_of_task(bot.settings.paths.worktrees_dir, 1)
        assert os.path.ismount(worktree)
        assert await dr.check_task_disks(bot.settings) is None, "a running task's mount is owned"
    assert not os.path.ismount(worktree), "the stopped bot left its task's file system mounted"
    assert task_disk.image_for(worktree).is_file(), "the image stays for the resume"
    await fake_telegram.await_for(lambda: not loop_devices_of(tmp_path), timeout=10)

    async with running_bot(fake_telegram, fake_anthropic, tmp_path, workspace_root, bot_repo, **settings) as bot:
        bot.claude.handler = model
        assert os.path.ismount(worktree), "the start did not mount the kept worktree again"
        assert (worktree / "draft.txt").read_text() == "draft\n"
        notice = await fake_telegram.await_for(
            lambda: next((m for m in fake_telegram.messages(USER_ID) if "stopped while" in (m.text or "")), None)
        )
        model.add("code", claude_says.text("Resumed: the notes are written."))
        fake_telegram.press_button(USER_ID, notice.message_id, "task:resume:1")
        task = await ended(bot, 1, timeout=90)
        assert "Resumed: the notes are written." in (task.result or ""), task
        await fake_telegram.await_for(lambda: not worktree.exists(), timeout=30)  # its status is stored, then it goes


@needs_bwrap
@pytest.mark.quick_tests  # the verdict is not what this test is about
@pytest.mark.parametrize("disk_fs", ["off", "auto"])
async def test_a_resumed_tasks_disk_budget_counts_what_its_first_run_wrote(
    fake_telegram, fake_anthropic, tmp_path: Path, workspace_root: Path, bot_repo: Path, disk_fs: str
) -> None:
    """Budget 16 MB: the first run writes 12 MB and the bot stops mid-task (SIGTERM's path); resumed after the
    restart, the worker writes 12 MB more. 24 MB of growth in one task is past its budget, with or without a file
    system of its own: an interruption does not hand a task a fresh budget."""
    sleeper = own_sleep("8" + str(len(disk_fs)))
    settings = dict(sandbox_max_disk_mb=BUDGET_MB, sandbox_disk_fs=disk_fs)
    model = RoleScript()
    write = "head -c 12000000 /dev/urandom > {0}.bin && echo wrote-{0}"
    async with running_bot(fake_telegram, fake_anthropic, tmp_path, workspace_root, bot_repo, **settings) as bot:
        bot.claude.handler = model
        model.add("orchestrator", start_task("calc", "Make data."), claude_says.text("Started."))
        model.add(
            "code", claude_says.tool_use("run_command", {"command": f"{write.format('first')}; exec sleep {sleeper}"})
        )
        bot.say("make data in calc")
        await fake_telegram.await_for(lambda: host_pids(sleeper), timeout=60)
    async with running_bot(fake_telegram, fake_anthropic, tmp_path, workspace_root, bot_repo, **settings) as bot:
        bot.claude.handler = model
        notice = await fake_telegram.await_for(
            lambda: next(
                (m for m in fake_telegram.messages(USER_ID) if "task:resume:1" in (m.callback_data or [])), None
            )
        )
        model.add(
            "code",
            claude_says.tool_use("run_command", {"command": f"ls; {write.format('second')}"}),
            claude_says.text("Done."),
        )
        fake_telegram.press_button(USER_ID, notice.message_id, "task:resume:1")
        await ended(bot, 1, timeout=120)
        last = tool_results(model)[-1]
        assert "first.bin" in last, last  # the resumed run works on what the first one wrote
        assert "disk budget of 16 MB" in last or "No space left" in last, last
        await fake_telegram.await_for(
            lambda: not mounts_under(tmp_path), timeout=30
        )  # its status is stored, then it goes
    await fake_telegram.await_for(lambda: not loop_devices_of(tmp_path), timeout=10)


@needs_own_fs
async def test_a_worktree_whose_file_system_cannot_be_made_is_a_plain_folder_and_doctor_says_which_bound_holds(
    tmp_path: Path, workspace_root: Path, fake_telegram, fake_anthropic
) -> None:
    """A step that fails (here the images' folder cannot be made: a file has its name) leaves a plain worktree that
    works and goes as before; doctor names the bound in force for each setting."""
    repo, worktrees = workspace_root / "calc", tmp_path / "worktrees"
    worktrees.mkdir()
    (worktrees / task_disk.IMAGES_FOLDER).write_text("not a folder")
    tree = await create_task_worktree(repo, 5, "plain", worktrees_dir=worktrees, disk_budget=16 << 20)
    assert (tree.path / "calc.py").is_file() and not os.path.ismount(tree.path)
    await remove_worktree_keep_branch(tree)
    assert not tree.path.exists()

    settings = make_settings(fake_telegram, fake_anthropic, tmp_path, workspace_root, sandbox_max_disk_mb=64)
    own = await dr.check_disk_bound(settings.model_copy(update={"sandbox_disk_fs": "auto"}))  # a real try
    assert own.level is Level.ok and "a file system of its own per task, 64 MB beyond its checkout" in own.detail
    polled = dr.check_disk_budget(settings.model_copy(update={"sandbox_disk_fs": "off"}))
    assert "polling every 0.2 s (SANDBOX_DISK_FS=off)" in polled.detail, polled.detail
    assert "a burst between two looks is not bounded" in polled.detail and "file system of its own" in polled.fix


def loop_devices_of(folder: Path) -> list[str]:
    """Loop devices whose backing file is under `folder` (/sys/block/loop*/loop/backing_file)."""
    found = []
    for backing in Path("/sys/block").glob("loop*/loop/backing_file"):
        with contextlib.suppress(OSError):
            if backing.read_text().strip().startswith(str(folder.resolve())):
                found.append(backing.parent.parent.name)
    return found


@needs_own_fs
@pytest.mark.parametrize("budget_mb", [16, 200])
async def test_what_a_worktree_can_hold_is_its_checkout_and_budget_not_more(tmp_path: Path, budget_mb: int) -> None:
    """The budget the owner set is the ceiling: a writer that goes on until the file system refuses has written the
    budget (and the checkout's room), not an eighth more; and no noticeably less either."""
    budget, checkout = budget_mb << 20, 1 << 20
    worktree = tmp_path / "worktrees" / "calc-task-4-fill"
    assert await task_disk.make(worktree, checkout, 10, budget)
    try:
        fill = await asyncio.create_subprocess_exec(
            "dd", "if=/dev/zero", f"of={worktree / 'fill.bin'}", "bs=1M", f"count={2 * budget_mb}",
            stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.PIPE,
        )  # fmt: skip
        _, said = await fill.communicate()
        assert b"No space left on device" in said, said
        held = (worktree / "fill.bin").stat().st_blocks * 512
    finally:
        await task_disk.release(worktree)
    assert held <= budget + checkout, f"{held:,} bytes written against a budget of {budget:,} (+{checkout:,})"
    assert held >= budget - (1 << 20), f"only {held:,} bytes could be written with a budget of {budget:,}"


@needs_own_fs
async def test_a_make_cancelled_after_the_kernel_mounted_leaves_no_mount_no_device_and_no_image(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The cancel comes while the bot waits for `mount`, which has already mounted the image: the mount and its loop
    device are undone before the image is deleted (else a mount on a deleted image stays, which no start-up finds)."""
    real = asyncio.create_subprocess_exec

    async def cancelled_once_mounted(*args: str, **kwargs: object) -> asyncio.subprocess.Process:
        process = await real(*args, **kwargs)  # type: ignore[arg-type]  # the stand-in passes the caller's keywords on as they came
        if args[0] == "mount":
            await process.wait()  # the kernel has mounted it; the bot has not heard yet
            current = asyncio.current_task()
            assert current is not None
            current.cancel()
        return process

    monkeypatch.setattr(asyncio, "create_subprocess_exec", cancelled_once_mounted)
    worktree = tmp_path / "worktrees" / "calc-task-5-cut"
    with pytest.raises(asyncio.CancelledError):
        await task_disk.make(worktree, 1 << 20, 10, 16 << 20)
    monkeypatch.undo()
    assert not os.path.ismount(worktree) and not task_disk.image_for(worktree).exists()
    for _ in range(200):  # the kernel frees the device once unmounted (a hang guard, not a timing)
        if not loop_devices_of(tmp_path):
            break
        await asyncio.sleep(0.05)
    assert not loop_devices_of(tmp_path)


@needs_own_fs
async def test_doctor_names_the_mounts_and_loop_devices_no_task_owns(
    tmp_path: Path, workspace_root: Path, fake_telegram, fake_anthropic
) -> None:
    """A worktree mounted that no task has (a cancel that raced set-up, a killed bot's task discarded), and a loop
    device on an image that was deleted (a killed mount): doctor names each, with the commands that free them."""
    settings = make_settings(fake_telegram, fake_anthropic, tmp_path, workspace_root)
    worktrees = settings.paths.worktrees_dir
    assert await dr.check_task_disks(settings) is None, "nothing to say"
    orphan = worktrees / "calc-task-8-orphan"
    assert await task_disk.make(orphan, 1 << 20, 10, 16 << 20)
    lost = worktrees / task_disk.IMAGES_FOLDER / "calc-task-9-lost.img"
    device = await loop_device_on_a_deleted_image(lost)
    try:
        check = await dr.check_task_disks(settings)
        assert check is not None and check.level is Level.warn, check
        assert f"mount {orphan} (no task still going or resumable has this worktree)" in check.detail, check.detail
        assert f"loop device {device} (its image {lost} was deleted)" in check.detail, check.detail
        assert f"umount -l {orphan}" in check.fix and f"losetup -d {device}" in check.fix, check.fix
    finally:
        await task_disk.release(orphan)
        detach = await asyncio.create_subprocess_exec("losetup", "-d", device)
        await detach.wait()
    assert await dr.check_task_disks(settings) is None


async def loop_device_on_a_deleted_image(image: Path) -> str:
    """A loop device attached to `image`, which is then deleted (what a bot killed in the middle of a mount leaves)."""
    image.write_bytes(bytes(1 << 20))
    attach = await asyncio.create_subprocess_exec("losetup", "-f", "--show", str(image), stdout=asyncio.subprocess.PIPE)
    device = (await attach.communicate())[0].decode().strip()
    image.unlink()
    return device


@needs_own_fs
async def test_the_start_up_recovery_frees_loop_devices_on_deleted_images(tmp_path: Path) -> None:
    worktrees = tmp_path / "worktrees"
    mounted = worktrees / "calc-task-6-deleted"
    assert await task_disk.make(mounted, 1 << 20, 10, 16 << 20)
    task_disk.image_for(mounted).unlink()  # still mounted, its image gone
    device = await loop_device_on_a_deleted_image(worktrees / task_disk.IMAGES_FOLDER / "calc-task-7-lost.img")
    done = await task_disk.recover(worktrees)
    assert not os.path.ismount(mounted), done
    assert any(device in line for line in done), done
    for _ in range(200):  # the kernel detaches a lazily unmounted device once it is free (a hang guard, not a timing)
        if not loop_devices_of(tmp_path):
            break
        await asyncio.sleep(0.05)
    assert not loop_devices_of(tmp_path), done


@needs_own_fs
async def test_a_busy_worktree_is_unmounted_lazily_and_its_loop_device_goes_with_the_last_user(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A process still holding a file of the worktree (a service not yet gone) makes `umount` fail: the worktree is
    unmounted lazily, its image deleted, and its loop device is released once that process lets go."""
    worktree = tmp_path / "worktrees" / "calc-task-3-busy"
    assert await task_disk.make(worktree, 1 << 20, 10, 16 << 20)
    assert os.path.ismount(worktree) and not any(worktree.iterdir()), "a new worktree's file system is empty"
    held = open(worktree / "held.txt", "w")  # noqa: SIM115 - held open across the release on purpose
    try:
        assert await task_disk.release(worktree)
        assert "unmounted lazily" in caplog.text, caplog.text
        assert not os.path.ismount(worktree) and not worktree.exists()
        assert not task_disk.image_for(worktree).exists()
    finally:
        held.close()
    await asyncio.sleep(0.1)  # the last user gone, the kernel detaches the loop device (autoclear)
    assert not loop_devices_of(tmp_path), "the loop device outlived the worktree"


@needs_own_fs
async def test_the_start_up_recovery_keeps_live_worktrees_and_deletes_those_git_no_longer_knows(tmp_path: Path) -> None:
    """A mounted worktree whose `.git` names its (existing) admin folder stays; one whose admin folder is gone goes;
    a `.git` the worker made a FIFO neither hangs the start nor keeps the image."""
    worktrees, admin = tmp_path / "worktrees", tmp_path / "repo.git" / "worktrees" / "live"
    admin.mkdir(parents=True)
    trees = {name: worktrees / f"calc-task-{n}-{name}" for n, name in enumerate(("live", "gone", "fifo"), 1)}
    for tree in trees.values():
        assert await task_disk.make(tree, 1 << 20, 10, 16 << 20)
    (trees["live"] / ".git").write_text(f"gitdir: {admin}\n")
    (trees["gone"] / ".git").write_text(f"gitdir: {tmp_path / 'repo.git' / 'worktrees' / 'gone'}\n")
    os.mkfifo(trees["fifo"] / ".git")
    try:
        done = await asyncio.wait_for(task_disk.recover(worktrees), 10)
        assert os.path.ismount(trees["live"]) and task_disk.image_for(trees["live"]).exists(), done
        for name in ("gone", "fifo"):
            assert not trees[name].exists() and not task_disk.image_for(trees[name]).exists(), done
    finally:
        await task_disk.release(trees["live"])
