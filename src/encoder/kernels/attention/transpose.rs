//! Blocks of floats copied transposed, a `LANES x LANES` block at a time in registers
//! ([`Simd::transpose`]): the attention kernel reads one head's queries and keys with the
//! sequence along the lanes, and writes its context back row by row. One float at a time, the
//! key copy alone took a sixth of the AVX2 kernel's time (and a seventh of the AVX-512 one's
//! before it went 16 x 16 in registers).

use crate::encoder::simd::Simd;

/// `dst[c * dst_stride + r] = src[r * src_stride + c]` for `r < rows`, `c < cols`: `rows`
/// rows of `cols` floats, written as `cols` rows of `rows`, each rounded up to whole vectors
/// with zeros (so `dst` rows need room for `rows` rounded up to `LANES`).
///
/// # Safety
/// Needs `S`'s instruction set; `src` readable and `dst` writable as described.
#[inline(always)]
pub(super) unsafe fn transpose<S: Simd>(
    src: *const f32,
    src_stride: usize,
    rows: usize,
    cols: usize,
    dst: *mut f32,
    dst_stride: usize,
) {
    let lanes = S::LANES;
    for first in (0..rows).step_by(lanes) {
        for col in (0..cols).step_by(lanes) {
            let (height, width) = (lanes.min(rows - first), lanes.min(cols - col));
            let from = src.add(first * src_stride + col);
            let to = dst.add(col * dst_stride + first);
            block::<S>(from, src_stride, height, width, to, dst_stride, lanes);
        }
    }
}

/// One block: `height x width` floats (both at most `LANES`) from `src` to `width` rows of
/// `dst`, `dst_lanes` of each written (zeros past `height`).
///
/// # Safety
/// As for [`transpose`], for one block.
#[inline(always)]
pub(super) unsafe fn block<S: Simd>(
    src: *const f32,
    src_stride: usize,
    height: usize,
    width: usize,
    dst: *mut f32,
    dst_stride: usize,
    dst_lanes: usize,
) {
    let mut v = [S::zero(); 16];
    let v = &mut v[..S::LANES];
    for (r, v) in v.iter_mut().enumerate().take(height) {
        *v = S::load_first(src.add(r * src_stride), width);
    }
    S::transpose(v);
    for (c, &v) in v.iter().enumerate().take(width) {
        S::store_first(dst.add(c * dst_stride), dst_lanes, v);
    }
}
