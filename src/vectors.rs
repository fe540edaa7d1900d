//! Dense row-major f32 matrices of embeddings, and the ESE truncation: keep the first `k`
//! dimensions and L2-normalise them again.

#[derive(Debug, Clone, PartialEq)]
pub struct Matrix {
    pub rows: usize,
    pub cols: usize,
    pub data: Vec<f32>,
}

impl Matrix {
    pub fn zeros(rows: usize, cols: usize) -> Self {
        Self {
            rows,
            cols,
            data: vec![0.0; rows * cols],
        }
    }

    pub fn from_vec(rows: usize, cols: usize, data: Vec<f32>) -> Self {
        assert_eq!(
            data.len(),
            rows * cols,
            "matrix data does not match its shape"
        );
        Self { rows, cols, data }
    }

    pub fn row(&self, i: usize) -> &[f32] {
        &self.data[i * self.cols..(i + 1) * self.cols]
    }

    pub fn row_mut(&mut self, i: usize) -> &mut [f32] {
        &mut self.data[i * self.cols..(i + 1) * self.cols]
    }

    pub fn normalize_rows(&mut self) {
        for row in self.data.chunks_exact_mut(self.cols.max(1)) {
            normalize(row);
        }
    }

    /// The first `dim` columns of every row, each re-normalised to unit length.
    pub fn truncated(&self, dim: usize) -> Matrix {
        let dim = dim.min(self.cols);
        let mut data = Vec::with_capacity(self.rows * dim);
        for i in 0..self.rows {
            data.extend_from_slice(&self.row(i)[..dim]);
        }
        let mut out = Matrix::from_vec(self.rows, dim, data);
        out.normalize_rows();
        out
    }
}

pub fn normalize(v: &mut [f32]) {
    let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt();
    if norm > 0.0 {
        v.iter_mut().for_each(|x| *x /= norm);
    }
}

pub fn cosine(a: &[f32], b: &[f32]) -> f32 {
    let dot: f32 = a.iter().zip(b).map(|(x, y)| x * y).sum();
    let na = a.iter().map(|x| x * x).sum::<f32>().sqrt();
    let nb = b.iter().map(|x| x * x).sum::<f32>().sqrt();
    dot / (na * nb).max(f32::MIN_POSITIVE)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn truncation_keeps_leading_dims_and_renormalises() {
        let m = Matrix::from_vec(2, 3, vec![3.0, 4.0, 12.0, 0.0, 0.0, 5.0]);
        let t = m.truncated(2);
        assert_eq!(t.cols, 2);
        assert!((t.row(0)[0] - 0.6).abs() < 1e-6 && (t.row(0)[1] - 0.8).abs() < 1e-6);
        // An all-zero prefix stays zero instead of becoming NaN.
        assert_eq!(t.row(1), &[0.0, 0.0]);
    }

    #[test]
    fn cosine_of_parallel_vectors_is_one() {
        assert!((cosine(&[1.0, 2.0], &[2.0, 4.0]) - 1.0).abs() < 1e-6);
        assert!(cosine(&[1.0, 0.0], &[0.0, 1.0]).abs() < 1e-6);
    }
}
