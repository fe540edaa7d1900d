//! Post-hoc PCA, the no-training baseline for small embeddings: fit the top principal directions
//! of a sample of vectors with faiss `PCAMatrix`, project onto them and L2-normalise again.
//! `rag index --reduce pca:K` stores one per depth with the index and applies it to queries;
//! `rag eval-sts --reduce pca` compares it with ESE's first-k truncation. The components come
//! strongest first, so the first k of a K-dimensional projection are the k-dimensional one.

use std::collections::HashMap;
use std::fmt;
use std::path::Path;
use std::str::FromStr;

use anyhow::{anyhow, bail, Context, Result};
use candle_core::{Device, Tensor};
use faiss::vector_transform::{NativeVectorTransform, PCAMatrix, VectorTransform};
use serde::{Deserialize, Serialize};

use crate::vectors::Matrix;

/// `--reduce pca:K`: keep the top K principal components.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct PcaSpec {
    pub dim: usize,
}

impl FromStr for PcaSpec {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        s.strip_prefix("pca:")
            .and_then(|k| k.parse::<usize>().ok())
            .filter(|&dim| dim > 0)
            .map(|dim| PcaSpec { dim })
            .ok_or_else(|| format!("'{s}' is not a reduction (expected pca:K, e.g. pca:64)"))
    }
}

impl TryFrom<String> for PcaSpec {
    type Error = String;
    fn try_from(s: String) -> Result<Self, String> {
        s.parse()
    }
}

impl From<PcaSpec> for String {
    fn from(spec: PcaSpec) -> String {
        spec.to_string()
    }
}

impl fmt::Display for PcaSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "pca:{}", self.dim)
    }
}

/// A fitted PCA as the affine map `y = components x + bias`, where `bias = -components mean`.
pub struct Pca {
    /// The principal directions, strongest first, one per row: `[dim, input width]`.
    components: Tensor,
    bias: Tensor,
}

fn faiss_error(e: faiss::error::Error) -> anyhow::Error {
    anyhow!("faiss: {e}")
}

impl Pca {
    /// Fits the top `dim` principal directions of the rows of `sample`.
    pub fn fit(sample: &Matrix, dim: usize) -> Result<Self> {
        let width = sample.cols;
        if dim == 0 || dim > width {
            bail!("a PCA of {width}-dimensional vectors keeps 1 to {width} components, not {dim}");
        }
        if sample.rows < dim {
            bail!(
                "a PCA to {dim} dimensions needs at least {dim} vectors to fit on, got {}",
                sample.rows
            );
        }
        let mut pca = PCAMatrix::new(width as u32, dim as u32, 0.0, false).map_err(faiss_error)?;
        pca.train(sample.rows, &sample.data).map_err(faiss_error)?;
        // faiss's C API applies a trained transform but can neither hand out its matrix nor
        // write it to a file, so the affine map is read off its images of the origin and of
        // each unit vector, and kept as plain tensors.
        let mut probes = Matrix::zeros(width + 1, width);
        for i in 0..width {
            probes.row_mut(i + 1)[i] = 1.0;
        }
        let images = apply(&pca, &probes);
        let bias = images.row(0);
        let mut components = vec![0f32; dim * width];
        for i in 0..width {
            for (j, (&image, &b)) in images.row(i + 1).iter().zip(bias).enumerate() {
                components[j * width + i] = image - b;
            }
        }
        Ok(Self {
            components: Tensor::from_vec(components, (dim, width), &Device::Cpu)?,
            bias: Tensor::from_slice(bias, dim, &Device::Cpu)?,
        })
    }

    pub fn input_dim(&self) -> usize {
        self.components.dims()[1]
    }

    pub fn output_dim(&self) -> usize {
        self.components.dims()[0]
    }

    /// Projects each row onto the components and L2-normalises it again.
    pub fn reduce(&self, vectors: &Matrix) -> Result<Matrix> {
        if vectors.cols != self.input_dim() {
            bail!(
                "the PCA takes {}-dimensional vectors, not {}-dimensional ones",
                self.input_dim(),
                vectors.cols
            );
        }
        if vectors.rows == 0 {
            return Ok(Matrix::zeros(0, self.output_dim()));
        }
        let x = Tensor::from_slice(&vectors.data, (vectors.rows, vectors.cols), &Device::Cpu)?;
        let y = x.matmul(&self.components.t()?)?.broadcast_add(&self.bias)?;
        let mut out =
            Matrix::from_vec(vectors.rows, self.output_dim(), y.flatten_all()?.to_vec1()?);
        out.normalize_rows();
        Ok(out)
    }

    pub fn save(&self, path: &Path) -> Result<()> {
        let tensors = HashMap::from([
            ("components".to_string(), self.components.clone()),
            ("bias".to_string(), self.bias.clone()),
        ]);
        candle_core::safetensors::save(&tensors, path)
            .with_context(|| format!("writing {}", path.display()))
    }

    pub fn load(path: &Path) -> Result<Self> {
        let mut tensors = candle_core::safetensors::load(path, &Device::Cpu)
            .with_context(|| format!("reading {}", path.display()))?;
        let mut take = |name: &str| {
            tensors
                .remove(name)
                .ok_or_else(|| anyhow!("{} has no '{name}' tensor", path.display()))
        };
        let (components, bias) = (take("components")?, take("bias")?);
        let (dim, _) = components
            .dims2()
            .with_context(|| format!("{}: components must be a matrix", path.display()))?;
        if bias.dims() != [dim] {
            bail!(
                "{}: bias has shape {:?}, not [{dim}]",
                path.display(),
                bias.dims()
            );
        }
        Ok(Self { components, bias })
    }
}

/// Runs the trained faiss transform on the rows of `x`.
fn apply(pca: &PCAMatrix, x: &Matrix) -> Matrix {
    let mut out = Matrix::zeros(x.rows, pca.d_out() as usize);
    // The safe `apply_noalloc` of faiss 0.13 returns an empty vector (it never sets the
    // length of what faiss wrote), so the C function is called directly.
    // SAFETY: `pca` is trained with input width `x.cols`, and `out` holds `x.rows` rows of its
    // output width, which is all faiss writes.
    unsafe {
        faiss_sys::faiss_VectorTransform_apply_noalloc(
            pca.inner_ptr(),
            x.rows as i64,
            x.data.as_ptr(),
            out.data.as_mut_ptr(),
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::vectors::cosine;

    /// 400 points in 12 dimensions around an offset mean, spread 10 along `u`, 4 along `v`
    /// (orthogonal unit vectors) and 0.1 in every direction.
    fn two_direction_data() -> (Matrix, Vec<f32>, Vec<f32>) {
        let width = 12;
        let mut u = vec![0f32; width];
        let mut v = vec![0f32; width];
        for i in 0..width {
            u[i] = (i as f32 * 0.7).sin();
            v[i] = (i as f32 * 1.3 + 0.5).cos();
        }
        crate::vectors::normalize(&mut u);
        let along: f32 = v.iter().zip(&u).map(|(a, b)| a * b).sum();
        v.iter_mut().zip(&u).for_each(|(a, b)| *a -= along * b);
        crate::vectors::normalize(&mut v);
        let mut state = 12345u64;
        let mut noise = || {
            state = state
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (state >> 40) as f32 / (1u64 << 24) as f32 - 0.5
        };
        let mut data = Vec::new();
        for _ in 0..400 {
            let (a, b) = (noise() * 20.0, noise() * 8.0);
            for i in 0..width {
                data.push(1.0 + i as f32 * 0.1 + a * u[i] + b * v[i] + noise() * 0.2);
            }
        }
        (Matrix::from_vec(400, width, data), u, v)
    }

    #[test]
    fn components_are_the_dominant_directions_strongest_first() {
        let (data, u, v) = two_direction_data();
        let pca = Pca::fit(&data, 3).unwrap();
        assert_eq!((pca.input_dim(), pca.output_dim()), (12, 3));
        let components: Vec<Vec<f32>> = pca.components.to_vec2().unwrap();
        let first = cosine(&components[0], &u).abs();
        let second = cosine(&components[1], &v).abs();
        assert!(first > 0.999, "first component vs u: {first}");
        assert!(second > 0.999, "second component vs v: {second}");
        // Orthonormal rows.
        for (i, a) in components.iter().enumerate() {
            for (j, b) in components.iter().enumerate() {
                let dot: f32 = a.iter().zip(b).map(|(x, y)| x * y).sum();
                let want = if i == j { 1.0 } else { 0.0 };
                assert!((dot - want).abs() < 1e-4, "rows {i},{j}: {dot}");
            }
        }
    }

    #[test]
    fn reduced_vectors_are_unit_length_and_follow_the_top_direction() {
        let (data, u, _) = two_direction_data();
        let pca = Pca::fit(&data, 2).unwrap();
        // The data's mean plus a step along u lands on (+-1, 0) once centred and normalised.
        let mean: Vec<f32> = (0..12).map(|i| 1.0 + i as f32 * 0.1).collect();
        let probe: Vec<f32> = mean.iter().zip(&u).map(|(m, d)| m + 5.0 * d).collect();
        let reduced = pca.reduce(&Matrix::from_vec(1, 12, probe)).unwrap();
        assert_eq!(reduced.cols, 2);
        assert!(
            (reduced.row(0)[0].abs() - 1.0).abs() < 1e-2,
            "{:?}",
            reduced.row(0)
        );
        let all = pca.reduce(&data).unwrap();
        for i in 0..all.rows {
            let norm: f32 = all.row(i).iter().map(|x| x * x).sum();
            assert!((norm - 1.0).abs() < 1e-4);
        }
        // The first k of a larger projection are the k-dimensional projection.
        let wide = Pca::fit(&data, 5)
            .unwrap()
            .reduce(&data)
            .unwrap()
            .truncated(2);
        for i in 0..all.rows {
            assert!(cosine(wide.row(i), all.row(i)).abs() > 0.999, "row {i}");
        }
    }

    #[test]
    fn saved_pca_reloads_and_reduces_the_same() {
        let (data, _, _) = two_direction_data();
        let pca = Pca::fit(&data, 4).unwrap();
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("L1.safetensors");
        pca.save(&path).unwrap();
        let loaded = Pca::load(&path).unwrap();
        assert_eq!(loaded.reduce(&data).unwrap(), pca.reduce(&data).unwrap());
        assert!(Pca::load(&dir.path().join("missing.safetensors")).is_err());
    }

    #[test]
    fn bad_fits_and_inputs_are_clear_errors() {
        let (data, _, _) = two_direction_data();
        let err = Pca::fit(&data, 13).err().unwrap().to_string();
        assert!(err.contains("1 to 12 components"), "{err}");
        let few = Matrix::from_vec(3, 12, data.data[..36].to_vec());
        let err = Pca::fit(&few, 4).err().unwrap().to_string();
        assert!(err.contains("at least 4 vectors"), "{err}");
        let pca = Pca::fit(&data, 2).unwrap();
        assert!(pca.reduce(&Matrix::zeros(1, 5)).is_err());
        assert_eq!(pca.reduce(&Matrix::zeros(0, 12)).unwrap().rows, 0);
    }

    #[test]
    fn specs_parse_and_print_as_pca_k() {
        assert_eq!("pca:64".parse::<PcaSpec>().unwrap(), PcaSpec { dim: 64 });
        assert_eq!(PcaSpec { dim: 8 }.to_string(), "pca:8");
        for bad in ["pca", "pca:0", "pca:x", "svd:8", "64"] {
            assert!(bad.parse::<PcaSpec>().is_err(), "{bad}");
        }
        let json = serde_json::to_string(&PcaSpec { dim: 8 }).unwrap();
        assert_eq!(json, "\"pca:8\"");
        assert!(serde_json::from_str::<PcaSpec>("\"pca:x\"").is_err());
    }
}
