# Shared by the device scripts (sourced from the repository root): the timestamps of their log, llama.cpp's
# build options, unpacking Node and the server, and compiling the patched addon alone.
T0=$(date +%s)
say() { echo "[$(($(date +%s) - T0)) s] $*"; }

# llama.cpp with its backends as loadable modules, so that llama-server and ours run the same GPU module; the
# CPU backend for AVX2 machines (GGML_NATIVE is refused with modules); no network, no web UI, no tests.
LLAMA_DL_OPTIONS=(
  -DCMAKE_BUILD_TYPE=Release -DGGML_BACKEND_DL=ON -DBUILD_SHARED_LIBS=ON
  -DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_BMI2=ON
  -DLLAMA_CURL=OFF -DLLAMA_OPENSSL=OFF -DLLAMA_USE_PREBUILT_UI=OFF -DLLAMA_BUILD_UI=OFF
  -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF
)

# Node on PATH, the server's dependencies and dist/, and the bundled bench, from a packed folder ($1).
unpack_node() {
  mkdir -p /tmp/node/bin && xz -dc "$1/node.xz" > /tmp/node/bin/node && chmod +x /tmp/node/bin/node || return 1
  export PATH=/tmp/node/bin:$PATH
  tar -xJf "$1/node_modules.tar.xz" || return 1
  # tiny-model.js reads the chat template beside itself; bundled, "itself" is bench/peer.mjs (or spec.mjs).
  cp "$1/peer.mjs" bench/peer.mjs && cp "$1/spec.mjs" bench/spec.mjs && cp resources/test-model/chat-template.jinja bench/
}

# bench:spec (issue 44) on the GPU backend $1 against the llama-server $2, with the server's addon as it is now:
# the echo model (Q8_0, written by the bench itself: no llama-quantize on the device) rewriting a quoted file, and
# nothing to repeat; one stream and four, svc with speculation on and off, llama-server with ngram-simple. Its
# log and JSON go to $OUT/spec-$1.*. About 90 s on an H200 (SPEC_LIMIT_S, SPEC_ROUNDS, THREADS override).
spec_bench() {
  timeout "${SPEC_LIMIT_S:-180}" node bench/spec.mjs --gpu "$1" --llama-server "$2" --weights q8_0 --tokens 512 \
    --rounds "${SPEC_ROUNDS:-3}" --threads "${THREADS:-4}" --workloads echo,norepeat --json "$OUT/spec-$1.json" 2>&1 |
    tee "$OUT/spec-$1.log" | grep -vE "round [0-9]+/|warm-up"
}

# node-llama-cpp's addon source in $1 (its llama/addon, patched) compiled alone (resources/engine-addon)
# against the llama.cpp source $2 and the libraries in $3, in the build folder $4.
build_addon() {
  cmake -S resources/engine-addon -B "$4" -G Ninja -DADDON_SRC="$1/llama/addon" -DLLAMA_SRC="$2" \
    -DNODE_API_INC="$PWD/node_modules/node-api-headers/include" -DNODE_ADDON_API_INC="$PWD/node_modules/node-addon-api" \
    -DLIBS="$3" && cmake --build "$4"
}
