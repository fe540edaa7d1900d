//! The bf16 kernel on AMX tiles, where the CPU has them (Sapphire Rapids on): one `tdpbf16ps`
//! multiplies a 16 x 32 bf16 tile of activations by a 32 x 16 tile of weights into 16 x 16 f32
//! sums, 8,192 multiply-adds where `vdpbf16ps` does 32. The weights' pair layout
//! ([`PairRow`]) is already the one AMX reads its second operand in, so both bf16 kernels share
//! the packed weights and the rounded rows.
//!
//! Tiles go in blocks of 32 rows by 32 columns: four sum tiles (tmm0-3), two activation tiles
//! (tmm4-5, 16 rows each) and two weight tiles (tmm6-7, 16 columns each), so each tile loaded
//! feeds two products. Rust has no stable AMX intrinsics; the instructions are written in
//! `asm!`, and Linux only lets a process use the tiles' 8 KiB of state after asking for it
//! (`arch_prctl`), which [`amx_supported`] does once.

#[cfg(target_arch = "x86_64")]
use std::arch::asm;
use std::sync::OnceLock;

use super::super::{Epilogue, PackedLinear, SharedOut, Tile, PANEL};
use super::{Bf16Rows, PairRow};
use crate::encoder::simd::Isa;

/// Rows (and columns) of one tile; an activation tile holds 16 pairs of features per row.
pub(in crate::encoder::gemm) const TILE: usize = 16;
/// Rows per block: two activation tiles.
pub(in crate::encoder::gemm) const BLOCK_ROWS: usize = 2 * TILE;
/// Pairs of input features per tile step: one activation tile row of 64 bytes.
pub(in crate::encoder::gemm) const STEP_PAIRS: usize = TILE;

/// Whether this CPU and kernel let this process use AMX bf16 tiles: CPUID's AMX-BF16 and
/// AMX-TILE, the OS saving tile state (XCR0 bits 17-18), and Linux's permission, asked once.
pub fn amx_supported() -> bool {
    static SUPPORTED: OnceLock<bool> = OnceLock::new();
    *SUPPORTED.get_or_init(|| {
        #[cfg(all(target_arch = "x86_64", target_os = "linux"))]
        {
            use std::arch::x86_64::{__cpuid, __cpuid_count};
            // SAFETY: CPUID exists on every x86-64 CPU; leaf 7 is asked for only where the
            // CPU reports it; XGETBV only where OSXSAVE says the OS enabled it.
            unsafe {
                if __cpuid(0).eax < 7 || !super::bf16_supported() {
                    return false;
                }
                let features = __cpuid_count(7, 0).edx;
                let (amx_bf16, amx_tile) = (features >> 22 & 1 == 1, features >> 24 & 1 == 1);
                let osxsave = __cpuid(1).ecx >> 27 & 1 == 1;
                if !(amx_bf16 && amx_tile && osxsave) {
                    return false;
                }
                let xcr0 = std::arch::x86_64::_xgetbv(0);
                if xcr0 >> 17 & 3 != 3 {
                    return false;
                }
                const ARCH_REQ_XCOMP_PERM: libc::c_long = 0x1023;
                const XFEATURE_XTILEDATA: libc::c_long = 18;
                libc::syscall(
                    libc::SYS_arch_prctl,
                    ARCH_REQ_XCOMP_PERM,
                    XFEATURE_XTILEDATA,
                ) == 0
            }
        }
        #[cfg(not(all(target_arch = "x86_64", target_os = "linux")))]
        {
            false
        }
    })
}

/// The tile configuration every block uses: palette 1, all eight tiles 16 rows of 64 bytes.
#[repr(C, align(64))]
struct TileConfig([u8; 64]);

impl TileConfig {
    fn all_full() -> Self {
        let mut config = [0u8; 64];
        config[0] = 1;
        for tile in 0..8 {
            config[16 + 2 * tile..18 + 2 * tile].copy_from_slice(&64u16.to_le_bytes());
            config[48 + tile] = TILE as u8;
        }
        Self(config)
    }
}

#[cfg(target_arch = "x86_64")]
impl PackedLinear {
    /// Rows `rows` of output panel `panel` on AMX tiles, 32 rows at a time: all of the panel's
    /// sums into a block buffer, the valid part copied out, then the bias and `epilogue`.
    /// SAFETY: needs `amx_supported()`; `xs` padded to whole blocks of rows (`Bf16Rows::new`);
    /// as for `rows_of_panel` otherwise.
    pub(in crate::encoder::gemm) unsafe fn amx_rows_of_panel(
        &self,
        panels: &[PairRow],
        xs: &Bf16Rows,
        rows: std::ops::Range<usize>,
        panel: usize,
        dst: SharedOut,
        epilogue: Epilogue,
    ) {
        let config = TileConfig::all_full();
        asm!("ldtilecfg [{}]", in(reg) config.0.as_ptr(), options(nostack, readonly));
        let cols = PANEL.min(self.out_dim - panel * PANEL);
        let bias = self.bias.as_ptr().add(panel * PANEL);
        let weights = panels[panel * xs.stride..].as_ptr().cast::<u8>();
        let mut block = Block([0.0; BLOCK_ROWS * PANEL]);
        for first in rows.clone().step_by(BLOCK_ROWS) {
            let take = BLOCK_ROWS.min(rows.end - first);
            let at = first * self.out_dim + panel * PANEL;
            let tile = Tile {
                source: (),
                out: dst.0.add(at),
                out_dim: self.out_dim,
                cols,
            };
            tile.prefetch_residual(take, epilogue, at);
            let x = xs.pairs.as_ptr().add(first * xs.stride).cast::<u8>();
            for half in 0..PANEL / (2 * TILE) {
                // Column offset of the half's first weight tile within a pair row, in bytes.
                let w = weights.add(half * 2 * TILE * 4);
                let out = block.0.as_mut_ptr().add(half * 2 * TILE).cast::<u8>();
                block_sums(x, xs.stride * 4, w, xs.stride, out);
            }
            for r in 0..take {
                let from = block.0.as_ptr().add(r * PANEL);
                std::ptr::copy_nonoverlapping(from, dst.0.add(at + r * self.out_dim), cols);
            }
            tile.finish(Isa::Avx512, take, bias, epilogue, at);
        }
        asm!("tilerelease", options(nostack, nomem));
    }
}

/// One block's sums: 32 rows by 64 columns, row-major.
#[repr(C, align(64))]
struct Block([f32; BLOCK_ROWS * PANEL]);

/// The 32 x 32 sums of activation rows `x` (row stride `x_stride` bytes) and the 32 weight
/// columns from `w` (pair rows of one `PairRow` apart), over `pairs` pairs of features, stored
/// at `out` (row stride one block row). SAFETY: a tile configuration of 16 x 64-byte tiles
/// loaded; `pairs` a multiple of 16; 32 rows readable from `x`.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
unsafe fn block_sums(x: *const u8, x_stride: usize, w: *const u8, pairs: usize, out: *mut u8) {
    const W_STRIDE: usize = std::mem::size_of::<PairRow>();
    const OUT_STRIDE: usize = PANEL * 4;
    asm!(
        "tilezero tmm0",
        "tilezero tmm1",
        "tilezero tmm2",
        "tilezero tmm3",
        options(nostack, nomem)
    );
    for step in (0..pairs).step_by(STEP_PAIRS) {
        let a = x.add(step * 4);
        let b = w.add(step * W_STRIDE);
        asm!(
            "tileloadd tmm4, [{a} + {xs}*1]",
            "tileloadd tmm5, [{a2} + {xs}*1]",
            "tileloadd tmm6, [{b} + {ws}*1]",
            "tileloadd tmm7, [{b2} + {ws}*1]",
            "tdpbf16ps tmm0, tmm4, tmm6",
            "tdpbf16ps tmm1, tmm4, tmm7",
            "tdpbf16ps tmm2, tmm5, tmm6",
            "tdpbf16ps tmm3, tmm5, tmm7",
            a = in(reg) a,
            a2 = in(reg) a.add(TILE * x_stride),
            xs = in(reg) x_stride,
            b = in(reg) b,
            b2 = in(reg) b.add(TILE * 4),
            ws = in(reg) W_STRIDE,
            options(nostack, readonly)
        );
    }
    asm!(
        "tilestored [{o} + {os}*1], tmm0",
        "tilestored [{o1} + {os}*1], tmm1",
        "tilestored [{o2} + {os}*1], tmm2",
        "tilestored [{o3} + {os}*1], tmm3",
        o = in(reg) out,
        o1 = in(reg) out.add(TILE * 4),
        o2 = in(reg) out.add(TILE * OUT_STRIDE),
        o3 = in(reg) out.add(TILE * OUT_STRIDE + TILE * 4),
        os = in(reg) OUT_STRIDE,
        options(nostack)
    );
}
