#!/usr/bin/env bash
# Packs what bench/device/cuda-peer.sh needs on a lent CUDA machine (the `device` tool: no Node, no npm, no
# network there) into .cache/device/ (git-ignored; name it in the run's `carry`, 64 MiB at most in all):
#   node.xz            this machine's Node binary
#   node_modules.tar.xz the server's production dependencies and dist/, without what the bench never loads
#                      (other platforms' binaries, speech, vision's llama.node, OCR, PDF, HEIC) and without
#                      node-llama-cpp's 159 MB libggml-cuda.so, which the device builds for its own GPU alone
#   llama-src.tar.xz   the llama.cpp source node-llama-cpp ships (its gitRelease.bundle), for llama-server
#                      and that libggml-cuda.so
#   peer.mjs, spec.mjs bench/peer.ts and bench/spec.ts bundled by esbuild (no tsx there)
#   addon-patched.tar.xz node-llama-cpp's addon source with `svc engine build`'s patches applied, which the
#                      device compiles alone (resources/engine-addon) against the same llama.cpp libraries
# Usage: bash bench/device/pack-cuda-peer.sh   (after `npm install`; about 3 minutes on 2 cores)
set -euo pipefail
cd "$(dirname "$0")/../.."
OUT=.cache/device
rm -rf "$OUT" && mkdir -p "$OUT"

npm run -s build
for b in peer spec; do
  npx --no esbuild "bench/$b.ts" --bundle --platform=node --format=esm --packages=external --log-level=warning \
    --outfile="$OUT/$b.mjs"
done

xz -T0 -6 -c "$(readlink -f "$(command -v node)")" > "$OUT/node.xz"

# The production dependency tree, less what a chat-completions bench on CUDA never loads.
npm ls --omit=dev --all --parseable 2>/dev/null | sed "s|^$PWD/||" | grep '^node_modules/' | sort -u > "$OUT/.packages"
XZ_OPT=-9 tar -cJf "$OUT/node_modules.tar.xz" \
  --exclude='node_modules/@node-llama-cpp/linux-x64-cuda/bins/linux-x64-cuda/libggml-cuda.so' \
  --exclude='node_modules/@node-llama-cpp/linux-x64-cuda-ext' \
  --exclude='node_modules/@node-llama-cpp/linux-x64-vulkan' \
  --exclude='node_modules/@node-llama-cpp/linux-x64' \
  --exclude='node_modules/@node-llama-cpp/linux-arm*' \
  --exclude='node_modules/node-llama-cpp/llama/llama.cpp' \
  --exclude='node_modules/node-llama-cpp/llama/localBuilds' \
  --exclude='node_modules/node-llama-cpp/llama/gitRelease.bundle' \
  --exclude='node_modules/@fugood/node-whisper-*' \
  --exclude='node_modules/@fugood/node-llama-*' \
  --exclude='node_modules/@fugood/llama.node' \
  --exclude='node_modules/libheif-js' \
  --exclude='node_modules/koffi/build/koffi/darwin_*' \
  --exclude='node_modules/koffi/build/koffi/freebsd_*' \
  --exclude='node_modules/koffi/build/koffi/openbsd_*' \
  --exclude='node_modules/koffi/build/koffi/win32_*' \
  --exclude='node_modules/koffi/build/koffi/musl_*' \
  --exclude='node_modules/koffi/build/koffi/linux_[!x]*' \
  --exclude='node_modules/tesseract.js-core' \
  --exclude='node_modules/@tesseract.js-data' \
  --exclude='node_modules/@ffmpeg-installer/linux-x64' \
  --exclude='node_modules/pdfjs-dist/legacy/build/*.map' \
  --exclude='node_modules/pdfjs-dist/build/*.map' \
  --exclude='node_modules/@napi-rs/canvas-linux-x64-gnu' \
  --exclude='node_modules/better-sqlite3/deps' \
  --exclude='node_modules/better-sqlite3/src' \
  --exclude='node_modules/typescript' \
  --exclude='node_modules/better-sqlite3/build/Release/obj*' \
  --exclude='node_modules/better-sqlite3/build/Release/.deps' \
  --exclude='node_modules/better-sqlite3/build/deps' \
  --exclude='node_modules/@fugood/whisper.node/whisper.cpp' \
  --exclude='dist/renderer' \
  --exclude='*.map' \
  dist -T "$OUT/.packages"

# The shipped llama.cpp source, less what a llama-server build does not read.
BUNDLE=node_modules/node-llama-cpp/llama/gitRelease.bundle
SRC=$(mktemp -d)
git clone --quiet "$BUNDLE" "$SRC/llama.cpp"
git -C "$SRC/llama.cpp" archive --format=tar HEAD \
  ':(exclude)models' ':(exclude)docs' ':(exclude)media' ':(exclude)gguf-py' ':(exclude)tests' ':(exclude).devops' \
  ':(exclude)tools/server/public' ':(exclude)tools/server/webui' ':(exclude)examples/*/*.gguf' | xz -T0 -6 > "$OUT/llama-src.tar.xz"
rm -rf "$SRC"
# The addon's source with svc's patches (the engine build's own code applies them to a copy).
ADDON=$(mktemp -d)
mkdir -p "$ADDON/llama" && cp -r node_modules/node-llama-cpp/llama/addon "$ADDON/llama/"
node -e "import('./dist/server/engine/engine-build.js').then((m) => m.applyAddonPatches(process.argv[1], undefined, undefined, [m.ADDON_HOOKS_PATCH]))" "$ADDON"
tar -cJf "$OUT/addon-patched.tar.xz" -C "$ADDON" llama/addon
rm -rf "$ADDON"
du -ch "$OUT"/* | sort -h
# The device tool carries 64 MiB in all (this folder, or what pack-vulkan-peer.sh makes of it).
TOTAL=$(du -cb "$OUT"/* | tail -1 | cut -f1)
[ "$TOTAL" -le $((64 * 1024 * 1024)) ] || { echo "$OUT holds $TOTAL bytes: over the device tool's 64 MiB"; exit 1; }
