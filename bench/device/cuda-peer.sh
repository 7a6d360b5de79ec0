#!/usr/bin/env bash
# bench:peer on a lent CUDA machine (issue 20: "where a task has one, run the same bench there with the CUDA
# build and record it"). That machine has nvcc and the NVIDIA driver but no Node, no npm and no network, so
# bench/device/pack-cuda-peer.sh packs Node, the server's dependencies, the bundled bench and the llama.cpp
# source node-llama-cpp ships into .cache/device/, and the `device` tool's run carries that folder:
#
#   bash bench/device/pack-cuda-peer.sh                       # here, once
#   run: bash bench/device/cuda-peer.sh    carry: [".cache/device"]    timeout_s: 600
#
# About 7.5 minutes on an H200 machine's 16 cores: the build about 280 s, then the bench twice (threads 4,
# the server's default there; 5 rounds; about 50 s each): with node-llama-cpp's prebuilt addon, and with the
# addon alone compiled again with `svc engine build`'s patches. THREADS, ROUNDS, WARMUP, CUDA_ARCH,
# BUILD_LIMIT_S, BENCH_LIMIT_S override; SPEC=1 adds bench:spec on the patched addon (about 90 s more).
#
# On the device it builds llama.cpp once, from that source, for this GPU alone (CMAKE_CUDA_ARCHITECTURES,
# default 90-real for the H100/H200), with its backends as loadable modules: llama-server, and the CUDA
# backend module libggml-cuda.so. Both servers then run the same libggml-cuda.so: llama-server loads it from
# its own folder, ours from node-llama-cpp's prebuilt CUDA binaries, where it replaces the prebuilt one
# (159 MB for every architecture, too large to carry). Everything else of ours is what `npm install` gives.
# Results (bench log, JSON, build log, nvidia-smi) go to $OUT.
set -uo pipefail
cd "$(dirname "$0")/../.."
CARRY=.cache/device
OUT=${OUT:-/tmp/cuda-peer-out}
mkdir -p "$OUT"
source bench/device/common.sh
fail() { say "FAILED: $*"; exit 1; }
JOBS=$(nproc)

say "unpacking"
unpack_node "$CARRY" || fail "Node and the server"
SRC=/tmp/llama.cpp
BUILD=$SRC/build
mkdir -p "$SRC" && tar -xJf "$CARRY/llama-src.tar.xz" -C "$SRC" || fail "llama.cpp source"
node --version
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv | tee "$OUT/gpu.txt"
lscpu | grep -E 'Model name|^CPU\(s\)' | tee -a "$OUT/gpu.txt"
NVCC=$(command -v nvcc || ls /usr/local/cuda/bin/nvcc 2>/dev/null) || fail "no nvcc"
"$NVCC" --version | tail -2

# cuBLAS and the driver library may live outside the toolkit (the Python wheels' nvidia/*/lib, the driver's
# mount): find them and point CMake and the loader at them.
CUDA_HOME=$(dirname "$(dirname "$(readlink -f "$NVCC")")")
FOUND=$(find "$CUDA_HOME"/ /usr/local /opt /usr/lib /usr/lib64 -xdev \( -name 'libcublas.so*' -o -name 'libcublasLt.so*' -o -name 'cublas_v2.h' -o -name 'libcuda.so*' -o -name 'libcudart.so*' \) 2>/dev/null | sort -u)
echo "$FOUND" >> "$OUT/gpu.txt"
pick() { echo "$FOUND" | grep -E "$1" | grep -v stubs | head -1; }
CUBLAS=$(pick '/libcublas\.so(\.[0-9]+)*$')
CUBLASLT=$(pick '/libcublasLt\.so(\.[0-9]+)*$')
CUBLAS_H=$(pick '/cublas_v2\.h$')
LIBCUDA=$(pick '/libcuda\.so(\.[0-9]+)*$')
say "cuBLAS ${CUBLAS:-none} (header ${CUBLAS_H:-none}), driver ${LIBCUDA:-none}"
[ -n "$CUBLAS" ] && [ -n "$CUBLAS_H" ] || fail "no cuBLAS"
LINKS=/tmp/cuda-links
mkdir -p $LINKS
ln -sf "$CUBLAS" $LINKS/libcublas.so
[ -n "$CUBLASLT" ] && ln -sf "$CUBLASLT" $LINKS/libcublasLt.so
[ -n "$LIBCUDA" ] && ln -sf "$LIBCUDA" $LINKS/libcuda.so
INC=$(dirname "$CUBLAS_H")
export LD_LIBRARY_PATH=$(dirname "$CUBLAS"):$(dirname "${LIBCUDA:-$CUBLAS}"):$CUDA_HOME/lib64:${LD_LIBRARY_PATH:-}

say "configuring llama.cpp (CUDA ${CUDA_ARCH:-90-real}, backends as modules, unversioned sonames as node-llama-cpp's)"
cmake -S "$SRC" -B "$BUILD" -G Ninja "${LLAMA_DL_OPTIONS[@]}" -DCMAKE_PLATFORM_NO_VERSIONED_SONAME=ON \
  -DCMAKE_CUDA_COMPILER="$NVCC" -DGGML_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES="${CUDA_ARCH:-90-real}" \
  -DCUDA_cublas_LIBRARY=$LINKS/libcublas.so -DCUDA_cublasLt_LIBRARY=$LINKS/libcublasLt.so \
  $([ -n "$LIBCUDA" ] && echo "-DCUDA_cuda_driver_LIBRARY=$LINKS/libcuda.so" || echo "-DGGML_CUDA_NO_VMM=ON") \
  -DCMAKE_CUDA_FLAGS="-I$INC" -DCMAKE_CXX_FLAGS="-I$INC" > "$OUT/cmake.log" 2>&1 || { tail -40 "$OUT/cmake.log"; fail "cmake configure"; }
say "building llama-server, ggml-cpu and ggml-cuda with $JOBS jobs"
timeout "${BUILD_LIMIT_S:-400}" cmake --build "$BUILD" --target llama-server ggml-cpu ggml-cuda -j "$JOBS" > "$OUT/build.log" 2>&1 || { tail -30 "$OUT/build.log"; fail "build"; }
say "built: $(stat -c %s "$BUILD/bin/libggml-cuda.so") bytes of libggml-cuda.so"

BINS=node_modules/@node-llama-cpp/linux-x64-cuda/bins/linux-x64-cuda
cp "$BUILD/bin/libggml-cuda.so" "$BINS/libggml-cuda.so"
# A module file, not `node -e`: node-llama-cpp tests a binary in a forked process, which inherits -e.
cat > bench/cuda-check.mjs <<'JS'
import { getLlama } from "node-llama-cpp";
const llama = await getLlama({ gpu: "cuda", build: "never", logLevel: "warn" });
console.log(`node-llama-cpp: ${llama.gpu} on ${(await llama.getGpuDeviceNames()).join(", ")}`);
JS
if node bench/cuda-check.mjs 2>&1 | tee -a "$OUT/gpu.txt" | grep -q "^node-llama-cpp: cuda"; then
  say "ours: node-llama-cpp's prebuilt binaries with this libggml-cuda.so"
else
  # The prebuilt llama.cpp libraries did not take this module: use the ones built here with it (same source,
  # the same files llama-server runs), under node-llama-cpp's prebuilt addon, named as the addon links them.
  cp "$BUILD/bin/libggml.so" "$(ls "$BINS"/libggml.cuda.*.so)" && cp "$BUILD/bin/libllama.so" "$(ls "$BINS"/libllama.cuda.*.so)" && cp "$BUILD"/bin/*.so "$BINS/"
  node bench/cuda-check.mjs 2>&1 | tee -a "$OUT/gpu.txt" | grep -q "^node-llama-cpp: cuda" || { tail -20 "$OUT/gpu.txt"; fail "node-llama-cpp cannot load CUDA"; }
  say "ours: node-llama-cpp's prebuilt addon with the llama.cpp libraries built here"
fi

bench() { # $1: name of the run's files
  timeout "${BENCH_LIMIT_S:-120}" node bench/peer.mjs --gpu cuda --llama-server "$BUILD/bin/llama-server" \
    --threads "${THREADS:-4}" --rounds "${ROUNDS:-5}" --warmup-streams "${WARMUP:-10}" --json "$OUT/$1.json" 2>&1 | tee "$OUT/$1.log"
}
say "bench:peer, node-llama-cpp's prebuilt addon"
bench peer

# The same again with `svc engine build`'s patches in the addon, compiled alone against the same libraries
# (resources/engine-addon: no CUDA compiler needed, about 25 s on 2 cores).
say "the patched addon"
ADDON=/tmp/addon-patched
mkdir -p $ADDON && tar -xJf "$CARRY/addon-patched.tar.xz" -C $ADDON
build_addon $ADDON "$SRC" "$PWD/$BINS" /tmp/addon-build > "$OUT/addon-build.log" 2>&1 || { tail -30 "$OUT/addon-build.log"; fail "the patched addon"; }
cp /tmp/addon-build/llama-addon.node "$BINS/llama-addon.node"
say "bench:peer, the patched addon"
bench peer-patched
if [ "${SPEC:-0}" != 0 ]; then
  # Off by default: with the build it would pass the device tool's 600 s a command (SPEC=1 where a second run has the time).
  say "bench:spec, the patched addon"
  spec_bench cuda "$BUILD/bin/llama-server"
fi
say "done"
