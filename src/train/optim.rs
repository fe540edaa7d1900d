//! AdamW with decoupled weight decay (PyTorch's update), gradient clipping by global norm and
//! the linear warm-up / decay schedule. Its moments are plain vectors so that a checkpoint can
//! save them and `--resume` continue with the very same optimizer state.

use std::collections::HashMap;

use candle_core::{Device, Result, Tensor, Var};

#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct AdamWConfig {
    pub lr: f64,
    pub beta1: f64,
    pub beta2: f64,
    pub eps: f64,
    pub weight_decay: f64,
}

pub struct AdamW {
    config: AdamWConfig,
    vars: Vec<(String, Var)>,
    first_moment: Vec<Vec<f32>>,
    second_moment: Vec<Vec<f32>>,
    step: usize,
}

/// Linear warm-up over `warmup` steps, then linear decay to zero at `total` (Hugging Face's
/// `get_linear_schedule_with_warmup`, counting the step being taken so the first one moves).
pub fn scheduled_lr(peak: f64, step: usize, warmup: usize, total: usize) -> f64 {
    let step = step + 1;
    if step <= warmup {
        peak * step as f64 / warmup.max(1) as f64
    } else {
        peak * (total.saturating_sub(step) as f64 / total.saturating_sub(warmup).max(1) as f64)
    }
}

impl AdamW {
    pub fn new(vars: Vec<(String, Var)>, config: AdamWConfig) -> Self {
        let mut optimizer = Self {
            first_moment: Vec::new(),
            second_moment: Vec::new(),
            vars,
            config,
            step: 0,
        };
        optimizer.first_moment = optimizer.zero_grads();
        optimizer.second_moment = optimizer.zero_grads();
        optimizer
    }

    pub fn vars(&self) -> &[(String, Var)] {
        &self.vars
    }

    /// One zeroed vector per variable: gradient accumulators, or fresh moments.
    pub fn zero_grads(&self) -> Vec<Vec<f32>> {
        self.vars
            .iter()
            .map(|(_, v)| vec![0.0; v.elem_count()])
            .collect()
    }

    /// Adds this backward pass's gradients (scaled) into `accumulated`.
    pub fn accumulate(
        &self,
        grads: &candle_core::backprop::GradStore,
        scale: f32,
        accumulated: &mut [Vec<f32>],
    ) -> Result<()> {
        for ((_, var), acc) in self.vars.iter().zip(accumulated.iter_mut()) {
            if let Some(grad) = grads.get(var.as_tensor()) {
                let grad = grad.flatten_all()?.to_vec1::<f32>()?;
                acc.iter_mut().zip(grad).for_each(|(a, g)| *a += g * scale);
            }
        }
        Ok(())
    }

    /// One update at learning rate `lr` after clipping the gradients' global L2 norm to
    /// `max_norm` (0 disables clipping). Returns the norm before clipping.
    pub fn step(&mut self, grads: &[Vec<f32>], lr: f64, max_norm: f64) -> Result<f64> {
        let norm = grads
            .iter()
            .flatten()
            .map(|&g| (g as f64) * (g as f64))
            .sum::<f64>()
            .sqrt();
        let clip = if max_norm > 0.0 && norm > max_norm {
            max_norm / (norm + 1e-6)
        } else {
            1.0
        };
        self.step += 1;
        let AdamWConfig {
            beta1,
            beta2,
            eps,
            weight_decay,
            ..
        } = self.config;
        let bias1 = 1.0 - beta1.powi(self.step as i32);
        let bias2 = 1.0 - beta2.powi(self.step as i32);
        let decay = (1.0 - lr * weight_decay) as f32;
        let (beta1, beta2) = (beta1 as f32, beta2 as f32);
        for (i, (_, var)) in self.vars.iter().enumerate() {
            let mut theta = var.as_tensor().flatten_all()?.to_vec1::<f32>()?;
            let (m, v) = (&mut self.first_moment[i], &mut self.second_moment[i]);
            for (((t, &g), m), v) in theta
                .iter_mut()
                .zip(&grads[i])
                .zip(m.iter_mut())
                .zip(v.iter_mut())
            {
                let g = g * clip as f32;
                *m = beta1 * *m + (1.0 - beta1) * g;
                *v = beta2 * *v + (1.0 - beta2) * g * g;
                let update = (*m as f64 / bias1) / ((*v as f64 / bias2).sqrt() + eps);
                *t = *t * decay - (lr * update) as f32;
            }
            var.set(&Tensor::from_vec(theta, var.shape(), var.device())?)?;
        }
        Ok(norm)
    }

    /// Moments as named tensors (`m.<var>`, `v.<var>`) for a checkpoint.
    pub fn state_tensors(&self, device: &Device) -> Result<HashMap<String, Tensor>> {
        let mut out = HashMap::new();
        for (i, (name, var)) in self.vars.iter().enumerate() {
            out.insert(
                format!("m.{name}"),
                Tensor::from_slice(&self.first_moment[i], var.shape(), device)?,
            );
            out.insert(
                format!("v.{name}"),
                Tensor::from_slice(&self.second_moment[i], var.shape(), device)?,
            );
        }
        Ok(out)
    }

    pub fn restore(&mut self, tensors: &HashMap<String, Tensor>, step: usize) -> Result<()> {
        for (i, (name, _)) in self.vars.iter().enumerate() {
            let get = |prefix: &str| {
                tensors
                    .get(&format!("{prefix}.{name}"))
                    .ok_or_else(|| {
                        candle_core::Error::Msg(format!(
                            "checkpoint lacks optimizer state for {name}"
                        ))
                    })?
                    .flatten_all()?
                    .to_vec1::<f32>()
            };
            self.first_moment[i] = get("m")?;
            self.second_moment[i] = get("v")?;
        }
        self.step = step;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn schedule_warms_up_then_decays_to_zero() {
        let lrs: Vec<f64> = (0..10).map(|s| scheduled_lr(1.0, s, 2, 10)).collect();
        assert_eq!(lrs[0], 0.5);
        assert_eq!(lrs[1], 1.0);
        assert!(lrs[2..].windows(2).all(|w| w[1] < w[0]));
        assert_eq!(lrs[9], 0.0);
    }

    #[test]
    fn one_step_matches_the_adamw_formula_and_clipping_scales_gradients() {
        let var = Var::from_slice(&[1.0f32, -2.0], 2, &Device::Cpu).unwrap();
        let config = AdamWConfig {
            lr: 0.1,
            beta1: 0.9,
            beta2: 0.999,
            eps: 1e-8,
            weight_decay: 0.01,
        };
        let mut opt = AdamW::new(vec![("w".into(), var.clone())], config);
        let norm = opt.step(&[vec![3.0, 4.0]], 0.1, 1.0).unwrap();
        assert!((norm - 5.0).abs() < 1e-9);
        // After bias correction the first step moves each weight by lr * sign(g) (clipping only
        // rescales g), after decaying it by lr * weight_decay.
        let got = var.as_tensor().to_vec1::<f32>().unwrap();
        let expected = [1.0 * (1.0 - 0.001) - 0.1, -2.0 * (1.0 - 0.001) - 0.1];
        for (g, e) in got.iter().zip(expected) {
            assert!((g - e).abs() < 1e-5, "{got:?} vs {expected:?}");
        }
        let state = opt.state_tensors(&Device::Cpu).unwrap();
        let m = state["m.w"].to_vec1::<f32>().unwrap();
        // The clipped gradient (0.6, 0.8) went into the first moment.
        assert!(
            (m[0] - 0.06).abs() < 1e-4 && (m[1] - 0.08).abs() < 1e-4,
            "{m:?}"
        );
    }
}
