//! Layer norm over the last dimension, fused forward and with a one-pass backward that yields
//! the input's, gamma's and beta's gradients together.

use candle_core::{CpuStorage, CustomOp3, Layout, Result, Shape, Tensor};
use rayon::prelude::*;

use super::{rows_f32, sum_rows, SUM_BLOCK_ROWS};
use crate::encoder::kernels::{contiguous_f32, multiversion};

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
        // d/dgamma and d/dbeta are summed per block of rows, then the blocks in order.
        let partials: Vec<Vec<f32>> = dx
            .par_chunks_mut(width * SUM_BLOCK_ROWS)
            .zip(
                src.par_chunks(width * SUM_BLOCK_ROWS)
                    .zip(grad.par_chunks(width * SUM_BLOCK_ROWS)),
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
        for partial in &partials {
            sum_rows(params, partial);
        }
        Ok((CpuStorage::F32(out), Shape::from((rows + 2, width))))
    }
}

/// Layer norm over the last dimension, differentiable (fused forward and backward).
pub fn layer_norm(xs: &Tensor, gamma: &Tensor, beta: &Tensor, eps: f64) -> Result<Tensor> {
    xs.contiguous()?
        .apply_op3(gamma, beta, LayerNorm { eps: eps as f32 })
}
