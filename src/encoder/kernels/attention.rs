//! Multi-head self-attention fused from the QKV projection to the context, forward only:
//! profiling the encoder showed candle spending more time in scalar `exp` (softmax), small
//! attention GEMMs and permute copies than in its big GEMMs; this runs on all cores and fuses
//! what can be fused.

use candle_core::{bail, CpuStorage, CustomOp3, Layout, Result, Shape, Tensor};
use rayon::prelude::*;

use super::math::softmax_in_place;
use super::{contiguous_f32, multiversion};
#[cfg(target_arch = "x86_64")]
use crate::encoder::simd::Isa;

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

/// The vector kernel for the widest instruction set the CPU has (AVX-512, or AVX2 with FMA),
/// else the portable one.
fn sequence_kernel() -> SequenceKernel {
    #[cfg(target_arch = "x86_64")]
    match Isa::detect() {
        // SAFETY: the CPU has the instruction set (just detected).
        Some(Isa::Avx512) => {
            return |qkv, out, len, heads, dh| unsafe {
                tiled::attend_sequence_avx512(qkv, out, len, heads, dh)
            }
        }
        // SAFETY: as above.
        Some(Isa::Avx2) => {
            return |qkv, out, len, heads, dh| unsafe {
                tiled::attend_sequence_avx2(qkv, out, len, heads, dh)
            }
        }
        _ => {}
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

/// Vector width the portable kernel's blocks are laid out for.
const LANES: usize = 16;
/// Query rows computed together, so each key or value vector loaded feeds several FMAs.
const ROWS: usize = 4;

fn round_up(n: usize, to: usize) -> usize {
    n.div_ceil(to) * to
}

multiversion! {
    /// The portable [`SequenceKernel`], for CPUs with neither AVX-512 nor AVX2 with FMA.
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

/// The attention kernel over vectors (`attention/tiled.rs`), and its copy of the keys
/// transposed (`attention/transpose.rs`).
mod tiled;
mod transpose;

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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::encoder::kernels::tests::max_abs_diff;
    use candle_core::{Device, D};

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
        // The vector kernel's tiles at both widths on plain arrays, then on each instruction
        // set the CPU has (the dispatched kernel is the widest).
        let mut kernels: Vec<(&str, SequenceKernel)> = vec![
            ("dispatched", sequence_kernel()),
            ("portable", attend_sequence),
            (
                "tiled on 16 portable lanes",
                tiled::attend_sequence_portable16,
            ),
            (
                "tiled on 8 portable lanes",
                tiled::attend_sequence_portable8,
            ),
        ];
        #[cfg(target_arch = "x86_64")]
        for isa in Isa::available() {
            kernels.push(match isa {
                // SAFETY: the CPU has the instruction set (just detected).
                Isa::Avx512 => ("avx512", |q, o, l, h, d| unsafe {
                    tiled::attend_sequence_avx512(q, o, l, h, d)
                }),
                // SAFETY: as above.
                _ => ("avx2", |q, o, l, h, d| unsafe {
                    tiled::attend_sequence_avx2(q, o, l, h, d)
                }),
            });
        }
        for (heads, dh) in [(3, 8), (2, 20), (2, 32), (2, 48), (2, 64)] {
            // The wider spread drives some exponents below the approximation's cutoff.
            for spread in [1.0, 4.0] {
                let shape = (lengths.len(), t, 3 * heads * dh);
                let qkv = Tensor::randn(0f32, spread, shape, &Device::Cpu).unwrap();
                let theirs = reference_attention(&qkv, &lengths, heads, dh);
                for &(name, kernel) in &kernels {
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
