"""deploy/Dockerfile: what it installs (read from the file), and, where a Docker daemon runs, the image built from it
holds CPU torch and no CUDA package, both speech engines, Temporal, node and the frontend worker's browser."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
DOCKERFILE = REPO / "deploy" / "Dockerfile"


def instructions() -> str:
    """The Dockerfile without its comments, continuation lines joined."""
    lines = [line for line in DOCKERFILE.read_text().splitlines() if not line.lstrip().startswith("#")]
    return "\n".join(lines).replace("\\\n", " ")


def test_the_image_gets_node_the_browser_the_extras_and_torch_chosen_like_the_makefile() -> None:
    text = instructions()
    assert "nodejs" in text and "npm" in text
    assert "sh scripts/install-browser.sh" in text and "BROWSER_TOOLS_DIR" in text
    assert ".[faster,temporal]" in text
    assert "sh scripts/install-torch.sh pip install" in text, "torch chosen as `make` chooses it: CPU without a GPU"
    assert "COPY scripts" in text


def docker_missing() -> str | None:
    if shutil.which("docker") is None:
        return "the docker client is not installed"
    info = subprocess.run(["docker", "info"], capture_output=True, text=True, timeout=60)
    if info.returncode != 0:
        said = (info.stderr or info.stdout).strip().splitlines()
        return f"no Docker daemon answers here ({said[-1] if said else 'docker info failed'})"
    return None


@pytest.mark.slow
def test_the_image_builds_with_cpu_torch_the_extras_and_the_browser() -> None:
    if (why := docker_missing()) is not None:
        pytest.skip(why)
    tag = "agentlab-dockerfile-test"
    build = subprocess.run(
        ["docker", "build", "-f", str(DOCKERFILE), "-t", tag, str(REPO)], capture_output=True, text=True, timeout=3600
    )
    assert build.returncode == 0, build.stdout[-3000:] + build.stderr[-3000:]
    try:
        probe = (
            "import importlib.metadata as m, torch, whisper, faster_whisper, temporalio; "
            "names = [d.metadata['Name'].lower() for d in m.distributions()]; "
            "cuda = [n for n in names if n.startswith(('nvidia-', 'triton', 'cuda-'))]; "
            "assert '+cpu' in torch.__version__, torch.__version__; assert not cuda, cuda; print('ok')"
        )
        run = subprocess.run(["docker", "run", "--rm", tag, "python", "-c", probe], capture_output=True, text=True)
        assert run.returncode == 0 and run.stdout.strip() == "ok", run.stdout + run.stderr
        tools = subprocess.run(
            [
                "docker",
                "run",
                "--rm",
                tag,
                "sh",
                "-c",
                "node --version && test -f /opt/agentlab-tools/node_modules/chrome-devtools-mcp/package.json "
                "&& agentlab run --help",
            ],
            capture_output=True,
            text=True,
        )
        assert tools.returncode == 0, tools.stdout + tools.stderr
    finally:
        subprocess.run(["docker", "rmi", "-f", tag], capture_output=True)
