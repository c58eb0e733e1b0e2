"""Pictures within the limit: scaling a large one keeps the bot's peak memory under 2× the decoded
picture, and scaling while decoding (JPEG draft) keeps the EXIF rotation right.

Memory is measured as the peak RSS a fresh child process adds while `normalise_image` runs (bench/attachments.py, which also
prints the figures); Pillow's image memory is invisible to tracemalloc. A memory bound, not a timing.
"""

from __future__ import annotations

import io
import sys

import pytest
from PIL import Image

from agents.inputs.attachments import AttachmentRefused, normalise_image
from bench.attachments import decoded_megabytes, encoded, measure
from tests.support.attachments import decompression_bomb


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads VmHWM from /proc/self/status")
@pytest.mark.parametrize("fmt", ["PNG", "JPEG"])
def test_scaling_a_large_picture_stays_under_twice_its_decoded_size(fmt: str) -> None:
    width, height = 6000, 4500  # 27 MP: within the 50-MP limit, large enough that copies show
    result = measure(encoded(width, height, fmt))
    assert (result["out_width"], result["out_height"]) == (1568, 1176)
    assert result["peak_added_mb"] < 2 * decoded_megabytes(width, height), result


def test_a_rotated_photo_is_scaled_while_decoded_and_still_upright() -> None:
    exif = Image.Exif()
    exif[0x0112] = 6  # the camera was turned: show it rotated 90° clockwise
    out = io.BytesIO()
    Image.new("RGB", (4000, 3000), (10, 120, 200)).save(out, "JPEG", quality=85, exif=exif)
    data, media_type, width, height = normalise_image(out.getvalue(), 1568)
    assert (media_type, width, height) == ("image/jpeg", 1176, 1568)
    assert Image.open(io.BytesIO(data)).size == (1176, 1568)


def test_a_decompression_bomb_is_one_sentence_naming_the_file() -> None:
    with pytest.raises(AttachmentRefused) as refused:
        normalise_image(decompression_bomb(), 1568, "plan.png")
    assert str(refused.value) == "I can't take plan.png: it is 400 million pixels, more than my limit of 50 megapixels"
