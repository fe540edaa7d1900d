//! [`Simd`] on AVX2 with FMA: 8 lanes, tails by `vmaskmovps` (lanes whose mask word has its top
//! bit set), `exp`'s power of two built in the exponent field since AVX2 has no `vscalefps`.

use super::Simd;
use std::arch::x86_64::*;

/// 8 lanes, AVX2 and FMA.
pub(in crate::encoder) struct Avx2;

/// Lanes `0..n` of 8 as a `vmaskmovps` mask: all ones where `n > lane`.
#[inline(always)]
unsafe fn first_lanes(n: usize) -> __m256i {
    let n = _mm256_set1_epi32(n.min(8) as i32);
    _mm256_cmpgt_epi32(n, _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7))
}

/// The lanes of `a` combined by `f`: the upper half onto the lower, then pairs, then one.
#[inline(always)]
unsafe fn reduce(a: __m256, f: impl Fn(__m128, __m128) -> __m128) -> f32 {
    let s = f(_mm256_castps256_ps128(a), _mm256_extractf128_ps::<1>(a));
    let s = f(s, _mm_movehl_ps(s, s));
    _mm_cvtss_f32(f(s, _mm_movehdup_ps(s)))
}

impl Simd for Avx2 {
    type V = __m256;
    const LANES: usize = 8;
    #[inline(always)]
    unsafe fn zero() -> __m256 {
        _mm256_setzero_ps()
    }
    #[inline(always)]
    unsafe fn splat(x: f32) -> __m256 {
        _mm256_set1_ps(x)
    }
    #[inline(always)]
    unsafe fn load(p: *const f32) -> __m256 {
        _mm256_loadu_ps(p)
    }
    /// Masked-off lanes read as zero and do not fault.
    #[inline(always)]
    unsafe fn load_first(p: *const f32, n: usize) -> __m256 {
        if n >= 8 {
            _mm256_loadu_ps(p)
        } else {
            _mm256_maskload_ps(p, first_lanes(n))
        }
    }
    #[inline(always)]
    unsafe fn store(p: *mut f32, v: __m256) {
        _mm256_storeu_ps(p, v)
    }
    #[inline(always)]
    unsafe fn store_first(p: *mut f32, n: usize, v: __m256) {
        if n >= 8 {
            _mm256_storeu_ps(p, v)
        } else {
            _mm256_maskstore_ps(p, first_lanes(n), v)
        }
    }
    #[inline(always)]
    unsafe fn add(a: __m256, b: __m256) -> __m256 {
        _mm256_add_ps(a, b)
    }
    #[inline(always)]
    unsafe fn sub(a: __m256, b: __m256) -> __m256 {
        _mm256_sub_ps(a, b)
    }
    #[inline(always)]
    unsafe fn mul(a: __m256, b: __m256) -> __m256 {
        _mm256_mul_ps(a, b)
    }
    #[inline(always)]
    unsafe fn max(a: __m256, b: __m256) -> __m256 {
        _mm256_max_ps(a, b)
    }
    #[inline(always)]
    unsafe fn min(a: __m256, b: __m256) -> __m256 {
        _mm256_min_ps(a, b)
    }
    #[inline(always)]
    unsafe fn fmadd(a: __m256, b: __m256, c: __m256) -> __m256 {
        _mm256_fmadd_ps(a, b, c)
    }
    #[inline(always)]
    unsafe fn fnmadd(a: __m256, b: __m256, c: __m256) -> __m256 {
        _mm256_fnmadd_ps(a, b, c)
    }
    /// `vrcpps` (relative error under 1.5 x 2^-12), then `t (2 - a t)`.
    #[inline(always)]
    unsafe fn recip(a: __m256) -> __m256 {
        let t = _mm256_rcp_ps(a);
        _mm256_mul_ps(t, _mm256_fnmadd_ps(a, t, _mm256_set1_ps(2.0)))
    }
    #[inline(always)]
    unsafe fn round(a: __m256) -> __m256 {
        _mm256_round_ps::<{ _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC }>(a)
    }
    /// `2^n` as the float whose exponent field is `n + 127`.
    #[inline(always)]
    unsafe fn scale_pow2(a: __m256, n: __m256) -> __m256 {
        let biased = _mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127));
        _mm256_mul_ps(a, _mm256_castsi256_ps(_mm256_slli_epi32::<23>(biased)))
    }
    #[inline(always)]
    unsafe fn zero_unless_above(a: __m256, x: __m256, limit: f32) -> __m256 {
        _mm256_and_ps(a, _mm256_cmp_ps::<_CMP_GT_OQ>(x, _mm256_set1_ps(limit)))
    }
    #[inline(always)]
    unsafe fn reduce_add(a: __m256) -> f32 {
        reduce(a, |a, b| _mm_add_ps(a, b))
    }
    #[inline(always)]
    unsafe fn reduce_max(a: __m256) -> f32 {
        reduce(a, |a, b| _mm_max_ps(a, b))
    }
    /// 8 x 8 in three rounds: rows interleaved pairwise by single lanes (`vunpck[lh]ps`), then
    /// by pairs of lanes (`vshufps`), then the 128-bit halves exchanged (`vperm2f128`).
    #[inline(always)]
    unsafe fn transpose(rows: &mut [__m256]) {
        let r: &mut [__m256; 8] = rows.try_into().expect("8 rows");
        let t: [__m256; 8] = std::array::from_fn(|i| {
            let (a, b) = (r[i / 2 * 2], r[i / 2 * 2 + 1]);
            if i % 2 == 0 {
                _mm256_unpacklo_ps(a, b)
            } else {
                _mm256_unpackhi_ps(a, b)
            }
        });
        // From pairs (t[4g + k], t[4g + k + 2]): k = 0 holds lanes 0-1 of each, k = 1 lanes 2-3.
        let u: [__m256; 8] = std::array::from_fn(|i| {
            let (g, k, hi) = (i / 4, i % 4 / 2, i % 2 == 1);
            let (a, b) = (t[4 * g + k], t[4 * g + k + 2]);
            if hi {
                _mm256_shuffle_ps::<0xee>(a, b)
            } else {
                _mm256_shuffle_ps::<0x44>(a, b)
            }
        });
        *r = std::array::from_fn(|i| {
            let (a, b) = (u[i % 4], u[i % 4 + 4]);
            if i < 4 {
                _mm256_permute2f128_ps::<0x20>(a, b)
            } else {
                _mm256_permute2f128_ps::<0x31>(a, b)
            }
        });
    }
}
