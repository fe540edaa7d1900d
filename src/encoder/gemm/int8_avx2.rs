//! The int8 kernel where the CPU has AVX2 but not AVX-512 VNNI: the same weight panels and
//! quantization as [`super::int8`] (weights per output column, activations per row, both
//! symmetric in -127..=127), with the integer sums exact, so both kernels give the same
//! products.
//!
//! Without `vpdpbusd`, a 4-feature dot product per 32-bit lane takes `vpmaddubsw` (unsigned x
//! signed bytes, adjacent pairs summed into a saturating i16) then `vpmaddwd` by ones (pairs of
//! i16 into an i32). Both sides at full 8-bit range would saturate the i16 (255 x 127 x 2 with
//! the activations offset by 128 to make them unsigned), so the activation's sign moves onto the
//! weight instead (`vpsignb`) and its magnitude, at most 127, is the unsigned side: a pair then
//! sums to at most 2 x 127 x 127 = 32,258, no saturation, no 7-bit weights, no zero-point
//! correction. On a first-generation Zen (AMD family 23, model 1), which splits every 256-bit
//! operation in two, an FMA, a `vpmaddwd` and a `vpmaddubsw` each issue at about the same rate
//! (eval/encode/int8-avx2/issue_rate.c), so these four instructions per 32 multiply-adds cost
//! what four FMAs (8 each) do: the kernel runs no faster than f32 there
//! (eval/encode/int8-avx2.md). On a Zen 3 (family 25), with two full-width integer multiply
//! pipes, it encodes 1.31x as fast as f32 (eval/encode/README.md). Sign-extending to i16 and
//! `vpmaddwd` alone (16 per multiply, twice the weight bytes) would be no better; 7-bit
//! weights, dropping the `vpsignb`, measured within the noise of this kernel and cost accuracy.

use super::int8::{int8_scales, Int8Source, QUAD};
use super::{PanelSource, Tile, PANEL};
use crate::encoder::simd::Isa;

/// Output columns per AVX2 vector: 8 i32 sums, each over one quad of bytes.
const LANES: usize = 8;
/// Rows and vectors of one register block: 2 x 4 accumulators, 4 weight vectors, the row's
/// broadcast and its magnitude, the ones and a temporary fill the 16 vector registers.
const BLOCK_ROWS: usize = 2;
const BLOCK_VECS: usize = 4;

/// Quantizes `x` into `q` (twice `x.len()` rounded up to quads) as this kernel reads it: for
/// each quad of features its four magnitudes `|q|`, the unsigned side of `vpmaddubsw`, then
/// its four signed `q`, whose signs `vpsignb` moves onto the weights, so that a row's quad is
/// two broadcasts with nothing left to compute (from the VNNI form, `q + 128`, the kernel
/// spent two more instructions per row and quad undoing the offset and taking the magnitude).
/// The same quantization as the VNNI kernel's (per row, symmetric, rounded to nearest even);
/// returns the scale.
///
/// SAFETY: needs AVX2 and FMA.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
pub(super) unsafe fn quantize_row(x: &[f32], q: &mut [u8]) -> f32 {
    use std::arch::x86_64::*;
    assert!(q.len() >= 2 * x.len().next_multiple_of(QUAD));
    // The largest magnitude as the largest sign-cleared bit pattern, as the VNNI path takes it:
    // an integer max vectorises where a float max (NaN rules) does not.
    let max = x.iter().fold(0u32, |m, v| m.max(v.to_bits() & 0x7fff_ffff));
    let (scale, inverse) = int8_scales(f32::from_bits(max));
    let whole = x.len() / 32 * 32;
    let vinverse = _mm256_set1_ps(inverse);
    // `vpackssdw` / `vpacksswb` interleave their inputs by 128-bit lane; this puts the dwords
    // (four values each) back in order.
    let order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
    for first in (0..whole).step_by(32) {
        // Rounded to nearest even (the default rounding mode) as the scalar tail below.
        let v: [__m256i; 4] = std::array::from_fn(|k| {
            let v = _mm256_loadu_ps(x.as_ptr().add(first + 8 * k));
            _mm256_cvtps_epi32(_mm256_mul_ps(v, vinverse))
        });
        let words = [
            _mm256_packs_epi32(v[0], v[1]),
            _mm256_packs_epi32(v[2], v[3]),
        ];
        let signed = _mm256_permutevar8x32_epi32(_mm256_packs_epi16(words[0], words[1]), order);
        let magnitude = _mm256_abs_epi8(signed);
        // Quads interleaved: magnitudes 0, signed 0, magnitudes 1, ...
        let low = _mm256_unpacklo_epi32(magnitude, signed);
        let high = _mm256_unpackhi_epi32(magnitude, signed);
        let out = q.as_mut_ptr().add(2 * first).cast::<__m256i>();
        _mm256_storeu_si256(out, _mm256_permute2x128_si256::<0x20>(low, high));
        _mm256_storeu_si256(out.add(1), _mm256_permute2x128_si256::<0x31>(low, high));
    }
    for (i, &v) in x.iter().enumerate().skip(whole) {
        let level = (v * inverse).round_ties_even().clamp(-127.0, 127.0) as i8;
        let at = i / QUAD * 2 * QUAD + i % QUAD;
        q[at] = level.unsigned_abs();
        q[at + QUAD] = level as u8;
    }
    scale
}

#[cfg(not(target_arch = "x86_64"))]
pub(super) unsafe fn quantize_row(_: &[f32], _: &mut [u8]) -> f32 {
    unreachable!("int8 projections are only built where int8_supported() holds")
}

/// Whether this CPU runs 256-bit vector operations as two 128-bit halves: AMD before Zen 2
/// (families up to 0x16, and 0x17 below model 0x30: Zen and Zen+) and Hygon's Zen-based
/// family 0x18. There the int8 kernel is no faster than f32.
pub(super) fn splits_256_bit_ops() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::x86_64::__cpuid;
        let (vendor, signature) = (__cpuid(0), __cpuid(1).eax);
        let vendor = [vendor.ebx, vendor.edx, vendor.ecx]
            .map(u32::to_le_bytes)
            .concat();
        let base_family = (signature >> 8) & 0xf;
        let (family, model) = if base_family == 0xf {
            let family = base_family + ((signature >> 20) & 0xff);
            (
                family,
                ((signature >> 12) & 0xf0) | ((signature >> 4) & 0xf),
            )
        } else {
            (base_family, (signature >> 4) & 0xf)
        };
        match &vendor[..] {
            b"AuthenticAMD" => family < 0x17 || (family == 0x17 && model < 0x30),
            b"HygonGenuine" => family == 0x18,
            _ => false,
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

/// A tile's int8 inputs for the AVX2 kernel: the VNNI kernel's, run the AVX2 way.
pub(super) struct Avx2Int8Source(pub(super) Int8Source);

#[cfg(target_arch = "x86_64")]
impl PanelSource for Avx2Int8Source {
    /// Stores `s_x * s_w * sum`, the sums in f32 short of the bias, a register block of
    /// `BLOCK_ROWS` rows by `BLOCK_VECS` vectors at a time; blocks wholly past the panel's
    /// valid columns are skipped.
    #[target_feature(enable = "avx2,fma")]
    #[inline(never)]
    unsafe fn accumulate<const R: usize>(tile: &Tile<Self>) {
        for first_vec in (0..PANEL / LANES).step_by(BLOCK_VECS) {
            if first_vec * LANES >= tile.cols {
                break;
            }
            let mut row = 0;
            while row < R {
                if R - row >= BLOCK_ROWS {
                    block::<BLOCK_ROWS>(tile, row, first_vec);
                    row += BLOCK_ROWS;
                } else {
                    block::<1>(tile, row, first_vec);
                    row += 1;
                }
            }
        }
    }

    /// The epilogue on 8-lane vectors: this kernel's CPU may lack AVX-512.
    fn isa(&self) -> Isa {
        Isa::Avx2
    }
}

/// Rows `first_row..first_row + RR` of the tile by its vectors `first_vec..+BLOCK_VECS`, all
/// input features, stored scaled to f32.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
#[inline]
unsafe fn block<const RR: usize>(tile: &Tile<Avx2Int8Source>, first_row: usize, first_vec: usize) {
    use std::arch::x86_64::*;
    let s = &tile.source.0;
    let ones = _mm256_set1_epi16(1);
    let mut acc = [[_mm256_setzero_si256(); BLOCK_VECS]; RR];
    for quad in 0..s.quads {
        // SAFETY: a `QuadRow` is 64-byte aligned and 256 bytes, 8 vectors of 32.
        let w = s.weights.add(quad).cast::<__m256i>().add(first_vec);
        let wv: [__m256i; BLOCK_VECS] = std::array::from_fn(|v| _mm256_load_si256(w.add(v)));
        for (r, acc) in acc.iter_mut().enumerate() {
            let x = s.xs.add((first_row + r) * s.stride + quad * 2 * QUAD);
            let magnitude = _mm256_set1_epi32(x.cast::<i32>().read_unaligned());
            let x = _mm256_set1_epi32(x.add(QUAD).cast::<i32>().read_unaligned());
            for (a, &w) in acc.iter_mut().zip(&wv) {
                // The sign of each activation moved onto its weight.
                let pairs = _mm256_maddubs_epi16(magnitude, _mm256_sign_epi8(w, x));
                *a = _mm256_add_epi32(*a, _mm256_madd_epi16(pairs, ones));
            }
        }
    }
    for v in 0..BLOCK_VECS {
        let column = (first_vec + v) * LANES;
        if column >= tile.cols {
            break;
        }
        // The scales are padded to whole panels, so a full vector loads.
        let w_scale = _mm256_loadu_ps(s.w_scales.add(column));
        for (r, acc) in acc.iter().enumerate() {
            let row = first_row + r;
            let scale = _mm256_mul_ps(_mm256_set1_ps(*s.x_scales.add(row)), w_scale);
            let y = _mm256_mul_ps(_mm256_cvtepi32_ps(acc[v]), scale);
            let at = tile.out.add(row * tile.out_dim + column);
            let valid = tile.cols - column;
            if valid >= LANES {
                _mm256_storeu_ps(at, y);
            } else {
                let mut lanes = [0f32; LANES];
                _mm256_storeu_ps(lanes.as_mut_ptr(), y);
                std::ptr::copy_nonoverlapping(lanes.as_ptr(), at, valid);
            }
        }
    }
}
