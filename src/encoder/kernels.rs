//! Fused CPU kernels for the inference path. Profiling the encoder showed candle spending more
//! time in scalar `erf` (GELU) and `exp` (softmax) from libm, and in small attention GEMMs and
//! permute copies, than in its big GEMMs. These use branch-free polynomial approximations that
//! the compiler vectorises, run on all cores, and fuse what can be fused. They are accurate to a
//! few float ulps of the exact functions (tested below), far inside what the reference-vector
//! tests allow.
//!
//! Training gets fused layer norm, softmax and GELU too, each with a hand-written backward pass:
//! candle's composite forms of these cost a dozen passes over the activations forward and twice
//! that backward, more than the GEMMs around them.

use candle_core::{
    bail, CpuStorage, CustomOp1, CustomOp2, CustomOp3, Layout, Result, Shape, Tensor,
};
use rayon::prelude::*;

/// Where `exp` stops being a normal f32: below it the approximations return exactly zero.
const EXP_MIN: f32 = -87.3;
/// ln 2 split in two so that x - n*ln2 stays exact.
const LN2_HI: f32 = 0.693_145_75;
const LN2_LO: f32 = 1.428_606_8e-6;
/// Taylor coefficients of `exp(r)` for r^6 down to r^2 (those of r and 1 are 1).
const EXP_POLY: [f32; 5] = [
    0.001_388_889,
    0.008_333_334,
    0.041_666_668,
    0.166_666_67,
    0.5,
];

/// `exp(x)` for f32 by range reduction to `r` in [-ln2/2, ln2/2] and a degree-6 polynomial.
#[inline(always)]
fn exp_approx(x: f32) -> f32 {
    let x = x.clamp(EXP_MIN, 88.7);
    // Round to nearest by the 1.5 * 2^23 trick: `f32::round` is a libm call that stops the
    // loop from vectorising.
    const SHIFTER: f32 = 12_582_912.0;
    let n = (x * std::f32::consts::LOG2_E + SHIFTER) - SHIFTER;
    let r = x - n * LN2_HI - n * LN2_LO;
    let [c6, c5, c4, c3, c2] = EXP_POLY;
    let p = 1.0 + r * (1.0 + r * (c2 + r * (c3 + r * (c4 + r * (c5 + r * c6)))));
    let scale = f32::from_bits(((n as i32 + 127) as u32) << 23);
    // Below the clamp the true value is (nearly) zero; returning 2^-126-ish instead would seed
    // denormals downstream (masked attention scores in training), which slow every FMA that
    // touches them a hundredfold.
    if x <= EXP_MIN {
        0.0
    } else {
        p * scale
    }
}

/// Abramowitz & Stegun 7.1.26: `erf(x) = 1 - t (a1 + t (a2 + ..)) exp(-x^2)`, `t = 1/(1 + p x)`.
const ERF_P: f32 = 0.327_591_1;
/// a5 down to a1.
const ERF_POLY: [f32; 5] = [
    1.061_405_4,
    -1.453_152_1,
    1.421_413_8,
    -0.284_496_74,
    0.254_829_6,
];

/// `erf(x)` by Abramowitz & Stegun 7.1.26: |error| < 1.5e-7 in exact arithmetic.
#[inline(always)]
fn erf_approx(x: f32) -> f32 {
    let sign = if x < 0.0 { -1.0 } else { 1.0 };
    let a = x.abs();
    let t = 1.0 / (1.0 + ERF_P * a);
    let [a5, a4, a3, a2, a1] = ERF_POLY;
    let poly = t * (a1 + t * (a2 + t * (a3 + t * (a4 + t * a5))));
    sign * (1.0 - poly * exp_approx(-a * a))
}

#[inline(always)]
fn gelu(x: f32) -> f32 {
    0.5 * x * (1.0 + erf_approx(x * std::f32::consts::FRAC_1_SQRT_2))
}

pub(super) fn contiguous_f32<'a>(storage: &'a CpuStorage, layout: &Layout) -> Result<&'a [f32]> {
    let data = storage.as_slice::<f32>()?;
    match layout.contiguous_offsets() {
        Some((start, end)) => Ok(&data[start..end]),
        None => bail!("fused kernels need contiguous f32 input"),
    }
}

/// Defines `$name(args)` that runs `$body` compiled for AVX-512 or AVX2+FMA when the CPU has
/// them (the crate itself targets baseline x86-64), so the loops inside vectorise wide. The body
/// is instantiated inside each `target_feature` function rather than called through a closure:
/// a closure the inliner declines would run at baseline width.
macro_rules! multiversion {
    ($(#[$doc:meta])* fn $name:ident($($arg:ident: $ty:ty),* $(,)?) $body:block) => {
        $(#[$doc])*
        fn $name($($arg: $ty),*) {
            #[cfg(target_arch = "x86_64")]
            {
                #[target_feature(enable = "avx512f")]
                unsafe fn avx512($($arg: $ty),*) $body
                #[target_feature(enable = "avx2,fma")]
                unsafe fn avx2($($arg: $ty),*) $body
                if std::arch::is_x86_feature_detected!("avx512f") {
                    // SAFETY: the CPU supports the enabled features (checked just above).
                    return unsafe { avx512($($arg),*) };
                }
                if std::arch::is_x86_feature_detected!("avx2")
                    && std::arch::is_x86_feature_detected!("fma")
                {
                    // SAFETY: as above.
                    return unsafe { avx2($($arg),*) };
                }
            }
            $body
        }
    };
}

multiversion! {
    fn bias_gelu_row(out: &mut [f32], xs: &[f32], bias: &[f32]) {
        for ((o, &x), &b) in out.iter_mut().zip(xs).zip(bias) {
            *o = gelu(x + b);
        }
    }
}

#[inline(always)]
fn softmax_in_place(xs: &mut [f32]) {
    let max = xs.iter().fold(f32::NEG_INFINITY, |m, &x| m.max(x));
    // Kept apart from the sum so this loop has no loop-carried dependency and vectorises.
    for x in xs.iter_mut() {
        *x = exp_approx(*x - max);
    }
    let inv = 1.0 / xs.iter().sum::<f32>();
    xs.iter_mut().for_each(|x| *x *= inv);
}

/// `gelu(x + bias)` with the exact (erf) GELU that Hugging Face calls "gelu", in one pass.
struct BiasGelu;

impl CustomOp2 for BiasGelu {
    fn name(&self) -> &'static str {
        "rag-bias-gelu"
    }

    fn cpu_fwd(
        &self,
        xs: &CpuStorage,
        xs_layout: &Layout,
        bias: &CpuStorage,
        bias_layout: &Layout,
    ) -> Result<(CpuStorage, Shape)> {
        let src = contiguous_f32(xs, xs_layout)?;
        let bias = contiguous_f32(bias, bias_layout)?;
        let width = bias.len();
        if width == 0 || src.len() % width != 0 {
            bail!("bias width does not divide the input");
        }
        let mut dst = vec![0f32; src.len()];
        dst.par_chunks_mut(width)
            .zip(src.par_chunks(width))
            .for_each(|(d, s)| bias_gelu_row(d, s, bias));
        Ok((CpuStorage::F32(dst), xs_layout.shape().clone()))
    }
}

/// `gelu(xs + bias)` for `xs` `[.., width]` and `bias` `[width]`.
pub fn bias_gelu(xs: &Tensor, bias: &Tensor) -> Result<Tensor> {
    xs.contiguous()?
        .apply_op2_no_bwd(&bias.contiguous()?, &BiasGelu)
}

/// Multi-head self-attention straight from the fused QKV projection: for each sequence and
/// head, `softmax(q k^T / sqrt(d) ) v` over that sequence's real tokens only. Never materialising
/// the `[batch, heads, seq, seq]` scores, skipping padding instead of masking it, and writing the
/// context in the rows' own layout (padded or packed) removes the permute copies and most memory
/// traffic; the small per-head products run register-blocked over a transposed key tile that
/// stays in L1. Rows no sequence covers (padding) come out as zeros: nothing downstream reads them.
struct Attention {
    heads: usize,
    head_dim: usize,
    kernel: SequenceKernel,
}

/// Attention over one sequence: `qkv` `[seq, 3*hidden]`, `out` `[seq, hidden]` (zeroed), the
/// first `len` tokens real; then the number of heads and the head dimension.
type SequenceKernel = fn(&[f32], &mut [f32], usize, usize, usize);

/// The AVX-512 kernel where the CPU has it, else the portable one.
fn sequence_kernel() -> SequenceKernel {
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx512f") {
        // SAFETY: the CPU supports AVX-512F (checked just above).
        return |qkv, out, len, heads, dh| unsafe {
            avx512::attend_sequence(qkv, out, len, heads, dh)
        };
    }
    attend_sequence
}

impl CustomOp3 for Attention {
    fn name(&self) -> &'static str {
        "rag-attention"
    }

    fn cpu_fwd(
        &self,
        qkv: &CpuStorage,
        qkv_layout: &Layout,
        starts: &CpuStorage,
        starts_layout: &Layout,
        lengths: &CpuStorage,
        lengths_layout: &Layout,
    ) -> Result<(CpuStorage, Shape)> {
        let hidden = self.heads * self.head_dim;
        let width = 3 * hidden;
        let mut dims = qkv_layout.shape().dims().to_vec();
        if dims.last() != Some(&width) {
            bail!("QKV shape {dims:?} does not end in 3 x {hidden}");
        }
        let qkv = contiguous_f32(qkv, qkv_layout)?;
        let rows = qkv.len() / width;
        let u32s = |storage: &'_ CpuStorage, layout: &Layout| -> Result<Vec<usize>> {
            match layout.contiguous_offsets() {
                Some((a, b)) => Ok(storage.as_slice::<u32>()?[a..b]
                    .iter()
                    .map(|&x| x as usize)
                    .collect()),
                None => bail!("sequence starts and lengths must be contiguous"),
            }
        };
        let (starts, lengths) = (u32s(starts, starts_layout)?, u32s(lengths, lengths_layout)?);
        if starts.len() != lengths.len() {
            bail!(
                "{} sequence starts for {} lengths",
                starts.len(),
                lengths.len()
            );
        }
        let mut out = vec![0f32; rows * hidden];
        // Each sequence's rows of the output, split off in order so threads own disjoint parts.
        let mut sequences = Vec::with_capacity(starts.len());
        let mut rest = out.as_mut_slice();
        let mut at = 0;
        for (&start, &len) in starts.iter().zip(&lengths) {
            if start < at || start + len > rows {
                bail!(
                    "sequence rows {start}..{} overlap or lie outside 0..{rows}",
                    start + len
                );
            }
            let (_, tail) = rest.split_at_mut((start - at) * hidden);
            let (mine, tail) = tail.split_at_mut(len * hidden);
            sequences.push((&qkv[start * width..(start + len) * width], mine, len));
            rest = tail;
            at = start + len;
        }
        sequences
            .into_par_iter()
            .for_each(|(qkv, out, len)| (self.kernel)(qkv, out, len, self.heads, self.head_dim));
        *dims.last_mut().expect("checked above") = hidden;
        Ok((CpuStorage::F32(out), Shape::from(dims)))
    }
}

/// Vector width the attention blocks are laid out for (one AVX-512 register of f32).
const LANES: usize = 16;
/// Query rows computed together, so each key or value vector loaded feeds several FMAs.
const ROWS: usize = 4;

fn round_up(n: usize, to: usize) -> usize {
    n.div_ceil(to) * to
}

multiversion! {
    /// The portable [`SequenceKernel`], for CPUs without AVX-512.
    /// Register-blocked: a `ROWS x LANES` tile of scores (or of context) stays in registers
    /// while the loop over the head dimension (or over keys) streams through L1-resident
    /// copies of K (transposed) and V, zero-padded to whole vectors.
    fn attend_sequence(qkv: &[f32], out: &mut [f32], len: usize, heads: usize, dh: usize) {
        let hidden = heads * dh;
        let width = 3 * hidden;
        let scale = 1.0 / (dh as f32).sqrt();
        let keys_len = round_up(len, LANES);
        let dh_padded = round_up(dh, LANES);
        let mut keys_t = vec![0f32; dh * keys_len];
        let mut values = vec![0f32; len * dh_padded];
        let mut queries = vec![0f32; ROWS * dh];
        let mut scores = vec![0f32; ROWS * keys_len];
        for head in 0..heads {
            let (q_at, k_at, v_at) = (head * dh, hidden + head * dh, 2 * hidden + head * dh);
            for j in 0..len {
                let row = &qkv[j * width..];
                for c in 0..dh {
                    keys_t[c * keys_len + j] = row[k_at + c];
                }
                values[j * dh_padded..j * dh_padded + dh].copy_from_slice(&row[v_at..v_at + dh]);
            }
            for first in (0..len).step_by(ROWS) {
                let rows = (len - first).min(ROWS);
                queries.fill(0.0);
                for r in 0..rows {
                    let q = &qkv[(first + r) * width + q_at..][..dh];
                    for (dst, &q) in queries[r * dh..(r + 1) * dh].iter_mut().zip(q) {
                        *dst = q * scale;
                    }
                }
                for block in (0..keys_len).step_by(LANES) {
                    let mut acc = [[0f32; LANES]; ROWS];
                    for c in 0..dh {
                        let k: &[f32; LANES] = keys_t[c * keys_len + block..][..LANES]
                            .try_into()
                            .expect("one vector");
                        for (r, acc) in acc.iter_mut().enumerate() {
                            let q = queries[r * dh + c];
                            for l in 0..LANES {
                                acc[l] += q * k[l];
                            }
                        }
                    }
                    for (r, acc) in acc.iter().enumerate() {
                        scores[r * keys_len + block..][..LANES].copy_from_slice(acc);
                    }
                }
                for r in 0..rows {
                    softmax_in_place(&mut scores[r * keys_len..r * keys_len + len]);
                }
                for block in (0..dh_padded).step_by(LANES) {
                    let mut acc = [[0f32; LANES]; ROWS];
                    for j in 0..len {
                        let v: &[f32; LANES] = values[j * dh_padded + block..][..LANES]
                            .try_into()
                            .expect("one vector");
                        for (r, acc) in acc.iter_mut().enumerate() {
                            let p = scores[r * keys_len + j];
                            for l in 0..LANES {
                                acc[l] += p * v[l];
                            }
                        }
                    }
                    let take = LANES.min(dh - block.min(dh));
                    for (r, acc) in acc.iter().enumerate().take(rows) {
                        out[(first + r) * hidden + q_at + block..][..take]
                            .copy_from_slice(&acc[..take]);
                    }
                }
            }
        }
    }
}

/// The attention kernel in AVX-512 intrinsics. Left to LLVM, the portable one issues a separate
/// multiply and add per product (Rust never contracts them into FMAs), keeps too few
/// accumulators to hide the FMA latency, and sums the softmax one scalar at a time: it took a
/// quarter of the encoding time, half as much as the big GEMMs, for a twentieth of the FLOPs.
#[cfg(target_arch = "x86_64")]
pub(super) use avx512::gelu_lanes;

#[cfg(target_arch = "x86_64")]
mod avx512 {
    use super::{round_up, ERF_P, ERF_POLY, EXP_MIN, EXP_POLY, LANES, LN2_HI, LN2_LO};
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
    pub(super) fn attend_sequence(
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
                        unsafe {
                            context_tile::<2>(&dims, &scores, values, cols, inv_sums, context)
                        };
                    } else {
                        unsafe {
                            context_tile::<1>(&dims, &scores, values, cols, inv_sums, context)
                        };
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

    /// [`super::gelu`] on a vector, with the same erf and exp approximations; the division in
    /// the erf is a reciprocal estimate refined by one Newton step (to about 23 bits).
    #[target_feature(enable = "avx512f")]
    pub(in crate::encoder) fn gelu_lanes(x: __m512) -> __m512 {
        let z = _mm512_mul_ps(x, _mm512_set1_ps(std::f32::consts::FRAC_1_SQRT_2));
        let a = _mm512_abs_ps(z);
        let d = _mm512_fmadd_ps(a, _mm512_set1_ps(ERF_P), _mm512_set1_ps(1.0));
        let t = _mm512_rcp14_ps(d);
        let t = _mm512_mul_ps(t, _mm512_fnmadd_ps(d, t, _mm512_set1_ps(2.0)));
        let [a5, a4, a3, a2, a1] = ERF_POLY;
        let mut poly = _mm512_set1_ps(a5);
        for c in [a4, a3, a2, a1] {
            poly = _mm512_fmadd_ps(poly, t, _mm512_set1_ps(c));
        }
        poly = _mm512_mul_ps(poly, t);
        let gauss = exp_lanes(_mm512_mul_ps(_mm512_sub_ps(_mm512_setzero_ps(), a), a), !0);
        let erf_abs = _mm512_fnmadd_ps(poly, gauss, _mm512_set1_ps(1.0));
        let sign = _mm512_and_si512(_mm512_castps_si512(z), _mm512_set1_epi32(i32::MIN));
        let erf = _mm512_castsi512_ps(_mm512_xor_si512(_mm512_castps_si512(erf_abs), sign));
        let half = _mm512_mul_ps(x, _mm512_set1_ps(0.5));
        _mm512_fmadd_ps(half, erf, half)
    }

    /// [`super::exp_approx`] in the lanes of `live`, zero in the others.
    #[target_feature(enable = "avx512f")]
    fn exp_lanes(x: __m512, live: __mmask16) -> __m512 {
        const NEAREST: i32 = _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC;
        let n = _mm512_roundscale_ps::<NEAREST>(_mm512_mul_ps(
            x,
            _mm512_set1_ps(std::f32::consts::LOG2_E),
        ));
        let r = _mm512_fnmadd_ps(n, _mm512_set1_ps(LN2_HI), x);
        let r = _mm512_fnmadd_ps(n, _mm512_set1_ps(LN2_LO), r);
        let [c6, c5, c4, c3, c2] = EXP_POLY;
        let mut p = _mm512_set1_ps(c6);
        for c in [c5, c4, c3, c2, 1.0, 1.0] {
            p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(c));
        }
        // Zero rather than a denormal below `EXP_MIN`, as in `exp_approx`.
        let live = _mm512_mask_cmp_ps_mask::<_CMP_GT_OQ>(live, x, _mm512_set1_ps(EXP_MIN));
        _mm512_maskz_scalef_ps(live, p, n)
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
}

/// Self-attention for `qkv` `[.., 3*hidden]` (Q, K, V stacked, biases applied, the leading
/// dimensions taken as rows) where sequence `b` is the `lengths[b]` rows from `starts[b]` on
/// (in order, not overlapping): padded batches (`starts[b] = b * seq`) and packed ones alike.
/// Returns `[.., hidden]`, zero in rows no sequence covers.
pub fn attention(
    qkv: &Tensor,
    starts: &Tensor,
    lengths: &Tensor,
    heads: usize,
    head_dim: usize,
) -> Result<Tensor> {
    qkv.contiguous()?.apply_op3_no_bwd(
        &starts.contiguous()?,
        &lengths.contiguous()?,
        &Attention {
            heads,
            head_dim,
            kernel: sequence_kernel(),
        },
    )
}

/// The rows of a contiguous f32 tensor as one slice, and the row length.
fn rows_f32<'a>(storage: &'a CpuStorage, layout: &Layout) -> Result<(&'a [f32], usize)> {
    let width = *layout.shape().dims().last().unwrap_or(&1);
    Ok((contiguous_f32(storage, layout)?, width.max(1)))
}

/// Layer norm over the last dimension, `(x - mean) / sqrt(var + eps) * gamma + beta`.
struct LayerNorm {
    eps: f32,
}

/// Mean and `1 / sqrt(var + eps)` of one row. The sums run in 16 lanes: a plain float sum is
/// one long dependency chain that the compiler may not reorder into vectors.
#[inline(always)]
fn row_moments(row: &[f32], eps: f32) -> (f32, f32) {
    #[inline(always)]
    fn lane_sum(row: &[f32], f: impl Fn(f32) -> f32) -> f32 {
        let mut lanes = [0f32; 16];
        let chunks = row.chunks_exact(16);
        let tail: f32 = chunks.remainder().iter().map(|&x| f(x)).sum();
        for chunk in chunks {
            for (lane, &x) in lanes.iter_mut().zip(chunk) {
                *lane += f(x);
            }
        }
        lanes.iter().sum::<f32>() + tail
    }
    let n = row.len() as f32;
    let mean = lane_sum(row, |x| x) / n;
    let var = lane_sum(row, |x| (x - mean) * (x - mean)) / n;
    (mean, 1.0 / (var + eps).sqrt())
}

multiversion! {
    fn layer_norm_rows(out: &mut [f32], xs: &[f32], gamma: &[f32], beta: &[f32], eps: f32) {
        let width = gamma.len();
        for (o, x) in out.chunks_exact_mut(width).zip(xs.chunks_exact(width)) {
            let (mean, rstd) = row_moments(x, eps);
            for (((o, &x), &g), &b) in o.iter_mut().zip(x).zip(gamma).zip(beta) {
                *o = (x - mean) * rstd * g + b;
            }
        }
    }
}

impl CustomOp3 for LayerNorm {
    fn name(&self) -> &'static str {
        "rag-layer-norm"
    }

    fn cpu_fwd(
        &self,
        xs: &CpuStorage,
        xs_layout: &Layout,
        gamma: &CpuStorage,
        gamma_layout: &Layout,
        beta: &CpuStorage,
        beta_layout: &Layout,
    ) -> Result<(CpuStorage, Shape)> {
        let (src, width) = rows_f32(xs, xs_layout)?;
        let gamma = contiguous_f32(gamma, gamma_layout)?;
        let beta = contiguous_f32(beta, beta_layout)?;
        let mut out = vec![0f32; src.len()];
        const BLOCK_ROWS: usize = 32;
        out.par_chunks_mut(width * BLOCK_ROWS)
            .zip(src.par_chunks(width * BLOCK_ROWS))
            .for_each(|(o, x)| layer_norm_rows(o, x, gamma, beta, self.eps));
        Ok((CpuStorage::F32(out), xs_layout.shape().clone()))
    }

    fn bwd(
        &self,
        xs: &Tensor,
        gamma: &Tensor,
        _beta: &Tensor,
        _res: &Tensor,
        grad: &Tensor,
    ) -> Result<(Option<Tensor>, Option<Tensor>, Option<Tensor>)> {
        let width = gamma.elem_count();
        let rows = xs.elem_count() / width;
        // One pass yields all three gradients: rows 0..n of the result are d/dx, then d/dgamma
        // and d/dbeta.
        let all = xs.contiguous()?.apply_op3_no_bwd(
            gamma,
            &grad.contiguous()?,
            &LayerNormGrad { eps: self.eps },
        )?;
        Ok((
            Some(all.narrow(0, 0, rows)?.reshape(xs.shape())?),
            Some(all.narrow(0, rows, 1)?.reshape(gamma.shape())?),
            Some(all.narrow(0, rows + 1, 1)?.reshape(gamma.shape())?),
        ))
    }
}

struct LayerNormGrad {
    eps: f32,
}

impl CustomOp3 for LayerNormGrad {
    fn name(&self) -> &'static str {
        "rag-layer-norm-grad"
    }

    fn cpu_fwd(
        &self,
        xs: &CpuStorage,
        xs_layout: &Layout,
        gamma: &CpuStorage,
        gamma_layout: &Layout,
        grad: &CpuStorage,
        grad_layout: &Layout,
    ) -> Result<(CpuStorage, Shape)> {
        let (src, width) = rows_f32(xs, xs_layout)?;
        let gamma = contiguous_f32(gamma, gamma_layout)?;
        let grad = contiguous_f32(grad, grad_layout)?;
        let rows = src.len() / width;
        let mut out = vec![0f32; src.len() + 2 * width];
        let (dx, params) = out.split_at_mut(src.len());
        // d/dgamma and d/dbeta are summed per fixed block of rows, then the blocks in order:
        // the same sums in the same order on every run, so training repeats bit for bit.
        const BLOCK_ROWS: usize = 64;
        let partials: Vec<Vec<f32>> = dx
            .par_chunks_mut(width * BLOCK_ROWS)
            .zip(
                src.par_chunks(width * BLOCK_ROWS)
                    .zip(grad.par_chunks(width * BLOCK_ROWS)),
            )
            .map(|(dx, (x, g))| {
                let mut acc = vec![0f32; 2 * width];
                let (dgamma, dbeta) = acc.split_at_mut(width);
                let n = width as f32;
                for (dx, (x, g)) in dx
                    .chunks_mut(width)
                    .zip(x.chunks(width).zip(g.chunks(width)))
                {
                    let (mean, rstd) = row_moments(x, self.eps);
                    let (mut sum_gg, mut sum_gg_xhat) = (0f32, 0f32);
                    for ((&x, &g), &gm) in x.iter().zip(g).zip(gamma) {
                        let xhat = (x - mean) * rstd;
                        sum_gg += g * gm;
                        sum_gg_xhat += g * gm * xhat;
                    }
                    let (mean_gg, mean_gg_xhat) = (sum_gg / n, sum_gg_xhat / n);
                    for (i, ((&x, &g), &gm)) in x.iter().zip(g).zip(gamma).enumerate() {
                        let xhat = (x - mean) * rstd;
                        dx[i] = rstd * (g * gm - mean_gg - xhat * mean_gg_xhat);
                        dgamma[i] += g * xhat;
                        dbeta[i] += g;
                    }
                }
                acc
            })
            .collect();
        for partial in partials {
            params.iter_mut().zip(partial).for_each(|(p, v)| *p += v);
        }
        Ok((CpuStorage::F32(out), Shape::from((rows + 2, width))))
    }
}

/// Layer norm over the last dimension, differentiable (fused forward and backward).
pub fn layer_norm(xs: &Tensor, gamma: &Tensor, beta: &Tensor, eps: f64) -> Result<Tensor> {
    xs.contiguous()?
        .apply_op3(gamma, beta, LayerNorm { eps: eps as f32 })
}

/// Softmax over the last dimension; backward `dx = y * (g - sum(g * y))`.
struct Softmax;

impl CustomOp1 for Softmax {
    fn name(&self) -> &'static str {
        "rag-softmax"
    }

    fn cpu_fwd(&self, xs: &CpuStorage, layout: &Layout) -> Result<(CpuStorage, Shape)> {
        let (src, width) = rows_f32(xs, layout)?;
        let mut out = src.to_vec();
        out.par_chunks_mut(width).for_each(softmax_in_place);
        Ok((CpuStorage::F32(out), layout.shape().clone()))
    }

    fn bwd(&self, _xs: &Tensor, res: &Tensor, grad: &Tensor) -> Result<Option<Tensor>> {
        Ok(Some(
            res.apply_op2_no_bwd(&grad.contiguous()?, &SoftmaxGrad)?,
        ))
    }
}

struct SoftmaxGrad;

impl CustomOp2 for SoftmaxGrad {
    fn name(&self) -> &'static str {
        "rag-softmax-grad"
    }

    fn cpu_fwd(
        &self,
        ys: &CpuStorage,
        ys_layout: &Layout,
        grad: &CpuStorage,
        grad_layout: &Layout,
    ) -> Result<(CpuStorage, Shape)> {
        let (ys, width) = rows_f32(ys, ys_layout)?;
        let grad = contiguous_f32(grad, grad_layout)?;
        let mut out = vec![0f32; ys.len()];
        out.par_chunks_mut(width)
            .zip(ys.par_chunks(width).zip(grad.par_chunks(width)))
            .for_each(|(o, (y, g))| {
                let dot: f32 = y.iter().zip(g).map(|(y, g)| y * g).sum();
                for ((o, &y), &g) in o.iter_mut().zip(y).zip(g) {
                    *o = y * (g - dot);
                }
            });
        Ok((CpuStorage::F32(out), ys_layout.shape().clone()))
    }
}

/// Differentiable softmax over the last dimension, fused forward and backward.
pub fn softmax_train(xs: &Tensor) -> Result<Tensor> {
    xs.contiguous()?.apply_op1(Softmax)
}

/// The exact (erf) GELU; backward `g * (Phi(x) + x * phi(x))`.
struct Gelu;

multiversion! {
    fn gelu_rows(out: &mut [f32], xs: &[f32]) {
        for (o, &x) in out.iter_mut().zip(xs) {
            *o = gelu(x);
        }
    }
}

multiversion! {
    fn gelu_grad_rows(out: &mut [f32], xs: &[f32], grad: &[f32]) {
        const INV_SQRT_2PI: f32 = 0.398_942_3;
        for ((o, &x), &g) in out.iter_mut().zip(xs).zip(grad) {
            let cdf = 0.5 * (1.0 + erf_approx(x * std::f32::consts::FRAC_1_SQRT_2));
            let pdf = INV_SQRT_2PI * exp_approx(-0.5 * x * x);
            *o = g * (cdf + x * pdf);
        }
    }
}

/// Elements per parallel work item of the element-wise kernels.
const ELEMENTWISE_CHUNK: usize = 1 << 14;

impl CustomOp1 for Gelu {
    fn name(&self) -> &'static str {
        "rag-gelu"
    }

    fn cpu_fwd(&self, xs: &CpuStorage, layout: &Layout) -> Result<(CpuStorage, Shape)> {
        let src = contiguous_f32(xs, layout)?;
        let mut out = vec![0f32; src.len()];
        out.par_chunks_mut(ELEMENTWISE_CHUNK)
            .zip(src.par_chunks(ELEMENTWISE_CHUNK))
            .for_each(|(o, x)| gelu_rows(o, x));
        Ok((CpuStorage::F32(out), layout.shape().clone()))
    }

    fn bwd(&self, xs: &Tensor, _res: &Tensor, grad: &Tensor) -> Result<Option<Tensor>> {
        Ok(Some(
            xs.contiguous()?
                .apply_op2_no_bwd(&grad.contiguous()?, &GeluGrad)?,
        ))
    }
}

struct GeluGrad;

impl CustomOp2 for GeluGrad {
    fn name(&self) -> &'static str {
        "rag-gelu-grad"
    }

    fn cpu_fwd(
        &self,
        xs: &CpuStorage,
        xs_layout: &Layout,
        grad: &CpuStorage,
        grad_layout: &Layout,
    ) -> Result<(CpuStorage, Shape)> {
        let src = contiguous_f32(xs, xs_layout)?;
        let grad = contiguous_f32(grad, grad_layout)?;
        let mut out = vec![0f32; src.len()];
        out.par_chunks_mut(ELEMENTWISE_CHUNK)
            .zip(
                src.par_chunks(ELEMENTWISE_CHUNK)
                    .zip(grad.par_chunks(ELEMENTWISE_CHUNK)),
            )
            .for_each(|(o, (x, g))| gelu_grad_rows(o, x, g));
        Ok((CpuStorage::F32(out), xs_layout.shape().clone()))
    }
}

/// Differentiable exact GELU, fused forward and backward.
pub fn gelu_train(xs: &Tensor) -> Result<Tensor> {
    xs.contiguous()?.apply_op1(Gelu)
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;
    use candle_core::{Device, D};

    #[test]
    fn exp_and_erf_match_libm() {
        let mut worst_exp = 0f32;
        let mut worst_erf = 0f32;
        for i in -40_000..=40_000 {
            let x = i as f32 / 1000.0;
            worst_exp = worst_exp.max(((exp_approx(x) - x.exp()) / x.exp()).abs());
            let exact = libm_erf(x);
            worst_erf = worst_erf.max((erf_approx(x) - exact).abs());
        }
        assert!(worst_exp < 1e-6, "exp relative error {worst_exp}");
        // The approximation itself is within 1.5e-7; f32 rounding of its terms adds a little.
        assert!(worst_erf < 6e-7, "erf error {worst_erf}");
    }

    /// The vector GELU of the GEMM epilogue against the scalar one (itself checked against
    /// libm above), far into both tails where exp underflows.
    #[cfg(target_arch = "x86_64")]
    #[test]
    fn vector_gelu_matches_scalar() {
        if !std::arch::is_x86_feature_detected!("avx512f") {
            eprintln!("SKIP: no AVX-512 on this CPU");
            return;
        }
        use std::arch::x86_64::*;
        let mut worst = 0f32;
        for block in (-30_000..30_000).step_by(16) {
            let xs: [f32; 16] = std::array::from_fn(|l| (block + l as i32) as f32 / 1000.0);
            let mut ys = [0f32; 16];
            // SAFETY: AVX-512 checked above; both arrays hold one vector.
            unsafe {
                let y = gelu_lanes(_mm512_loadu_ps(xs.as_ptr()));
                _mm512_storeu_ps(ys.as_mut_ptr(), y);
            }
            for (x, y) in xs.iter().zip(ys) {
                worst = worst.max((y - gelu(*x)).abs() / x.abs().max(1.0));
            }
        }
        assert!(worst < 1e-6, "vector GELU differs from scalar by {worst}");
    }

    /// The oracle: candle's scalar f64 erf, the one its own `gelu_erf` uses.
    fn libm_erf(x: f32) -> f32 {
        candle_core::cpu::erf::erf_f64(x as f64) as f32
    }

    #[test]
    fn bias_gelu_matches_candle() {
        let device = Device::Cpu;
        let x = Tensor::randn(0f32, 3.0, (4, 3, 8), &device).unwrap();
        let bias = Tensor::randn(0f32, 1.0, 8, &device).unwrap();
        let ours = bias_gelu(&x, &bias).unwrap();
        let theirs = x.broadcast_add(&bias).unwrap().gelu_erf().unwrap();
        assert!(max_abs_diff(&ours, &theirs) < 1e-5);
    }

    /// The reference: candle's composite attention with an additive padding mask.
    fn reference_attention(qkv: &Tensor, lengths: &[u32], heads: usize, dh: usize) -> Tensor {
        let (b, t, _) = qkv.dims3().unwrap();
        let qkv = qkv
            .reshape((b, t, 3, heads, dh))
            .unwrap()
            .permute((2, 0, 3, 1, 4))
            .unwrap();
        let (q, k, v) = (
            qkv.get(0).unwrap(),
            qkv.get(1).unwrap(),
            qkv.get(2).unwrap(),
        );
        let q = (q.contiguous().unwrap() / (dh as f64).sqrt()).unwrap();
        let mask: Vec<f32> = lengths
            .iter()
            .flat_map(|&l| (0..t).map(move |j| if (j as u32) < l { 0.0 } else { -1e4 }))
            .collect();
        let mask = Tensor::from_vec(mask, (b, 1, 1, t), qkv.device()).unwrap();
        let scores = q.matmul(&k.contiguous().unwrap().t().unwrap()).unwrap();
        let probs =
            candle_nn::ops::softmax(&scores.broadcast_add(&mask).unwrap(), D::Minus1).unwrap();
        probs
            .matmul(&v.contiguous().unwrap())
            .unwrap()
            .transpose(1, 2)
            .unwrap()
            .reshape((b, t, heads * dh))
            .unwrap()
    }

    #[test]
    fn fused_attention_matches_masked_reference_on_real_tokens() {
        // Lengths around the tile sizes (8 rows, 16 and 32 keys), down to 1 and up to the
        // padded length itself; head sizes below, at and between whole vectors.
        let t = 40;
        let lengths = [40u32, 33, 17, 8, 7, 1];
        let lens = Tensor::new(&lengths, &Device::Cpu).unwrap();
        let padded_starts: Vec<u32> = (0..lengths.len() as u32).map(|b| b * t as u32).collect();
        let padded_starts = Tensor::new(padded_starts, &Device::Cpu).unwrap();
        // The same sequences with the padding squeezed out.
        let real_rows: Vec<u32> = (0..lengths.len())
            .flat_map(|b| (0..lengths[b]).map(move |i| (b * t) as u32 + i))
            .collect();
        let real_rows = Tensor::new(real_rows, &Device::Cpu).unwrap();
        let packed_starts: Vec<u32> = lengths
            .iter()
            .scan(0, |at, &len| {
                *at += len;
                Some(*at - len)
            })
            .collect();
        let packed_starts = Tensor::new(packed_starts, &Device::Cpu).unwrap();
        let kernels: [(&str, SequenceKernel); 2] = [
            ("dispatched", sequence_kernel()),
            ("portable", attend_sequence),
        ];
        for (heads, dh) in [(3, 8), (2, 20), (2, 32), (2, 48), (2, 64)] {
            // The wider spread drives some exponents below the approximation's cutoff.
            for spread in [1.0, 4.0] {
                let shape = (lengths.len(), t, 3 * heads * dh);
                let qkv = Tensor::randn(0f32, spread, shape, &Device::Cpu).unwrap();
                let theirs = reference_attention(&qkv, &lengths, heads, dh);
                for (name, kernel) in kernels {
                    let op = Attention {
                        heads,
                        head_dim: dh,
                        kernel,
                    };
                    let ours = qkv.apply_op3_no_bwd(&padded_starts, &lens, &op).unwrap();
                    let case = format!("{name} kernel, head dim {dh}, spread {spread}");
                    assert_matches_on_real_tokens(&ours, &theirs, &lengths, spread, &case);
                    let rows = qkv.reshape(((), 3 * heads * dh)).unwrap();
                    let packed = rows.index_select(&real_rows, 0).unwrap();
                    let packed = packed.apply_op3_no_bwd(&packed_starts, &lens, &op).unwrap();
                    let from_padded = ours
                        .reshape(((), heads * dh))
                        .unwrap()
                        .index_select(&real_rows, 0)
                        .unwrap();
                    let diff = max_abs_diff(&packed, &from_padded);
                    assert_eq!(diff, 0.0, "{case}: packed rows differ from padded ones");
                }
            }
        }
    }

    /// The largest element-wise difference of two same-shaped tensors.
    pub(in crate::encoder) fn max_abs_diff(a: &Tensor, b: &Tensor) -> f32 {
        (a - b)
            .unwrap()
            .abs()
            .unwrap()
            .max_all()
            .unwrap()
            .to_scalar::<f32>()
            .unwrap()
    }

    fn assert_matches_on_real_tokens(
        ours: &Tensor,
        theirs: &Tensor,
        lengths: &[u32],
        spread: f32,
        case: &str,
    ) {
        let t = ours.dim(1).unwrap();
        for (b, &len) in lengths.iter().enumerate() {
            let real = |x: &Tensor| x.get(b).unwrap().narrow(0, 0, len as usize).unwrap();
            let diff = max_abs_diff(&real(ours), &real(theirs));
            // Rounding in scores of size spread^2 moves probabilities that weigh values of size
            // spread: the reference itself is only that exact.
            let tolerance = 1e-5 * spread.powi(3);
            assert!(diff < tolerance, "{case}, length {len}: off by {diff}");
            // Padding rows are zero: nothing reads them.
            let pad = ours
                .get(b)
                .unwrap()
                .narrow(0, len as usize, t - len as usize)
                .unwrap();
            assert_eq!(
                pad.abs()
                    .unwrap()
                    .sum_all()
                    .unwrap()
                    .to_scalar::<f32>()
                    .unwrap(),
                0.0,
                "{case}, length {len}"
            );
        }
    }
}
