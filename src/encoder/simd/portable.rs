//! The [`Simd`] backend in plain arrays and scalar loops, at any width: the tests run every
//! generic kernel through it at 16 lanes (AVX-512's tile shapes) and at 8 (AVX2's), so that a
//! kernel's lane and tail logic is checked for AVX-512 on machines without it. Each method
//! follows the semantics the trait documents (those of the x86 instructions).

use super::Simd;

/// `N` f32 lanes in an array.
pub(in crate::encoder) struct Portable<const N: usize>;

fn map<const N: usize>(a: [f32; N], f: impl Fn(f32) -> f32) -> [f32; N] {
    a.map(f)
}

fn zip<const N: usize>(a: [f32; N], b: [f32; N], f: impl Fn(f32, f32) -> f32) -> [f32; N] {
    std::array::from_fn(|i| f(a[i], b[i]))
}

impl<const N: usize> Simd for Portable<N> {
    type V = [f32; N];
    const LANES: usize = N;
    unsafe fn zero() -> [f32; N] {
        [0.0; N]
    }
    unsafe fn splat(x: f32) -> [f32; N] {
        [x; N]
    }
    unsafe fn load(p: *const f32) -> [f32; N] {
        std::ptr::read_unaligned(p.cast())
    }
    unsafe fn load_first(p: *const f32, n: usize) -> [f32; N] {
        std::array::from_fn(|i| if i < n { *p.add(i) } else { 0.0 })
    }
    unsafe fn store(p: *mut f32, v: [f32; N]) {
        std::ptr::write_unaligned(p.cast(), v)
    }
    unsafe fn store_first(p: *mut f32, n: usize, v: [f32; N]) {
        for (i, &x) in v.iter().enumerate().take(n) {
            *p.add(i) = x;
        }
    }
    unsafe fn add(a: [f32; N], b: [f32; N]) -> [f32; N] {
        zip(a, b, |a, b| a + b)
    }
    unsafe fn sub(a: [f32; N], b: [f32; N]) -> [f32; N] {
        zip(a, b, |a, b| a - b)
    }
    unsafe fn mul(a: [f32; N], b: [f32; N]) -> [f32; N] {
        zip(a, b, |a, b| a * b)
    }
    unsafe fn max(a: [f32; N], b: [f32; N]) -> [f32; N] {
        zip(a, b, |a, b| if a > b { a } else { b })
    }
    unsafe fn min(a: [f32; N], b: [f32; N]) -> [f32; N] {
        zip(a, b, |a, b| if a < b { a } else { b })
    }
    unsafe fn fmadd(a: [f32; N], b: [f32; N], c: [f32; N]) -> [f32; N] {
        std::array::from_fn(|i| a[i].mul_add(b[i], c[i]))
    }
    unsafe fn fnmadd(a: [f32; N], b: [f32; N], c: [f32; N]) -> [f32; N] {
        std::array::from_fn(|i| (-a[i]).mul_add(b[i], c[i]))
    }
    unsafe fn recip(a: [f32; N]) -> [f32; N] {
        map(a, |a| 1.0 / a)
    }
    unsafe fn round(a: [f32; N]) -> [f32; N] {
        map(a, f32::round_ties_even)
    }
    unsafe fn scale_pow2(a: [f32; N], n: [f32; N]) -> [f32; N] {
        zip(a, n, |a, n| a * 2f32.powi(n as i32))
    }
    unsafe fn zero_unless_above(a: [f32; N], x: [f32; N], limit: f32) -> [f32; N] {
        zip(a, x, |a, x| if x > limit { a } else { 0.0 })
    }
    unsafe fn reduce_add(a: [f32; N]) -> f32 {
        a.iter().sum()
    }
    unsafe fn reduce_max(a: [f32; N]) -> f32 {
        a.iter().copied().fold(f32::NEG_INFINITY, f32::max)
    }
    unsafe fn transpose(rows: &mut [[f32; N]]) {
        let copy: Vec<[f32; N]> = rows.to_vec();
        for (i, row) in rows.iter_mut().enumerate() {
            *row = std::array::from_fn(|j| copy[j][i]);
        }
    }
}
