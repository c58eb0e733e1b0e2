"""Peak memory of normalising a large picture the bot accepts.

Each picture is written to a temp file; a fresh `python` child reads it, imports Pillow and
`agents.inputs.attachments`, notes its peak RSS (VmHWM of /proc/self/status), runs `normalise_image` on the bytes
and notes the peak again. The difference is what normalising added to the bot's memory at its peak; it is compared
with the size of the decoded picture (width × height × 4 bytes: Pillow keeps RGB as 4 bytes a pixel). Pillow
allocates image memory outside Python's allocator, so tracemalloc cannot see it: RSS it is. One run per picture
(memory, not time, is the figure).

    python bench/attachments.py            # table
    python bench/attachments.py --json     # figures for bench/run_all.py (last line)
"""

from __future__ import annotations

import argparse
import io
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

CHILD = r"""
import re, sys, time
def peak_kb():  # VmHWM: this process's own peak RSS (ru_maxrss would carry the parent's over fork + exec)
    return int(re.search(r"VmHWM:\s+(\d+)", open("/proc/self/status").read()).group(1))
data = open(sys.argv[1], "rb").read()
from PIL import Image
from agents.inputs.attachments import normalise_image
before = peak_kb()
started = time.perf_counter()
out, media_type, width, height = normalise_image(data, 1568)
seconds = time.perf_counter() - started
after = peak_kb()
print(before, after, width, height, len(out), seconds)
"""


def smooth_picture(width: int, height: int, mode: str):
    """A picture that compresses like a photo of a screen or a whiteboard (gradients, some edges), not like noise."""
    from PIL import Image, ImageDraw

    small = Image.radial_gradient("L").resize((width // 8, height // 8))
    rgb = Image.merge("RGB", (small, small.rotate(90), small.rotate(180))).resize((width, height))
    draw = ImageDraw.Draw(rgb)
    for i in range(0, width, max(1, width // 40)):
        draw.line((i, 0, width - i, height), fill=(20, 20, 20), width=3)
    return rgb.convert(mode) if mode != "RGB" else rgb


def encoded(width: int, height: int, fmt: str) -> bytes:
    out = io.BytesIO()
    if fmt == "JPEG":
        smooth_picture(width, height, "RGB").save(out, "JPEG", quality=90)
    else:
        smooth_picture(width, height, "RGB").save(out, "PNG", compress_level=1)
    return out.getvalue()


CASES = [  # (name, width, height, format): the 49-MP pictures of the issue, and a phone photo
    ("49 MP JPEG (8100×6050)", 8100, 6050, "JPEG"),
    ("49 MP PNG (8100×6050)", 8100, 6050, "PNG"),
    ("12 MP JPEG (4000×3000)", 4000, 3000, "JPEG"),
]


def decoded_megabytes(width: int, height: int) -> float:
    return width * height * 4 / 2**20  # Pillow stores an RGB pixel in 4 bytes


def measure(data: bytes) -> dict[str, float]:
    with tempfile.NamedTemporaryFile(suffix=".img") as file:
        file.write(data)
        file.flush()
        done = subprocess.run(
            [sys.executable, "-c", CHILD, file.name], cwd=REPO, capture_output=True, text=True, check=True
        )
    before, after, width, height, size, seconds = done.stdout.split()
    return {
        "peak_added_mb": (int(after) - int(before)) / 1024,
        "out_width": int(width),
        "out_height": int(height),
        "out_bytes": int(size),
        "seconds": float(seconds),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    figures: dict[str, dict[str, float]] = {}
    print(f"{'picture':28} {'file':>8} {'decoded':>9} {'peak added':>11} {'× decoded':>10} {'seconds':>8}")
    for name, width, height, fmt in CASES:
        started = time.perf_counter()
        data = encoded(width, height, fmt)
        print(f"  (made {name} in {time.perf_counter() - started:.1f} s)", file=sys.stderr)
        decoded_mb = decoded_megabytes(width, height)
        result = measure(data)
        result |= {"file_mb": len(data) / 2**20, "decoded_mb": decoded_mb}
        figures[name] = result
        print(
            f"{name:28} {len(data) / 2**20:7.1f}M {decoded_mb:8.0f}M {result['peak_added_mb']:10.0f}M "
            f"{result['peak_added_mb'] / decoded_mb:10.2f} {result['seconds']:8.2f}"
        )
    if args.json:
        print(json.dumps({"attachments": figures}))


if __name__ == "__main__":
    main()
