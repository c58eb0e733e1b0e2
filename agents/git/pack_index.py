"""Whether a commit is stored in one of a repository's packs, read from the pack files without running git.

A cloned repository keeps its commits in packs, so "does HEAD name a commit?" and "which commit is HEAD?" could
only be answered from the loose objects by `ref_files` and otherwise cost a git process, several times a task. A
pack's index (`objects/pack/*.idx`, version 2) lists its object ids sorted, with each object's offset in the pack;
the first byte of the object there holds its type. That is what `git rev-parse --verify <id>^{commit}` reads of a
packed commit (git checks no more of it), and what `is_packed_commit` reads, checking as git does that the index
belongs to its pack (the pack's checksum is in both). Anything else (another index version, a commit stored as a
delta, a SHA-256 repository, a link, a file of odd size) gives False, and the caller asks git as before.
"""

from __future__ import annotations

import mmap
import os
import stat
from pathlib import Path

_IDX_V2 = b"\xfftOc\x00\x00\x00\x02"
_FANOUT_END = 8 + 256 * 4  # the header, then 256 cumulative counts by first byte
_ID = 20  # SHA-1: a SHA-256 repository's packs are left to git
_CHECKSUMS = 2 * _ID  # the index ends with its pack's checksum, then its own
_LARGE = 0x80000000  # an offset with this bit set indexes the 8-byte offsets table
_MAX_PACKS = 64  # more packs than this: git is asked (an unmaintained repository; reading them would hold the loop)
_COMMIT = 1  # the pack object type of a commit
_NOT_THERE, _UNSURE = 0, -1


def is_packed_commit(common_dir: Path, object_id: str) -> bool:
    """Whether `object_id` (SHA-1, hex) is stored as a commit, whole (not as a delta), in a pack of the repository
    whose shared git directory is `common_dir`; False where that cannot be told here (then git must be asked).

    The caller checks that no object is replaced (grafts, `refs/replace/`), as for a loose object."""
    if len(object_id) != 2 * _ID:
        return False
    try:
        wanted = bytes.fromhex(object_id)
    except ValueError:
        return False
    folder = common_dir / "objects" / "pack"
    try:
        indexes = sorted(name for name in os.listdir(folder) if name.endswith(".idx"))
    except OSError:
        return False
    if len(indexes) > _MAX_PACKS:
        return False
    for name in indexes:
        kind = _packed_type(folder / name, wanted)
        if kind != _NOT_THERE:
            return kind == _COMMIT
    return False


def _open_plain(path: Path) -> tuple[int, int] | None:
    """(descriptor, size) of the plain file `path`, never through a link; None for anything else."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return None
    info = os.fstat(fd)
    if not stat.S_ISREG(info.st_mode):
        os.close(fd)
        return None
    return fd, info.st_size


def _packed_type(index: Path, wanted: bytes) -> int:
    """The pack type of `wanted` in the pack that `index` lists; _NOT_THERE when it is not listed, _UNSURE where
    the files are not what they should be."""
    opened = _open_plain(index)
    if opened is None:
        return _UNSURE
    fd, size = opened
    try:
        if size < _FANOUT_END + _CHECKSUMS:
            return _UNSURE
        with mmap.mmap(fd, 0, access=mmap.ACCESS_READ) as data:
            found = _offset_in_index(data, size, wanted)
            if found is None or found < 0:
                return _NOT_THERE if found is None else _UNSURE
            pack_checksum = data[size - _CHECKSUMS : size - _ID]
    except (OSError, ValueError):
        return _UNSURE
    finally:
        os.close(fd)
    return _type_in_pack(index.with_suffix(".pack"), found, pack_checksum)


def _offset_in_index(data: mmap.mmap, size: int, wanted: bytes) -> int | None:
    """The offset of `wanted` in the pack, from its version 2 index; None when it is not listed; -1 where the
    index is not what it should be."""
    if data[:8] != _IDX_V2:
        return -1

    def count(slot: int) -> int:
        return int.from_bytes(data[8 + 4 * slot : 12 + 4 * slot], "big")

    total = count(255)
    ids_end = _FANOUT_END + total * _ID
    offsets = ids_end + total * 4  # after the ids and their CRC32s
    if size < offsets + total * 4 + _CHECKSUMS:
        return -1
    low = count(wanted[0] - 1) if wanted[0] else 0
    high = count(wanted[0])
    if not low <= high <= total:
        return -1
    while low < high:
        middle = (low + high) // 2
        at = _FANOUT_END + middle * _ID
        listed = data[at : at + _ID]
        if listed == wanted:
            offset = int.from_bytes(data[offsets + 4 * middle : offsets + 4 * middle + 4], "big")
            if offset & _LARGE:
                at = offsets + total * 4 + 8 * (offset & ~_LARGE)
                if at + 8 > size - _CHECKSUMS:
                    return -1
                offset = int.from_bytes(data[at : at + 8], "big")
            return offset
        if listed < wanted:
            low = middle + 1
        else:
            high = middle
    return None


def _type_in_pack(pack: Path, offset: int, checksum: bytes) -> int:
    """The type of the object at `offset` in `pack`, where the pack is the one its index was made for."""
    opened = _open_plain(pack)
    if opened is None:
        return _UNSURE
    fd, size = opened
    try:
        if not 12 <= offset < size - _ID:
            return _UNSURE
        header = os.pread(fd, 12, 0)
        if header[:4] != b"PACK" or int.from_bytes(header[4:8], "big") not in (2, 3):
            return _UNSURE
        if os.pread(fd, _ID, size - _ID) != checksum:
            return _UNSURE  # not the pack this index describes (git refuses such a pair too)
        first = os.pread(fd, 1, offset)
    except OSError:
        return _UNSURE
    finally:
        os.close(fd)
    return (first[0] >> 4) & 7 if first else _UNSURE
