//! The inference projections' GEMM, for CPUs with AVX-512 or AVX2 with FMA (the f32 kernel and the
//! epilogues are written once over the vector width, `super::simd`). A projection's weights never
//! change at inference, so they are packed once at load into the layout the kernel streams (panels
//! of 64 output columns) instead of being repacked on every call as a general GEMM must; the f32
//! activations are broadcast one element at a time, on AVX2 from a chunk's rows interleaved once,
//! a register tile's rows feature by feature. The bias, and GELU or the residual add where the layer
//! wants them, are applied to the accumulators on their way out, saving a pass over memory for
//! each.
//!
//! Profiling the encoder on two cores put candle's general GEMM at about 55% of the machine's
//! f32 peak and the separate bias, GELU and residual passes at another sixth of the run time;
//! for a short question, repacking the weights cost more than the arithmetic.
//!
//! This module schedules the tiles and applies the epilogues; the weights come in one of three
//! kernel families, [`float`] (f32), [`bf16`] (AVX-512 BF16, on [`bf16::amx`] tiles where the CPU has
//! them) and [`int8`] (AVX-512 VNNI, or AVX2 in [`int8_avx2`]), chosen by [`Precision`].

mod bf16;
mod epilogue;
mod float;
mod int8;
mod int8_avx2;
mod op;
mod precision;

use candle_core::{bail, Result, Tensor};
use rayon::prelude::*;

use super::kernels;
use super::simd::{self, Isa};
use bf16::{Bf16Rows, Bf16Source, Bf16Weights};
use epilogue::Epilogue;
use float::{F32Source, PanelRow};
use int8::{Int8Kernel, Int8Rows, Int8Source, Int8Weights, QUAD};
use int8_avx2::Avx2Int8Source;
use op::PackedLinearOp;
pub use precision::Precision;
#[cfg(target_arch = "x86_64")]
use simd::Simd;

/// Output columns per panel: four AVX-512 vectors (on AVX2, four strips of two 8-lane ones).
const PANEL: usize = 64;
const VECS: usize = PANEL / 16;
/// Rows per register tile: 6 rows x 4 vectors keep 24 of the 32 vector registers accumulating,
/// and each step's 4 weight loads and 6 broadcasts feed 24 FMAs (on AVX2, a strip of 2 vectors:
/// 12 of the 16 registers, 2 loads and 6 broadcasts feeding 12 FMAs).
const TILE_ROWS: usize = 6;
/// Rows one thread takes at a time: enough tiles that a weight panel, once in L2, serves many.
const CHUNK_ROWS: usize = 16 * TILE_ROWS;
/// Input features per pass over a chunk: all of them for a 384-wide input (no partial sums),
/// four passes for the 1536-wide one. A block's 96 KiB of weights stay in L2 while the chunk's
/// tiles run over them; 128-feature blocks (32 KiB, within L1) measured about 3% slower.
const DEPTH_BLOCK: usize = 384;

/// Input values from which a call prepares its rows for a kernel (int8 quantization, bf16
/// rounding) on all threads, in chunks of this many rows: a question's few rows of 384 are
/// quicker done on the calling thread; from 32 rows of 1536 on, splitting them saved about a
/// fifth of an int8 call.
const CONVERT_PARALLEL_VALUES: usize = 32 * 1024;
const CONVERT_CHUNK_ROWS: usize = 8;

/// Runs `convert` on each `in_dim`-wide row of `xs` with its `stride`-wide row of `out` and its
/// entry of `per_row`, on all threads for large inputs. Rows of `out` past those of `xs` are
/// left as they are.
fn convert_rows<T: Send, R: Send>(
    xs: &[f32],
    in_dim: usize,
    out: &mut [T],
    stride: usize,
    per_row: &mut [R],
    convert: impl Fn(&[f32], &mut [T], &mut R) + Sync,
) {
    let run = |(xs, (out, per_row)): (&[f32], (&mut [T], &mut [R]))| {
        let rows = xs.chunks_exact(in_dim).zip(out.chunks_exact_mut(stride));
        for ((x, o), r) in rows.zip(per_row) {
            convert(x, o, r);
        }
    };
    if xs.len() >= CONVERT_PARALLEL_VALUES {
        let out = out.par_chunks_mut(CONVERT_CHUNK_ROWS * stride);
        let chunks = out.zip(per_row.par_chunks_mut(CONVERT_CHUNK_ROWS));
        xs.par_chunks(CONVERT_CHUNK_ROWS * in_dim)
            .zip(chunks)
            .for_each(run);
    } else {
        run((xs, (out, per_row)));
    }
}

/// The first `n` of a vector's 16 f32 lanes (all 16 from 16 on), as a mask.
fn first_lanes(n: usize) -> u16 {
    match n {
        n if n >= 16 => !0,
        n => (1u16 << n) - 1,
    }
}

/// Whether this CPU runs the packed f32 kernel, on AVX-512 or AVX2 with FMA (else the caller
/// keeps candle's GEMM).
pub fn supported() -> bool {
    Isa::detect().is_some()
}

/// A linear layer `x W^T + b` packed for the AVX-512 or AVX2 kernels.
pub struct PackedLinear {
    in_dim: usize,
    out_dim: usize,
    weights: Weights,
    /// Zero beyond `out_dim`.
    bias: Vec<f32>,
}

enum Weights {
    /// `[panel][in_dim]` rows of 64 output columns, zero beyond `out_dim`, for the kernel of
    /// `isa`.
    F32 {
        panels: Vec<PanelRow>,
        isa: Isa,
    },
    Bf16(Bf16Weights),
    Int8(Int8Weights),
}

impl PackedLinear {
    /// Checks the shapes; returns `in`, the weight rows and the bias padded to whole panels.
    fn load(weight: &Tensor, bias: &Tensor) -> Result<(usize, Vec<Vec<f32>>, Vec<f32>)> {
        let (out_dim, in_dim) = weight.dims2()?;
        if bias.dims1()? != out_dim {
            bail!("bias of {} for {out_dim} outputs", bias.dims1()?);
        }
        let weight = weight.to_dtype(candle_core::DType::F32)?.to_vec2::<f32>()?;
        let mut bias = bias.to_dtype(candle_core::DType::F32)?.to_vec1::<f32>()?;
        bias.resize(out_dim.div_ceil(PANEL) * PANEL, 0.0);
        Ok((in_dim, weight, bias))
    }

    /// `xs W^T + b` for `xs` `[.., in]`.
    pub fn forward(&self, xs: &Tensor) -> Result<Tensor> {
        xs.contiguous()?.apply_op1_no_bwd(&PackedLinearOp {
            linear: self,
            gelu: false,
        })
    }

    /// `gelu(xs W^T + b)`, the exact (erf) GELU.
    pub fn forward_gelu(&self, xs: &Tensor) -> Result<Tensor> {
        xs.contiguous()?.apply_op1_no_bwd(&PackedLinearOp {
            linear: self,
            gelu: true,
        })
    }

    /// `xs W^T + b + residual`, `residual` shaped like the output.
    pub fn forward_residual(&self, xs: &Tensor, residual: &Tensor) -> Result<Tensor> {
        xs.contiguous()?.apply_op2_no_bwd(
            &residual.contiguous()?,
            &PackedLinearOp {
                linear: self,
                gelu: false,
            },
        )
    }

    fn run(&self, xs: &[f32], epilogue: Epilogue) -> Vec<f32> {
        let rows = xs.len() / self.in_dim;
        let input = match &self.weights {
            Weights::F32 { panels, isa } => Input::F32 {
                panels,
                xs,
                isa: *isa,
            },
            Weights::Bf16(weights) => Input::Bf16 {
                weights,
                // SAFETY: `new_bf16` checked `bf16_supported()`.
                xs: unsafe { Bf16Rows::new(xs, self.in_dim) },
            },
            Weights::Int8(weights) => Input::Int8 {
                weights,
                // SAFETY: `new_int8_on` checked that the kernel runs here.
                xs: unsafe { Int8Rows::new(xs, self.in_dim, weights.kernel) },
            },
        };
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
            float::with_tile_rows(&input, self.in_dim, first..end, |tiles| {
                for panel in panels {
                    // SAFETY: `supported()` (or the bf16 or int8 one) was checked when this
                    // layer was packed; the input holds `rows` rows; each (row, panel) block of
                    // `dst` is written by exactly one item, inside `rows * out_dim`.
                    unsafe { self.rows_of_panel(&input, tiles, first..end, panel, dst, epilogue) }
                }
            });
        });
        // SAFETY: the tiles above wrote every one of the `total` elements.
        unsafe { out.set_len(total) };
        out
    }

    /// Rows `rows` of output panel `panel`. The f32 input features go in blocks of
    /// `DEPTH_BLOCK`, each block's weights staying in cache while every tile of the chunk runs
    /// over them, partial sums waiting in the output. The int8 ones go in one pass: their sums
    /// leave the registers already scaled to f32, so could not be resumed, and a panel of int8
    /// weights is a quarter the size. The bf16 ones too: a panel of them is half the size.
    #[cfg(target_arch = "x86_64")]
    unsafe fn rows_of_panel(
        &self,
        input: &Input,
        tiles: &[f32],
        rows: std::ops::Range<usize>,
        panel: usize,
        dst: SharedOut,
        epilogue: Epilogue,
    ) {
        match input {
            Input::F32 { panels, xs, isa } => {
                for depth in (0..self.in_dim).step_by(DEPTH_BLOCK) {
                    let depth = depth..self.in_dim.min(depth + DEPTH_BLOCK);
                    let finish = (depth.end == self.in_dim).then_some(epilogue);
                    self.tiles(rows.clone(), panel, dst, finish, |row| F32Source {
                        xs: float::tile_start(*isa, xs, tiles, self.in_dim, rows.start, row),
                        in_dim: self.in_dim,
                        weights: panels[panel * self.in_dim..].as_ptr().cast::<f32>(),
                        depth: depth.clone(),
                        isa: *isa,
                    });
                }
            }
            Input::Bf16 { weights, xs } if weights.amx => {
                self.amx_rows_of_panel(&weights.panels, xs, rows, panel, dst, epilogue);
            }
            Input::Bf16 { weights, xs } => {
                self.tiles(rows, panel, dst, Some(epilogue), |row| Bf16Source {
                    xs: xs.pairs.as_ptr().add(row * xs.stride),
                    stride: xs.stride,
                    weights: weights.panels[panel * xs.stride..].as_ptr(),
                });
            }
            Input::Int8 { weights, xs } => {
                let quads = self.in_dim.div_ceil(QUAD);
                let column = panel * PANEL;
                let source = |row: usize| Int8Source {
                    xs: xs.bytes.as_ptr().add(row * xs.stride),
                    stride: xs.stride,
                    x_scales: xs.scales.as_ptr().add(row),
                    weights: weights.panels[panel * quads..].as_ptr(),
                    quads,
                    w_scales: weights.scales.as_ptr().add(column),
                    col_sums: weights.col_sums.as_ptr().add(column),
                };
                match weights.kernel {
                    Int8Kernel::Vnni => self.tiles(rows, panel, dst, Some(epilogue), source),
                    Int8Kernel::Avx2 => self.tiles(rows, panel, dst, Some(epilogue), |row| {
                        Avx2Int8Source(source(row))
                    }),
                }
            }
        }
    }

    #[cfg(not(target_arch = "x86_64"))]
    unsafe fn rows_of_panel(
        &self,
        _: &Input,
        _: &[f32],
        _: std::ops::Range<usize>,
        _: usize,
        _: SharedOut,
        _: Epilogue,
    ) {
        unreachable!("packed projections are only built where supported() holds")
    }

    /// Rows `rows` of output panel `panel`, a register tile at a time, each tile reading from
    /// `source(its first row)`; then, on the pass that completes the sums, `finish`.
    #[cfg(target_arch = "x86_64")]
    unsafe fn tiles<S: PanelSource>(
        &self,
        rows: std::ops::Range<usize>,
        panel: usize,
        dst: SharedOut,
        finish: Option<Epilogue>,
        source: impl Fn(usize) -> S,
    ) {
        let cols = PANEL.min(self.out_dim - panel * PANEL);
        let bias = self.bias.as_ptr().add(panel * PANEL);
        let mut row = rows.start;
        while row < rows.end {
            let at = row * self.out_dim + panel * PANEL;
            let tile = Tile {
                source: source(row),
                out: dst.0.add(at),
                out_dim: self.out_dim,
                cols,
            };
            let take = TILE_ROWS.min(rows.end - row);
            if let Some(epilogue) = finish {
                tile.prefetch_residual(take, epilogue, at);
            }
            match take {
                6 => S::accumulate::<6>(&tile),
                5 => S::accumulate::<5>(&tile),
                4 => S::accumulate::<4>(&tile),
                3 => S::accumulate::<3>(&tile),
                2 => S::accumulate::<2>(&tile),
                _ => S::accumulate::<1>(&tile),
            }
            if let Some(epilogue) = finish {
                tile.finish(tile.source.isa(), take, bias, epilogue, at);
            }
            row += take;
        }
    }
}

/// A call's input, in the form the layer's weights take it.
enum Input<'a> {
    F32 {
        panels: &'a [PanelRow],
        xs: &'a [f32],
        isa: Isa,
    },
    Bf16 {
        weights: &'a Bf16Weights,
        xs: Bf16Rows,
    },
    Int8 {
        weights: &'a Int8Weights,
        xs: Int8Rows,
    },
}

/// The output buffer, written by many threads at disjoint places.
#[derive(Clone, Copy)]
struct SharedOut(*mut f32);
// SAFETY: every thread writes a disjoint set of elements (see `PackedLinear::run`).
unsafe impl Send for SharedOut {}
unsafe impl Sync for SharedOut {}

/// One register tile: up to 6 rows by one 64-column panel, its inputs from `source`.
struct Tile<S> {
    source: S,
    out: *mut f32,
    out_dim: usize,
    /// Valid output columns in this panel (64 except in the last one).
    cols: usize,
}

/// Where a tile's products come from: one kind of weights and input.
trait PanelSource: Sized {
    /// Stores (or adds, for a later block of features) `tile`'s first `R` rows' sums into the
    /// output. On its own, away from the epilogue, so that LLVM keeps all 24 accumulators in
    /// registers: inlined together, it spilled some.
    unsafe fn accumulate<const R: usize>(tile: &Tile<Self>);

    /// The vector backend that finishes this source's tiles ([`Tile::finish`]): AVX-512 unless
    /// the source's kernel runs on another.
    fn isa(&self) -> Isa {
        Isa::Avx512
    }
}

#[cfg(target_arch = "x86_64")]
impl<S> Tile<S> {
    /// Stores `sums` as row `r`'s vector `v` of the tile's output (16 columns from `v * 16`),
    /// masked to the tile's columns where it is short of them ([`Simd::store_first`]).
    #[inline(always)]
    unsafe fn store_vector(&self, r: usize, v: usize, sums: std::arch::x86_64::__m512) {
        let at = self.out.add(r * self.out_dim + v * 16);
        simd::Avx512::store_first(at, self.cols.saturating_sub(v * 16), sums);
    }

    /// Stores `R` rows of f32 sums (`VECS` vectors a row) into the tile's output, masked to its
    /// columns: how the bf16 kernel ends a tile. Always inlined, so that it is compiled
    /// with the calling kernel's features and the accumulators stay in its registers.
    #[inline(always)]
    unsafe fn store<const R: usize>(&self, acc: &[[std::arch::x86_64::__m512; VECS]; R]) {
        for (r, acc) in acc.iter().enumerate() {
            for (v, &a) in acc.iter().enumerate() {
                self.store_vector(r, v, a);
            }
        }
    }
}

#[cfg(test)]
pub(super) mod tests;
