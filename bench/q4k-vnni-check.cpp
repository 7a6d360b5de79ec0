// svc engine build's VNNI products of repacked Q4_K weights (resources/engine-native/q4k-vnni.h, called from the
// x86 repack.cpp through resources/engine-patches/repack-q4k-vnni.patch) against llama.cpp's own (with
// repack-gemv-order.patch, which the build applies first): the gemm (4 rows and more: several answers' tokens,
// checked guesses, prompts) and the gemv (one row), on random blocks, in shapes that fit the caches and shapes
// that do not. Prints whether every output has the same bits and the time of each (best of the repeats, one
// thread); exits with 1 where any bit differs. Needs a CPU with AVX512-VNNI, and the llama.cpp source
// node-llama-cpp ships unpacked (svc engine build does that). For the 256-bit form (AVX-VNNI without AVX-512:
// Intel from Alder Lake), run the same lines with F's -mavx512... flags replaced by -mavxvnni. The patched file
// sits in a copy of the build's folders, where its #include finds our header. docs/performance.md, section 50.
// Not part of `npm test`.
//   L=node_modules/node-llama-cpp/llama/llama.cpp; R=$L/ggml/src/ggml-cpu/arch/x86/repack.cpp; D=/tmp/q4k-check; X=$D/llama/llama.cpp/ggml/src/ggml-cpu/arch/x86
//   mkdir -p $X $D/llama/addon/svc && cp resources/engine-native/q4k-vnni.h $D/llama/addon/svc/
//   patch -s -o $D/llama.cpp $R < resources/engine-patches/repack-gemv-order.patch
//   patch -s -o $X/repack.cpp $D/llama.cpp < resources/engine-patches/repack-q4k-vnni.patch
//   F="-O3 -std=c++17 -mavx2 -mfma -mf16c -mbmi2 -mavx512f -mavx512cd -mavx512vl -mavx512dq -mavx512bw -mavx512vbmi -mavx512vnni -I$L/ggml/include -I$L/ggml/src -I$L/ggml/src/ggml-cpu -I$L/ggml/src/ggml-cpu/arch/x86"
//   g++ $F -c $D/llama.cpp -o $D/llama.o && g++ $F -c $X/repack.cpp -o $D/ours.o
//   for v in llama ours; do objcopy --redefine-sym ggml_gemm_q4_K_8x8_q8_K=${v}_gemm --redefine-sym ggml_gemv_q4_K_8x8_q8_K=${v}_gemv $D/$v.o && objcopy --keep-global-symbol=${v}_gemm --keep-global-symbol=${v}_gemv $D/$v.o; done
//   g++ $F bench/q4k-vnni-check.cpp $D/llama.o $D/ours.o -o $D/check && $D/check
#include <immintrin.h>
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <random>
#include <vector>

extern "C" {
// What the two objects read from ggml-base.
float ggml_table_f32_f16[1 << 16];
float ggml_table_f32_e8m0_half[1 << 8];
void llama_gemm(int n, float * s, size_t bs, const void * vx, const void * vy, int nr, int nc);
void ours_gemm(int n, float * s, size_t bs, const void * vx, const void * vy, int nr, int nc);
void llama_gemv(int n, float * s, size_t bs, const void * vx, const void * vy, int nr, int nc);
void ours_gemv(int n, float * s, size_t bs, const void * vx, const void * vy, int nr, int nc);
}

// ggml's layouts (ggml-cpu/repack.h, ggml-common.h).
struct block_q4_Kx8 { uint16_t d[8]; uint16_t dmin[8]; uint8_t scales[96]; uint8_t qs[1024]; };
struct block_q8_Kx4 { float d[4]; int8_t qs[1024]; int16_t bsums[64]; };
struct block_q8_K { float d; int8_t qs[256]; int16_t bsums[16]; };

static std::mt19937 rng(42);
static float uniform(float a, float b) { return std::uniform_real_distribution<float>(a, b)(rng); }

static std::vector<block_q4_Kx8> weights(int n, int nc) {
    std::vector<block_q4_Kx8> w((size_t) (nc / 8) * (n / 256));
    for (auto & b : w) {
        for (int i = 0; i < 8; i++) { b.d[i] = _cvtss_sh(uniform(0.001f, 0.05f), 0); b.dmin[i] = _cvtss_sh(uniform(0.001f, 0.05f), 0); }
        for (auto & x : b.scales) x = (uint8_t) rng();
        for (auto & x : b.qs) x = (uint8_t) rng();
    }
    return w;
}

// Quants within Q8_K's range, bsums any int16 (they only meet the mins).
template <typename Q> static void fill_q8(Q & b) {
    for (auto & x : b.qs) x = (int8_t) ((int) (rng() % 255) - 127);
    for (auto & x : b.bsums) x = (int16_t) ((int) (rng() % 4000) - 2000);
}

static bool failed = false;

static void report(const char * what, int n, int nr, int nc, const std::vector<float> & a, const std::vector<float> & b, double ta, double tb) {
    size_t differ = 0;
    for (size_t i = 0; i < a.size(); i++) differ += memcmp(&a[i], &b[i], sizeof(float)) != 0;
    failed |= differ > 0;
    printf("| %s | %d | %d | %d | %.1f MB | %s | %.1f | %.1f | %.2f |\n", what, n, nr, nc, (double) nc / 8 * (n / 256) * sizeof(block_q4_Kx8) / 1e6,
           differ == 0 ? "yes" : "NO", ta, tb, ta / tb);
}


template <typename F> static double timed(int repeats, F f) {
    double best = 1e30;
    for (int r = 0; r < repeats; r++) {
        const auto t0 = std::chrono::steady_clock::now();
        f();
        best = std::min(best, std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count());
    }
    return best;
}

static void gemm(int n, int nr, int nc, int repeats) {
    const auto w = weights(n, nc);
    std::vector<block_q8_Kx4> a((size_t) (nr / 4) * (n / 256));
    for (auto & b : a) { for (auto & d : b.d) d = uniform(0.001f, 0.1f); fill_q8(b); }
    std::vector<float> s1((size_t) nr * nc), s2((size_t) nr * nc);
    const double t1 = timed(repeats, [&] { llama_gemm(n, s1.data(), nc, w.data(), a.data(), nr, nc); });
    const double t2 = timed(repeats, [&] { ours_gemm(n, s2.data(), nc, w.data(), a.data(), nr, nc); });
    report("gemm", n, nr, nc, s1, s2, t1, t2);
}

static void gemv(int n, int nc, int repeats) {
    const auto w = weights(n, nc);
    std::vector<block_q8_K> a(n / 256);
    for (auto & b : a) { b.d = uniform(0.001f, 0.1f); fill_q8(b); }
    std::vector<float> s1(nc), s2(nc);
    const double t1 = timed(repeats, [&] { llama_gemv(n, s1.data(), nc, w.data(), a.data(), 1, nc); });
    const double t2 = timed(repeats, [&] { ours_gemv(n, s2.data(), nc, w.data(), a.data(), 1, nc); });
    report("gemv", n, 1, nc, s1, s2, t1, t2);
}

int main() {
    for (int i = 0; i < (1 << 16); i++) ggml_table_f32_f16[i] = _cvtsh_ss((uint16_t) i);
    printf("| product | n | rows | columns | weights | same bits | llama.cpp µs | ours µs | llama.cpp ÷ ours |\n|---|---|---|---|---|---|---|---|---|\n");
    // Odd shapes: column counts with a last block of 8 of their own, row counts around the forms' bounds.
    for (int nr : {4, 8, 12, 16, 20, 28}) gemm(512, nr, 24, 3);
    gemm(256, 4, 8, 3);
    gemv(256, 8, 3);
    gemv(768, 24, 3);
    // In the caches (2.4 MB of weights), then not (75 MB and more).
    for (int nr : {4, 8, 12, 16, 64}) gemm(2048, nr, 2048, 20);
    gemm(2048, 512, 256, 3);
    gemv(2048, 2048, 50);
    for (int nr : {4, 8, 12, 16}) gemm(2048, nr, 65536, 3);
    gemv(2048, 65536, 5);
    gemv(8192, 32768, 5);
    if (failed) printf("Some outputs differ.\n");
    return failed ? 1 : 0;
}
