"""A task's worktree as a file system of its own: a hard ceiling on its disk use that no burst of writes can pass.

The disk budget's poll (task_limits.DiskBudget) is precise but looks only every 0.2 s: one command can reserve
several large files and delete them between two looks, and the host's disk holds them meanwhile. Where the machine
allows it, the worktree folder is therefore the mount point of a sparse ext4 image (a loop mount) whose file system
leaves exactly the checkout plus the task's budget free for files (ext4's own records on top, measured after `mkfs`
and the image refitted): a write past the budget fails with "No space left on device" at once, whatever its speed. The
budget the owner set is the ceiling; the poll stays the precise count for what lies outside the worktree (the
services' logs) and stops a command that went past it.

Where the image lives: the worktree `<worktrees>/<name>` has its image at `<worktrees>/.task-disks/<name>.img`,
beside the worktrees and outside every sandbox (a command sees its own worktree only). It is found from the
worktree's path alone, so removing a worktree (agents/git/worktrees.py) and the start-up sweep need nothing else.
The image is sparse: it takes on the host only what has been written in it (about 4 MB when new), at most its size;
space freed inside it is not given back to the host until the worktree goes.

When: SANDBOX_DISK_FS=auto (the default) where the bot may mount (CAP_SYS_ADMIN, as root), the kernel has loop
devices (/dev/loop-control) and `mkfs.ext4`, `mount`, `umount` are installed. Elsewhere, or when a mount fails, the
worktree is a plain folder bounded by the poll alone, said once per process in the log and by `agentlab doctor`.

Lifecycle: made and mounted before `git worktree add`; unmounted and deleted when the worktree is removed, and when
`make` itself is cancelled half way (a mount that completed and a loop device left attached are undone before the
image goes). A worktree kept after its task (an interrupted task) keeps its image; a graceful stop unmounts it, a
killed bot's mount survives it. `recover` runs at start-up: an image whose worktree folder is not a mount point (a
stop, a machine restart) is mounted again so no uncommitted work is lost; an image whose worktree is gone is unmounted
and deleted; a loop device on an image already deleted is unmounted and detached. `strays` names the mounts and loop
devices that no task owns (`agentlab doctor`).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import os
import re
import shutil
import signal
import stat
import tempfile
from dataclasses import dataclass
from pathlib import Path

from agents.sandbox.clean_env import child_env
from agents.sandbox.privilege import holds_sys_admin
from agents.sandbox.reaping import start_group

log = logging.getLogger(__name__)

IMAGES_FOLDER = ".task-disks"
BLOCK = 4096
INODE_BYTES = 256
COMMAND_SECONDS = 30.0  # mkfs, mount, umount: each takes well under a second
TOOLS = ("mkfs.ext4", "dumpe2fs", "mount", "umount")
LOST_FOUND_BLOCKS = 4  # what mkfs.ext4 gives lost+found with 4 KB blocks (16 KB)
FIT_PASSES = 4  # mkfs runs at most this often to fit the free room to the checkout plus the budget
FIT_SLACK = 64 * BLOCK  # the free room may fall short of that by this much at most (ext4's group records move)


@dataclass(frozen=True)
class Support:
    """Whether this machine can give a worktree a file system of its own, and if not, why."""

    available: bool
    reason: str = ""


@functools.cache
def support() -> Support:
    """Checked once per process: the right to mount, loop devices, the tools (a constant of the machine while the
    process runs, so cached for it)."""
    if not Path("/dev/loop-control").exists():
        return Support(False, "the kernel offers no loop devices (/dev/loop-control)")
    if not holds_sys_admin():
        return Support(False, "the bot may not mount file systems (it needs CAP_SYS_ADMIN: run it as root)")
    missing = [tool for tool in TOOLS if shutil.which(tool) is None]
    if missing:
        return Support(False, f"{', '.join(missing)} not installed (e2fsprogs, util-linux)")
    return Support(True)


async def probe() -> Support:
    """`support`, then a real try (`agentlab doctor`): a small image made, mounted and removed in a temporary folder,
    so a machine that forbids the mount itself (a container's seccomp or AppArmor profile) is told too."""
    found = support()
    if not found.available:
        return found
    folder = Path(tempfile.mkdtemp(prefix=f"agentlab-diskprobe-{os.getpid()}-"))
    try:
        worktree = folder / "probe"
        if not await make(worktree, 0, 1, 16 << 20, quiet=True):
            return Support(False, "making and mounting a small image failed here (see the log)")
        await release(worktree)
        return Support(True)
    finally:
        with contextlib.suppress(OSError):
            shutil.rmtree(folder)


@functools.cache
def _say_plain_folders() -> None:
    """The log line for a machine whose worktrees stay plain folders (`support` says why). Cached, so said once per
    process: like `support`, whose answer it says, it is a constant of the machine."""
    log.warning(
        "task worktrees are plain folders: %s; a task's disk budget is polled every 0.2 s, and a burst of writes "
        "between two looks is not bounded",
        support().reason,
    )


def can_make() -> bool:
    """Whether a worktree can get a file system of its own here; said once in the log when not."""
    found = support()
    if not found.available:
        _say_plain_folders()
    return found.available


def image_for(worktree: Path) -> Path:
    """Where the image of the worktree at `worktree` is (whether or not there is one)."""
    worktree = Path(worktree)
    return worktree.parent / IMAGES_FOLDER / f"{worktree.name}.img"


def worktree_of(image: Path) -> Path:
    return image.parent.parent / image.name.removesuffix(".img")


def is_own_file_system(worktree: Path) -> bool:
    """Whether `worktree` is mounted from its image now."""
    return image_for(worktree).is_file() and os.path.ismount(worktree)


def image_size(checkout_bytes: int, entries: int, budget_bytes: int) -> tuple[int, int, int]:
    """A first guess of the image's size, and its inode count, for a checkout of `checkout_bytes` (in whole blocks)
    and `entries` files and folders, with room for `budget_bytes` more: the checkout and the budget, plus an estimate of
    ext4's inode tables, journal and bitmaps (`make` then fits the size to what mkfs really leaves free). Returns the
    size, the inode count and the journal's size (a 64th of the room, 4 to 128 MB)."""
    room = checkout_bytes + budget_bytes
    inodes = 2 * entries + budget_bytes // 8192 + 4096
    journal = min(128 << 20, max(4 << 20, (room // 64) >> 20 << 20))
    size = room + inodes * INODE_BYTES + journal + room // 64 + (4 << 20)
    return -(-size // BLOCK) * BLOCK, inodes, journal


async def _run(*args: str) -> tuple[int, str]:
    """Run a tool (its own process group, killed past COMMAND_SECONDS); its exit status and output."""
    try:
        process = await start_group(
            args,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT,
            env=child_env(),
        )
    except OSError as err:
        return 127, str(err)
    try:
        async with asyncio.timeout(COMMAND_SECONDS):
            out, _ = await process.communicate()
    except (TimeoutError, asyncio.CancelledError):
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        await process.wait()
        raise
    return process.returncode or 0, out.decode(errors="replace").strip()


async def make(worktree: Path, checkout_bytes: int, entries: int, budget_bytes: int, *, quiet: bool = False) -> bool:
    """Give the (new, empty or absent) folder `worktree` a file system of its own, sized by `image_size`. True when
    it has one; False where the machine allows none or a step failed (said in the log): the folder is then plain."""
    found = support()
    if not found.available:
        if not quiet:
            _say_plain_folders()
        return False
    worktree = Path(worktree)
    image = image_for(worktree)
    size, inodes, journal = image_size(checkout_bytes, entries, budget_bytes)
    try:
        await asyncio.to_thread(_new_image, worktree, image, size)
    except OSError as err:  # an image left there is never overwritten: it may hold a kept worktree's files
        log.warning("%s stays a plain folder (its disk budget is only polled): %s", worktree, err)
        return False
    try:
        await _fit(image, size, inodes, journal, checkout_bytes + budget_bytes)
        await _mount(image, worktree)
    except (OSError, asyncio.CancelledError) as err:
        # a cancel during `mount` may come after the kernel mounted it (or attached the loop device): undone before
        # the image goes, even if cancelled again meanwhile, so no mount or loop device is left on a deleted image
        await asyncio.shield(_undo(image, worktree))
        if isinstance(err, asyncio.CancelledError):
            raise
        log.warning("%s stays a plain folder (its disk budget is only polled): %s", worktree, err)
        return False
    # mkfs made lost+found: the folder must be empty for `git worktree add` (e2fsck makes another if it needs one)
    with contextlib.suppress(OSError):
        (worktree / "lost+found").rmdir()
    return True


async def _fit(image: Path, size: int, inodes: int, journal: int, want: int) -> None:
    """Format the image so that its file system leaves `want` bytes free for files, FIT_SLACK less at most and never
    more: mkfs, read what it left free, resize the image by the difference, again (ext4's records grow with the size,
    so a pass or two settles it)."""
    free = 0
    for _ in range(FIT_PASSES):
        free = await _format(image, size, inodes, journal)
        if want - FIT_SLACK <= free <= want:
            return
        # by the difference, aiming at the middle of the slack (the group records that come or go move it a little)
        size += ((want - free) // BLOCK - FIT_SLACK // BLOCK // 2) * BLOCK
    if free > want:
        raise OSError(f"the file system leaves {free:,} bytes free for a budget of {want:,}")


async def _format(image: Path, size: int, inodes: int, journal: int) -> int:
    """mkfs.ext4 on the image at `size` bytes; the bytes its file system leaves free for files."""
    await asyncio.to_thread(os.truncate, image, size)  # sparse either way
    code, out = await _run(
        "mkfs.ext4", "-q", "-F", "-b", str(BLOCK), "-m", "0", "-N", str(inodes), "-J", f"size={journal >> 20}",
        "-E", f"lazy_itable_init=1,lazy_journal_init=1,root_owner={os.geteuid()}:{os.getegid()}", str(image),
    )  # fmt: skip
    if code != 0:
        raise OSError(f"mkfs.ext4 failed: {out}")
    code, out = await _run("dumpe2fs", "-h", str(image))
    free = re.search(r"^Free blocks:\s+(\d+)\s*$", out, re.MULTILINE)
    blocks = re.search(r"^Block count:\s+(\d+)\s*$", out, re.MULTILINE)
    if code != 0 or free is None or blocks is None:
        raise OSError(f"dumpe2fs failed: {out[-300:]}")
    # mounted, ext4 keeps back a fiftieth of the blocks (4096 at most) for its delayed allocation, and the folder
    # lost+found that mkfs made (LOST_FOUND_BLOCKS) is removed at once
    kept_back = min(int(blocks[1]) // 50, 4096)
    return (int(free[1]) - kept_back + LOST_FOUND_BLOCKS) * BLOCK


async def _undo(image: Path, worktree: Path) -> None:
    """A `make` that did not finish: whatever it mounted or attached is undone, then the image deleted."""
    with contextlib.suppress(OSError):
        await unmount(worktree)
    await detach_loops(image)
    with contextlib.suppress(OSError):
        image.unlink()


def loop_devices(images: Path) -> list[tuple[str, str]]:
    """The loop devices whose backing file is under the folder `images`: (device, backing file as the kernel names
    it, " (deleted)" at its end when the file is gone)."""
    found = []
    prefix = str(Path(images).resolve()) + "/"
    for backing in sorted(Path("/sys/block").glob("loop*/loop/backing_file")):
        with contextlib.suppress(OSError):
            name = backing.read_text().strip()
            if name.startswith(prefix):
                found.append((f"/dev/{backing.parent.parent.name}", name))
    return found


@dataclass(frozen=True)
class Stray:
    """A mount or loop device of the task disks that no task owns (`agentlab doctor` names it)."""

    kind: str  # "mount" or "loop device"
    name: str  # the mount point, or /dev/loopN
    why: str


def mounts() -> list[tuple[str, str]]:
    """(source, mount point) of every mount this process sees, the kernel's octal escapes undone."""
    found: list[tuple[str, str]] = []
    with contextlib.suppress(OSError):
        for line in Path("/proc/self/mounts").read_text().splitlines():
            fields = [re.sub(r"\\([0-7]{3})", lambda m: chr(int(m[1], 8)), f) for f in line.split()[:2]]
            if len(fields) == 2:
                found.append((fields[0], fields[1]))
    return found


def strays(worktrees_dir: Path, owned: set[Path] | None) -> list[Stray]:
    """The mounts under `worktrees_dir` and the loop devices on its images that no task owns: a mount on a deleted
    image, or of a folder that is not the worktree of a task still going or resumable (`owned`; None: not known, so
    that is not judged); a loop device on a deleted image, or mounted nowhere."""
    root = str(Path(worktrees_dir).resolve())
    devices = loop_devices(Path(root) / IMAGES_FOLDER)
    deleted = {device: backing for device, backing in devices if backing.endswith(" (deleted)")}
    kept = {str(Path(p).resolve()) for p in owned} if owned is not None else None
    found = []
    seen = mounts()
    for source, point in seen:
        if not point.startswith(root + "/"):
            continue
        if source in deleted:
            found.append(Stray("mount", point, f"its image {deleted[source].removesuffix(' (deleted)')} was deleted"))
        elif kept is not None and point not in kept:
            found.append(Stray("mount", point, "no task still going or resumable has this worktree"))
    mounted = {source for source, _ in seen}
    for device, backing in devices:
        if device in deleted:
            found.append(Stray("loop device", device, f"its image {backing.removesuffix(' (deleted)')} was deleted"))
        elif device not in mounted:
            found.append(Stray("loop device", device, f"attached to {backing} and mounted nowhere"))
    return found


async def detach_loops(image: Path) -> None:
    """Detach the loop devices still attached to `image` (mounted nowhere: a mount keeps its device busy)."""
    image = Path(image).resolve()
    for device, backing in loop_devices(image.parent):
        if backing.removesuffix(" (deleted)") == str(image):
            await _run("losetup", "-d", device)


def _new_image(worktree: Path, image: Path, size: int) -> None:
    image.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    worktree.mkdir(parents=True, exist_ok=True)
    with open(image, "xb") as file:
        file.truncate(size)  # sparse: nothing is written yet


async def _mount(image: Path, worktree: Path) -> None:
    # noinit_itable: the inode tables are not zeroed in the background, which would write them all to the host's disk
    options = "loop,nodev,nosuid,noinit_itable"
    code, out = await _run("mount", "-t", "ext4", "-o", options, str(image), str(worktree))
    if code != 0:
        raise OSError(f"mount failed: {out}")


async def unmount(worktree: Path) -> None:
    """Unmount the worktree's file system: lazily (it goes when the last process using it ends) when it is busy."""
    worktree = Path(worktree)
    if not os.path.ismount(worktree):
        return
    code, out = await _run("umount", str(worktree))
    if code != 0 and os.path.ismount(worktree):
        log.warning("%s is busy (%s): unmounted lazily", worktree, out)
        code, out = await _run("umount", "-l", str(worktree))
        if code != 0:
            raise OSError(f"cannot unmount {worktree}: {out}")


async def release(worktree: Path) -> bool:
    """The worktree goes with its file system: unmounted, its image deleted, the empty folder removed. Whether it had
    an image (False: a plain folder, left as it is)."""
    worktree = Path(worktree)
    image = image_for(worktree)
    if not image.is_file():
        return False
    if os.path.ismount(worktree):
        try:
            await unmount(worktree)
        except OSError as err:  # the worktree stays as it is, mounted; the next start's `recover` tries again
            log.warning("%s stays: %s", worktree, err)
            return True
    with contextlib.suppress(FileNotFoundError):
        image.unlink()
    with contextlib.suppress(OSError):
        worktree.rmdir()
    return True


async def remount(worktree: Path) -> bool:
    """Mount the worktree's image again when its folder is no longer a mount point (the machine restarted); whether
    the folder is now mounted from it. A folder with files of its own is left alone."""
    worktree = Path(worktree)
    image = image_for(worktree)
    if not image.is_file() or os.path.ismount(worktree):
        return os.path.ismount(worktree) and image.is_file()
    found = support()
    if not found.available:
        log.warning("cannot mount %s on %s again: %s", image, worktree, found.reason)
        return False
    worktree.mkdir(parents=True, exist_ok=True)
    if any(worktree.iterdir()):
        log.warning("%s holds files of its own: its image %s is not mounted over them", worktree, image)
        return False
    await _mount(image, worktree)  # OSError when it fails: the caller must not take the empty folder for the worktree
    return True


def _worktree_gone(worktree: Path) -> bool:
    """A worktree whose `.git` no longer names an existing admin folder of its repository is gone (removed, pruned)."""
    dot_git = worktree / ".git"  # written by git, but the task's worker could replace it: a plain file, 4 KB read
    try:
        with open(
            dot_git, "rb", buffering=0, opener=lambda path, flags: os.open(path, flags | os.O_NOFOLLOW | os.O_NONBLOCK)
        ) as f:
            text = f.read(4096).decode(errors="replace") if stat.S_ISREG(os.fstat(f.fileno()).st_mode) else ""
    except OSError:
        text = ""
    target = text.strip().removeprefix("gitdir:").strip()
    return not target or not (worktree / target).is_dir()


async def recover(worktrees_dir: Path, wanted: bool = True) -> list[str]:
    """Start-up: mount again the images whose worktree folder is not a mount point, and unmount and delete those whose
    worktree is gone (whether or not new worktrees get one: `wanted`, SANDBOX_DISK_FS=auto, says so, and a machine
    that allows none is said in the log). What was done, one line each."""
    if wanted and not support().available:
        _say_plain_folders()
    folder = Path(worktrees_dir) / IMAGES_FOLDER
    try:
        images = sorted(folder.glob("*.img"))
    except OSError:
        return []
    done = []
    for image in images:
        worktree = worktree_of(image)
        try:
            if not worktree.is_dir() and not os.path.ismount(worktree):
                image.unlink()
                done.append(f"deleted {image.name}: its worktree is gone")
                continue
            if not os.path.ismount(worktree):
                if not await remount(worktree):
                    continue
                done.append(f"mounted {image.name} again on {worktree}")
            if _worktree_gone(worktree):
                await release(worktree)
                done.append(f"deleted {image.name}: its worktree was removed from its repository")
        except OSError as err:
            log.warning("task disk %s: %s", image, err)
    return done + await _free_deleted(folder)


async def _free_deleted(images: Path) -> list[str]:
    """Loop devices on images of `images` that were deleted (a bot killed during a mount, or while a deleted image was
    still mounted): no task can own one (a task's image exists while its worktree does), so each is unmounted where
    it is mounted and detached. What was done, one line each."""
    done = []
    for device, backing in loop_devices(images):
        if not backing.endswith(" (deleted)"):
            continue
        for source, point in mounts():
            if source == device:
                await _run("umount", "-l", point)
                done.append(f"unmounted {point}: its image was deleted")
        await _run("losetup", "-d", device)
        done.append(f"detached {device}: its image {backing.removesuffix(' (deleted)')} was deleted")
    return done
