//! The attention kernel over vectors ([`Simd`]), instantiated for AVX-512 and AVX2. Left to
//! LLVM, the portable one issues a separate multiply and add per product (Rust never contracts
//! them into FMAs), keeps too few accumulators to hide the FMA latency, and sums the softmax
//! one scalar at a time: it took a quarter of the encoding time, half as much as the big
//! GEMMs, for a twentieth of the FLOPs.

use super::round_up;
use super::transpose;
use crate::encoder::kernels::exp_vector;
#[cfg(test)]
use crate::encoder::simd::portable::Portable;
use crate::encoder::simd::Simd;
#[cfg(target_arch = "x86_64")]
use crate::encoder::simd::{Avx2, Avx512};

/// Sizes of one sequence's attention, shared by its tiles.
struct Dims {
    len: usize,
    /// `len` rounded up to whole vectors: the row stride of the transposed keys and scores.
    keys_len: usize,
    dh: usize,
    hidden: usize,
    scale: f32,
}

/// A [`super::SequenceKernel`] on AVX-512: 8 query rows per register tile, each holding two
/// vectors (32 keys, or 32 columns of the head), so a tile is 16 independent accumulators,
/// enough to cover the FMA latency on two ports, leaving the other 16 registers for operands.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
pub(super) fn attend_sequence_avx512(
    qkv: &[f32],
    out: &mut [f32],
    len: usize,
    heads: usize,
    dh: usize,
) {
    // SAFETY: compiled for AVX-512F.
    unsafe { attend::<Avx512, 8, 8, 2>(qkv, out, len, heads, dh) }
}

/// A [`super::SequenceKernel`] on AVX2 with FMA: scores and context both 6 rows of two 8-lane
/// vectors (12 accumulators, leaving 4 of the 16 registers for the two keys or values and the
/// broadcast). With the head's values in rows of their own the context tile reads them twice
/// per 6 queries (16 columns a pass) where 2 rows of four vectors read them three times, 16
/// loads and broadcasts per 24 FMAs against 18: attention 98-100 ms against 106-108 ms per
/// batch of 64 paragraphs on a Zen 4 capped at AVX2 (`RAG_MAX_ISA=avx2`, eval/encode/README.md).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
pub(super) fn attend_sequence_avx2(
    qkv: &[f32],
    out: &mut [f32],
    len: usize,
    heads: usize,
    dh: usize,
) {
    // SAFETY: compiled for AVX2 and FMA.
    unsafe { attend::<Avx2, 6, 6, 2>(qkv, out, len, heads, dh) }
}

/// The AVX-512 kernel's tiles (8 rows of 16 lanes) on plain arrays, for the tests.
#[cfg(test)]
pub(super) fn attend_sequence_portable16(
    qkv: &[f32],
    out: &mut [f32],
    len: usize,
    heads: usize,
    dh: usize,
) {
    // SAFETY: the portable backend needs no instruction set.
    unsafe { attend::<Portable<16>, 8, 8, 2>(qkv, out, len, heads, dh) }
}

/// The AVX2 kernel's tiles (6 rows of 8 lanes) on plain arrays, for the tests.
#[cfg(test)]
pub(super) fn attend_sequence_portable8(
    qkv: &[f32],
    out: &mut [f32],
    len: usize,
    heads: usize,
    dh: usize,
) {
    // SAFETY: as above.
    unsafe { attend::<Portable<8>, 6, 6, 2>(qkv, out, len, heads, dh) }
}

/// One sequence's attention, `ROWS` queries at a time (their context `CONTEXT_ROWS` rows by
/// `CONTEXT_VECS` vectors of the head at a time); each head's keys are first copied
/// transposed (`transpose.rs`), zero past `len`, and its values copied into rows of their own.
/// Read in place, a head's values lie one `qkv` row (4.5 KiB for MiniLM) apart: a sequence's
/// span more pages than the first-level TLB holds, and the context tiles read it once per
/// `CONTEXT_ROWS` queries.
///
/// # Safety
/// Needs `S`'s instruction set.
#[inline(always)]
unsafe fn attend<
    S: Simd,
    const ROWS: usize,
    const CONTEXT_ROWS: usize,
    const CONTEXT_VECS: usize,
>(
    qkv: &[f32],
    out: &mut [f32],
    len: usize,
    heads: usize,
    dh: usize,
) {
    let hidden = heads * dh;
    let width = 3 * hidden;
    // The tiles read and write through raw pointers within these bounds.
    assert!(len * width <= qkv.len() && len * hidden <= out.len());
    let lanes = S::LANES;
    let dims = Dims {
        len,
        keys_len: round_up(len, lanes),
        dh,
        hidden,
        scale: 1.0 / (dh as f32).sqrt(),
    };
    let keys_len = dims.keys_len;
    let mut keys_t = vec![0f32; dh * keys_len];
    let mut head_values = vec![0f32; len * dh];
    let mut scores = vec![0f32; ROWS * keys_len];
    for head in 0..heads {
        let (q_at, k_at, v_at) = (head * dh, hidden + head * dh, 2 * hidden + head * dh);
        let keys = qkv.as_ptr().add(k_at);
        transpose::transpose::<S>(keys, width, len, dh, keys_t.as_mut_ptr(), keys_len);
        for (j, row) in head_values.chunks_exact_mut(dh).enumerate() {
            row.copy_from_slice(&qkv[j * width + v_at..][..dh]);
        }
        for first in (0..len).step_by(ROWS) {
            let rows = (len - first).min(ROWS);
            // A short last tile repeats its last query rather than branching on the row count
            // in the inner loops; the extra rows' results are never stored.
            let mut queries = [qkv.as_ptr(); ROWS];
            for (r, q) in queries.iter_mut().enumerate() {
                *q = qkv[(first + r).min(len - 1) * width + q_at..].as_ptr();
            }
            let mut block = 0;
            while block < keys_len {
                let keys = keys_t[block..].as_ptr();
                let tile = scores[block..].as_mut_ptr();
                // SAFETY: each query has `dh` values from `q_at` in its row; `keys_t` has `dh`
                // rows and `scores` `ROWS` rows of `keys_len`, and the tile stays within
                // `keys_len`.
                if keys_len - block >= 2 * lanes {
                    scores_tile::<S, ROWS, 2>(&dims, &queries, keys, tile);
                    block += 2 * lanes;
                } else {
                    scores_tile::<S, ROWS, 1>(&dims, &queries, keys, tile);
                    block += lanes;
                }
            }
            let mut inv_sums = [0f32; ROWS];
            for (r, inv_sum) in inv_sums[..rows].iter_mut().enumerate() {
                *inv_sum = exp_row::<S>(&mut scores[r * keys_len..][..keys_len], len);
            }
            let context_cols = CONTEXT_VECS * lanes;
            for col in (0..dh).step_by(context_cols) {
                let cols = context_cols.min(dh - col);
                let values = head_values[col..].as_ptr();
                for row in (0..rows).step_by(CONTEXT_ROWS) {
                    let probs = scores[row * keys_len..].as_ptr();
                    let context = out[(first + row) * hidden + q_at + col..].as_mut_ptr();
                    let inv_sums = &inv_sums[row..rows.min(row + CONTEXT_ROWS)];
                    // SAFETY: the tile reads `cols` or fewer values from `col` in each of the
                    // `len` rows of `head_values` and writes as many from `q_at + col` in
                    // `inv_sums.len()` rows of `out` from `first + row`, all real tokens;
                    // `probs` has that many rows of `keys_len >= len`.
                    if cols == context_cols {
                        context_tile::<S, CONTEXT_ROWS, CONTEXT_VECS, false>(
                            &dims, probs, values, cols, inv_sums, context,
                        );
                    } else {
                        context_tile::<S, CONTEXT_ROWS, CONTEXT_VECS, true>(
                            &dims, probs, values, cols, inv_sums, context,
                        );
                    }
                }
            }
        }
    }
}

/// Scaled scores of the tile's queries against `V` vectors of keys, from the transposed keys
/// at `keys` (row stride `keys_len`) into `scores` (the same stride).
///
/// # Safety
/// Needs `S`'s instruction set. Each query is readable for `dh` floats, `keys` for `dh` rows
/// of `V` vectors and `scores` writable for `ROWS` rows of `V` vectors.
#[inline(always)]
unsafe fn scores_tile<S: Simd, const ROWS: usize, const V: usize>(
    dims: &Dims,
    queries: &[*const f32; ROWS],
    keys: *const f32,
    scores: *mut f32,
) {
    let mut acc = [[S::zero(); V]; ROWS];
    for c in 0..dims.dh {
        let mut k = [S::zero(); V];
        for (v, k) in k.iter_mut().enumerate() {
            *k = S::load(keys.add(c * dims.keys_len + v * S::LANES));
        }
        for (acc, q) in acc.iter_mut().zip(queries) {
            let q = S::splat(*q.add(c));
            for (acc, &k) in acc.iter_mut().zip(&k) {
                *acc = S::fmadd(q, k, *acc);
            }
        }
    }
    // Scaled here rather than in a scaled copy of the queries: `V` multiplies per row.
    let scale = S::splat(dims.scale);
    for (r, acc) in acc.iter().enumerate() {
        for (v, &acc) in acc.iter().enumerate() {
            let at = scores.add(r * dims.keys_len + v * S::LANES);
            S::store(at, S::mul(acc, scale));
        }
    }
}

/// Replaces the first `len` scores of `row` (whole vectors long) by `exp(score - max)` and
/// returns `1 / sum`: the context tile normalises its output instead, a multiply per output
/// vector rather than one per probability. The scores past `len` (against zero keys) are set
/// to minus infinity first, so that they weigh nothing in the max or the sum: what masking
/// the last vector did before the kernel was generic.
///
/// # Safety
/// Needs `S`'s instruction set.
#[inline(always)]
unsafe fn exp_row<S: Simd>(row: &mut [f32], len: usize) -> f32 {
    let row = &mut row[..round_up(len, S::LANES)];
    row[len..].fill(f32::NEG_INFINITY);
    let mut max = S::splat(f32::NEG_INFINITY);
    for chunk in row.chunks_exact(S::LANES) {
        max = S::max(max, S::load(chunk.as_ptr()));
    }
    let max = S::splat(S::reduce_max(max));
    let mut sum = S::zero();
    for chunk in row.chunks_exact_mut(S::LANES) {
        let e = exp_vector::<S>(S::sub(S::load(chunk.as_ptr()), max));
        S::store(chunk.as_mut_ptr(), e);
        sum = S::add(sum, e);
    }
    1.0 / S::reduce_add(sum)
}

/// `context[r][..cols] = inv_sums[r] * sum_j probs[r][j] * values[j][..cols]` over the
/// sequence's `len` keys, for `cols <= V * LANES` and the first `inv_sums.len() <= ROWS` rows
/// of `probs` (row stride `keys_len`); `values` has rows of `dh`, `context` the output's
/// stride. Short of `ROWS` rows, the last one is repeated rather than branched on.
/// `MASKED` is whether `cols` may be short of whole vectors: the masked loads' masks took
/// registers the accumulators needed.
///
/// # Safety
/// Needs `S`'s instruction set. `values` is readable for `cols` floats in each of `len` rows,
/// `context` writable for as many in each of `inv_sums.len()` rows, and `probs` has that many
/// rows of `keys_len`.
#[inline(always)]
unsafe fn context_tile<S: Simd, const ROWS: usize, const V: usize, const MASKED: bool>(
    dims: &Dims,
    probs: *const f32,
    values: *const f32,
    cols: usize,
    inv_sums: &[f32],
    context: *mut f32,
) {
    let live = |v: usize| {
        if MASKED {
            cols.saturating_sub(v * S::LANES)
        } else {
            S::LANES
        }
    };
    let rows: [*const f32; ROWS] =
        std::array::from_fn(|r| probs.add(r.min(inv_sums.len() - 1) * dims.keys_len));
    let mut acc = [[S::zero(); V]; ROWS];
    for j in 0..dims.len {
        let mut value = [S::zero(); V];
        for (v, value) in value.iter_mut().enumerate() {
            *value = S::load_first(values.add(j * dims.dh + v * S::LANES), live(v));
        }
        for (acc, row) in acc.iter_mut().zip(&rows) {
            let p = S::splat(*row.add(j));
            for (acc, &value) in acc.iter_mut().zip(&value) {
                *acc = S::fmadd(p, value, *acc);
            }
        }
    }
    for (r, (acc, &inv_sum)) in acc.iter().zip(inv_sums).enumerate() {
        for (v, &acc) in acc.iter().enumerate() {
            let at = context.add(r * dims.hidden + v * S::LANES);
            S::store_first(at, live(v), S::mul(acc, S::splat(inv_sum)));
        }
    }
}
