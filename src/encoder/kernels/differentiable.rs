//! Layer norm, softmax, the exact GELU and the bias add, each fused forward and with a
//! hand-written backward pass: candle's composite forms of these cost a dozen passes over the
//! activations forward and twice that backward, more than the GEMMs around them. Training
//! differentiates through all four; inference uses the layer norm and the bias add too (one
//! implementation instead of two).

mod gelu;
mod layer_norm;

use candle_core::{bail, CpuStorage, CustomOp1, CustomOp2, Layout, Result, Shape, Tensor};
use rayon::prelude::*;

pub use self::gelu::gelu_train;
pub use self::layer_norm::layer_norm;
use super::math::softmax_in_place;
use super::{contiguous_f32, map_rows_with_bias, multiversion};

/// Elements per parallel work item of the element-wise kernels.
const ELEMENTWISE_CHUNK: usize = 1 << 14;

/// Rows per parallel work item of the gradients summed over rows (layer norm's gamma and beta,
/// a bias): fixed, not per thread, and the blocks' sums then added in order, so the sums come
/// out the same on every run and machine and training repeats bit for bit.
const SUM_BLOCK_ROWS: usize = 64;

multiversion! {
    /// Adds each `sum.len()`-wide row of `rows` into `sum`.
    fn sum_rows(sum: &mut [f32], rows: &[f32]) {
        for r in rows.chunks_exact(sum.len()) {
            for (s, &x) in sum.iter_mut().zip(r) {
                *s += x;
            }
        }
    }
}

/// The rows of a contiguous f32 tensor as one slice, and the row length.
fn rows_f32<'a>(storage: &'a CpuStorage, layout: &Layout) -> Result<(&'a [f32], usize)> {
    let width = *layout.shape().dims().last().unwrap_or(&1);
    Ok((contiguous_f32(storage, layout)?, width.max(1)))
}

/// Softmax over the last dimension of `scores + bias`, the bias one row per batch element
/// broadcast over that element's rows (attention's padding mask: `[batch, 1, 1, seq]` against
/// `[batch, heads, seq, seq]`). The add is folded into the softmax: on its own it was candle's
/// broadcasting kernel, about a twelfth of a training step.
struct MaskedSoftmax;

/// Rows of `width` per parallel work item of the row-wise kernels: a row of attention scores
/// is too little work to hand to the pool on its own.
fn rows_per_item(width: usize) -> usize {
    (ELEMENTWISE_CHUNK / width).max(1)
}

impl CustomOp2 for MaskedSoftmax {
    fn name(&self) -> &'static str {
        "rag-masked-softmax"
    }

    fn cpu_fwd(
        &self,
        xs: &CpuStorage,
        xs_layout: &Layout,
        bias: &CpuStorage,
        bias_layout: &Layout,
    ) -> Result<(CpuStorage, Shape)> {
        let (src, width) = rows_f32(xs, xs_layout)?;
        let bias = contiguous_f32(bias, bias_layout)?;
        let (rows, bias_rows) = (src.len() / width, bias.len() / width);
        if bias.len() % width != 0 || bias_rows == 0 || rows % bias_rows != 0 {
            bail!("a bias of {} for {rows} rows of {width}", bias.len());
        }
        let rows_per_bias = rows / bias_rows;
        let per_item = rows_per_item(width);
        let mut out = src.to_vec();
        out.par_chunks_mut(width * per_item)
            .enumerate()
            .for_each(|(item, chunk)| {
                for (i, row) in chunk.chunks_exact_mut(width).enumerate() {
                    let b = (item * per_item + i) / rows_per_bias;
                    for (x, &m) in row.iter_mut().zip(&bias[b * width..(b + 1) * width]) {
                        *x += m;
                    }
                    softmax_in_place(row);
                }
            });
        Ok((CpuStorage::F32(out), xs_layout.shape().clone()))
    }

    /// The bias is a constant (the mask): no gradient.
    fn bwd(
        &self,
        _xs: &Tensor,
        _bias: &Tensor,
        res: &Tensor,
        grad: &Tensor,
    ) -> Result<(Option<Tensor>, Option<Tensor>)> {
        let grad = res.apply_op2_no_bwd(&grad.contiguous()?, &SoftmaxGrad)?;
        Ok((Some(grad), None))
    }
}

/// The softmax's backward, from its output `y`: `dx = y * (g - sum(g * y))`.
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
        let chunk = width * rows_per_item(width);
        out.par_chunks_mut(chunk)
            .zip(ys.par_chunks(chunk).zip(grad.par_chunks(chunk)))
            .for_each(|(o, (y, g))| {
                let rows = o.chunks_exact_mut(width).zip(y.chunks_exact(width));
                for ((o, y), g) in rows.zip(g.chunks_exact(width)) {
                    let dot: f32 = y.iter().zip(g).map(|(y, g)| y * g).sum();
                    for ((o, &y), &g) in o.iter_mut().zip(y).zip(g) {
                        *o = y * (g - dot);
                    }
                }
            });
        Ok((CpuStorage::F32(out), ys_layout.shape().clone()))
    }
}

/// Differentiable `softmax(scores + bias)` over the last dimension, fused forward and backward;
/// `bias` holds one row per leading block of `scores`' rows (see [`MaskedSoftmax`]).
pub fn masked_softmax_train(scores: &Tensor, bias: &Tensor) -> Result<Tensor> {
    scores
        .contiguous()?
        .apply_op2(&bias.contiguous()?, MaskedSoftmax)
}

/// `x + b`, the bias `b` (`[width]`) added to every row of `x` (`[.., width]`); backward: the
/// gradient itself for `x`, and its column sums for `b`. candle's broadcast add reduces the
/// bias gradient one strided column at a time on one thread: an eighth of a training step on
/// two cores went there, with the other core idle.
struct BiasAdd;

multiversion! {
    /// Adds `row` to each `row.len()`-wide row of `rows`.
    fn add_to_rows(rows: &mut [f32], row: &[f32]) {
        for r in rows.chunks_exact_mut(row.len()) {
            for (x, &b) in r.iter_mut().zip(row) {
                *x += b;
            }
        }
    }
}

impl CustomOp2 for BiasAdd {
    fn name(&self) -> &'static str {
        "rag-bias-add"
    }

    fn cpu_fwd(
        &self,
        xs: &CpuStorage,
        xs_layout: &Layout,
        bias: &CpuStorage,
        bias_layout: &Layout,
    ) -> Result<(CpuStorage, Shape)> {
        map_rows_with_bias(
            (xs, xs_layout),
            (bias, bias_layout),
            rows_per_item,
            |out, xs, bias| {
                out.copy_from_slice(xs);
                add_to_rows(out, bias);
            },
        )
    }

    fn bwd(
        &self,
        _xs: &Tensor,
        _bias: &Tensor,
        _res: &Tensor,
        grad: &Tensor,
    ) -> Result<(Option<Tensor>, Option<Tensor>)> {
        let grad = grad.contiguous()?;
        let bias_grad = grad.apply_op1_no_bwd(&ColumnSums)?;
        Ok((Some(grad), Some(bias_grad)))
    }
}

/// The sums over all rows of `[.., width]`, as `[width]`: partial sums of [`SUM_BLOCK_ROWS`] rows
/// each in parallel, then those in order.
struct ColumnSums;

impl CustomOp1 for ColumnSums {
    fn name(&self) -> &'static str {
        "rag-column-sums"
    }

    fn cpu_fwd(&self, xs: &CpuStorage, layout: &Layout) -> Result<(CpuStorage, Shape)> {
        let (src, width) = rows_f32(xs, layout)?;
        let partials: Vec<Vec<f32>> = src
            .par_chunks(width * SUM_BLOCK_ROWS)
            .map(|rows| {
                let mut sum = vec![0f32; width];
                sum_rows(&mut sum, rows);
                sum
            })
            .collect();
        let mut total = vec![0f32; width];
        for partial in &partials {
            sum_rows(&mut total, partial);
        }
        Ok((CpuStorage::F32(total), Shape::from(width)))
    }
}

/// Differentiable `x + b` over the last dimension, with a parallel bias gradient.
pub fn bias_add(xs: &Tensor, bias: &Tensor) -> Result<Tensor> {
    xs.contiguous()?.apply_op2(&bias.contiguous()?, BiasAdd)
}

#[cfg(test)]
mod tests {
    use candle_core::{Device, Tensor, Var};

    use super::super::tests::max_abs_diff;
    use super::{bias_add, masked_softmax_train};

    /// The fused masked softmax against candle's broadcast add and softmax: values, and the
    /// gradient through a weighted sum; more rows than one work item, a masked-out column.
    #[test]
    fn masked_softmax_and_its_gradient_match_candle() {
        let device = Device::Cpu;
        let (batch, heads, seq) = (3, 4, 40);
        let n = batch * heads * seq * seq;
        let values: Vec<f32> = (0..n)
            .map(|i| ((i * 37 % 101) as f32 - 50.0) / 17.0)
            .collect();
        let scores = Var::from_vec(values, (batch, heads, seq, seq), &device).unwrap();
        let mask: Vec<f32> = (0..batch * seq)
            .map(|i| {
                if i % seq >= seq - 1 - i / seq {
                    -1e4
                } else {
                    0.0
                }
            })
            .collect();
        let bias = Tensor::from_vec(mask, (batch, 1, 1, seq), &device).unwrap();
        let weights = Tensor::arange(0f32, n as f32, &device)
            .unwrap()
            .reshape((batch, heads, seq, seq))
            .unwrap()
            .affine(1e-4, 0.0)
            .unwrap();
        let ours = masked_softmax_train(scores.as_tensor(), &bias).unwrap();
        let theirs =
            candle_nn::ops::softmax_last_dim(&scores.broadcast_add(&bias).unwrap()).unwrap();
        assert!(max_abs_diff(&ours, &theirs) < 1e-6);
        let loss = |probs: &Tensor| (probs * &weights).unwrap().sum_all().unwrap();
        let grad = |probs: &Tensor| {
            loss(probs)
                .backward()
                .unwrap()
                .get(&scores)
                .unwrap()
                .clone()
        };
        // candle's fused softmax has no backward: the same softmax from differentiable ops.
        let shifted = scores.broadcast_add(&bias).unwrap();
        let exp = shifted
            .broadcast_sub(&shifted.max_keepdim(3).unwrap())
            .unwrap()
            .exp()
            .unwrap();
        let reference = exp.broadcast_div(&exp.sum_keepdim(3).unwrap()).unwrap();
        assert!(max_abs_diff(&grad(&ours), &grad(&reference)) < 1e-6);
    }

    #[test]
    fn bias_add_and_its_gradients_match_candle() {
        let device = Device::Cpu;
        // 150 rows: more than one work item, the last one partial.
        let var = |shape: &[usize]| {
            Var::from_tensor(&Tensor::randn(0f32, 1.0, shape, &device).unwrap()).unwrap()
        };
        let (xs, bias) = (var(&[3, 50, 24]), var(&[24]));
        let weights = Tensor::randn(0f32, 1.0, (3, 50, 24), &device).unwrap();
        let ours = bias_add(xs.as_tensor(), bias.as_tensor()).unwrap();
        let theirs = xs.as_tensor().broadcast_add(bias.as_tensor()).unwrap();
        assert!(max_abs_diff(&ours, &theirs) < 1e-6);
        let gradients = |out: Tensor| (out * &weights).unwrap().sum_all().unwrap().backward();
        let (ours, theirs) = (gradients(ours).unwrap(), gradients(theirs).unwrap());
        for v in [&xs, &bias] {
            let (a, b) = (ours.get(v).unwrap(), theirs.get(v).unwrap());
            assert_eq!(a.dims(), b.dims());
            assert!(max_abs_diff(a, b) < 1e-4);
        }
    }
}
