//! Copying one head's keys transposed, so that the score tiles load a vector of keys per
//! head-dimension step: `keys_t` is `dh` rows of `keys_len` (the sequence length rounded up
//! to whole vectors), and keys past `len` stay zero, so that the scores against them are
//! finite (the softmax then drops them).

use super::tiled::Dims;

/// One float at a time: the backends without a register transpose (AVX2, where an 8 x 8 one
/// would save a sixth of a small share, and the portable one of the tests). `keys_t` must be
/// zero past `len` in each row on the first call; later calls write the same places.
pub(super) fn transpose_keys(qkv: &[f32], k_at: usize, dims: &Dims, keys_t: &mut [f32]) {
    for j in 0..dims.len {
        let key = &qkv[j * dims.width + k_at..][..dims.dh];
        for (c, &k) in key.iter().enumerate() {
            keys_t[c * dims.keys_len + j] = k;
        }
    }
}

/// The AVX-512 copy, 16 by 16 in registers: one float at a time, the copy was bound by
/// stores and took a seventh of the AVX-512 kernel's time. Unchanged from before the kernel
/// was made generic (and so tested on AVX-512 machines then); `keys_len` is a multiple of 16.
#[cfg(target_arch = "x86_64")]
pub(super) mod avx512 {
    use super::Dims;
    use std::arch::x86_64::*;

    const LANES: usize = 16;

    /// The first `n` lanes (all of them from 16 on).
    fn first_lanes(n: usize) -> __mmask16 {
        if n >= LANES {
            !0
        } else {
            (1 << n) - 1
        }
    }

    /// [`super::transpose_keys`], for AVX-512F.
    #[target_feature(enable = "avx512f")]
    pub(in crate::encoder::kernels::attention) fn transpose_keys(
        qkv: &[f32],
        k_at: usize,
        dims: &Dims,
        keys_t: &mut [f32],
    ) {
        for first in (0..dims.len).step_by(LANES) {
            for col in (0..dims.dh).step_by(LANES) {
                let live = first_lanes(dims.dh - col);
                let mut block = [_mm512_setzero_ps(); LANES];
                for (j, row) in block.iter_mut().enumerate().take(dims.len - first) {
                    let key = qkv[(first + j) * dims.width + k_at + col..].as_ptr();
                    // SAFETY: the key has `dh - col` more values, and `live` masks off the rest.
                    *row = unsafe { _mm512_maskz_loadu_ps(live, key) };
                }
                for (c, column) in transpose(block).iter().enumerate().take(dims.dh - col) {
                    let at = &mut keys_t[(col + c) * dims.keys_len + first..][..LANES];
                    // SAFETY: `at` is one vector long.
                    unsafe { _mm512_storeu_ps(at.as_mut_ptr(), *column) };
                }
            }
        }
    }

    /// Transposes a 16 x 16 block: interleaving rows pairwise by single lanes, then by pairs
    /// of lanes, then by quarters of the vector twice.
    #[target_feature(enable = "avx512f")]
    fn transpose(rows: [__m512; LANES]) -> [__m512; LANES] {
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
        let mut columns = [_mm512_setzero_ps(); LANES];
        for k in 0..8 {
            columns[k] = _mm512_shuffle_f32x4::<0x88>(c[k], c[k + 8]);
            columns[k + 8] = _mm512_shuffle_f32x4::<0xdd>(c[k], c[k + 8]);
        }
        columns
    }
}
