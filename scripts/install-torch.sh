#!/bin/sh
# PyTorch for whisper, the build this machine can use, never a multi-gigabyte CUDA build it cannot.
#
#   TORCH=torch==2.13.0 TORCH_INDEX= sh scripts/install-torch.sh .venv/bin/pip install -q ...
#
# The arguments are the pip install command (the Makefile's PIP). Chosen, in this order:
# - TORCH_INDEX set: torch from that index (PyPI for the rest), as asked.
# - Not Linux, or an NVIDIA GPU here (nvidia-smi, or /proc/driver/nvidia): the plain pin (PyPI's Linux torch is
#   the CUDA build, which a GPU wants; macOS's has no CUDA).
# - Linux without a GPU: PyTorch's CPU wheel index (TORCH_CPU_INDEX, the way PyTorch documents), which also serves
#   torch's own dependencies. Where it cannot be reached, the plain pin only when pip's resolution of it proves it
#   brings no CUDA package (no nvidia-*, triton or cuda-*: a CPU wheel on pip's own path, as on our CI machines, or
#   torch already installed); otherwise nothing is installed and one line says what happened and what to do.
# Each choice is resolved first with `pip install --dry-run --report` and checked for CUDA packages; the install
# then runs with the same arguments. TORCH_DRY_RUN_REPORT=FILE stops there and leaves the chosen resolution in FILE
# (tests/test_torch_install.py drives this with stand-in indexes).
set -u
TORCH="${TORCH:-torch==2.13.0}"
TORCH_INDEX="${TORCH_INDEX:-}"
TORCH_CPU_INDEX="${TORCH_CPU_INDEX:-https://download.pytorch.org/whl/cpu}"
PYPI="${PYPI_INDEX:-https://pypi.org/simple}"
report="${TORCH_DRY_RUN_REPORT:-}"
work="$(mktemp -d "${TMPDIR:-/tmp}/agentlab-torch.XXXXXX")" || exit 1
trap 'rm -rf "$work"' EXIT

# The names of a pip report's packages to install, one a line (a report is JSON: "install": [{"metadata": ...}]).
cuda_packages() {
  grep -o '"name": *"[^"]*"' "$1" | sed 's/.*"\([^"]*\)"$/\1/' | tr 'A-Z_.' 'a-z--' \
    | grep -E '^(nvidia-|triton$|cuda-|pytorch-triton)' | sort -u | tr '\n' ' '
}

# resolve LABEL ARGS...: the dry run of `pip install ARGS TORCH`; true when it resolves and brings no CUDA package
resolve() {
  label="$1"; shift
  rm -f "$work/report.json"
  if ! "$@" --dry-run --report "$work/report.json" "$TORCH" > "$work/pip.log" 2>&1; then
    if grep -qiE 'NewConnectionError|ConnectTimeout|Could not fetch URL|Failed to establish|resolve host|No such file' \
      "$work/pip.log"; then
      echo "torch: $label could not be reached" > "$work/why"
    else
      why="$(grep -E 'ERROR' "$work/pip.log" | head -n 1)"
      echo "torch: $label did not resolve${why:+ ($why)}" > "$work/why"
    fi
    return 1
  fi
  cuda="$(cuda_packages "$work/report.json")"
  if [ -n "$cuda" ]; then
    echo "torch: $label is the CUDA build (it brings ${cuda% }: several GB)" > "$work/why"
    return 1
  fi
  return 0
}

# install ARGS...: the resolution just checked, installed (or its report kept, for a dry run)
install() {
  if [ -n "$report" ]; then
    cp "$work/report.json" "$report"
    return 0
  fi
  "$@" "$TORCH"
}

if [ -n "$TORCH_INDEX" ]; then
  "$@" --index-url "$TORCH_INDEX" --extra-index-url "$PYPI" --dry-run --report "$work/report.json" "$TORCH" \
    || exit 1
  install "$@" --index-url "$TORCH_INDEX" --extra-index-url "$PYPI"
  exit $?
fi

if [ "$(uname -s)" != "Linux" ] || command -v nvidia-smi > /dev/null 2>&1 || [ -e /proc/driver/nvidia ]; then
  "$@" --dry-run --report "$work/report.json" "$TORCH" || exit 1
  install "$@"
  exit $?
fi

# Linux, no GPU: the CPU index (a short timeout: an unreachable index should not hold the set-up for minutes)
if resolve "PyTorch's CPU index $TORCH_CPU_INDEX" "$@" --index-url "$TORCH_CPU_INDEX" --timeout 20 --retries 1; then
  install "$@" --index-url "$TORCH_CPU_INDEX"
  exit $?
fi
cpu_failed="$(cat "$work/why")"
if resolve "pip's own $TORCH" "$@"; then  # a CPU wheel pip already finds (our CI machines), or torch installed
  install "$@"
  exit $?
fi
echo "$cpu_failed, and $(sed 's/^torch: //' "$work/why"); torch is NOT installed. What to do: make sure" \
  "$TORCH_CPU_INDEX is reachable, or give a mirror of it (make run TORCH_INDEX=URL), or take the CUDA build" \
  "anyway (make run TORCH_INDEX=$PYPI)."
exit 1
