#!/usr/bin/env bash
# tools/python_env.sh: the Python environment of the outside engines
# (tools/jax_engine.py), a virtual environment at .venv/ in the workspace.
#
#   tools/python_env.sh          # create it, or check the one there
#   .venv/bin/python tools/jax_engine.py DIR
#
# Creates .venv/ with /usr/bin/python3 -m venv when it is missing and installs
# the pinned packages below from PyPI with pip (pip's cache, ~/.cache/pip,
# makes a second install on the same machine fast). When .venv/ exists and
# already has every pinned version, it installs nothing and returns at once.
# Prints what it installs. On success prints "python env: .venv/bin/python
# (PACKAGES)" and exits 0; when it cannot (no network, no wheel for this
# Python, no venv module) prints "SKIPPED: <reason>" and exits 1, leaving no
# half-made .venv/ behind.
#
# To add a package, append its pin to PINNED (or TORCH_PINNED); the next run
# installs it into the existing environment.
set -uo pipefail
cd "$(dirname "$0")/.."

# Every package pinned, its dependencies too, so that two runs on two
# machines get the same wheels. jax and jaxlib (CPU) must match each other;
# these install on CPython 3.11 (Debian bookworm's /usr/bin/python3).
PINNED=(
  jax==0.10.2
  jaxlib==0.10.2
  numpy==2.3.5
  ml_dtypes==0.6.0
  opt_einsum==3.4.0
  scipy==1.17.1
)
# PyTorch 2, torchvision, transformers and timm (tools/torch_export.py; its tests run on this PyTorch,
# and exports torchvision's own ResNet-18, when the
# environment has it, else on Debian's 1.13), with every dependency pinned:
# PyPI's Linux wheel needs the CUDA libraries' wheels even on CPU (about 3.5
# GB to download, 7 GB installed). Installed after the packages above, and
# optional: when it cannot be installed, JAX's environment stays and the
# script says so.
TORCH_PINNED=(
  torch==2.9.1
  torchvision==0.24.1
  pillow==13.0.0
  triton==3.5.1
  nvidia-cublas-cu12==12.8.4.1
  nvidia-cuda-cupti-cu12==12.8.90
  nvidia-cuda-nvrtc-cu12==12.8.93
  nvidia-cuda-runtime-cu12==12.8.90
  nvidia-cudnn-cu12==9.10.2.21
  nvidia-cufft-cu12==11.3.3.83
  nvidia-cufile-cu12==1.13.1.3
  nvidia-curand-cu12==10.3.9.90
  nvidia-cusolver-cu12==11.7.3.90
  nvidia-cusparse-cu12==12.5.8.93
  nvidia-cusparselt-cu12==0.7.1
  nvidia-nccl-cu12==2.27.5
  nvidia-nvjitlink-cu12==12.8.93
  nvidia-nvshmem-cu12==3.3.20
  nvidia-nvtx-cu12==12.8.90
  sympy==1.14.0
  mpmath==1.3.0
  networkx==3.6.1
  Jinja2==3.1.6
  MarkupSafe==3.0.4
  filelock==4.3.1
  fsspec==2026.9.0
  typing_extensions==4.16.0
  # Hugging Face transformers and timm (tools/torch_export_models_test.py
  # builds their models from configs, never downloaded), every dependency
  # pinned.
  transformers==5.23.0
  timm==1.0.31
  huggingface_hub==2.4.0
  tokenizers==0.23.3
  safetensors==0.8.0
  regex==2026.12.2
  PyYAML==6.0.4
  packaging==26.4
  tqdm==4.70.1
  hf-xet==1.8.0
  httpx2==2.17.0
  httpcore2==2.17.0
  h11==0.16.0
  anyio==4.16.0
  idna==3.21
  truststore==0.10.5
  typer==0.29.2
  click==8.5.1
  rich==15.0.0
  markdown-it-py==4.3.0
  mdurl==0.1.2
  Pygments==2.21.0
  shellingham==1.5.4
  annotated-doc==0.0.7
  pydantic==2.14.4
  pydantic_core==2.50.5
  annotated-types==0.8.0
  typing-inspection==0.4.5
)
PYTHON=${REMAT_VENV_PYTHON:-/usr/bin/python3}
VENV=.venv

skip() {
  echo "SKIPPED: $*"
  exit 1
}

# Whether the environment has exactly the pinned versions of the packages
# named (default: PINNED), pip's own view, without the network.
has_pins() {
  local frozen
  frozen=$("$VENV/bin/python" -m pip freeze --disable-pip-version-check 2>/dev/null) || return 1
  local pins=("$@")
  ((${#pins[@]})) || pins=("${PINNED[@]}")
  local pin
  for pin in "${pins[@]}"; do
    grep -qixF "$pin" <<<"$frozen" || return 1
  done
}

# PyTorch into an environment that has the rest; never fails the script.
install_torch() {
  if has_pins "${TORCH_PINNED[@]}"; then
    echo "python env: PyTorch ${TORCH_PINNED[0]#torch==} already installed"
    return 0
  fi
  echo "python env: installing PyTorch into $VENV: ${TORCH_PINNED[*]}"
  local tlog
  tlog=$(mktemp)
  if "$VENV/bin/python" -m pip install --disable-pip-version-check --no-input \
      "${TORCH_PINNED[@]}" >"$tlog" 2>&1 && has_pins "${TORCH_PINNED[@]}"; then
    echo "python env: PyTorch ${TORCH_PINNED[0]#torch==} installed"
  else
    echo "python env: PyTorch NOT installed (tools/torch_export_test uses Debian's instead): $(grep -m1 -E 'ERROR|error' "$tlog" || tail -n 1 "$tlog")"
  fi
  rm -f "$tlog"
}

if [[ -x "$VENV/bin/python" ]] && has_pins; then
  echo "python env: $VENV/bin/python ($(IFS=' '; echo "${PINNED[*]}")), already installed"
  install_torch
  exit 0
fi

[[ -x "$PYTHON" ]] || skip "no $PYTHON to make a virtual environment with"
created=0
if [[ ! -x "$VENV/bin/python" ]]; then
  rm -rf "$VENV"
  if ! out=$("$PYTHON" -m venv "$VENV" 2>&1); then
    rm -rf "$VENV"
    skip "$PYTHON -m venv $VENV failed: $(tail -n 1 <<<"$out")"
  fi
  created=1
fi
echo "python env: installing into $VENV: ${PINNED[*]}"
log=$(mktemp)
trap 'rm -f "$log"' EXIT
if ! "$VENV/bin/python" -m pip install --disable-pip-version-check --no-input \
    "${PINNED[@]}" >"$log" 2>&1; then
  tail -n 5 "$log"
  ((created)) && rm -rf "$VENV"
  skip "pip install into $VENV failed: $(grep -m1 -E 'ERROR|error' "$log" || tail -n 1 "$log")"
fi
grep -E '^Successfully installed|^Requirement already satisfied' "$log" | sort -u
has_pins || skip "$VENV lacks a pinned version after pip install (pip freeze: $("$VENV/bin/python" -m pip freeze 2>&1 | tr '\n' ' '))"
install_torch
echo "python env: $VENV/bin/python (${PINNED[*]})"
