#!/usr/bin/env bash
# Sets up a fresh Debian 12 machine for deepspeed.cpp and builds it:
#   1. installs every Debian package the project needs (skipped when all are present),
#   2. fetches the default training corpus (Ambrose Bierce's "The Devil's Dictionary", public
#      domain, from Debian's dict-devil package) into data/,
#   3. configures and builds into build/ (Release, Ninja, precompiled headers, ccache if present).
# Environment: BUILD_DIR (default build), BUILD_TYPE (default Release), JOBS (default nproc).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

BUILD_DIR=${BUILD_DIR:-build}
BUILD_TYPE=${BUILD_TYPE:-Release}
JOBS=${JOBS:-$(nproc)}
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi

PACKAGES=(
  build-essential cmake ninja-build ccache git pkg-config
  libtorch-dev python3-torch          # LibTorch 1.13 (C++), and Python PyTorch for golden tests
  python3-protobuf                    # tests decode our TensorBoard event files with Python's protobuf
  libopenblas0-openmp                 # without it LibTorch's GEMM falls back to reference BLAS (13x slower)
  libopenmpi-dev openmpi-bin          # collectives on CPU, mpirun
  liburing-dev                        # async direct I/O (NVMe offload)
  nlohmann-json3-dev libcli11-dev libspdlog-dev libfmt-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  libicu-dev                          # tokenizers: Unicode categories for the pre-tokenizer, NFC
  libsentencepiece-dev sentencepiece  # SentencePiece models (Llama-2, Mistral); spm_train/spm_encode in tests
  libprotobuf-dev                     # (with libtorch-dev) tests load it beside the SentencePiece plugin
  nodejs                              # test-only references from npm (tests/data/npm_setup.sh)
  libcpp-httplib-dev curl             # ds-serve's HTTP server (cpp-httplib); curl drives it in tests/inference
  nftables                            # tests/multihost: 1% packet loss where the kernel has no netem
)

missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ "${#missing[@]}" -gt 0 ]; then
  echo "setup: installing ${missing[*]}"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# The default corpus. apt-get download + dpkg -x works on images that strip /usr/share/doc.
CORPUS=data/devils_dictionary.txt
if [ ! -s "$CORPUS" ]; then
  echo "setup: fetching the default corpus (Debian package dict-devil) into $CORPUS"
  mkdir -p data
  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' EXIT
  if ! (cd "$tmp" && apt-get download dict-devil >/dev/null 2>&1); then
    $SUDO apt-get update -qq
    (cd "$tmp" && apt-get download dict-devil >/dev/null 2>&1)
  fi
  dpkg -x "$tmp"/dict-devil_*.deb "$tmp/x"
  zcat "$tmp/x/usr/share/dictd/devil.dict.dz" > "$CORPUS.tmp"
  mv "$CORPUS.tmp" "$CORPUS"
fi

echo "setup: building into $BUILD_DIR ($BUILD_TYPE, $JOBS jobs)"
cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE="$BUILD_TYPE" >/dev/null
cmake --build "$BUILD_DIR" -j "$JOBS"
