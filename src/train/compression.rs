//! The learn-to-compress target: `PCA_k(X) = X (U_k S_k)`, where `U S V^T` is the exact SVD of
//! `A = softmax(X^T X / sqrt(d))` (softmax over each row). The ESE reference takes a randomised
//! low-rank SVD; the exact one is cheap at these sizes (d x d, d <= 1024) and does not wobble
//! from batch to batch.

use candle_core::{Result, Tensor};

/// A square SVD `A = U diag(s) V^T`, row-major, singular values descending.
pub struct Svd {
    pub n: usize,
    pub u: Vec<f64>,
    pub s: Vec<f64>,
    pub vt: Vec<f64>,
}

// LAPACK's divide-and-conquer SVD. faiss links LAPACK into every build already (the `static`
// feature of faiss-sys links `lapack` and `blas`), so rag gets an exact, well-tested SVD
// without a second linear-algebra stack.
extern "C" {
    #[allow(clippy::too_many_arguments)]
    fn dgesdd_(
        jobz: *const u8,
        m: *const i32,
        n: *const i32,
        a: *mut f64,
        lda: *const i32,
        s: *mut f64,
        u: *mut f64,
        ldu: *const i32,
        vt: *mut f64,
        ldvt: *const i32,
        work: *mut f64,
        lwork: *const i32,
        iwork: *mut i32,
        info: *mut i32,
    );
}

/// dgesdd's buffers for a square `n x n` SVD with jobz = 'S' (the input is overwritten).
struct Dgesdd {
    n: i32,
    a: Vec<f64>,
    s: Vec<f64>,
    u: Vec<f64>,
    vt: Vec<f64>,
    iwork: Vec<i32>,
}

impl Dgesdd {
    /// One call with `work`; `lwork = -1` asks for the workspace size in `work[0]`. Returns info.
    fn run(&mut self, work: &mut [f64], lwork: i32) -> i32 {
        let mut info = 0;
        let n = &self.n;
        // SAFETY: every buffer is sized as dgesdd documents for jobz = 'S', m = n (a, u, vt:
        // n*n; s: n; iwork: 8n; work: lwork, or 1 for the query), and all leading dimensions
        // are n.
        unsafe {
            dgesdd_(
                &b'S',
                n,
                n,
                self.a.as_mut_ptr(),
                n,
                self.s.as_mut_ptr(),
                self.u.as_mut_ptr(),
                n,
                self.vt.as_mut_ptr(),
                n,
                work.as_mut_ptr(),
                &lwork,
                self.iwork.as_mut_ptr(),
                &mut info,
            )
        };
        info
    }
}

/// The SVD of the `n x n` row-major matrix `a`, with sklearn's `svd_flip` sign convention: in
/// every column of `U` the entry of largest magnitude is positive. Without a fixed convention
/// LAPACK may return `-u, -v` for one batch and `u, v` for the next, and the target would flip.
pub fn svd(a: &[f64], n: usize) -> Result<Svd> {
    assert_eq!(a.len(), n * n, "svd of a non-square matrix");
    let dim = i32::try_from(n).map_err(|_| candle_core::Error::Msg("matrix too large".into()))?;
    // LAPACK is column-major: hand it A^T, whose SVD is V S U^T, and swap the factors back.
    let mut lapack = Dgesdd {
        n: dim,
        a: a.to_vec(),
        s: vec![0.0; n],
        u: vec![0.0; n * n],
        vt: vec![0.0; n * n],
        iwork: vec![0; 8 * n],
    };
    let mut query = [0.0f64];
    let info = lapack.run(&mut query, -1);
    if info != 0 {
        candle_core::bail!("LAPACK dgesdd workspace query failed (info {info})");
    }
    let lwork = query[0] as i32;
    let info = lapack.run(&mut vec![0.0; lwork.max(1) as usize], lwork);
    if info != 0 {
        candle_core::bail!("LAPACK dgesdd did not converge (info {info})");
    }
    let Dgesdd {
        s,
        u: u_of_at,
        vt: vt_of_at,
        ..
    } = lapack;
    // Column-major U' of A^T read row-major is U'^T = V^T of A; likewise V'^T gives U.
    let (mut u, mut vt) = (vt_of_at, u_of_at);
    for j in 0..n {
        let largest = (0..n)
            .map(|i| u[i * n + j])
            .max_by(|x, y| x.abs().total_cmp(&y.abs()))
            .unwrap_or(0.0);
        if largest < 0.0 {
            (0..n).for_each(|i| u[i * n + j] = -u[i * n + j]);
            vt[j * n..(j + 1) * n].iter_mut().for_each(|v| *v = -*v);
        }
    }
    Ok(Svd { n, u, s, vt })
}

/// `A = softmax(X^T X / sqrt(d))` for row-major `x` of `rows x d`, in f64.
pub fn feature_affinity(x: &[f32], rows: usize, d: usize) -> Vec<f64> {
    let scale = 1.0 / (d as f64).sqrt();
    let mut a = vec![0.0f64; d * d];
    for row in x.chunks_exact(d).take(rows) {
        for (i, &xi) in row.iter().enumerate() {
            let xi = xi as f64 * scale;
            let out = &mut a[i * d..(i + 1) * d];
            for (o, &xj) in out.iter_mut().zip(row) {
                *o += xi * xj as f64;
            }
        }
    }
    for out in a.chunks_exact_mut(d) {
        let max = out.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        let mut sum = 0.0;
        for v in out.iter_mut() {
            *v = (*v - max).exp();
            sum += *v;
        }
        out.iter_mut().for_each(|v| *v /= sum);
    }
    a
}

/// `PCA_k(X) = X (U_k S_k)` for `x` `[rows, d]`: a constant (no gradient flows into it).
pub fn pca_target(x: &Tensor, k: usize) -> Result<Tensor> {
    let (rows, d) = x.dims2()?;
    if k == 0 || k > d {
        candle_core::bail!("compression size {k} must be in 1..={d}");
    }
    let values = x.detach().flatten_all()?.to_vec1::<f32>()?;
    let svd = svd(&feature_affinity(&values, rows, d), d)?;
    let projection: Vec<f32> = (0..d)
        .flat_map(|i| (0..k).map(move |j| (i, j)))
        .map(|(i, j)| (svd.u[i * d + j] * svd.s[j]) as f32)
        .collect();
    let projection = Tensor::from_vec(projection, (d, k), x.device())?;
    x.detach().matmul(&projection)
}

#[cfg(test)]
mod tests {
    use super::*;
    use candle_core::Device;

    fn random(rows: usize, cols: usize, seed: u64) -> Vec<f32> {
        let mut rng = crate::rng::Rng::new(seed);
        (0..rows * cols)
            .map(|_| (rng.next_u64() % 2001) as f32 / 1000.0 - 1.0)
            .collect()
    }

    fn matmul(a: &[f64], b: &[f64], n: usize) -> Vec<f64> {
        let mut out = vec![0.0; n * n];
        for i in 0..n {
            for k in 0..n {
                for j in 0..n {
                    out[i * n + j] += a[i * n + k] * b[k * n + j];
                }
            }
        }
        out
    }

    #[test]
    fn svd_reconstructs_and_satisfies_the_singular_relations() {
        let (rows, d) = (12, 7);
        let x = random(rows, d, 3);
        let a = feature_affinity(&x, rows, d);
        // Rows of a softmax sum to one.
        for row in a.chunks_exact(d) {
            assert!((row.iter().sum::<f64>() - 1.0).abs() < 1e-12);
        }
        let svd = svd(&a, d).unwrap();
        assert!(svd.s.windows(2).all(|w| w[0] >= w[1]));
        // A V = U S and A^T U = V S, column by column.
        for j in 0..d {
            for i in 0..d {
                let av: f64 = (0..d).map(|l| a[i * d + l] * svd.vt[j * d + l]).sum();
                assert!((av - svd.u[i * d + j] * svd.s[j]).abs() < 1e-10);
                let atu: f64 = (0..d).map(|l| a[l * d + i] * svd.u[l * d + j]).sum();
                assert!((atu - svd.vt[j * d + i] * svd.s[j]).abs() < 1e-10);
            }
        }
        // U is orthogonal.
        let ut: Vec<f64> = (0..d * d).map(|p| svd.u[(p % d) * d + p / d]).collect();
        let identity = matmul(&ut, &svd.u, d);
        for i in 0..d {
            for j in 0..d {
                let expected = if i == j { 1.0 } else { 0.0 };
                assert!((identity[i * d + j] - expected).abs() < 1e-10);
            }
        }
    }

    #[test]
    fn target_sign_is_fixed_across_calls_and_nearby_batches() {
        let (rows, d, k) = (16, 8, 3);
        let x = random(rows, d, 11);
        let tensor = |v: &[f32]| Tensor::from_vec(v.to_vec(), (rows, d), &Device::Cpu).unwrap();
        let first = pca_target(&tensor(&x), k).unwrap();
        assert_eq!(first.dims(), &[rows, k]);
        let again = pca_target(&tensor(&x), k).unwrap();
        let diff = (&first - &again).unwrap().abs().unwrap().max_all().unwrap();
        assert_eq!(diff.to_scalar::<f32>().unwrap(), 0.0);
        // A slightly different batch keeps every component's orientation.
        let nudged: Vec<f32> = x.iter().map(|v| v * 1.001 + 1e-4).collect();
        let other = pca_target(&tensor(&nudged), k).unwrap();
        let dots = (first * other)
            .unwrap()
            .sum(0)
            .unwrap()
            .to_vec1::<f32>()
            .unwrap();
        assert!(
            dots.iter().all(|&dot| dot > 0.0),
            "a component flipped: {dots:?}"
        );
        let svd = svd(&feature_affinity(&x, rows, d), d).unwrap();
        for j in 0..d {
            let largest = (0..d)
                .map(|i| svd.u[i * d + j])
                .max_by(|a, b| a.abs().total_cmp(&b.abs()))
                .unwrap();
            assert!(largest > 0.0, "column {j} breaks the sign convention");
        }
    }
}
