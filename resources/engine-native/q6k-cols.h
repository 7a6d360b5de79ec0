// svc-desktop's own code in llama.cpp's CPU backend (resources/engine-native; included by llamafile's
// sgemm.cpp through sgemm-q6k-cols.patch, which calls it for Q6_K weights times Q8_K columns).
//
// Q6_K weights times a few columns (a step of a few answers' tokens, checked guesses): each row's blocks are
// unpacked once (6-bit values from ql and qh, the 16 scales) and multiplied with every column, where llama.cpp's
// ggml_vec_dot_q6_K_q8_K unpacks them again for each column. Each column's integer sums land in the same
// 32-bit lanes as that function's, and are scaled and added in its order, so every output has the same bits as
// llama.cpp's: a token's logits do not depend on the step's width (docs/performance.md of svc-desktop,
// section 51).
#pragma once

#if defined(__AVX2__) && defined(__FMA__)
#define SVC_Q6K_COLS 1
#include <immintrin.h>
#include <cstdint>

namespace svc_q6k {

// ggml's x86 quants.c hsum_float_8, in its order.
static inline float hsum_float_8(const __m256 x) {
    __m128 res = _mm256_extractf128_ps(x, 1);
    res = _mm_add_ps(res, _mm256_castps256_ps128(x));
    res = _mm_add_ps(res, _mm_movehl_ps(res, res));
    res = _mm_add_ss(res, _mm_movehdup_ps(res));
    return _mm_cvtss_f32(res);
}

// The part of a column's sum that Q6_K's offset of 32 contributes, as ggml_vec_dot_q6_K_q8_K takes it.
static inline __m256i offset_sums(const block_q8_K & y, __m256i scales_16) {
    const __m256i q8sums = _mm256_loadu_si256((const __m256i *) y.bsums);
    return _mm256_slli_epi32(_mm256_madd_epi16(q8sums, scales_16), 5);
}

#if defined(__AVX512BW__) && defined(__AVX512VL__)
// Columns a row's unpacked blocks meet in turn (a sum and a total of each stay in registers).
constexpr int group = 8;

// RN columns of one row; 512-bit: the low half of a vector holds what llama.cpp's 256-bit q4_0 (q4_2) holds,
// the high half q4_1 (q4_3), so lane k of the sum is lane k of llama.cpp's sumi plus lane k + 8.
template <int RN>
static inline void row(const block_q6_K * x, const block_q8_K * const * y, int64_t nb, float * out) {
    const __m512i m15 = _mm512_set1_epi8(15);
    // qh's bits 0-1 and 2-3 (then 4-5 and 6-7) for the low and the high half, and their shifts into bits 4-5.
    const __m512i mA = _mm512_inserti64x4(_mm512_set1_epi8(3), _mm256_set1_epi8(12), 1);
    const __m512i mB = _mm512_inserti64x4(_mm512_set1_epi8(48), _mm256_set1_epi8(-64), 1);
    const __m512i shA = _mm512_inserti64x4(_mm512_set1_epi16(4), _mm256_set1_epi16(2), 1);
    const __m512i shB = _mm512_inserti64x4(_mm512_setzero_si512(), _mm256_set1_epi16(2), 1);
    // Scale k of 16 on the 16-bit lanes 8k' .. 8k' + 7 of four 16-element groups.
    const __m512i pick0 = _mm512_set_epi16(3, 3, 3, 3, 3, 3, 3, 3, 2, 2, 2, 2, 2, 2, 2, 2,
                                           1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0);
    const __m512i four = _mm512_set1_epi16(4);

    __m256 acc[RN];
    for (int j = 0; j < RN; ++j) acc[j] = _mm256_setzero_ps();

    for (int64_t i = 0; i < nb; ++i) {
        const __m128i scales = _mm_loadu_si128((const __m128i *) x[i].scales);
        const __m256i scales_16 = _mm256_cvtepi8_epi16(scales);
        const __m512i sc16 = _mm512_castsi256_si512(scales_16);
        __m512i sumi[RN];
        for (int j = 0; j < RN; ++j) sumi[j] = _mm512_setzero_si512();
        __m512i pick = pick0;
        for (int h = 0; h < 2; ++h) {
            const __m512i ql = _mm512_loadu_si512((const void *) (x[i].ql + 64 * h));
            const __m512i qh = _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *) (x[i].qh + 32 * h)));
            const __m512i qA = _mm512_or_si512(_mm512_and_si512(ql, m15), _mm512_sllv_epi16(_mm512_and_si512(qh, mA), shA));
            const __m512i qB = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(ql, 4), m15),
                                               _mm512_srlv_epi16(_mm512_and_si512(qh, mB), shB));
            const __m512i sA = _mm512_permutexvar_epi16(pick, sc16);
            pick = _mm512_add_epi16(pick, four);
            const __m512i sB = _mm512_permutexvar_epi16(pick, sc16);
            pick = _mm512_add_epi16(pick, four);
            for (int j = 0; j < RN; ++j) {
                const int8_t * q8 = y[j][i].qs + 128 * h;
                const __m512i pA = _mm512_maddubs_epi16(qA, _mm512_loadu_si512((const void *) q8));
                const __m512i pB = _mm512_maddubs_epi16(qB, _mm512_loadu_si512((const void *) (q8 + 64)));
#if defined(__AVX512VNNI__)
                sumi[j] = _mm512_dpwssd_epi32(_mm512_dpwssd_epi32(sumi[j], pA, sA), pB, sB);
#else
                sumi[j] = _mm512_add_epi32(sumi[j], _mm512_add_epi32(_mm512_madd_epi16(pA, sA), _mm512_madd_epi16(pB, sB)));
#endif
            }
        }
        for (int j = 0; j < RN; ++j) {
            const float d = y[j][i].d * GGML_CPU_FP16_TO_FP32(x[i].d);
            __m256i s = _mm256_add_epi32(_mm512_castsi512_si256(sumi[j]), _mm512_extracti64x4_epi64(sumi[j], 1));
            s = _mm256_sub_epi32(s, offset_sums(y[j][i], scales_16));
            acc[j] = _mm256_fmadd_ps(_mm256_broadcast_ss(&d), _mm256_cvtepi32_ps(s), acc[j]);
        }
    }
    for (int j = 0; j < RN; ++j) out[j] = hsum_float_8(acc[j]);
}
#else
constexpr int group = 4;

// RN columns of one row; 256-bit: llama.cpp's own steps, the weights' unpacking shared by the columns.
template <int RN>
static inline void row(const block_q6_K * x, const block_q8_K * const * y, int64_t nb, float * out) {
    const __m256i m3 = _mm256_set1_epi8(3);
    const __m256i m15 = _mm256_set1_epi8(15);
    // get_scale_shuffle of ggml's x86 quants.c: scale 2i on bytes 0-7, 2i + 1 on bytes 8-15.
    const __m128i pick0 = _mm_set_epi8(1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0);
    const __m128i two = _mm_set1_epi8(2);

    __m256 acc[RN];
    for (int j = 0; j < RN; ++j) acc[j] = _mm256_setzero_ps();

    for (int64_t i = 0; i < nb; ++i) {
        const __m128i scales = _mm_loadu_si128((const __m128i *) x[i].scales);
        const __m256i scales_16 = _mm256_cvtepi8_epi16(scales);
        const uint8_t * q4 = x[i].ql;
        const uint8_t * qh = x[i].qh;
        __m256i sumi[RN];
        for (int j = 0; j < RN; ++j) sumi[j] = _mm256_setzero_si256();
        __m128i pick = pick0;
        for (int h = 0; h < 2; ++h) {
            const __m256i q4bits1 = _mm256_loadu_si256((const __m256i *) q4); q4 += 32;
            const __m256i q4bits2 = _mm256_loadu_si256((const __m256i *) q4); q4 += 32;
            const __m256i q4bitsH = _mm256_loadu_si256((const __m256i *) qh); qh += 32;
            const __m256i q4h_0 = _mm256_slli_epi16(_mm256_and_si256(q4bitsH, m3), 4);
            const __m256i q4h_1 = _mm256_slli_epi16(_mm256_and_si256(q4bitsH, _mm256_set1_epi8(12)), 2);
            const __m256i q4h_2 = _mm256_and_si256(q4bitsH, _mm256_set1_epi8(48));
            const __m256i q4h_3 = _mm256_srli_epi16(_mm256_and_si256(q4bitsH, _mm256_set1_epi8(-64)), 2);
            const __m256i q4_0 = _mm256_or_si256(_mm256_and_si256(q4bits1, m15), q4h_0);
            const __m256i q4_1 = _mm256_or_si256(_mm256_and_si256(q4bits2, m15), q4h_1);
            const __m256i q4_2 = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(q4bits1, 4), m15), q4h_2);
            const __m256i q4_3 = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(q4bits2, 4), m15), q4h_3);
            __m256i sc[4];
            for (int s = 0; s < 4; ++s) {
                sc[s] = _mm256_cvtepi8_epi16(_mm_shuffle_epi8(scales, pick));
                pick = _mm_add_epi8(pick, two);
            }
            for (int j = 0; j < RN; ++j) {
                const __m256i * q8 = (const __m256i *) (y[j][i].qs + 128 * h);
                const __m256i p0 = _mm256_madd_epi16(sc[0], _mm256_maddubs_epi16(q4_0, _mm256_loadu_si256(q8 + 0)));
                const __m256i p1 = _mm256_madd_epi16(sc[1], _mm256_maddubs_epi16(q4_1, _mm256_loadu_si256(q8 + 1)));
                const __m256i p2 = _mm256_madd_epi16(sc[2], _mm256_maddubs_epi16(q4_2, _mm256_loadu_si256(q8 + 2)));
                const __m256i p3 = _mm256_madd_epi16(sc[3], _mm256_maddubs_epi16(q4_3, _mm256_loadu_si256(q8 + 3)));
                sumi[j] = _mm256_add_epi32(sumi[j], _mm256_add_epi32(p0, p1));
                sumi[j] = _mm256_add_epi32(sumi[j], _mm256_add_epi32(p2, p3));
            }
        }
        for (int j = 0; j < RN; ++j) {
            const float d = y[j][i].d * GGML_CPU_FP16_TO_FP32(x[i].d);
            const __m256i s = _mm256_sub_epi32(sumi[j], offset_sums(y[j][i], scales_16));
            acc[j] = _mm256_fmadd_ps(_mm256_broadcast_ss(&d), _mm256_cvtepi32_ps(s), acc[j]);
        }
    }
    for (int j = 0; j < RN; ++j) out[j] = hsum_float_8(acc[j]);
}
#endif

template <int RN>
static void rows(int64_t i0, int64_t i1, int64_t j0, int64_t k, const block_q6_K * A, int64_t lda,
                 const block_q8_K * B, int64_t ldb, float * C, int64_t ldc) {
    const block_q8_K * y[RN];
    for (int j = 0; j < RN; ++j) y[j] = B + ldb * (j0 + j);
    float out[RN];
    for (int64_t i = i0; i < i1; ++i) {
        row<RN>(A + lda * i, y, k, out);
        for (int j = 0; j < RN; ++j) C[ldc * (j0 + j) + i] = out[j];
    }
}

// The last n columns (fewer than a group).
template <int RN>
static void rest(int64_t n, int64_t i0, int64_t i1, int64_t j0, int64_t k, const block_q6_K * A, int64_t lda,
                 const block_q8_K * B, int64_t ldb, float * C, int64_t ldc) {
    if (n == RN) rows<RN>(i0, i1, j0, k, A, lda, B, ldb, C, ldc);
    else if constexpr (RN > 1) rest<RN - 1>(n, i0, i1, j0, k, A, lda, B, ldb, C, ldc);
}

}  // namespace svc_q6k

// C = A·B for Q6_K rows of A (m of them, k blocks each) and n Q8_K columns of B: this thread's share of the rows
// (ith of nth), in tiles of 16 rows, each tile's rows against a group of columns at a time. Faster than
// llama.cpp's per-column products for any n (prompts too), so it takes every product it is given.
static void svc_q6_K_cols(int ith, int nth, int64_t m, int64_t n, int64_t k, const void * A, int64_t lda,
                          const void * B, int64_t ldb, float * C, int64_t ldc) {
    const int64_t duty = (m + nth - 1) / nth;
    const int64_t i0 = duty * ith;
    const int64_t i1 = i0 + duty < m ? i0 + duty : m;
    const block_q6_K * a = (const block_q6_K *) A;
    const block_q8_K * b = (const block_q8_K *) B;
    // A tile's blocks stay in the cache between the groups of columns.
    constexpr int64_t RB = 16;
    constexpr int G = svc_q6k::group;
    for (int64_t r = i0; r < i1; r += RB) {
        const int64_t r1 = r + RB < i1 ? r + RB : i1;
        int64_t j = 0;
        for (; j + G <= n; j += G) svc_q6k::rows<G>(r, r1, j, k, a, lda, b, ldb, C, ldc);
        if (j < n) svc_q6k::rest<G - 1>(n - j, r, r1, j, k, a, lda, b, ldb, C, ldc);
    }
}

#endif
