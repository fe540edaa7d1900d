//! The candle op over a packed projection: the shape checks between a tensor and
//! [`PackedLinear::run`].

use candle_core::{bail, CpuStorage, CustomOp1, CustomOp2, Layout, Result, Shape};

use super::{Epilogue, PackedLinear};
use crate::encoder::kernels;

/// The candle op that runs a packed projection on a tensor's rows: as a one-input op with or
/// without GELU, as a two-input op adding the residual.
pub(super) struct PackedLinearOp<'a> {
    pub(super) linear: &'a PackedLinear,
    pub(super) gelu: bool,
}

impl PackedLinearOp<'_> {
    fn rows<'s>(&self, storage: &'s CpuStorage, layout: &Layout) -> Result<(&'s [f32], Shape)> {
        let xs = kernels::contiguous_f32(storage, layout)?;
        let dims = layout.shape().dims();
        if dims.last() != Some(&self.linear.in_dim) {
            bail!(
                "packed projection takes {} features, got shape {:?}",
                self.linear.in_dim,
                dims
            );
        }
        let mut out_dims = dims.to_vec();
        *out_dims.last_mut().expect("checked above") = self.linear.out_dim;
        Ok((xs, Shape::from(out_dims)))
    }
}

impl CustomOp1 for PackedLinearOp<'_> {
    fn name(&self) -> &'static str {
        "rag-packed-linear"
    }

    fn cpu_fwd(&self, xs: &CpuStorage, layout: &Layout) -> Result<(CpuStorage, Shape)> {
        let (xs, shape) = self.rows(xs, layout)?;
        let epilogue = if self.gelu {
            Epilogue::BiasGelu
        } else {
            Epilogue::Bias
        };
        Ok((CpuStorage::F32(self.linear.run(xs, epilogue)), shape))
    }
}

impl CustomOp2 for PackedLinearOp<'_> {
    fn name(&self) -> &'static str {
        "rag-packed-linear-residual"
    }

    fn cpu_fwd(
        &self,
        xs: &CpuStorage,
        xs_layout: &Layout,
        residual: &CpuStorage,
        residual_layout: &Layout,
    ) -> Result<(CpuStorage, Shape)> {
        let (xs, shape) = self.rows(xs, xs_layout)?;
        let residual = kernels::contiguous_f32(residual, residual_layout)?;
        if residual_layout.shape() != &shape {
            bail!(
                "residual shape {:?} does not match the output {:?}",
                residual_layout.shape(),
                shape
            );
        }
        let out = self.linear.run(xs, Epilogue::BiasResidual(residual));
        Ok((CpuStorage::F32(out), shape))
    }
}
