#!/usr/bin/env bash
# Packs bench:peer over Vulkan for a lent GPU machine into .cache/device-vk/ (git-ignored): no compiling
# there, so it fits in two minutes of device time. What it holds:
#   node.xz, node_modules.tar.xz, peer.mjs, spec.mjs   as bench/device/pack-cuda-peer.sh makes them
#   vulkan-bins.tar.xz       node-llama-cpp's prebuilt Vulkan binaries (libggml-vulkan.so: 43 MB, 5 MB packed)
#   llama-server-dl.tar.xz   llama-server built here from the llama.cpp source node-llama-cpp ships, for the
#                            CPU with its backends as loadable modules: on the device it loads the same
#                            prebuilt libggml-vulkan.so as ours, from its own folder
#   llama-addon.patched.node node-llama-cpp's addon with `svc engine build`'s patches, compiled alone against
#                            the prebuilt Vulkan libraries (resources/engine-addon)
# and .gl/ the Vulkan loader's Debian packages (the device tool's README).
# Then: run `bash bench/device/vulkan-peer.sh`, carry [".cache/device-vk", ".gl"], timeout_s 360.
# Usage: bash bench/device/pack-vulkan-peer.sh   (about 15 minutes on 2 cores the first time: llama-server)
set -euo pipefail
cd "$(dirname "$0")/../.."
source bench/device/common.sh
bash bench/device/pack-cuda-peer.sh > /dev/null
OUT=.cache/device-vk
rm -rf "$OUT" && mkdir -p "$OUT"
cp .cache/device/node.xz .cache/device/node_modules.tar.xz .cache/device/peer.mjs .cache/device/spec.mjs "$OUT/"
VK=node_modules/@node-llama-cpp/linux-x64-vulkan
tar -cJf "$OUT/vulkan-bins.tar.xz" "$VK"

# llama-server with loadable backends (cached in .cache/peer-dl/).
SRC=.cache/peer-dl/llama.cpp
BUILD=.cache/peer-dl/build
if [ ! -f "$SRC/CMakeLists.txt" ]; then
  mkdir -p .cache/peer-dl && git clone --quiet node_modules/node-llama-cpp/llama/gitRelease.bundle "$SRC"
fi
cmake -S "$SRC" -B "$BUILD" -G Ninja "${LLAMA_DL_OPTIONS[@]}" -DCMAKE_BUILD_WITH_INSTALL_RPATH=ON -DCMAKE_INSTALL_RPATH='$ORIGIN' > /dev/null
cmake --build "$BUILD" --target llama-server ggml-cpu -j "$(nproc)"
tar -cJf "$OUT/llama-server-dl.tar.xz" -C "$BUILD/bin" llama-server $(cd "$BUILD/bin" && ls ./*.so*)

# The patched addon (the source pack-cuda-peer.sh patched), against the prebuilt Vulkan libraries.
ADDON=$(mktemp -d)
tar -xJf .cache/device/addon-patched.tar.xz -C "$ADDON"
build_addon "$ADDON" "$PWD/$SRC" "$PWD/$VK/bins/linux-x64-vulkan" "$ADDON/build" > /dev/null
cp "$ADDON/build/llama-addon.node" "$OUT/llama-addon.patched.node"
rm -rf "$ADDON"

# The Vulkan loader (and GL libraries) for the device, as its README says.
mkdir -p .gl /tmp/amd64/partial
o='-oAPT::Architecture=amd64 -oAPT::Architectures=amd64 -oDir::State::Lists=/tmp/amd64'
apt-get $o update > /dev/null
(cd .gl && apt-get $o download libvulkan1 libegl1 libglvnd0 libopengl0 libgl1 libglx0 libgles2 > /dev/null 2>&1)
du -ch "$OUT"/* .gl | sort -h | tail -8
TOTAL=$(du -cb "$OUT"/* .gl | tail -1 | cut -f1)
[ "$TOTAL" -le $((64 * 1024 * 1024)) ] || { echo "$OUT and .gl hold $TOTAL bytes: over the device tool's 64 MiB"; exit 1; }
