"""Which torch `make run` installs: the resolution `make torch` asks pip for (scripts/install-torch.sh with the
Makefile's own pip command), stopped at `pip install --dry-run --report` and read back.

Two stand-in indexes on disk (file:// "simple" indexes, pip's real protocol) replace the network: "PyPI" serves
torch 2.13.0 as PyPI's Linux wheel is, the CUDA build that pulls nvidia-* and triton; "the CPU index" serves
torch 2.13.0+cpu, as PyTorch's https://download.pytorch.org/whl/cpu does. pip's configuration of this machine
(its on-disk wheels) is switched off, so the machine's pip sees only the stand-ins."""

from __future__ import annotations

import base64
import email.message
import hashlib
import json
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(sys.platform != "linux", reason="the CPU-index choice is made on Linux only"),
    pytest.mark.skipif(shutil.which("make") is None, reason="make is not installed"),
    pytest.mark.skipif(
        shutil.which("nvidia-smi") is not None or Path("/proc/driver/nvidia").exists(),
        reason="this machine has an NVIDIA GPU: make takes the CUDA build here, as it should",
    ),
]
CUDA_PACKAGES = ("nvidia-cublas", "nvidia-cudnn-cu13", "triton")


def wheel(folder: Path, name: str, version: str, requires: tuple[str, ...] = ()) -> Path:
    """A minimal real wheel (METADATA, WHEEL, RECORD) that pip can resolve and install."""
    dist = f"{name.replace('-', '_')}-{version}"
    path = folder / f"{dist}-py3-none-any.whl"
    meta = email.message.Message()
    meta["Metadata-Version"] = "2.1"
    meta["Name"] = name
    meta["Version"] = version
    for req in requires:
        meta["Requires-Dist"] = req
    files = {
        f"{dist}.dist-info/METADATA": meta.as_string(),
        f"{dist}.dist-info/WHEEL": "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
    }
    record = []
    for arcname, text in files.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(text.encode()).digest()).rstrip(b"=").decode()
        record.append(f"{arcname},sha256={digest},{len(text.encode())}")
    record.append(f"{dist}.dist-info/RECORD,,")
    files[f"{dist}.dist-info/RECORD"] = "\n".join(record) + "\n"
    with zipfile.ZipFile(path, "w") as archive:
        for arcname, text in files.items():
            archive.writestr(arcname, text)
    return path


def simple_index(root: Path, wheels: list[Path]) -> str:
    """A PEP 503 index on disk: root/<project>/index.html linking each wheel; returns its file:// URL."""
    by_project: dict[str, list[Path]] = {}
    for path in wheels:
        project = path.name.split("-")[0].replace("_", "-").lower()
        by_project.setdefault(project, []).append(path)
    for project, paths in by_project.items():
        (root / project).mkdir(parents=True)
        links = "".join(f'<a href="{p.as_uri()}">{p.name}</a>\n' for p in paths)
        (root / project / "index.html").write_text(f"<html><body>\n{links}</body></html>\n")
    return root.as_uri()


@pytest.fixture(scope="module")
def venv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh virtualenv, as `make` creates it (torch not installed yet), with this environment's pip linked into it
    (ensurepip would install the same pip from its wheel: about 4 s of CPU that test nothing here)."""
    import pip

    path = tmp_path_factory.mktemp("torch-venv") / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(path)], check=True, timeout=300)
    site_packages = next((path / "lib").glob("python3*/site-packages"))
    (site_packages / "pip").symlink_to(Path(pip.__file__).parent)
    script = path / "bin" / "pip"
    script.write_text(f"#!{path}/bin/python\nimport sys\nfrom pip._internal.cli.main import main\nsys.exit(main())\n")
    script.chmod(0o755)
    return path


@pytest.fixture(scope="module")
def indexes(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    root = tmp_path_factory.mktemp("indexes")
    (root / "wheels").mkdir()
    cuda = [wheel(root / "wheels", name, "1.0") for name in CUDA_PACKAGES]
    pypi_torch = wheel(root / "wheels", "torch", "2.13.0", tuple(CUDA_PACKAGES) + ("filelock",))
    filelock = wheel(root / "wheels", "filelock", "3.0")
    (root / "cpu-wheels").mkdir()
    cpu_torch = wheel(root / "cpu-wheels", "torch", "2.13.0+cpu", ("filelock",))
    return {
        "pypi": simple_index(root / "pypi", [pypi_torch, filelock, *cuda]),
        "cpu": simple_index(root / "cpu", [cpu_torch, filelock]),
        "pypi_with_cpu_wheel": simple_index(root / "ci", [cpu_torch, filelock]),
        "unreachable": (root / "no-such-index").as_uri(),
    }


def make_torch(venv: Path, tmp_path: Path, pypi: str, **make_vars: str) -> tuple[subprocess.CompletedProcess, dict]:
    """`make torch` with the Makefile's pip command, stopped at the dry run; returns the process and pip's report."""
    report = tmp_path / "report.json"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PIP_", "TORCH"))}
    env.update(
        PIP_CONFIG_FILE=os.devnull,  # not this machine's pip configuration (its on-disk wheels)
        PIP_INDEX_URL=pypi,  # "PyPI"
        PYPI_INDEX=pypi,  # "PyPI" where the script names it (an explicit TORCH_INDEX takes the rest from there)
        PIP_NO_CACHE_DIR="1",
        TORCH_DRY_RUN_REPORT=str(report),
    )
    args = ["make", "-s", "--no-print-directory", "torch", f"VENV={venv}"]
    args += [f"{key}={value}" for key, value in make_vars.items()]
    done = subprocess.run(args, cwd=REPO, env=env, capture_output=True, text=True, timeout=600)
    return done, (json.loads(report.read_text()) if report.exists() else {})


def installs(report: dict) -> dict[str, str]:
    return {item["metadata"]["name"].lower(): item["metadata"]["version"] for item in report.get("install", [])}


def test_a_cpu_machine_takes_the_cpu_index_and_no_cuda_package(venv: Path, indexes: dict, tmp_path: Path) -> None:
    done, report = make_torch(venv, tmp_path, indexes["pypi"], TORCH_CPU_INDEX=indexes["cpu"])
    assert done.returncode == 0, done.stdout + done.stderr
    chosen = installs(report)
    assert chosen.get("torch") == "2.13.0+cpu", chosen
    assert not [name for name in chosen if name.startswith(("nvidia", "triton", "cuda"))], chosen


def test_an_unreachable_cpu_index_never_falls_back_to_cuda(venv: Path, indexes: dict, tmp_path: Path) -> None:
    done, report = make_torch(venv, tmp_path, indexes["pypi"], TORCH_CPU_INDEX=indexes["unreachable"])
    assert done.returncode != 0
    assert report == {}
    said = [line for line in (done.stdout + done.stderr).splitlines() if line.startswith("torch:")]
    assert len(said) == 1, done.stdout + done.stderr
    line = said[0]
    assert indexes["unreachable"] in line and "CUDA build" in line and "triton" in line
    assert "NOT installed" in line and "TORCH_INDEX=" in line  # what happened, and what to do


def test_an_unreachable_cpu_index_takes_a_cpu_wheel_pip_already_finds(
    venv: Path, indexes: dict, tmp_path: Path
) -> None:
    """Our CI machines: the CPU index is out of reach, a torch CPU wheel lies on pip's own path."""
    done, report = make_torch(venv, tmp_path, indexes["pypi_with_cpu_wheel"], TORCH_CPU_INDEX=indexes["unreachable"])
    assert done.returncode == 0, done.stdout + done.stderr
    assert installs(report).get("torch") == "2.13.0+cpu"


def test_an_explicit_index_is_taken_as_given(venv: Path, indexes: dict, tmp_path: Path) -> None:
    done, report = make_torch(
        venv, tmp_path, indexes["pypi"], TORCH_INDEX=indexes["pypi"], TORCH_CPU_INDEX=indexes["cpu"]
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert installs(report).get("torch") == "2.13.0"  # the user asked for that index: its CUDA build


def test_a_gpu_machine_takes_the_plain_pin(venv: Path, indexes: dict, tmp_path: Path) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "nvidia-smi").write_text("#!/bin/sh\nexit 0\n")
    (bin_dir / "nvidia-smi").chmod(0o755)
    report = tmp_path / "report.json"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PIP_", "TORCH"))}
    env.update(
        PATH=f"{bin_dir}:{env['PATH']}",
        PIP_CONFIG_FILE=os.devnull,
        PIP_INDEX_URL=indexes["pypi"],
        TORCH_DRY_RUN_REPORT=str(report),
    )
    done = subprocess.run(
        ["make", "-s", "torch", f"VENV={venv}", f"TORCH_CPU_INDEX={indexes['cpu']}"],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    chosen = installs(json.loads(report.read_text()))
    assert chosen.get("torch") == "2.13.0" and "triton" in chosen
