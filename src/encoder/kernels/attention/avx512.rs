//! The attention kernel in AVX-512 intrinsics. Left to LLVM, the portable one issues a separate
//! multiply and add per product (Rust never contracts them into FMAs), keeps too few
//! accumulators to hide the FMA latency, and sums the softmax one scalar at a time: it took a
//! quarter of the encoding time, half as much as the big GEMMs, for a twentieth of the FLOPs.

use super::{round_up, LANES};
use crate::encoder::kernels::math::vector::exp_lanes;
use std::arch::x86_64::*;

/// Query rows per register tile. Each row holds two vectors (32 keys, or 32 columns of the
/// head), so a tile is 16 independent accumulators: enough to cover the FMA latency on two
/// ports, leaving the other 16 registers for operands.
const ROWS: usize = 8;

/// Sizes of one sequence's attention, shared by its tiles.
struct Dims {
    len: usize,
    /// `len` rounded up to whole vectors: the row stride of the transposed keys and scores.
    keys_len: usize,
    dh: usize,
    hidden: usize,
    width: usize,
    scale: f32,
}

/// The first `n` lanes (all of them from 16 on).
fn first_lanes(n: usize) -> __mmask16 {
    if n >= LANES {
        !0
    } else {
        (1 << n) - 1
    }
}

/// A [`super::SequenceKernel`].
#[target_feature(enable = "avx512f")]
pub(super) fn attend_sequence(qkv: &[f32], out: &mut [f32], len: usize, heads: usize, dh: usize) {
    let hidden = heads * dh;
    let width = 3 * hidden;
    // The tiles read and write through raw pointers within these bounds.
    assert!(len * width <= qkv.len() && len * hidden <= out.len());
    let dims = Dims {
        len,
        keys_len: round_up(len, LANES),
        dh,
        hidden,
        width,
        scale: 1.0 / (dh as f32).sqrt(),
    };
    let keys_len = dims.keys_len;
    let mut keys_t = vec![0f32; dh * keys_len];
    let mut scores = vec![0f32; ROWS * keys_len];
    for head in 0..heads {
        let (q_at, k_at, v_at) = (head * dh, hidden + head * dh, 2 * hidden + head * dh);
        transpose_keys(qkv, k_at, &dims, &mut keys_t);
        for first in (0..len).step_by(ROWS) {
            let rows = (len - first).min(ROWS);
            // A short last tile repeats its last query rather than branching on the row
            // count in the inner loops; the extra rows' results are never stored.
            let mut queries = [qkv.as_ptr(); ROWS];
            for (r, q) in queries.iter_mut().enumerate() {
                *q = qkv[(first + r).min(len - 1) * width + q_at..].as_ptr();
            }
            let mut block = 0;
            while block < keys_len {
                let keys = keys_t[block..].as_ptr();
                let tile = scores[block..].as_mut_ptr();
                // SAFETY: each query has `dh` values from `q_at` in its row; `keys_t` has
                // `dh` rows and `scores` `ROWS` rows of `keys_len`, and the tile stays
                // within `keys_len`.
                if keys_len - block >= 2 * LANES {
                    unsafe { scores_tile::<2>(&dims, &queries, keys, tile) };
                    block += 2 * LANES;
                } else {
                    unsafe { scores_tile::<1>(&dims, &queries, keys, tile) };
                    block += LANES;
                }
            }
            let mut inv_sums = [0f32; ROWS];
            for (r, inv_sum) in inv_sums[..rows].iter_mut().enumerate() {
                *inv_sum = exp_row(&mut scores[r * keys_len..][..keys_len], len);
            }
            for col in (0..dh).step_by(2 * LANES) {
                let cols = dh - col;
                let values = qkv[v_at + col..].as_ptr();
                let context = out[first * hidden + q_at + col..].as_mut_ptr();
                let inv_sums = &inv_sums[..rows];
                // SAFETY: the tile reads `cols` or fewer values from `v_at + col` in each of
                // the first `len` rows of `qkv` and writes as many from `q_at + col` in
                // `rows` rows of `out` from `first`, all real tokens; `scores` has `ROWS`
                // rows of `keys_len >= len`.
                if cols > LANES {
                    unsafe { context_tile::<2>(&dims, &scores, values, cols, inv_sums, context) };
                } else {
                    unsafe { context_tile::<1>(&dims, &scores, values, cols, inv_sums, context) };
                }
            }
        }
    }
}

/// Copies one head's keys, starting at column `k_at` of `qkv`, into `keys_t` transposed
/// (`dh` rows of `keys_len`), 16 by 16 in registers: one float at a time, the copy was bound
/// by stores and took a seventh of the kernel's time. Keys past `len` come out zero, so that
/// the scores against them are finite; nothing reads those.
#[target_feature(enable = "avx512f")]
fn transpose_keys(qkv: &[f32], k_at: usize, dims: &Dims, keys_t: &mut [f32]) {
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

/// Transposes a 16 x 16 block: interleaving rows pairwise by single lanes, then by pairs of
/// lanes, then by quarters of the vector twice.
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

/// Scaled scores of the tile's queries against `V` vectors of keys, from the transposed keys
/// at `keys` (row stride `keys_len`) into `scores` (the same stride).
///
/// # Safety
/// Each query is readable for `dh` floats, `keys` for `dh` rows of `V * LANES` and `scores`
/// writable for `ROWS` rows of `V * LANES`.
#[target_feature(enable = "avx512f")]
unsafe fn scores_tile<const V: usize>(
    dims: &Dims,
    queries: &[*const f32; ROWS],
    keys: *const f32,
    scores: *mut f32,
) {
    let mut acc = [[_mm512_setzero_ps(); V]; ROWS];
    for c in 0..dims.dh {
        let mut k = [_mm512_setzero_ps(); V];
        for (v, k) in k.iter_mut().enumerate() {
            *k = _mm512_loadu_ps(keys.add(c * dims.keys_len + v * LANES));
        }
        for (acc, q) in acc.iter_mut().zip(queries) {
            let q = _mm512_set1_ps(*q.add(c));
            for (acc, &k) in acc.iter_mut().zip(&k) {
                *acc = _mm512_fmadd_ps(q, k, *acc);
            }
        }
    }
    // Scaled here rather than in a scaled copy of the queries: `V` multiplies per row.
    let scale = _mm512_set1_ps(dims.scale);
    for (r, acc) in acc.iter().enumerate() {
        for (v, &acc) in acc.iter().enumerate() {
            let at = scores.add(r * dims.keys_len + v * LANES);
            _mm512_storeu_ps(at, _mm512_mul_ps(acc, scale));
        }
    }
}

/// Replaces the first `len` scores of `row` by `exp(score - max)` and returns `1 / sum`:
/// the context tile normalises its output instead, a multiply per output vector rather
/// than one per probability.
#[target_feature(enable = "avx512f")]
fn exp_row(row: &mut [f32], len: usize) -> f32 {
    let row = &mut row[..round_up(len, LANES)];
    let mut max = _mm512_set1_ps(f32::NEG_INFINITY);
    for (i, chunk) in row.chunks_exact(LANES).enumerate() {
        // SAFETY: a chunk is one vector.
        let x = unsafe { _mm512_loadu_ps(chunk.as_ptr()) };
        max = _mm512_mask_max_ps(max, first_lanes(len - i * LANES), max, x);
    }
    let max = _mm512_set1_ps(_mm512_reduce_max_ps(max));
    let mut sum = _mm512_setzero_ps();
    for (i, chunk) in row.chunks_exact_mut(LANES).enumerate() {
        // SAFETY: as above.
        let x = unsafe { _mm512_loadu_ps(chunk.as_ptr()) };
        let e = exp_lanes(_mm512_sub_ps(x, max), first_lanes(len - i * LANES));
        // SAFETY: as above.
        unsafe { _mm512_storeu_ps(chunk.as_mut_ptr(), e) };
        sum = _mm512_add_ps(sum, e);
    }
    1.0 / _mm512_reduce_add_ps(sum)
}
/// `context[r][..cols] = inv_sums[r] * sum_j scores[r][j] * values[j][..cols]` over the
/// sequence's `len` keys, for `cols <= V * LANES` and the tile's first `inv_sums.len()`
/// rows; `values` and `context` have the row strides of `qkv` and of the output.
///
/// # Safety
/// `values` is readable for `cols` floats in each of `len` rows, `context` writable for as
/// many in each of `inv_sums.len()` rows, and `scores` has `ROWS` rows of `keys_len`.
#[target_feature(enable = "avx512f")]
unsafe fn context_tile<const V: usize>(
    dims: &Dims,
    scores: &[f32],
    values: *const f32,
    cols: usize,
    inv_sums: &[f32],
    context: *mut f32,
) {
    let mut live = [0; V];
    for (v, live) in live.iter_mut().enumerate() {
        *live = first_lanes(cols.saturating_sub(v * LANES));
    }
    let probs = scores.as_ptr();
    let mut acc = [[_mm512_setzero_ps(); V]; ROWS];
    for j in 0..dims.len {
        let mut value = [_mm512_setzero_ps(); V];
        for (v, value) in value.iter_mut().enumerate() {
            *value = _mm512_maskz_loadu_ps(live[v], values.add(j * dims.width + v * LANES));
        }
        for (r, acc) in acc.iter_mut().enumerate() {
            let p = _mm512_set1_ps(*probs.add(r * dims.keys_len + j));
            for (acc, &value) in acc.iter_mut().zip(&value) {
                *acc = _mm512_fmadd_ps(p, value, *acc);
            }
        }
    }
    for (r, (acc, &inv_sum)) in acc.iter().zip(inv_sums).enumerate() {
        for (v, &acc) in acc.iter().enumerate() {
            let at = context.add(r * dims.hidden + v * LANES);
            _mm512_mask_storeu_ps(at, live[v], _mm512_mul_ps(acc, _mm512_set1_ps(inv_sum)));
        }
    }
}
