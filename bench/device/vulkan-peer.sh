#!/usr/bin/env bash
# bench:peer over Vulkan on a lent GPU machine, with what bench/device/pack-vulkan-peer.sh packed: twice,
# with node-llama-cpp's prebuilt addon and then with the addon compiled again with `svc engine build`'s
# patches (both on the same prebuilt Vulkan libraries, which llama-server loads too); then bench:spec on the
# patched addon (issue 44: speculation's gain where a step of many tokens costs about what one does). About
# 200 s; SPEC=0 leaves bench:spec out.
#   run: bash bench/device/vulkan-peer.sh    carry: [".cache/device-vk", ".gl"]    timeout_s: 360
set -uo pipefail
cd "$(dirname "$0")/../.."
V=.cache/device-vk
OUT=${OUT:-/tmp/vulkan-peer-out}
mkdir -p "$OUT"
source bench/device/common.sh
for f in node.xz node_modules.tar.xz vulkan-bins.tar.xz llama-server-dl.tar.xz peer.mjs spec.mjs llama-addon.patched.node; do
  [ -f "$V/$f" ] || { echo "$V/$f is missing: run bench/device/pack-vulkan-peer.sh and carry $V"; exit 1; }
done
for f in .gl/*.deb; do dpkg -x "$f" /; done
ldconfig
ICD=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
[ -f $ICD ] && export VK_DRIVER_FILES=$ICD
unpack_node $V && tar -xJf $V/vulkan-bins.tar.xz || exit 1
LS=/tmp/llama-server-dl
mkdir -p $LS && tar -xJf $V/llama-server-dl.tar.xz -C $LS
# Its libraries are found beside it (RUNPATH $ORIGIN), not through LD_LIBRARY_PATH, which ours would follow too.
VB=node_modules/@node-llama-cpp/linux-x64-vulkan/bins/linux-x64-vulkan
cp $VB/libggml-vulkan.so $LS/
say "llama-server's devices"
$LS/llama-server --list-devices 2>&1 | tail -3 | tee "$OUT/devices.txt"
bench() { # $1: name of the run's files
  timeout "${BENCH_LIMIT_S:-85}" node bench/peer.mjs --gpu vulkan --llama-server $LS/llama-server --threads "${THREADS:-4}" \
    --rounds "${ROUNDS:-3}" --warmup-streams "${WARMUP:-5}" --json "$OUT/$1.json" 2>&1 | tee "$OUT/$1.log" | grep -vE "round [0-9]+/|warm-up"
}
say "node-llama-cpp's prebuilt addon"
bench vulkan-prebuilt
cp $V/llama-addon.patched.node $VB/llama-addon.node
say "the patched addon"
bench vulkan-patched
if [ "${SPEC:-1}" != 0 ]; then
  say "bench:spec, the patched addon"
  spec_bench vulkan $LS/llama-server
fi
say "done"
