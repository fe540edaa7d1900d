//! The exact (erf) GELU, fused forward and backward.

use candle_core::{CpuStorage, CustomOp1, CustomOp2, Layout, Result, Shape, Tensor};
use rayon::prelude::*;

use super::ELEMENTWISE_CHUNK;
use crate::encoder::kernels::math::{erf_approx, exp_approx, gelu};
use crate::encoder::kernels::{contiguous_f32, multiversion};

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
