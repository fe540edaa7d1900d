//! [`Simd`] on AVX-512F: 16 lanes, tails by lane masks. Each method is one intrinsic (or two),
//! the same the kernels called directly before they were written over the trait; checked
//! against Intel's intrinsic descriptions where noted.

use super::Simd;
use std::arch::x86_64::*;

/// 16 lanes, AVX-512F.
pub(in crate::encoder) struct Avx512;

/// Lanes `0..n` of 16 (all of them from 16 on): bit `i` of a mask selects lane `i`.
#[inline(always)]
fn first_lanes(n: usize) -> __mmask16 {
    if n >= 16 {
        !0
    } else {
        (1u16 << n) - 1
    }
}

impl Simd for Avx512 {
    type V = __m512;
    const LANES: usize = 16;
    #[inline(always)]
    unsafe fn zero() -> __m512 {
        _mm512_setzero_ps()
    }
    #[inline(always)]
    unsafe fn splat(x: f32) -> __m512 {
        _mm512_set1_ps(x)
    }
    #[inline(always)]
    unsafe fn load(p: *const f32) -> __m512 {
        _mm512_loadu_ps(p)
    }
    /// `vmovups` with zero-masking (`maskz`: unselected lanes zeroed); masked-off lanes are
    /// not read and do not fault. A whole vector is loaded unmasked, as [`Self::store_first`]
    /// stores it.
    #[inline(always)]
    unsafe fn load_first(p: *const f32, n: usize) -> __m512 {
        if n >= 16 {
            _mm512_loadu_ps(p)
        } else {
            _mm512_maskz_loadu_ps(first_lanes(n), p)
        }
    }
    #[inline(always)]
    unsafe fn store(p: *mut f32, v: __m512) {
        _mm512_storeu_ps(p, v)
    }
    /// Writes only the lanes whose mask bit is set (`mask_storeu`: (address, mask, value)); a
    /// whole vector unmasked. A masked store does not forward to a later load of the same
    /// address, which waits for it to reach L1: the epilogue's loads of the sums a tile had
    /// just stored took a fifth of its time so on a Zen 5 (eval/encode/README.md).
    #[inline(always)]
    unsafe fn store_first(p: *mut f32, n: usize, v: __m512) {
        if n >= 16 {
            _mm512_storeu_ps(p, v)
        } else {
            _mm512_mask_storeu_ps(p, first_lanes(n), v)
        }
    }
    #[inline(always)]
    unsafe fn add(a: __m512, b: __m512) -> __m512 {
        _mm512_add_ps(a, b)
    }
    #[inline(always)]
    unsafe fn sub(a: __m512, b: __m512) -> __m512 {
        _mm512_sub_ps(a, b)
    }
    #[inline(always)]
    unsafe fn mul(a: __m512, b: __m512) -> __m512 {
        _mm512_mul_ps(a, b)
    }
    /// `vmaxps`: the second operand where either is NaN.
    #[inline(always)]
    unsafe fn max(a: __m512, b: __m512) -> __m512 {
        _mm512_max_ps(a, b)
    }
    #[inline(always)]
    unsafe fn min(a: __m512, b: __m512) -> __m512 {
        _mm512_min_ps(a, b)
    }
    #[inline(always)]
    unsafe fn fmadd(a: __m512, b: __m512, c: __m512) -> __m512 {
        _mm512_fmadd_ps(a, b, c)
    }
    /// `-(a * b) + c`.
    #[inline(always)]
    unsafe fn fnmadd(a: __m512, b: __m512, c: __m512) -> __m512 {
        _mm512_fnmadd_ps(a, b, c)
    }
    /// `vrcp14ps` (relative error under 2^-14), then `t (2 - a t)`.
    #[inline(always)]
    unsafe fn recip(a: __m512) -> __m512 {
        let t = _mm512_rcp14_ps(a);
        _mm512_mul_ps(t, _mm512_fnmadd_ps(a, t, _mm512_set1_ps(2.0)))
    }
    /// `vrndscaleps` with imm8 = 8: scale bits 7:4 zero (round to an integer), bits 1:0 zero
    /// (to nearest even), bit 3 set (no precision exception).
    #[inline(always)]
    unsafe fn round(a: __m512) -> __m512 {
        _mm512_roundscale_ps::<{ _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC }>(a)
    }
    /// `vscalefps`: `a * 2^floor(n)`.
    #[inline(always)]
    unsafe fn scale_pow2(a: __m512, n: __m512) -> __m512 {
        _mm512_scalef_ps(a, n)
    }
    /// Greater-than, ordered (false for NaN), then a zero-masked move.
    #[inline(always)]
    unsafe fn zero_unless_above(a: __m512, x: __m512, limit: f32) -> __m512 {
        let live = _mm512_cmp_ps_mask::<_CMP_GT_OQ>(x, _mm512_set1_ps(limit));
        _mm512_maskz_mov_ps(live, a)
    }
    /// A sequence intrinsic: the 16 lanes summed by halving (8 + 8, 4 + 4, ...), the order
    /// the attention's softmax summed in before it was generic.
    #[inline(always)]
    unsafe fn reduce_add(a: __m512) -> f32 {
        _mm512_reduce_add_ps(a)
    }
    #[inline(always)]
    unsafe fn reduce_max(a: __m512) -> f32 {
        _mm512_reduce_max_ps(a)
    }
    /// 16 x 16: rows interleaved pairwise by single lanes, then by pairs of lanes, then by
    /// quarters of the vector twice (the attention's key transpose before it was generic).
    #[inline(always)]
    unsafe fn transpose(rows: &mut [__m512]) {
        const LANES: usize = 16;
        let rows: &mut [__m512; LANES] = rows.try_into().expect("16 rows");
        let mut a = [_mm512_setzero_ps(); LANES];
        for i in (0..LANES).step_by(2) {
            a[i] = _mm512_unpacklo_ps(rows[i], rows[i + 1]);
            a[i + 1] = _mm512_unpackhi_ps(rows[i], rows[i + 1]);
        }
        let mut b = [_mm512_setzero_ps(); LANES];
        for g in (0..LANES).step_by(4) {
            for k in 0..2 {
                let (lo, hi) = (_mm512_castps_pd(a[g + k]), _mm512_castps_pd(a[g + k + 2]));
                b[g + 2 * k] = _mm512_castpd_ps(_mm512_unpacklo_pd(lo, hi));
                b[g + 2 * k + 1] = _mm512_castpd_ps(_mm512_unpackhi_pd(lo, hi));
            }
        }
        let mut c = [_mm512_setzero_ps(); LANES];
        for h in (0..LANES).step_by(8) {
            for k in 0..4 {
                c[h + k] = _mm512_shuffle_f32x4::<0x88>(b[h + k], b[h + k + 4]);
                c[h + k + 4] = _mm512_shuffle_f32x4::<0xdd>(b[h + k], b[h + k + 4]);
            }
        }
        for k in 0..8 {
            rows[k] = _mm512_shuffle_f32x4::<0x88>(c[k], c[k + 8]);
            rows[k + 8] = _mm512_shuffle_f32x4::<0xdd>(c[k], c[k + 8]);
        }
    }
}
