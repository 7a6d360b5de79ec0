// svc-desktop's own code in llama.cpp's CPU backend (resources/engine-native; included by the x86 repack.cpp
// through repack-q4k-vnni.patch, which calls it at the start of ggml_gemv_q4_K_8x8_q8_K and of
// ggml_gemm_q4_K_8x8_q8_K).
//
// Products of repacked Q4_K weights (block_q4_Kx8: 8 columns interleaved 8 bytes at a time) with tokens, with
// VNNI's vpdpbusd: a 64-byte load holds a block's 8 columns' 8 bytes, a row's 8 q8 values facing them are one
// broadcast, and vpdpbusd adds each column's products into its own lanes. llama.cpp's loops spend most of their
// work arranging bytes for maddubs, the rows' q8 values shuffled again for each pair of column blocks. The
// integer sums are the same (exact), scaled and added into the float accumulators in the same order as
// llama.cpp's loops, so every result is the same to the bit as theirs, and the gemv's as the gemm's (a token's
// logits the same in a step of any shape). On a Zen 5 core 1.5 to 3.3 times as fast (docs/performance.md of
// svc-desktop, section 50). Two forms: AVX512-VNNI (ggml's zen4, icelake, cascadelake, cooperlake and
// sapphirerapids libraries) and AVX-VNNI's 256-bit vpdpbusd (alderlake: Intel from Alder Lake, without
// AVX-512). Elsewhere both functions do nothing and llama.cpp's loops take every product.
#pragma once

#include <cstdint>
#include <cstring>

#if defined(__F16C__) && defined(__FMA__) && defined(__AVX512BW__) && defined(__AVX512DQ__) && defined(__AVX512VNNI__) && defined(__AVX512VL__)
#define SVC_Q4K_VNNI 512
#elif defined(__F16C__) && defined(__FMA__) && defined(__AVX2__) && defined(__AVXVNNI__)
#define SVC_Q4K_VNNI 256
#endif

#if defined(SVC_Q4K_VNNI)
#include <immintrin.h>

namespace svc_q4k {

// 8 F16 values as floats (exact, as llama.cpp's GGML_F32Cx8_LOAD).
static inline __m256 load_f16x8(const ggml_half * x) { return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *) x)); }

// A sub block's 6-bit scales and mins of the 8 columns from its 12 packed bytes: scales in bytes 0-7, mins in
// 8-15, as llama.cpp's loops unpack them (kmask1 to 3 of repack.cpp).
static inline __m128i scales_and_mins(const uint8_t * packed) {
    constexpr uint32_t kmask1 = 0x3f3f3f3f, kmask2 = 0x0f0f0f0f, kmask3 = 0x03030303;
    uint32_t utmp[4];
    memcpy(utmp, packed, 12);
    utmp[3] = ((utmp[2] >> 4) & kmask2) | (((utmp[1] >> 6) & kmask3) << 4);
    const uint32_t uaux = utmp[1] & kmask1;
    utmp[1] = (utmp[2] & kmask2) | (((utmp[0] >> 6) & kmask3) << 4);
    utmp[2] = uaux;
    utmp[0] &= kmask1;
    return _mm_set_epi32(utmp[3], utmp[2], utmp[1], utmp[0]);
}

// The mins of sub blocks 2sb and 2sb + 1 of the 8 columns, as 16-bit pairs (first, second) for madd.
static inline __m256i mins_pairs(__m128i mins_and_scales_0, __m128i mins_and_scales_1) {
    return _mm256_cvtepu8_epi16(_mm_unpacklo_epi8(_mm_shuffle_epi32(mins_and_scales_0, 78), _mm_shuffle_epi32(mins_and_scales_1, 78)));
}

// A row's bsums of the two sub blocks (each the sum of two of 16) as one 16-bit pair, against mins_pairs.
static inline __m256i bsums_pair(const int16_t * bsums) {
    const int32_t bsum_lo = (int32_t) bsums[0] + bsums[1];
    const int32_t bsum_hi = (int32_t) bsums[2] + bsums[3];
    return _mm256_set1_epi32((int32_t) (((uint32_t) (uint16_t) bsum_hi << 16) | (uint16_t) bsum_lo));
}

#if SVC_Q4K_VNNI == 512
// Each 128-bit lane of a row's packed sums holds columns c, c+1 of the first sub block (two halves each), then
// of the second; the scales laid out to match, as 16-bit pairs.
static inline __m512i scales_512(__m128i mins_and_scales_0, __m128i mins_and_scales_1) {
    const __m512i scale16 = _mm512_cvtepu8_epi32(_mm_unpacklo_epi16(mins_and_scales_0, mins_and_scales_1));
    return _mm512_or_si512(scale16, _mm512_slli_epi32(scale16, 16));
}

// A pair of sub blocks of a block of 8 columns (qs: its 256 bytes), nibbles split once for every row that meets
// it: one 64-byte vector holds the 8 columns' bytes k*8..k*8+7 of their 32 (low nibbles the first sub block's
// values, high the second's).
struct Block8 {
    __m512i lo[4], hi[4], scales;
    Block8(const uint8_t * qs, __m128i mins_and_scales_0, __m128i mins_and_scales_1) {
        const __m512i m4b512 = _mm512_set1_epi8(0x0F);
        for (int k = 0; k < 4; k++) {
            const __m512i raw = _mm512_loadu_si512((const void *) (qs + k * 64));
            lo[k] = _mm512_and_si512(raw, m4b512);
            hi[k] = _mm512_and_si512(_mm512_srli_epi16(raw, 4), m4b512);
        }
        scales = scales_512(mins_and_scales_0, mins_and_scales_1);
    }
    // A row's scaled sums of the 8 columns, its 8 q8 values k of the first sub block at qlo + k * stride and of
    // the second at qhi + k * stride, each broadcast against a vector.
    __m256i sums(const int8_t * qlo, const int8_t * qhi, int stride) const {
        // Lanes 0,1 of each 128-bit lane (a column's sum is in both halves): the block's 8 columns in order.
        const __m512i cols_idx = _mm512_setr_epi32(0, 1, 4, 5, 8, 9, 12, 13, 0, 0, 0, 0, 0, 0, 0, 0);
        __m512i slo = _mm512_setzero_si512(), shi = _mm512_setzero_si512();
        for (int k = 0; k < 4; k++) {
            int64_t q_lo, q_hi;
            memcpy(&q_lo, qlo + k * stride, 8);
            memcpy(&q_hi, qhi + k * stride, 8);
            slo = _mm512_dpbusd_epi32(slo, lo[k], _mm512_set1_epi64(q_lo));
            shi = _mm512_dpbusd_epi32(shi, hi[k], _mm512_set1_epi64(q_hi));
        }
        __m512i v = _mm512_madd_epi16(_mm512_packs_epi32(slo, shi), scales);
        v = _mm512_add_epi32(v, _mm512_shuffle_epi32(v, (_MM_PERM_ENUM) 78));
        return _mm512_castsi512_si256(_mm512_permutexvar_epi32(cols_idx, v));
    }
};
#else
// The same with AVX-VNNI's 256-bit vpdpbusd: columns 0-3 (a) and 4-7 (b) of the block in two vectors.
struct Block8 {
    __m256i lo_a[4], hi_a[4], lo_b[4], hi_b[4], scales_a, scales_b;
    Block8(const uint8_t * qs, __m128i mins_and_scales_0, __m128i mins_and_scales_1) {
        const __m256i m4b256 = _mm256_set1_epi8(0x0F);
        for (int k = 0; k < 4; k++) {
            const __m256i raw_a = _mm256_loadu_si256((const __m256i *) (qs + k * 64));
            const __m256i raw_b = _mm256_loadu_si256((const __m256i *) (qs + k * 64 + 32));
            lo_a[k] = _mm256_and_si256(raw_a, m4b256);
            hi_a[k] = _mm256_and_si256(_mm256_srli_epi16(raw_a, 4), m4b256);
            lo_b[k] = _mm256_and_si256(raw_b, m4b256);
            hi_b[k] = _mm256_and_si256(_mm256_srli_epi16(raw_b, 4), m4b256);
        }
        // Each 128-bit lane of a row's packed sums holds columns c, c+1 of the first sub block (two halves
        // each), then of the second; the scales laid out to match, as 16-bit pairs.
        const __m128i scale8 = _mm_unpacklo_epi16(mins_and_scales_0, mins_and_scales_1);
        const __m256i scale16_a = _mm256_cvtepu8_epi32(scale8);
        const __m256i scale16_b = _mm256_cvtepu8_epi32(_mm_srli_si128(scale8, 8));
        scales_a = _mm256_or_si256(scale16_a, _mm256_slli_epi32(scale16_a, 16));
        scales_b = _mm256_or_si256(scale16_b, _mm256_slli_epi32(scale16_b, 16));
    }
    __m256i sums(const int8_t * qlo, const int8_t * qhi, int stride) const {
        // Columns 0,1,4,5 | 2,3,6,7 after the unpack below, put back in order.
        const __m256i cols_order = _mm256_setr_epi32(0, 1, 4, 5, 2, 3, 6, 7);
        __m256i slo_a = _mm256_setzero_si256(), shi_a = _mm256_setzero_si256();
        __m256i slo_b = _mm256_setzero_si256(), shi_b = _mm256_setzero_si256();
        for (int k = 0; k < 4; k++) {
            int64_t q_lo, q_hi;
            memcpy(&q_lo, qlo + k * stride, 8);
            memcpy(&q_hi, qhi + k * stride, 8);
            const __m256i alo = _mm256_set1_epi64x(q_lo);
            const __m256i ahi = _mm256_set1_epi64x(q_hi);
            slo_a = _mm256_dpbusd_avx_epi32(slo_a, lo_a[k], alo);
            slo_b = _mm256_dpbusd_avx_epi32(slo_b, lo_b[k], alo);
            shi_a = _mm256_dpbusd_avx_epi32(shi_a, hi_a[k], ahi);
            shi_b = _mm256_dpbusd_avx_epi32(shi_b, hi_b[k], ahi);
        }
        __m256i v_a = _mm256_madd_epi16(_mm256_packs_epi32(slo_a, shi_a), scales_a);
        __m256i v_b = _mm256_madd_epi16(_mm256_packs_epi32(slo_b, shi_b), scales_b);
        v_a = _mm256_add_epi32(v_a, _mm256_shuffle_epi32(v_a, 78));
        v_b = _mm256_add_epi32(v_b, _mm256_shuffle_epi32(v_b, 78));
        return _mm256_permutevar8x32_epi32(_mm256_unpacklo_epi64(v_a, v_b), cols_order);
    }
};
#endif

// One token (the gemv): a block of 8 columns at a time, its weights read one block after another (with two
// blocks at a time, a model too large for the caches ran at half the speed).
static inline void gemv(int n, float * s, const void * vx, const void * vy, int nr, int nc) {
    const int64_t nb = n / QK_K;
    const block_q4_Kx8 * b_ptr_start = (const block_q4_Kx8 *) vx;
    const block_q8_K * a_ptr_start = (const block_q8_K *) vy;
    for (int64_t y = 0; y < nr; y++) {
        const block_q8_K * a_ptr = a_ptr_start + (y * nb);
        for (int64_t x = 0; x < nc / 8; x++) {
            const block_q4_Kx8 * b_ptr = b_ptr_start + (x * nb);
            __m256 acc_row = _mm256_setzero_ps();
            __m256 acc_min_row = _mm256_setzero_ps();
            for (int64_t b = 0; b < nb; b++) {
                const __m256 row_scale = _mm256_set1_ps(a_ptr[b].d);
                const __m256 col_scale_f32 = load_f16x8(b_ptr[b].d);
                const __m256 col_dmin_f32 = load_f16x8(b_ptr[b].dmin);
                for (int sb = 0; sb < QK_K / 64; sb++) {
                    const __m128i mins_and_scales_0 = scales_and_mins(b_ptr[b].scales + 24 * sb);
                    const __m128i mins_and_scales_1 = scales_and_mins(b_ptr[b].scales + 12 + 24 * sb);
                    const Block8 w(b_ptr[b].qs + sb * 256, mins_and_scales_0, mins_and_scales_1);
                    const int8_t * q8 = a_ptr[b].qs + sb * 64;
                    const __m256i iacc_sb = w.sums(q8, q8 + 32, 8);
                    const __m256i iacc_min_sb = _mm256_madd_epi16(bsums_pair(a_ptr[b].bsums + 4 * sb), mins_pairs(mins_and_scales_0, mins_and_scales_1));
                    acc_row = _mm256_fmadd_ps(_mm256_cvtepi32_ps(iacc_sb), _mm256_mul_ps(col_scale_f32, row_scale), acc_row);
                    acc_min_row = _mm256_fmadd_ps(_mm256_cvtepi32_ps(iacc_min_sb), _mm256_mul_ps(col_dmin_f32, row_scale), acc_min_row);
                }
            }
            _mm256_storeu_ps(s + (y * nr + x * 8), _mm256_sub_ps(acc_row, acc_min_row));
        }
    }
}

// Rows of 4 tokens each (block_q8_Kx4), blocks 0 to x_end: a block of 8 columns at a time, its weights read one
// block after another as the gemv reads them, up to 4 groups of 4 rows sharing each load. With AVX-512, fewer
// than 12 rows (a step of several answers, an answer's checked guesses); with AVX-VNNI, every row.
static inline void gemm_rows(int64_t nb, float * s, size_t bs, const block_q4_Kx8 * b_ptr_start, const block_q8_Kx4 * a_ptr_start, int nr, int64_t x_end) {
    for (int64_t y = 0; y < nr / 4; y += 4) {
        const int groups = nr / 4 - y < 4 ? (int) (nr / 4 - y) : 4;
        for (int64_t x = 0; x < x_end; x++) {
            const block_q4_Kx8 * b_ptr = b_ptr_start + (x * nb);
            __m256 acc_rows[16];
            __m256 acc_min_rows[16];
            for (int i = 0; i < 16; i++) {
                acc_rows[i] = _mm256_setzero_ps();
                acc_min_rows[i] = _mm256_setzero_ps();
            }
            for (int64_t b = 0; b < nb; b++) {
                const __m256 col_scale_f32 = load_f16x8(b_ptr[b].d);
                const __m256 col_dmin_f32 = load_f16x8(b_ptr[b].dmin);
                for (int sb = 0; sb < QK_K / 64; sb++) {
                    const __m128i mins_and_scales_0 = scales_and_mins(b_ptr[b].scales + 24 * sb);
                    const __m128i mins_and_scales_1 = scales_and_mins(b_ptr[b].scales + 12 + 24 * sb);
                    const __m256i mins_01 = mins_pairs(mins_and_scales_0, mins_and_scales_1);
                    const Block8 w(b_ptr[b].qs + sb * 256, mins_and_scales_0, mins_and_scales_1);
                    for (int g = 0; g < groups; g++) {
                        const block_q8_Kx4 * a_ptr = a_ptr_start + ((y + g) * nb);
                        const int8_t * q8 = a_ptr[b].qs + sb * 256;
                        for (int r = 0; r < 4; r++) {
                            const __m256i iacc_row = w.sums(q8 + r * 8, q8 + 128 + r * 8, 32);
                            const __m256i iacc_row_min = _mm256_madd_epi16(bsums_pair(a_ptr[b].bsums + 16 * sb + 4 * r), mins_01);
                            const __m256 row_scale = _mm256_set1_ps(a_ptr[b].d[r]);
                            acc_rows[g * 4 + r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(iacc_row), _mm256_mul_ps(col_scale_f32, row_scale), acc_rows[g * 4 + r]);
                            acc_min_rows[g * 4 + r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(iacc_row_min), _mm256_mul_ps(col_dmin_f32, row_scale), acc_min_rows[g * 4 + r]);
                        }
                    }
                }
            }
            for (int i = 0; i < 4 * groups; i++) {
                _mm256_storeu_ps((float *) (s + ((y * 4 + i) * bs + x * 8)), _mm256_sub_ps(acc_rows[i], acc_min_rows[i]));
            }
        }
    }
}

#if SVC_Q4K_VNNI == 512
// 12 rows and more (a prompt): two blocks of 8 columns at a time, up to 4 groups of 4 rows sharing each load of
// the weights. Blocks 0 to x_end (even). Written out rather than with two Block8: their sums then take a
// cross-lane permute each, not one for both, and prompts ran 6 to 9% slower (bench/q4k-vnni-check.cpp).
static inline void gemm_many_rows(int64_t nb, float * s, size_t bs, const block_q4_Kx8 * b_ptr_start, const block_q8_Kx4 * a_ptr_start, int nr, int64_t x_end) {
    const __m512i m4b512 = _mm512_set1_epi8(0x0F);
    // Lanes 0,1 of each 128-bit lane of two vectors (a column's sum is in both halves): columns 0-7, then 8-15.
    const __m512i cols_idx = _mm512_setr_epi32(0, 1, 4, 5, 8, 9, 12, 13, 16, 17, 20, 21, 24, 25, 28, 29);
    for (int64_t y = 0; y < nr / 4; y += 4) {
        const int groups = nr / 4 - y < 4 ? (int) (nr / 4 - y) : 4;
        for (int64_t x = 0; x < x_end; x += 2) {
            const block_q4_Kx8 * b_ptr_0 = b_ptr_start + ((x) * nb);
            const block_q4_Kx8 * b_ptr_1 = b_ptr_start + ((x + 1) * nb);
            __m512 acc_rows[16];
            __m512 acc_min_rows[16];
            for (int i = 0; i < 16; i++) {
                acc_rows[i] = _mm512_setzero_ps();
                acc_min_rows[i] = _mm512_setzero_ps();
            }
            for (int64_t b = 0; b < nb; b++) {
                const __m512 col_scale_f32 = _mm512_insertf32x8(_mm512_castps256_ps512(load_f16x8(b_ptr_0[b].d)), load_f16x8(b_ptr_1[b].d), 1);
                const __m512 col_dmin_f32 = _mm512_insertf32x8(_mm512_castps256_ps512(load_f16x8(b_ptr_0[b].dmin)), load_f16x8(b_ptr_1[b].dmin), 1);
                for (int sb = 0; sb < QK_K / 64; sb++) {
                    const __m128i ms_00 = scales_and_mins(b_ptr_0[b].scales + 24 * sb);
                    const __m128i ms_01 = scales_and_mins(b_ptr_0[b].scales + 12 + 24 * sb);
                    const __m128i ms_10 = scales_and_mins(b_ptr_1[b].scales + 24 * sb);
                    const __m128i ms_11 = scales_and_mins(b_ptr_1[b].scales + 12 + 24 * sb);
                    const __m512i mins_01 = _mm512_inserti64x4(_mm512_castsi256_si512(mins_pairs(ms_00, ms_01)), mins_pairs(ms_10, ms_11), 1);
                    const __m512i scales_0 = scales_512(ms_00, ms_01);
                    const __m512i scales_1 = scales_512(ms_10, ms_11);
                    // A column's 8 bytes k*8..k*8+7 of the 32: low nibbles the first sub block's values, high the second's.
                    __m512i lo_0[4], hi_0[4], lo_1[4], hi_1[4];
                    for (int k = 0; k < 4; k++) {
                        const __m512i raw_0 = _mm512_loadu_si512((const void *) (b_ptr_0[b].qs + sb * 256 + k * 64));
                        const __m512i raw_1 = _mm512_loadu_si512((const void *) (b_ptr_1[b].qs + sb * 256 + k * 64));
                        lo_0[k] = _mm512_and_si512(raw_0, m4b512);
                        hi_0[k] = _mm512_and_si512(_mm512_srli_epi16(raw_0, 4), m4b512);
                        lo_1[k] = _mm512_and_si512(raw_1, m4b512);
                        hi_1[k] = _mm512_and_si512(_mm512_srli_epi16(raw_1, 4), m4b512);
                    }
                    for (int g = 0; g < groups; g++) {
                        const block_q8_Kx4 * a_ptr = a_ptr_start + ((y + g) * nb);
                        const int8_t * q8 = a_ptr[b].qs + sb * 256;
                        for (int r = 0; r < 4; r++) {
                            __m512i slo_0 = _mm512_setzero_si512(), shi_0 = _mm512_setzero_si512();
                            __m512i slo_1 = _mm512_setzero_si512(), shi_1 = _mm512_setzero_si512();
                            for (int k = 0; k < 4; k++) {
                                int64_t qlo, qhi;
                                memcpy(&qlo, q8 + k * 32 + r * 8, 8);
                                memcpy(&qhi, q8 + 128 + k * 32 + r * 8, 8);
                                const __m512i alo = _mm512_set1_epi64(qlo);
                                const __m512i ahi = _mm512_set1_epi64(qhi);
                                slo_0 = _mm512_dpbusd_epi32(slo_0, lo_0[k], alo);
                                slo_1 = _mm512_dpbusd_epi32(slo_1, lo_1[k], alo);
                                shi_0 = _mm512_dpbusd_epi32(shi_0, hi_0[k], ahi);
                                shi_1 = _mm512_dpbusd_epi32(shi_1, hi_1[k], ahi);
                            }
                            __m512i v_0 = _mm512_madd_epi16(_mm512_packs_epi32(slo_0, shi_0), scales_0);
                            __m512i v_1 = _mm512_madd_epi16(_mm512_packs_epi32(slo_1, shi_1), scales_1);
                            v_0 = _mm512_add_epi32(v_0, _mm512_shuffle_epi32(v_0, (_MM_PERM_ENUM) 78));
                            v_1 = _mm512_add_epi32(v_1, _mm512_shuffle_epi32(v_1, (_MM_PERM_ENUM) 78));
                            const __m512i iacc_row = _mm512_permutex2var_epi32(v_0, cols_idx, v_1);
                            const __m512i bsums = _mm512_castsi256_si512(bsums_pair(a_ptr[b].bsums + 16 * sb + 4 * r));
                            const __m512i iacc_row_min = _mm512_madd_epi16(_mm512_inserti64x4(bsums, _mm512_castsi512_si256(bsums), 1), mins_01);
                            const __m512 row_scale = _mm512_set1_ps(a_ptr[b].d[r]);
                            acc_rows[g * 4 + r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(iacc_row), _mm512_mul_ps(col_scale_f32, row_scale), acc_rows[g * 4 + r]);
                            acc_min_rows[g * 4 + r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(iacc_row_min), _mm512_mul_ps(col_dmin_f32, row_scale), acc_min_rows[g * 4 + r]);
                        }
                    }
                }
            }
            for (int i = 0; i < 4 * groups; i++) {
                _mm512_storeu_ps((float *) (s + ((y * 4 + i) * bs + x * 8)), _mm512_sub_ps(acc_rows[i], acc_min_rows[i]));
            }
        }
    }
}

// Every row, for blocks 0 to (nc - nc % 16) / 8; llama.cpp's AVX-512 loops would take the even blocks, and its
// AVX2 loops take the last odd one (the xstart of its gemm).
static inline int64_t gemm(int n, float * s, size_t bs, const void * vx, const void * vy, int nr, int nc) {
    const int64_t nb = n / QK_K;
    const int64_t x_end = (nc - nc % 16) / 8;
    if (nr < 12) gemm_rows(nb, s, bs, (const block_q4_Kx8 *) vx, (const block_q8_Kx4 *) vy, nr, x_end);
    else gemm_many_rows(nb, s, bs, (const block_q4_Kx8 *) vx, (const block_q8_Kx4 *) vy, nr, x_end);
    return nr / 4;
}
#else
// Every row and block.
static inline int64_t gemm(int n, float * s, size_t bs, const void * vx, const void * vy, int nr, int nc) {
    gemm_rows(n / QK_K, s, bs, (const block_q4_Kx8 *) vx, (const block_q8_Kx4 *) vy, nr, nc / 8);
    return nr / 4;
}
#endif

}  // namespace svc_q4k
#endif

// The gemv's blocks of 8 columns done here (all of them, or none without VNNI); llama.cpp's loop takes the rest.
static inline int64_t svc_gemv_q4_K_8x8_vnni(int n, float * s, const void * vx, const void * vy, int nr, int nc) {
#if defined(SVC_Q4K_VNNI)
    svc_q4k::gemv(n, s, vx, vy, nr, nc);
    return nc / 8;
#else
    (void) n, (void) s, (void) vx, (void) vy, (void) nr, (void) nc;
    return 0;
#endif
}

// The gemm's groups of 4 rows done here (all of them, or none without VNNI), for llama.cpp's `y`.
static inline int64_t svc_gemm_q4_K_8x8_vnni(int n, float * s, size_t bs, const void * vx, const void * vy, int nr, int nc) {
#if defined(SVC_Q4K_VNNI)
    return svc_q4k::gemm(n, s, bs, vx, vy, nr, nc);
#else
    (void) n, (void) s, (void) bs, (void) vx, (void) vy, (void) nr, (void) nc;
    return 0;
#endif
}
