// bench/pass-shapes.ts's measure straight on libllama, for kernel experiments: each of 4 sequences reads the
// same prompt of random tokens, then each shape ("tokens by sequence", e.g. "1,1,1,1;17,17,17,17;33") is
// decoded on top of it with logits for every token, timed and removed, shapes alternated over rounds (the
// first round left out). Writes the logits of the last round to OUT, so that two builds' (or two kernels')
// logits can be compared. LOGITS_LAST=1 asks logits of each sequence's last token only (and writes none);
// FA_OFF=1 runs attention without the flash kernel (matrix products, a reference for its numbers).
// Built against the llama.cpp of `npm run upstream:build` (.cache/upstream; static libraries):
//   U=.cache/upstream; L="$U/build/src/libllama.a $U/build/ggml/src/libggml.a $U/build/ggml/src/libggml-cpu.a"
//   L="$L $U/build/ggml/src/ggml-rpc/libggml-rpc.a $U/build/ggml/src/libggml-base.a"
//   g++ -O2 -std=c++17 -I $U/llama.cpp/include -I $U/llama.cpp/ggml/include bench/pass-shapes-native.cpp $L -fopenmp -lpthread -ldl -o /tmp/pass-shapes-native
//   /tmp/pass-shapes-native MODEL.gguf THREADS PROMPT_TOKENS ROUNDS "SHAPES" OUT.bin
// After a change to ggml's CPU code there: `cmake --build .cache/upstream/build --target ggml-cpu`, link
// again (about 10 s). docs/performance.md, section 41. Not part of `npm test`.
#include "llama.h"
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>
#include <cmath>

static std::vector<std::vector<int>> parse(const char * s) {
    std::vector<std::vector<int>> shapes; std::vector<int> cur; std::string num;
    for (const char * p = s;; p++) {
        if (*p >= '0' && *p <= '9') { num += *p; continue; }
        if (!num.empty()) { cur.push_back(atoi(num.c_str())); num.clear(); }
        if (*p == ';' || *p == 0) { shapes.push_back(cur); cur.clear(); }
        if (*p == 0) break;
    }
    return shapes;
}

int main(int argc, char ** argv) {
    if (argc < 7) { fprintf(stderr, "shapes MODEL THREADS PROMPT ROUNDS SHAPES OUT\n"); return 2; }
    const char * path = argv[1]; int threads = atoi(argv[2]); int prompt = atoi(argv[3]); int rounds = atoi(argv[4]);
    auto shapes = parse(argv[5]); const char * out = argv[6];
    llama_backend_init();
    llama_log_set([](ggml_log_level, const char *, void *) {}, nullptr);
    auto mp = llama_model_default_params(); mp.load_mode = LLAMA_LOAD_MODE_NONE;
    llama_model * model = llama_model_load_from_file(path, mp);
    auto cp = llama_context_default_params();
    cp.n_ctx = 4 * 4096; cp.n_seq_max = 4; cp.n_batch = 2048; cp.n_ubatch = 512; cp.n_threads = threads; cp.n_threads_batch = threads;
    cp.flash_attn_type = getenv("FA_OFF") ? LLAMA_FLASH_ATTN_TYPE_DISABLED : LLAMA_FLASH_ATTN_TYPE_ENABLED; cp.kv_unified = false;
    llama_context * ctx = llama_init_from_model(model, cp);
    const llama_vocab * vocab = llama_model_get_vocab(model);
    int nv = llama_vocab_n_tokens(vocab);
    srand(7);
    std::vector<llama_token> ptoks(prompt); for (auto & t : ptoks) t = 3 + rand() % (nv - 3);
    llama_batch b = llama_batch_init(8192, 0, 1);
    for (int s = 0; s < 4; s++) {
        b.n_tokens = 0;
        for (int i = 0; i < prompt; i++) { b.token[b.n_tokens] = ptoks[i]; b.pos[b.n_tokens] = i; b.n_seq_id[b.n_tokens] = 1; b.seq_id[b.n_tokens][0] = s; b.logits[b.n_tokens] = i == prompt - 1; b.n_tokens++; }
        if (llama_decode(ctx, b)) { fprintf(stderr, "prompt decode failed\n"); return 1; }
    }
    llama_memory_t mem = llama_get_memory(ctx);
    std::vector<std::vector<double>> ms(shapes.size());
    FILE * f = fopen(out, "wb");
    for (int r = 0; r < rounds + 1; r++) {
        for (size_t k = 0; k < shapes.size(); k++) {
            auto & sh = shapes[k];
            b.n_tokens = 0;
            for (size_t s = 0; s < sh.size(); s++)
                for (int i = 0; i < sh[s]; i++) { b.token[b.n_tokens] = ptoks[(i * 7 + s) % prompt]; b.pos[b.n_tokens] = prompt + i; b.n_seq_id[b.n_tokens] = 1; b.seq_id[b.n_tokens][0] = (int) s; b.logits[b.n_tokens] = getenv("LOGITS_LAST") ? (i == sh[s] - 1) : 1; b.n_tokens++; }
            auto t0 = std::chrono::steady_clock::now();
            if (llama_decode(ctx, b)) { fprintf(stderr, "decode failed\n"); return 1; }
            llama_synchronize(ctx);
            double d = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
            if (r > 0) ms[k].push_back(d);
            if (r == rounds && !getenv("LOGITS_LAST")) for (int i = 0; i < b.n_tokens; i++) fwrite(llama_get_logits_ith(ctx, i), sizeof(float), nv, f);
            for (size_t s = 0; s < sh.size(); s++) llama_memory_seq_rm(mem, (int) s, prompt, -1);
        }
    }
    fclose(f);
    for (size_t k = 0; k < shapes.size(); k++) {
        auto v = ms[k]; std::sort(v.begin(), v.end());
        std::string name; for (size_t s = 0; s < shapes[k].size(); s++) name += (s ? "," : "") + std::to_string(shapes[k][s]);
        printf("%-14s median %7.2f ms  least %7.2f ms\n", name.c_str(), v[v.size() / 2], v[0]);
    }
    return 0;
}
