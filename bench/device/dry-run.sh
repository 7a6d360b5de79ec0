#!/usr/bin/env bash
# What a lent GPU machine will do with bench/device/pack-vulkan-peer.sh's folder, done here on the CPU first
# (device time is scarce; a pack that cannot start the server wastes it): the tracked tree in a temporary
# folder, the carried folder unpacked there as vulkan-peer.sh unpacks it, then bench:peer (one answer) and
# bench:spec (echo and nothing to repeat) from their bundles, one round each, against the llama-server the
# pack built. About 4 minutes on 2 cores.
# Usage: bash bench/device/pack-vulkan-peer.sh && bash bench/device/dry-run.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
REPO=$PWD
V=.cache/device-vk
[ -f "$V/node_modules.tar.xz" ] || { echo "$V is missing: run bench/device/pack-vulkan-peer.sh"; exit 1; }
SIM=$(mktemp -d)
trap 'rm -rf "$SIM"' EXIT
git ls-files -z | tar -c --null -T - | tar -x -C "$SIM"
mkdir -p "$SIM/.cache" && cp -a "$V" "$SIM/$V"
cd "$SIM"
source bench/device/common.sh
OUT=$SIM/out
mkdir -p "$OUT"
unpack_node "$V" && tar -xJf "$V/vulkan-bins.tar.xz" || exit 1
mkdir -p ls && tar -xJf "$V/llama-server-dl.tar.xz" -C ls
say "bench:peer, one answer, on the CPU"
timeout 300 node bench/peer.mjs --llama-server "$SIM/ls/llama-server" --threads 2 --rounds 1 --only single --warmup-streams 1 > "$OUT/peer.log" 2>&1 || true
grep "single-stream" "$OUT/peer.log" || { tail -20 "$OUT/peer.log"; echo "bench:peer did not run from the pack"; exit 1; }
say "bench:spec on the CPU"
SPEC_ROUNDS=1 THREADS=2 SPEC_LIMIT_S=400 spec_bench cpu "$SIM/ls/llama-server" > /dev/null || true
grep -E "^\| (echo|nothing)" "$OUT/spec-cpu.log" && grep "Lossless" "$OUT/spec-cpu.log" ||
  { tail -20 "$OUT/spec-cpu.log"; echo "bench:spec did not run from the pack"; exit 1; }
say "the pack runs: carry $V and .gl to the device (bench/device/vulkan-peer.sh)"
