//! The inference projections' GEMM, for CPUs with AVX-512. A projection's weights never change
//! at inference, so they are packed once at load into the layout the kernel streams (panels of
//! 64 output columns, one row of the panel per input feature) instead of being repacked on
//! every call as a general GEMM must; the activations are read in place, one broadcast per
//! element. The bias, and GELU or the residual add where the layer wants them, are applied to
//! the accumulators on their way out, saving a pass over memory for each.
//!
//! Profiling the encoder on two cores put candle's general GEMM at about 55% of the machine's
//! f32 peak and the separate bias, GELU and residual passes at another sixth of the run time;
//! for a short question, repacking the weights cost more than the arithmetic.

use candle_core::{bail, CpuStorage, CustomOp1, CustomOp2, Layout, Result, Shape, Tensor};
use rayon::prelude::*;

use super::kernels;

/// Output columns per panel: four AVX-512 vectors.
const PANEL: usize = 64;
const VECS: usize = PANEL / 16;
/// Rows per register tile: 6 rows x 4 vectors keep 24 of the 32 vector registers accumulating,
/// and each step's 4 weight loads and 6 broadcasts feed 24 FMAs.
const TILE_ROWS: usize = 6;
/// Rows one thread takes at a time: enough tiles that a weight panel, once in L2, serves many.
const CHUNK_ROWS: usize = 16 * TILE_ROWS;
/// Input features per pass over a chunk: all of them for a 384-wide input (no partial sums),
/// four passes for the 1536-wide one. A block's 96 KiB of weights stay in L2 while the chunk's
/// tiles run over them; 128-feature blocks (32 KiB, within L1) measured about 3% slower.
const DEPTH_BLOCK: usize = 384;

/// One weight panel row: 64 output columns, aligned so that loads never split a cache line.
#[derive(Clone, Copy)]
#[repr(C, align(64))]
struct PanelRow([f32; PANEL]);

/// Whether this CPU runs the packed kernel (else the caller keeps candle's GEMM).
pub fn supported() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        std::arch::is_x86_feature_detected!("avx512f")
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

/// What happens to `x W^T + b` before it is stored.
#[derive(Clone, Copy)]
enum Epilogue<'a> {
    Bias,
    BiasGelu,
    /// Adds the `[rows, out]` residual stream (the layer's input).
    BiasResidual(&'a [f32]),
}

/// A linear layer `x W^T + b` packed for the AVX-512 kernel.
pub struct PackedLinear {
    in_dim: usize,
    out_dim: usize,
    /// `[panel][in_dim]` rows of 64 output columns, zero beyond `out_dim`.
    panels: Vec<PanelRow>,
    bias: Vec<f32>,
}

impl PackedLinear {
    /// From `weight` `[out, in]` (PyTorch's layout) and `bias` `[out]`.
    pub fn new(weight: &Tensor, bias: &Tensor) -> Result<Self> {
        let (out_dim, in_dim) = weight.dims2()?;
        if bias.dims1()? != out_dim {
            bail!("bias of {} for {out_dim} outputs", bias.dims1()?);
        }
        let weight = weight.to_dtype(candle_core::DType::F32)?.to_vec2::<f32>()?;
        let n_panels = out_dim.div_ceil(PANEL);
        let mut panels = vec![PanelRow([0.0; PANEL]); n_panels * in_dim];
        for (o, row) in weight.iter().enumerate() {
            let (panel, lane) = (o / PANEL, o % PANEL);
            for (i, &w) in row.iter().enumerate() {
                panels[panel * in_dim + i].0[lane] = w;
            }
        }
        let mut bias = bias.to_dtype(candle_core::DType::F32)?.to_vec1::<f32>()?;
        bias.resize(n_panels * PANEL, 0.0);
        Ok(Self {
            in_dim,
            out_dim,
            panels,
            bias,
        })
    }

    /// `xs W^T + b` for `xs` `[.., in]`.
    pub fn forward(&self, xs: &Tensor) -> Result<Tensor> {
        xs.contiguous()?.apply_op1_no_bwd(&Apply {
            linear: self,
            gelu: false,
        })
    }

    /// `gelu(xs W^T + b)`, the exact (erf) GELU.
    pub fn forward_gelu(&self, xs: &Tensor) -> Result<Tensor> {
        xs.contiguous()?.apply_op1_no_bwd(&Apply {
            linear: self,
            gelu: true,
        })
    }

    /// `xs W^T + b + residual`, `residual` shaped like the output.
    pub fn forward_residual(&self, xs: &Tensor, residual: &Tensor) -> Result<Tensor> {
        xs.contiguous()?.apply_op2_no_bwd(
            &residual.contiguous()?,
            &Apply {
                linear: self,
                gelu: false,
            },
        )
    }

    fn run(&self, xs: &[f32], epilogue: Epilogue) -> Vec<f32> {
        let rows = xs.len() / self.in_dim;
        let total = rows * self.out_dim;
        let mut out: Vec<f32> = Vec::with_capacity(total);
        let dst = SharedOut(out.as_mut_ptr());
        let n_panels = self.out_dim.div_ceil(PANEL);
        let chunks = rows.div_ceil(CHUNK_ROWS);
        // Few rows (a question, a small batch): split the panels between threads too, so both
        // cores stream half of the weights each.
        let groups = if chunks >= 2 * rayon::current_num_threads() {
            1
        } else {
            n_panels
        };
        (0..chunks * groups).into_par_iter().for_each(|item| {
            let (chunk, group) = (item / groups, item % groups);
            let first = chunk * CHUNK_ROWS;
            let end = rows.min(first + CHUNK_ROWS);
            let panels = if groups == 1 {
                0..n_panels
            } else {
                group..group + 1
            };
            for panel in panels {
                // SAFETY: `supported()` was checked when this layer was packed; `xs` holds
                // `rows * in_dim` values; each (row, panel) block of `dst` is written by exactly
                // one item, inside `rows * out_dim`.
                unsafe { self.rows_of_panel(xs, first..end, panel, dst, epilogue) }
            }
        });
        // SAFETY: the tiles above wrote every one of the `total` elements.
        unsafe { out.set_len(total) };
        out
    }

    /// Rows `rows` of output panel `panel`, a register tile at a time. The input features go
    /// in blocks of `DEPTH_BLOCK`, each block's weights staying in cache while every tile of the
    /// chunk runs over them; partial sums wait in the output.
    #[cfg(target_arch = "x86_64")]
    unsafe fn rows_of_panel(
        &self,
        xs: &[f32],
        rows: std::ops::Range<usize>,
        panel: usize,
        dst: SharedOut,
        epilogue: Epilogue,
    ) {
        let cols = PANEL.min(self.out_dim - panel * PANEL);
        for depth in (0..self.in_dim).step_by(DEPTH_BLOCK) {
            let depth = depth..self.in_dim.min(depth + DEPTH_BLOCK);
            let finish = depth.end == self.in_dim;
            let mut row = rows.start;
            while row < rows.end {
                let tile = Tile {
                    xs: xs.as_ptr().add(row * self.in_dim),
                    in_dim: self.in_dim,
                    weights: self.panels[panel * self.in_dim..].as_ptr().cast::<f32>(),
                    depth: depth.clone(),
                    out: dst.0.add(row * self.out_dim + panel * PANEL),
                    out_dim: self.out_dim,
                    cols,
                };
                let take = TILE_ROWS.min(rows.end - row);
                match take {
                    6 => tile.accumulate::<6>(),
                    5 => tile.accumulate::<5>(),
                    4 => tile.accumulate::<4>(),
                    3 => tile.accumulate::<3>(),
                    2 => tile.accumulate::<2>(),
                    _ => tile.accumulate::<1>(),
                }
                if finish {
                    let at = row * self.out_dim + panel * PANEL;
                    tile.finish(take, self.bias.as_ptr().add(panel * PANEL), epilogue, at);
                }
                row += take;
            }
        }
    }

    #[cfg(not(target_arch = "x86_64"))]
    unsafe fn rows_of_panel(
        &self,
        _: &[f32],
        _: std::ops::Range<usize>,
        _: usize,
        _: SharedOut,
        _: Epilogue,
    ) {
        unreachable!("packed projections are only built where supported() holds")
    }
}

/// The output buffer, written by many threads at disjoint places.
#[derive(Clone, Copy)]
struct SharedOut(*mut f32);
// SAFETY: every thread writes a disjoint set of elements (see `PackedLinear::run`).
unsafe impl Send for SharedOut {}
unsafe impl Sync for SharedOut {}

/// Pointers to one register tile's inputs and outputs: up to 6 rows by one 64-column panel,
/// over one block of input features.
struct Tile {
    xs: *const f32,
    in_dim: usize,
    /// The panel's first row.
    weights: *const f32,
    depth: std::ops::Range<usize>,
    out: *mut f32,
    out_dim: usize,
    /// Valid output columns in this panel (64 except in the last one).
    cols: usize,
}

#[cfg(target_arch = "x86_64")]
impl Tile {
    /// The first `n` of this tile's columns from `first` on, as a lane mask.
    fn lanes(&self, first: usize) -> std::arch::x86_64::__mmask16 {
        match self.cols.saturating_sub(first) {
            n if n >= 16 => !0,
            n => (1u16 << n) - 1,
        }
    }

    /// Adds this block of features' products to the `R` rows' sums in the output (starting
    /// them at zero on the first block). On its own, away from the epilogue, so that LLVM
    /// keeps all 24 accumulators in registers: inlined together, it spilled some.
    #[target_feature(enable = "avx512f")]
    #[inline(never)]
    unsafe fn accumulate<const R: usize>(&self) {
        use std::arch::x86_64::*;
        let mut acc = [[_mm512_setzero_ps(); VECS]; R];
        if self.depth.start > 0 {
            for (r, acc) in acc.iter_mut().enumerate() {
                for (v, a) in acc.iter_mut().enumerate() {
                    let at = self.out.add(r * self.out_dim + v * 16);
                    *a = _mm512_maskz_loadu_ps(self.lanes(v * 16), at);
                }
            }
        }
        for i in self.depth.clone() {
            let w = self.weights.add(i * PANEL);
            let wv = [
                _mm512_load_ps(w),
                _mm512_load_ps(w.add(16)),
                _mm512_load_ps(w.add(32)),
                _mm512_load_ps(w.add(48)),
            ];
            for (r, acc) in acc.iter_mut().enumerate() {
                let x = _mm512_set1_ps(*self.xs.add(r * self.in_dim + i));
                for (a, &w) in acc.iter_mut().zip(&wv) {
                    *a = _mm512_fmadd_ps(x, w, *a);
                }
            }
        }
        for (r, acc) in acc.iter().enumerate() {
            for (v, &a) in acc.iter().enumerate() {
                let at = self.out.add(r * self.out_dim + v * 16);
                _mm512_mask_storeu_ps(at, self.lanes(v * 16), a);
            }
        }
    }

    /// Finishes the first `rows` rows' sums, still in L1: adds the bias, then applies
    /// `epilogue`; `at` is the tile's offset in output-shaped arrays (the residual).
    #[target_feature(enable = "avx512f")]
    unsafe fn finish(&self, rows: usize, bias: *const f32, epilogue: Epilogue, at: usize) {
        use std::arch::x86_64::*;
        for r in 0..rows {
            for first in (0..self.cols).step_by(16) {
                let lanes = self.lanes(first);
                let offset = r * self.out_dim + first;
                let out = self.out.add(offset);
                let y = _mm512_add_ps(
                    _mm512_maskz_loadu_ps(lanes, out),
                    _mm512_loadu_ps(bias.add(first)),
                );
                let y = match epilogue {
                    Epilogue::Bias => y,
                    Epilogue::BiasGelu => kernels::gelu_lanes(y),
                    Epilogue::BiasResidual(residual) => {
                        let skip = residual.as_ptr().add(at + offset);
                        _mm512_add_ps(y, _mm512_maskz_loadu_ps(lanes, skip))
                    }
                };
                _mm512_mask_storeu_ps(out, lanes, y);
            }
        }
    }
}

/// The candle op that runs a packed projection on a tensor's rows: as a one-input op with or
/// without GELU, as a two-input op adding the residual.
struct Apply<'a> {
    linear: &'a PackedLinear,
    gelu: bool,
}

impl Apply<'_> {
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

impl CustomOp1 for Apply<'_> {
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

impl CustomOp2 for Apply<'_> {
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::encoder::kernels::tests::max_abs_diff;
    use candle_core::Device;

    fn random(shape: (usize, usize), seed: u64) -> Tensor {
        let mut rng = crate::util::Rng::new(seed);
        let data: Vec<f32> = (0..shape.0 * shape.1)
            .map(|_| (rng.next_u64() % 2001) as f32 / 1000.0 - 1.0)
            .collect();
        Tensor::from_vec(data, shape, &Device::Cpu).unwrap()
    }

    /// Every tile height (1..6 leftover rows), both the row-split and the panel-split
    /// schedules, a last panel narrower than 64 and one narrower than a vector, odd widths, and
    /// inputs wider than one block of features (sums carried between blocks).
    #[test]
    fn packed_projection_matches_candle_matmul() {
        if !supported() {
            eprintln!("SKIP: this CPU has no AVX-512; the packed GEMM is not used here");
            return;
        }
        for (rows, in_dim, out_dim) in [
            (1, 7, 5),
            (5, 33, 70),
            (13, 64, 64),
            (250, 96, 136),
            (601, 40, 200),
            (37, 2 * DEPTH_BLOCK + 41, 70),
        ] {
            let x = random((rows, in_dim), rows as u64);
            let w = random((out_dim, in_dim), 7);
            let b = random((1, out_dim), 9).squeeze(0).unwrap();
            let packed = PackedLinear::new(&w, &b).unwrap();
            let linear = x
                .matmul(&w.t().unwrap())
                .unwrap()
                .broadcast_add(&b)
                .unwrap();
            let residual = random((rows, out_dim), 11);

            let cases = [
                (packed.forward(&x).unwrap(), linear.clone()),
                (packed.forward_gelu(&x).unwrap(), linear.gelu_erf().unwrap()),
                (
                    packed.forward_residual(&x, &residual).unwrap(),
                    (&linear + &residual).unwrap(),
                ),
            ];
            for (ours, theirs) in cases {
                assert_eq!(ours.dims(), theirs.dims());
                let diff = max_abs_diff(&ours, &theirs);
                assert!(diff < 1e-4, "{rows}x{in_dim}->{out_dim}: max diff {diff}");
            }
        }
    }

    #[test]
    fn wrong_input_width_is_an_error() {
        if !supported() {
            eprintln!("SKIP: this CPU has no AVX-512");
            return;
        }
        let packed =
            PackedLinear::new(&random((8, 4), 1), &random((1, 8), 2).squeeze(0).unwrap()).unwrap();
        assert!(packed.forward(&random((3, 5), 3)).is_err());
    }
}
