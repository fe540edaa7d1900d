//! Spearman's rank correlation, the STS measure, and the mean the reports average with.

/// Spearman's rank correlation: Pearson's correlation of the ranks, tied values sharing the
/// average of their ranks (as scipy's `spearmanr`). NaN when either side is constant.
pub fn spearman(x: &[f64], y: &[f64]) -> f64 {
    assert_eq!(x.len(), y.len(), "spearman needs paired values");
    pearson(&ranks(x), &ranks(y))
}

/// 1-based ranks, ties getting the mean of the ranks they span.
fn ranks(values: &[f64]) -> Vec<f64> {
    let mut order: Vec<usize> = (0..values.len()).collect();
    order.sort_by(|&a, &b| values[a].total_cmp(&values[b]));
    let mut ranks = vec![0.0; values.len()];
    let mut start = 0;
    while start < order.len() {
        let mut end = start + 1;
        while end < order.len() && values[order[end]] == values[order[start]] {
            end += 1;
        }
        // Sorted positions start..end hold one value: ranks start+1 ..= end, averaged.
        let rank = (start + 1 + end) as f64 / 2.0;
        for &i in &order[start..end] {
            ranks[i] = rank;
        }
        start = end;
    }
    ranks
}

fn pearson(x: &[f64], y: &[f64]) -> f64 {
    let n = x.len() as f64;
    let (mx, my) = (x.iter().sum::<f64>() / n, y.iter().sum::<f64>() / n);
    let (mut sxy, mut sxx, mut syy) = (0.0, 0.0, 0.0);
    for (a, b) in x.iter().zip(y) {
        let (dx, dy) = (a - mx, b - my);
        sxy += dx * dy;
        sxx += dx * dx;
        syy += dy * dy;
    }
    sxy / (sxx * syy).sqrt()
}

pub fn mean(values: impl Iterator<Item = f64>) -> f64 {
    let (sum, n) = values.fold((0.0, 0usize), |(s, n), v| (s + v, n + 1));
    sum / n.max(1) as f64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spearman_matches_hand_computed_values_with_ties() {
        // y's ranks are 1, 2, 3.5, 5, 3.5: r = 8 / sqrt(10 * 9.5).
        let r = spearman(&[1.0, 2.0, 3.0, 4.0, 5.0], &[5.0, 6.0, 7.0, 8.0, 7.0]);
        assert!((r - 8.0 / 95f64.sqrt()).abs() < 1e-12, "{r}");
        // Ties on both sides: ranks 1.5, 1.5, 3, 4 against 1, 2.5, 2.5, 4 give 3.75 / 4.5.
        let r = spearman(&[1.0, 1.0, 2.0, 3.0], &[1.0, 2.0, 2.0, 3.0]);
        assert!((r - 3.75 / 4.5).abs() < 1e-12, "{r}");
        // Only the order counts.
        let r = spearman(&[0.1, 0.5, 0.2, 0.9], &[1.0, 100.0, 3.0, 1e6]);
        assert!((r - 1.0).abs() < 1e-12, "{r}");
        let r = spearman(&[1.0, 2.0, 3.0], &[3.0, 2.0, 1.0]);
        assert!((r + 1.0).abs() < 1e-12, "{r}");
        assert!(spearman(&[1.0, 1.0, 1.0], &[1.0, 2.0, 3.0]).is_nan());
        assert_eq!(ranks(&[10.0, 20.0, 20.0, 30.0]), vec![1.0, 2.5, 2.5, 4.0]);
        assert_eq!(ranks(&[3.0, 1.0, 2.0]), vec![3.0, 1.0, 2.0]);
    }
}
