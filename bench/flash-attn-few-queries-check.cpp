// svc engine build's few-queries flash-attention kernel (resources/engine-patches/flash-attn-few-queries.patch)
// against llama.cpp's own, on ggml's operator alone: grouped-query and multi-query heads, several sequences,
// ALiBi, a logit soft-cap and attention sinks, masks with holes and padding (every case within the patch's
// bounds: 2 queries or more with heads of 128, 16 or more with heads of 64, heads at least the threads). Built
// twice against the llama.cpp of `npm run upstream:build`, without the patch and with it; the first writes its
// outputs, the second compares with them and prints the largest difference against the largest value for
// each case (the two kernels accumulate in F16, llama.cpp's, and F32, ours: about 10^-3 of it).
// docs/performance.md, section 41. Not part of `npm test`.
//   U=.cache/upstream; B="-fopenmp -lpthread -ldl"; L="$U/build/ggml/src/libggml.a $U/build/ggml/src/libggml-cpu.a $U/build/ggml/src/libggml-base.a"
//   g++ -O2 -std=c++17 -I $U/llama.cpp/ggml/include bench/flash-attn-few-queries-check.cpp $L $B -o /tmp/fa-check && /tmp/fa-check /tmp/fa-llama.bin
//   patch -p3 -d $U/llama.cpp < resources/engine-patches/flash-attn-few-queries.patch && cmake --build $U/build --target ggml-cpu
//   g++ -O2 -std=c++17 -I $U/llama.cpp/ggml/include bench/flash-attn-few-queries-check.cpp $L $B -o /tmp/fa-check && /tmp/fa-check /tmp/fa-ours.bin /tmp/fa-llama.bin
//   patch -R -p3 -d $U/llama.cpp < resources/engine-patches/flash-attn-few-queries.patch && cmake --build $U/build --target ggml-cpu
#include "ggml.h"
#include "ggml-cpu.h"
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <vector>
struct Case { int DK, NQ, nh, nhkv, nkv, ne3; float max_bias, softcap; bool sinks; int threads; };
static std::vector<float> run(const Case & c) {
    ggml_init_params ip = { 256u << 20, nullptr, false };
    ggml_context * ctx = ggml_init(ip);
    std::mt19937 rng(42); std::normal_distribution<float> nd(0, 1); std::uniform_real_distribution<float> ud(0, 1);
    ggml_tensor * q = ggml_new_tensor_4d(ctx, GGML_TYPE_F32, c.DK, c.NQ, c.nh, c.ne3);
    ggml_tensor * k = ggml_new_tensor_4d(ctx, GGML_TYPE_F16, c.DK, c.nkv, c.nhkv, c.ne3);
    ggml_tensor * v = ggml_new_tensor_4d(ctx, GGML_TYPE_F16, c.DK, c.nkv, c.nhkv, c.ne3);
    ggml_tensor * m = ggml_new_tensor_4d(ctx, GGML_TYPE_F16, c.nkv, c.NQ, 1, c.ne3);
    for (int64_t i = 0; i < ggml_nelements(q); i++) ((float *) q->data)[i] = nd(rng);
    for (int64_t i = 0; i < ggml_nelements(k); i++) ((ggml_fp16_t *) k->data)[i] = ggml_fp32_to_fp16(nd(rng));
    for (int64_t i = 0; i < ggml_nelements(v); i++) ((ggml_fp16_t *) v->data)[i] = ggml_fp32_to_fp16(nd(rng));
    // Causal over the last NQ positions, some holes, cells past 80% masked (padding)
    for (int s = 0; s < c.ne3; s++) for (int i = 0; i < m->ne[1]; i++) for (int j = 0; j < c.nkv; j++) {
        const int used = (int) (c.nkv * 0.8); const int pos = used - c.NQ + i;
        bool masked = j >= used || j > pos || ud(rng) < 0.05;
        ((ggml_fp16_t *) m->data)[(size_t) s * m->ne[1] * c.nkv + (size_t) i * c.nkv + j] = ggml_fp32_to_fp16(masked ? -INFINITY : 0.0f);
    }
    ggml_tensor * out = ggml_flash_attn_ext(ctx, q, k, v, m, 1.0f / sqrtf((float) c.DK), c.max_bias, c.softcap);
    if (c.sinks) { ggml_tensor * sk = ggml_new_tensor_1d(ctx, GGML_TYPE_F32, c.nh); for (int h = 0; h < c.nh; h++) ((float *) sk->data)[h] = nd(rng); ggml_flash_attn_ext_add_sinks(out, sk); }
    ggml_cgraph * gf = ggml_new_graph(ctx); ggml_build_forward_expand(gf, out);
    ggml_graph_compute_with_ctx(ctx, gf, c.threads);
    std::vector<float> r((float *) out->data, (float *) out->data + ggml_nelements(out));
    ggml_free(ctx);
    return r;
}
int main(int argc, char ** argv) {
    if (argc < 2) { fprintf(stderr, "fa-check OUT.bin [REFERENCE.bin]\n"); return 2; }
    Case cases[] = {
        {128, 5, 16, 4, 300, 2, 0, 0, false, 2},   // GQA 4:1
        {128, 2, 8, 8, 700, 1, 0, 0, false, 1},
        {64, 17, 8, 2, 512, 4, 0, 0, false, 2},    // GQA, 4 sequences
        {64, 33, 8, 1, 1000, 1, 0, 0, false, 2},   // MQA
        {128, 7, 8, 2, 256, 2, 8.0f, 0, false, 1}, // ALiBi
        {128, 7, 8, 2, 256, 2, 0, 30.0f, false, 2},// softcap
        {64, 20, 8, 4, 384, 2, 0, 0, true, 2},     // sinks
    };
    std::vector<std::vector<float>> outs;
    FILE * f = fopen(argv[1], "wb");
    for (auto & c : cases) { outs.push_back(run(c)); fwrite(outs.back().data(), sizeof(float), outs.back().size(), f); }
    fclose(f);
    if (argc < 3) { printf("wrote %s\n", argv[1]); return 0; }
    FILE * r = fopen(argv[2], "rb");
    if (!r) { fprintf(stderr, "cannot read %s\n", argv[2]); return 2; }
    int bad = 0;
    for (size_t k = 0; k < outs.size(); k++) {
        const Case & c = cases[k];
        const auto & b = outs[k];
        std::vector<float> a(b.size());
        if (fread(a.data(), sizeof(float), a.size(), r) != a.size()) { fprintf(stderr, "%s is short\n", argv[2]); return 2; }
        double d = 0, mx = 0; int nan = 0;
        for (size_t i = 0; i < a.size(); i++) { if (std::isnan(b[i]) != std::isnan(a[i])) nan++; d = std::max(d, (double) fabsf(a[i] - b[i])); mx = std::max(mx, (double) fabsf(a[i])); }
        printf("DK %d NQ %d heads %d/%d kv %d seqs %d alibi %.0f softcap %.0f sinks %d: max diff %.3g of %.3g, nan mismatch %d\n", c.DK, c.NQ, c.nh, c.nhkv, c.nkv, c.ne3, c.max_bias, c.softcap, c.sinks, d, mx, nan);
        if (d > 1e-2 * mx || nan) bad++;
    }
    fclose(r);
    printf(bad ? "FAIL\n" : "OK\n");
    return bad;
}
