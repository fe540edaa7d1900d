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
//!
//! Where the CPU has AVX-512 VNNI, a projection can instead be packed as int8: one `vpdpbusd`
//! does 64 multiply-adds where an FMA does 16, and the weights take a quarter of the memory.
//! Weights are quantized per output column at load, activations per row at each call (both
//! symmetric), and the integer sums are scaled back to f32 before the same epilogues.

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
/// Input features per `vpdpbusd` lane: the int8 layouts go in groups of this many.
const QUAD: usize = 4;
/// Input values from which a call quantizes its rows on all threads, in chunks of this many rows.
const QUANT_PARALLEL_VALUES: usize = 32 * 1024;
const QUANT_CHUNK_ROWS: usize = 8;
/// The widest int8 input: its sums of up to 255 x 127 per feature still fit an i32, so the
/// int8 kernel needs no depth blocks.
const MAX_INT8_IN: usize = 4096;

/// One weight panel row: 64 output columns, aligned so that loads never split a cache line.
#[derive(Clone, Copy)]
#[repr(C, align(64))]
struct PanelRow([f32; PANEL]);

/// One int8 weight panel row: 4 consecutive input features for each of 64 output columns,
/// column by column (`[c * 4 + feature]`), the order `vpdpbusd` multiplies them in.
#[derive(Clone, Copy)]
#[repr(C, align(64))]
struct QuadRow([i8; QUAD * PANEL]);

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

/// Whether this CPU runs the int8 kernel ([`PackedLinear::new_int8`]).
pub fn int8_supported() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        std::arch::is_x86_feature_detected!("avx512f")
            && std::arch::is_x86_feature_detected!("avx512bw")
            && std::arch::is_x86_feature_detected!("avx512vnni")
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

/// The symmetric int8 scale of values whose largest magnitude is `max_abs`, and its inverse,
/// which quantizes (`round(v * inverse)`); both zero for all-zero values, which then quantize
/// to zero and scale back to zero.
fn int8_scales(max_abs: f32) -> (f32, f32) {
    if max_abs > 0.0 {
        (max_abs / 127.0, 127.0 / max_abs)
    } else {
        (0.0, 0.0)
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
    weights: Weights,
    /// Zero beyond `out_dim`.
    bias: Vec<f32>,
}

enum Weights {
    /// `[panel][in_dim]` rows of 64 output columns, zero beyond `out_dim`.
    F32(Vec<PanelRow>),
    Int8(Int8Weights),
}

struct Int8Weights {
    /// `[panel][in_dim / 4, rounded up]`, zero beyond `in_dim` and `out_dim`.
    panels: Vec<QuadRow>,
    /// Per output column, zero beyond `out_dim`.
    scales: Vec<f32>,
    /// Per output column, the sum of its quantized weights: the activations go to the kernel
    /// offset by 128 (`vpdpbusd` takes them unsigned), which adds 128 times this to the sums.
    col_sums: Vec<i32>,
}

impl PackedLinear {
    /// From `weight` `[out, in]` (PyTorch's layout) and `bias` `[out]`.
    pub fn new(weight: &Tensor, bias: &Tensor) -> Result<Self> {
        let (in_dim, weight, bias) = Self::load(weight, bias)?;
        let n_panels = bias.len() / PANEL;
        let mut panels = vec![PanelRow([0.0; PANEL]); n_panels * in_dim];
        for (o, row) in weight.iter().enumerate() {
            let (panel, lane) = (o / PANEL, o % PANEL);
            for (i, &w) in row.iter().enumerate() {
                panels[panel * in_dim + i].0[lane] = w;
            }
        }
        Ok(Self {
            in_dim,
            out_dim: weight.len(),
            weights: Weights::F32(panels),
            bias,
        })
    }

    /// Like [`Self::new`], with the weights quantized to int8 per output column; each call
    /// quantizes its input rows likewise. Needs [`int8_supported`] and `in <= 4096`.
    pub fn new_int8(weight: &Tensor, bias: &Tensor) -> Result<Self> {
        if !int8_supported() {
            bail!("int8 projections need AVX-512 VNNI, which this CPU lacks");
        }
        let (in_dim, weight, bias) = Self::load(weight, bias)?;
        if in_dim > MAX_INT8_IN {
            bail!("int8 projections take at most {MAX_INT8_IN} features, not {in_dim}");
        }
        let quads = in_dim.div_ceil(QUAD);
        let mut panels = vec![QuadRow([0; QUAD * PANEL]); bias.len() / PANEL * quads];
        let mut scales = vec![0.0; bias.len()];
        let mut col_sums = vec![0; bias.len()];
        for (o, row) in weight.iter().enumerate() {
            let (panel, lane) = (o / PANEL, o % PANEL);
            let (scale, inverse) = int8_scales(row.iter().fold(0.0, |m, w| w.abs().max(m)));
            scales[o] = scale;
            for (i, &w) in row.iter().enumerate() {
                let q = (w * inverse).round_ties_even().clamp(-127.0, 127.0) as i8;
                panels[panel * quads + i / QUAD].0[lane * QUAD + i % QUAD] = q;
                col_sums[o] += i32::from(q);
            }
        }
        Ok(Self {
            in_dim,
            out_dim: weight.len(),
            weights: Weights::Int8(Int8Weights {
                panels,
                scales,
                col_sums,
            }),
            bias,
        })
    }

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
        let input = match &self.weights {
            Weights::F32(panels) => Input::F32 { panels, xs },
            Weights::Int8(weights) => Input::Int8 {
                weights,
                // SAFETY: `new_int8` checked `int8_supported()`.
                xs: unsafe { Int8Rows::new(xs, self.in_dim) },
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
            for panel in panels {
                // SAFETY: `supported()` (or `int8_supported()`) was checked when this layer was
                // packed; the input holds `rows` rows; each (row, panel) block of `dst` is
                // written by exactly one item, inside `rows * out_dim`.
                unsafe { self.rows_of_panel(&input, first..end, panel, dst, epilogue) }
            }
        });
        // SAFETY: the tiles above wrote every one of the `total` elements.
        unsafe { out.set_len(total) };
        out
    }

    /// Rows `rows` of output panel `panel`. The f32 input features go in blocks of
    /// `DEPTH_BLOCK`, each block's weights staying in cache while every tile of the chunk runs
    /// over them, partial sums waiting in the output. The int8 ones go in one pass: their sums
    /// leave the registers already scaled to f32, so could not be resumed, and a panel of int8
    /// weights is a quarter the size.
    #[cfg(target_arch = "x86_64")]
    unsafe fn rows_of_panel(
        &self,
        input: &Input,
        rows: std::ops::Range<usize>,
        panel: usize,
        dst: SharedOut,
        epilogue: Epilogue,
    ) {
        match input {
            Input::F32 { panels, xs } => {
                for depth in (0..self.in_dim).step_by(DEPTH_BLOCK) {
                    let depth = depth..self.in_dim.min(depth + DEPTH_BLOCK);
                    let finish = (depth.end == self.in_dim).then_some(epilogue);
                    self.tiles(rows.clone(), panel, dst, finish, |row| F32Source {
                        xs: xs.as_ptr().add(row * self.in_dim),
                        in_dim: self.in_dim,
                        weights: panels[panel * self.in_dim..].as_ptr().cast::<f32>(),
                        depth: depth.clone(),
                    });
                }
            }
            Input::Int8 { weights, xs } => {
                let quads = xs.stride / QUAD;
                let column = panel * PANEL;
                self.tiles(rows, panel, dst, Some(epilogue), |row| Int8Source {
                    xs: xs.bytes.as_ptr().add(row * xs.stride),
                    stride: xs.stride,
                    x_scales: xs.scales.as_ptr().add(row),
                    weights: weights.panels[panel * quads..].as_ptr(),
                    quads,
                    w_scales: weights.scales.as_ptr().add(column),
                    col_sums: weights.col_sums.as_ptr().add(column),
                });
            }
        }
    }

    #[cfg(not(target_arch = "x86_64"))]
    unsafe fn rows_of_panel(
        &self,
        _: &Input,
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
    unsafe fn tiles<S: Source>(
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
            match take {
                6 => S::accumulate::<6>(&tile),
                5 => S::accumulate::<5>(&tile),
                4 => S::accumulate::<4>(&tile),
                3 => S::accumulate::<3>(&tile),
                2 => S::accumulate::<2>(&tile),
                _ => S::accumulate::<1>(&tile),
            }
            if let Some(epilogue) = finish {
                tile.finish(take, bias, epilogue, at);
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
    },
    Int8 {
        weights: &'a Int8Weights,
        xs: Int8Rows,
    },
}

/// Input rows quantized for the int8 kernel.
struct Int8Rows {
    /// `[row][stride]`: each value `q + 128` for its quantized `q` in `-127..=127`, since
    /// `vpdpbusd` takes this side unsigned; the padding is 128 (zero).
    bytes: Vec<u8>,
    /// `in_dim` rounded up to whole quads, so that each quad is one aligned 4-byte broadcast.
    stride: usize,
    /// Per row.
    scales: Vec<f32>,
}

impl Int8Rows {
    /// SAFETY: needs `int8_supported()`.
    unsafe fn new(xs: &[f32], in_dim: usize) -> Self {
        let stride = in_dim.next_multiple_of(QUAD);
        let rows = xs.len() / in_dim;
        let mut bytes = vec![128; rows * stride];
        let mut scales = vec![0.0; rows];
        let quantize = |(xs, (bytes, scales)): (&[f32], (&mut [u8], &mut [f32]))| {
            let rows = xs.chunks_exact(in_dim).zip(bytes.chunks_exact_mut(stride));
            for ((x, q), scale) in rows.zip(scales) {
                // SAFETY: as for `new`; `q` is at least as long as `x`.
                *scale = unsafe { quantize_row(x, q) };
            }
        };
        // A question's few rows of 384 are quicker done here than handed to the pool; from
        // 32 rows of 1536 on, splitting them saved about a fifth of the whole call.
        if rows * in_dim >= QUANT_PARALLEL_VALUES {
            let bytes = bytes.par_chunks_mut(QUANT_CHUNK_ROWS * stride);
            let chunks = bytes.zip(scales.par_chunks_mut(QUANT_CHUNK_ROWS));
            xs.par_chunks(QUANT_CHUNK_ROWS * in_dim)
                .zip(chunks)
                .for_each(quantize);
        } else {
            quantize((xs, (&mut bytes, &mut scales)));
        }
        Self {
            bytes,
            stride,
            scales,
        }
    }
}

/// Quantizes `x` into the first `x.len()` bytes of `q` (see [`Int8Rows::bytes`]); returns the
/// scale.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512bw")]
unsafe fn quantize_row(x: &[f32], q: &mut [u8]) -> f32 {
    use std::arch::x86_64::*;
    let lanes = |n: usize| -> __mmask16 {
        match n {
            n if n >= 16 => !0,
            n => (1 << n) - 1,
        }
    };
    let load = |first: usize, n: usize| _mm512_maskz_loadu_ps(lanes(n), x.as_ptr().add(first));
    // The largest magnitude as the largest sign-cleared bit pattern: an integer max takes one
    // cycle where a float max takes four, and one running max is then no bottleneck.
    let mut max = _mm512_setzero_si512();
    let mut fold = |first, n| {
        let bits = _mm512_castps_si512(load(first, n));
        max = _mm512_max_epu32(max, _mm512_and_si512(bits, _mm512_set1_epi32(i32::MAX)));
    };
    let whole = x.len() / 16 * 16;
    (0..whole).step_by(16).for_each(|first| fold(first, 16));
    fold(whole, x.len() - whole);
    let (scale, inverse) = int8_scales(f32::from_bits(_mm512_reduce_max_epu32(max)));
    let inverse = _mm512_set1_ps(inverse);
    // Saturating packs narrow four vectors to bytes in fewer instructions than four `vpmovdb`
    // (the conversion and narrowing were most of this pass's time); they interleave the four
    // by 128-bit lane, which this permutation undoes. Finite values are within -127..=127
    // already; the packs keep anything else (a NaN) in byte range.
    let order = _mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15);
    let q = q.as_mut_ptr();
    let narrow = |first: usize, n: usize| {
        let v: [__m512i; 4] = std::array::from_fn(|k| {
            const NEAREST: i32 = _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC;
            let v = load(first + 16 * k, n.saturating_sub(16 * k));
            _mm512_cvt_roundps_epi32::<NEAREST>(_mm512_mul_ps(v, inverse))
        });
        let bytes = _mm512_packs_epi16(
            _mm512_packs_epi32(v[0], v[1]),
            _mm512_packs_epi32(v[2], v[3]),
        );
        let bytes = _mm512_xor_si512(
            _mm512_permutexvar_epi32(order, bytes),
            _mm512_set1_epi8(i8::MIN),
        );
        let mask = if n >= 64 { !0 } else { (1 << n) - 1 };
        _mm512_mask_storeu_epi8(q.add(first).cast(), mask, bytes);
    };
    let whole = x.len() / 64 * 64;
    (0..whole).step_by(64).for_each(|first| narrow(first, 64));
    if whole < x.len() {
        narrow(whole, x.len() - whole);
    }
    scale
}

#[cfg(not(target_arch = "x86_64"))]
unsafe fn quantize_row(_: &[f32], _: &mut [u8]) -> f32 {
    unreachable!("int8 projections are only built where int8_supported() holds")
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
trait Source: Sized {
    /// Stores (or adds, for a later block of features) `tile`'s first `R` rows' sums into the
    /// output. On its own, away from the epilogue, so that LLVM keeps all 24 accumulators in
    /// registers: inlined together, it spilled some.
    unsafe fn accumulate<const R: usize>(tile: &Tile<Self>);
}

/// Pointers to a tile's f32 inputs over one block of input features.
struct F32Source {
    xs: *const f32,
    in_dim: usize,
    /// The panel's first row.
    weights: *const f32,
    depth: std::ops::Range<usize>,
}

/// Pointers to a tile's int8 inputs, all of their features.
struct Int8Source {
    xs: *const u8,
    stride: usize,
    /// The tile's first row's.
    x_scales: *const f32,
    /// The panel's first row.
    weights: *const QuadRow,
    quads: usize,
    /// The panel's first column's.
    w_scales: *const f32,
    col_sums: *const i32,
}

#[cfg(target_arch = "x86_64")]
impl<S> Tile<S> {
    /// The first `n` of this tile's columns from `first` on, as a lane mask.
    fn lanes(&self, first: usize) -> std::arch::x86_64::__mmask16 {
        match self.cols.saturating_sub(first) {
            n if n >= 16 => !0,
            n => (1u16 << n) - 1,
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

#[cfg(target_arch = "x86_64")]
impl Source for F32Source {
    #[target_feature(enable = "avx512f")]
    #[inline(never)]
    unsafe fn accumulate<const R: usize>(tile: &Tile<Self>) {
        use std::arch::x86_64::*;
        let s = &tile.source;
        let mut acc = [[_mm512_setzero_ps(); VECS]; R];
        if s.depth.start > 0 {
            for (r, acc) in acc.iter_mut().enumerate() {
                for (v, a) in acc.iter_mut().enumerate() {
                    let at = tile.out.add(r * tile.out_dim + v * 16);
                    *a = _mm512_maskz_loadu_ps(tile.lanes(v * 16), at);
                }
            }
        }
        for i in s.depth.clone() {
            let w = s.weights.add(i * PANEL);
            let wv = [
                _mm512_load_ps(w),
                _mm512_load_ps(w.add(16)),
                _mm512_load_ps(w.add(32)),
                _mm512_load_ps(w.add(48)),
            ];
            for (r, acc) in acc.iter_mut().enumerate() {
                let x = _mm512_set1_ps(*s.xs.add(r * s.in_dim + i));
                for (a, &w) in acc.iter_mut().zip(&wv) {
                    *a = _mm512_fmadd_ps(x, w, *a);
                }
            }
        }
        for (r, acc) in acc.iter().enumerate() {
            for (v, &a) in acc.iter().enumerate() {
                let at = tile.out.add(r * tile.out_dim + v * 16);
                _mm512_mask_storeu_ps(at, tile.lanes(v * 16), a);
            }
        }
    }
}

#[cfg(target_arch = "x86_64")]
impl Source for Int8Source {
    /// Stores `s_x * s_w * (sum - 128 * col_sum)`: the sums in f32, short of the bias.
    #[target_feature(enable = "avx512f,avx512bw,avx512vnni")]
    #[inline(never)]
    unsafe fn accumulate<const R: usize>(tile: &Tile<Self>) {
        use std::arch::x86_64::*;
        let s = &tile.source;
        let mut acc = [[_mm512_setzero_si512(); VECS]; R];
        for quad in 0..s.quads {
            let w = s.weights.add(quad).cast::<__m512i>();
            let wv = [
                _mm512_load_si512(w),
                _mm512_load_si512(w.add(1)),
                _mm512_load_si512(w.add(2)),
                _mm512_load_si512(w.add(3)),
            ];
            for (r, acc) in acc.iter_mut().enumerate() {
                let x = s.xs.add(r * s.stride + quad * QUAD).cast::<i32>();
                let x = _mm512_set1_epi32(x.read_unaligned());
                for (a, &w) in acc.iter_mut().zip(&wv) {
                    *a = _mm512_dpbusd_epi32(*a, x, w);
                }
            }
        }
        for v in 0..VECS {
            let offset = _mm512_slli_epi32::<7>(_mm512_loadu_si512(s.col_sums.add(v * 16).cast()));
            let w_scale = _mm512_loadu_ps(s.w_scales.add(v * 16));
            for (r, acc) in acc.iter().enumerate() {
                let scale = _mm512_mul_ps(_mm512_set1_ps(*s.x_scales.add(r)), w_scale);
                let sum = _mm512_cvtepi32_ps(_mm512_sub_epi32(acc[v], offset));
                let at = tile.out.add(r * tile.out_dim + v * 16);
                _mm512_mask_storeu_ps(at, tile.lanes(v * 16), _mm512_mul_ps(sum, scale));
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
        let mut rng = crate::rng::Rng::new(seed);
        let data: Vec<f32> = (0..shape.0 * shape.1)
            .map(|_| (rng.next_u64() % 2001) as f32 / 1000.0 - 1.0)
            .collect();
        Tensor::from_vec(data, shape, &Device::Cpu).unwrap()
    }

    /// `x W^T + b` by candle.
    fn exact(x: &Tensor, w: &Tensor, b: &Tensor) -> Tensor {
        x.matmul(&w.t().unwrap()).unwrap().broadcast_add(b).unwrap()
    }

    /// `packed`'s three forwards on `x`, each beside what it should give when `linear` is its
    /// plain projection of `x`.
    fn epilogue_cases(
        packed: &PackedLinear,
        x: &Tensor,
        linear: &Tensor,
        residual: &Tensor,
    ) -> [(Tensor, Tensor); 3] {
        [
            (packed.forward(x).unwrap(), linear.clone()),
            (packed.forward_gelu(x).unwrap(), linear.gelu_erf().unwrap()),
            (
                packed.forward_residual(x, residual).unwrap(),
                (linear + residual).unwrap(),
            ),
        ]
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
            let residual = random((rows, out_dim), 11);
            for (ours, theirs) in epilogue_cases(&packed, &x, &exact(&x, &w, &b), &residual) {
                assert_eq!(ours.dims(), theirs.dims());
                let diff = max_abs_diff(&ours, &theirs);
                assert!(diff < 1e-4, "{rows}x{in_dim}->{out_dim}: max diff {diff}");
            }
        }
    }

    /// `x W^T + b` computed the int8 way in plain scalar code: `x`'s rows and `W`'s rows
    /// quantized as the layer does, then exact integer dot products (no zero-point offset).
    fn int8_reference(x: &Tensor, w: &Tensor, b: &Tensor) -> Tensor {
        fn quantize(values: &[f32]) -> (f64, Vec<i64>) {
            let max = values.iter().fold(0f32, |m, v| m.max(v.abs()));
            let inverse = if max > 0.0 { 127.0 / max } else { 0.0 };
            let q = values
                .iter()
                .map(|v| (v * inverse).round_ties_even().clamp(-127.0, 127.0) as i64);
            (f64::from(max / 127.0), q.collect())
        }
        let w: Vec<_> = w
            .to_vec2::<f32>()
            .unwrap()
            .iter()
            .map(|r| quantize(r))
            .collect();
        let b = b.to_vec1::<f32>().unwrap();
        let x = x.to_vec2::<f32>().unwrap();
        let mut out = Vec::new();
        for row in &x {
            let (x_scale, qx) = quantize(row);
            for ((w_scale, qw), &b) in w.iter().zip(&b) {
                let dot: i64 = qx.iter().zip(qw).map(|(a, b)| a * b).sum();
                out.push((x_scale * w_scale * dot as f64 + f64::from(b)) as f32);
            }
        }
        Tensor::from_vec(out, (x.len(), b.len()), &Device::Cpu).unwrap()
    }

    /// The int8 path against the same quantization done in scalar code: it must agree to
    /// rounding, so a wrong panel layout, padding or zero-point correction shows. Same shapes
    /// as the f32 test (inputs not a multiple of 4 wide among them), plus a feed-forward-wide
    /// input, an all-zero input row and an all-zero weight row.
    #[test]
    fn int8_projection_matches_scalar_quantized_reference() {
        if !int8_supported() {
            eprintln!("SKIP: this CPU has no AVX-512 VNNI; the int8 GEMM is not used here");
            return;
        }
        for (rows, in_dim, out_dim) in [
            (1, 7, 5),
            (5, 33, 70),
            (13, 64, 64),
            (250, 96, 136),
            (601, 40, 200),
            (37, 1536, 70),
        ] {
            let mut x = random((rows, in_dim), rows as u64);
            if rows > 1 {
                let zeros = Tensor::zeros((1, in_dim), candle_core::DType::F32, &Device::Cpu);
                x = x.slice_assign(&[1..2, 0..in_dim], &zeros.unwrap()).unwrap();
            }
            let zeros = Tensor::zeros((1, in_dim), candle_core::DType::F32, &Device::Cpu);
            let w = random((out_dim, in_dim), 7)
                .slice_assign(&[2..3, 0..in_dim], &zeros.unwrap())
                .unwrap();
            let b = random((1, out_dim), 9).squeeze(0).unwrap();
            let packed = PackedLinear::new_int8(&w, &b).unwrap();
            let linear = int8_reference(&x, &w, &b);
            let residual = random((rows, out_dim), 11);
            for (ours, theirs) in epilogue_cases(&packed, &x, &linear, &residual) {
                assert_eq!(ours.dims(), theirs.dims());
                let ours = ours.flatten_all().unwrap().to_vec1::<f32>().unwrap();
                let theirs = theirs.flatten_all().unwrap().to_vec1::<f32>().unwrap();
                for (i, (a, b)) in ours.iter().zip(&theirs).enumerate() {
                    assert!(
                        (a - b).abs() <= 1e-4 * b.abs().max(1.0),
                        "{rows}x{in_dim}->{out_dim}: element {i} is {a}, expected {b}"
                    );
                }
            }
        }
    }

    /// What the quantization costs: on random data, the int8 projection within 2% of the
    /// largest output of the f32 one, each row pointing the same way.
    #[test]
    fn int8_projection_is_close_to_f32() {
        if !int8_supported() {
            eprintln!("SKIP: this CPU has no AVX-512 VNNI; the int8 GEMM is not used here");
            return;
        }
        for (rows, in_dim, out_dim) in [(64, 384, 384), (30, 1536, 384), (7, 384, 1536)] {
            let x = random((rows, in_dim), 3);
            let w = random((out_dim, in_dim), 5);
            let b = random((1, out_dim), 6).squeeze(0).unwrap();
            let ours = PackedLinear::new_int8(&w, &b).unwrap().forward(&x).unwrap();
            let exact = exact(&x, &w, &b);
            let largest = exact.abs().unwrap().max_all().unwrap();
            let largest = largest.to_scalar::<f32>().unwrap();
            let diff = max_abs_diff(&ours, &exact);
            assert!(
                diff < 0.02 * largest,
                "{rows}x{in_dim}->{out_dim}: max diff {diff}"
            );
            let ours = ours.to_vec2::<f32>().unwrap();
            for (r, (a, b)) in ours.iter().zip(exact.to_vec2::<f32>().unwrap()).enumerate() {
                let cosine = crate::vectors::cosine(a, &b);
                assert!(
                    cosine >= 0.999,
                    "{rows}x{in_dim}->{out_dim}: row {r} cosine {cosine}"
                );
            }
        }
    }

    #[test]
    fn int8_inputs_too_wide_for_i32_sums_are_an_error() {
        if !int8_supported() {
            eprintln!("SKIP: this CPU has no AVX-512 VNNI");
            return;
        }
        let b = random((1, 8), 2).squeeze(0).unwrap();
        assert!(PackedLinear::new_int8(&random((8, MAX_INT8_IN), 1), &b).is_ok());
        assert!(PackedLinear::new_int8(&random((8, MAX_INT8_IN + 1), 1), &b).is_err());
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
