// svc engine build's products of Q6_K weights with a few columns (resources/engine-native/q6k-cols.h, called
// from llamafile's sgemm.cpp through resources/engine-patches/sgemm-q6k-cols.patch) against llama.cpp's own
// ggml_vec_dot_q6_K_q8_K taken as ggml's mul_mat takes it (tiles of 16 rows by 16 columns, a column's product at
// a time), on random blocks, for 1 to 512 columns (one answer's token, a few answers', checked guesses, prompts)
// and the 0.8B model's shapes. Prints whether every output has the same bits and the time of each (best of the
// repeats, one thread); exits with 1 where any bit differs. F gives the AVX-512 form (AVX512BW; AVX512-VNNI adds
// vpdpwssd); for the 256-bit form (any CPU with AVX2 and FMA) run the same lines with F's -mavx512... flags
// removed. docs/performance.md, section 51. Not part of `npm test`. Needs the llama.cpp source node-llama-cpp
// ships unpacked (svc engine build does that).
//   L=node_modules/node-llama-cpp/llama/llama.cpp; D=/tmp/q6k-check; mkdir -p $D
//   F="-O3 -mavx2 -mfma -mf16c -mbmi2 -mavx512f -mavx512cd -mavx512vl -mavx512dq -mavx512bw -mavx512vnni -I$L/ggml/include -I$L/ggml/src -I$L/ggml/src/ggml-cpu -I$L/ggml/src/ggml-cpu/llamafile"
//   gcc $F -std=c11 -c $L/ggml/src/ggml-cpu/arch/x86/quants.c -o $D/llama.o && objcopy --redefine-sym ggml_vec_dot_q6_K_q8_K=llama_vec_dot $D/llama.o && objcopy --keep-global-symbol=llama_vec_dot $D/llama.o
//   g++ $F -std=c++17 bench/q6k-cols-check.cpp $D/llama.o -o $D/check && $D/check
#include "ggml-impl.h"
#include "ggml-cpu-impl.h"
#include "ggml-quants.h"
#include "simd-mappings.h"
#include "../resources/engine-native/q6k-cols.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <vector>

#if !defined(SVC_Q6K_COLS)
#error "q6k-cols.h needs AVX2 and FMA: compile with the flags above"
#endif

extern "C" {
// What llama.cpp's x86 quants.c reads from ggml-base.
float ggml_table_f32_f16[1 << 16];
float ggml_table_f32_e8m0_half[1 << 8];
float ggml_table_f32_ue4m3[1 << 8];
void quantize_row_q8_K_ref(const float * GGML_RESTRICT, block_q8_K * GGML_RESTRICT, int64_t) { abort(); }
void llama_vec_dot(int n, float * s, size_t bs, const void * vx, size_t bx, const void * vy, size_t by, int nrc);
}

static std::mt19937 rng(7);

int main(int argc, char ** argv) {
    const int reps = argc > 1 ? atoi(argv[1]) : 5;
    // Rows and blocks of 256 of the 0.8B model's Q6_K tensors (attn_v, ffn_down, and the output's rows in a
    // tile of the vocabulary), and a shape that fits the caches.
    const int shapes[][2] = {{512, 8}, {2048, 22}, {8192, 8}};
    const int columns[] = {1, 2, 3, 4, 5, 8, 12, 16, 17, 33, 65, 512};
    bool failed = false;
    for (const auto & shape : shapes) {
        const int m = shape[0], kb = shape[1];
        std::vector<block_q6_K> A((size_t) m * kb);
        for (auto & b : A) {
            for (auto & x : b.ql) x = (uint8_t) rng();
            for (auto & x : b.qh) x = (uint8_t) rng();
            for (auto & x : b.scales) x = (int8_t) rng();
            b.d = GGML_CPU_FP32_TO_FP16(std::uniform_real_distribution<float>(0.0001f, 0.01f)(rng));
        }
        for (const int n : columns) {
            std::vector<block_q8_K> B((size_t) n * kb);
            for (auto & b : B) {
                for (auto & x : b.qs) x = (int8_t) ((int) (rng() % 255) - 127);
                for (int g = 0; g < 16; g++) {
                    int sum = 0;
                    for (int t = 0; t < 16; t++) sum += b.qs[g * 16 + t];
                    b.bsums[g] = (int16_t) sum;
                }
                b.d = std::uniform_real_distribution<float>(0.001f, 0.1f)(rng);
            }
            std::vector<float> theirs((size_t) m * n), ours((size_t) m * n, -1.0f);
            double t_theirs = 1e30, t_ours = 1e30;
            for (int r = 0; r < reps; r++) {
                const auto t0 = std::chrono::steady_clock::now();
                for (int j0 = 0; j0 < n; j0 += 16)
                    for (int i0 = 0; i0 < m; i0 += 16)
                        for (int j = j0; j < std::min(n, j0 + 16); j++)
                            for (int i = i0; i < std::min(m, i0 + 16); i++)
                                llama_vec_dot(kb * 256, &theirs[(size_t) j * m + i], 0, &A[(size_t) i * kb], 0, &B[(size_t) j * kb], 0, 1);
                const auto t1 = std::chrono::steady_clock::now();
                svc_q6_K_cols(0, 1, m, n, kb, A.data(), kb, B.data(), kb, ours.data(), m);
                const auto t2 = std::chrono::steady_clock::now();
                t_theirs = std::min(t_theirs, std::chrono::duration<double, std::micro>(t1 - t0).count());
                t_ours = std::min(t_ours, std::chrono::duration<double, std::micro>(t2 - t1).count());
            }
            const bool same = memcmp(theirs.data(), ours.data(), theirs.size() * sizeof(float)) == 0;
            failed = failed || !same;
            printf("rows %5d blocks %2d columns %3d  same bits: %s  llama.cpp %10.1f us  ours %10.1f us  llama.cpp/ours %.2f\n", m, kb, n,
                   same ? "yes" : "NO", t_theirs, t_ours, t_theirs / t_ours);
        }
    }
    return failed ? 1 : 0;
}
