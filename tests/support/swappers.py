"""Scripts of a hostile task's service that swaps names in its worktree again and again, for the race tests, and the
opening of one that waits for the bot's commit first."""

from __future__ import annotations

_FIFO_ROUND = """\
    for _ in range(100):
        libc.renameat2(-100, b".git", -100, b"fifo", 2)  # AT_FDCWD, RENAME_EXCHANGE
    kinds = [os.lstat(n).st_mode if os.path.lexists(n) else 0 for n in (".git", "fifo")]
    if not any(stat.S_ISFIFO(k) for k in kinds):
        if kinds[1]:
            os.unlink("fifo")
        os.mkfifo("fifo")
"""


def dot_git_fifo_swapper(stoppable: bool) -> str:
    """`.git` and a FIFO named `fifo` exchanged again and again; where the bot's guard deleted the FIFO, a FIFO again.
    `stoppable`: it prints "swapping", stops once a file `stop` appears (leaving `.git` a file again, for the turn's
    commit) and prints "stopped"; otherwise it runs until it is killed."""
    head = "import ctypes, os, stat\nlibc = ctypes.CDLL(None, use_errno=True)\n"
    if not stoppable:
        return head + "while True:\n" + _FIFO_ROUND
    return (
        head
        + 'print("swapping", flush=True)\nwhile not os.path.exists("stop"):\n'
        + _FIFO_ROUND
        + 'if stat.S_ISFIFO(os.lstat(".git").st_mode):  # `.git` a file again, for the commit\n'
        + '    libc.renameat2(-100, b".git", -100, b"fifo", 2)\nos.unlink("fifo")\nprint("stopped", flush=True)\n'
    )


# The opening of a task's service script that acts once the bot has committed on the task's branch: it reads the
# branch's tip in the shared git directory (readable in the sandbox) until it moves. Then `root` (the worktree),
# `common` (the git directory) and `ref` (the branch) are known.
AFTER_THE_BOTS_COMMIT = r"""
import os, shutil, sys, time
root = os.getcwd()
link = open(".git").read()
admin = os.path.join(root, link.split("gitdir:", 1)[1].strip())
ref = open(os.path.join(admin, "HEAD")).read().strip()[len("ref: "):]
common = os.path.normpath(os.path.join(admin, open(os.path.join(admin, "commondir")).read().strip()))
def tip():
    try:
        return open(os.path.join(common, ref)).read()
    except OSError:
        return None
first = tip()
print("watching", ref, flush=True)
while tip() == first:
    time.sleep(0.0002)
"""
