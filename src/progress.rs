//! Progress for long work: a live bar on a terminal, a line every half minute in a log file.

use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressStyle};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProgressMode {
    /// An indicatif bar (stderr is a terminal).
    Bar,
    /// A plain line on stderr now and then (stderr is a file or a pipe).
    Lines,
    Quiet,
}

impl ProgressMode {
    /// A bar on a terminal, lines otherwise.
    pub fn for_stderr() -> Self {
        if std::io::IsTerminal::is_terminal(&std::io::stderr()) {
            ProgressMode::Bar
        } else {
            ProgressMode::Lines
        }
    }
}

const LINE_INTERVAL: Duration = Duration::from_secs(30);

pub struct Progress {
    bar: Option<ProgressBar>,
    lines: Option<Lines>,
}

/// The plain-line form: a log line must say on its own how far the work is and how long is
/// left, as the bar does on a terminal.
struct Lines {
    label: String,
    total: u64,
    last: Instant,
    /// When this process first reported, and from where: a resumed job's rate counts only the
    /// work done since.
    start: Option<(Instant, u64)>,
}

impl Lines {
    fn line(&self, position: u64, now: Instant, message: &str) -> String {
        let percent = position.min(self.total) * 100 / self.total.max(1);
        let left = self.start.and_then(|(at, from)| {
            let done = position.checked_sub(from).filter(|&d| d > 0)?;
            let remaining = self.total.saturating_sub(position);
            Some(
                now.duration_since(at)
                    .mul_f64(remaining as f64 / done as f64),
            )
        });
        let mut line = format!("{}: {percent}%", self.label);
        if let Some(left) = left {
            line += &format!(", {} left", indicatif::HumanDuration(left));
        }
        if !message.is_empty() {
            line += &format!(" | {message}");
        }
        line
    }
}

impl Progress {
    /// `template` is an indicatif template for the bar; `label` starts each plain line.
    pub fn new(mode: ProgressMode, label: &str, total: u64, template: &str) -> Self {
        let bar = (mode == ProgressMode::Bar).then(|| {
            let bar = ProgressBar::new(total);
            bar.set_style(
                ProgressStyle::with_template(template)
                    .expect("valid progress template")
                    .progress_chars("=> "),
            );
            bar
        });
        let lines = (mode == ProgressMode::Lines).then(|| Lines {
            label: label.to_string(),
            total,
            last: Instant::now(),
            start: None,
        });
        Self { bar, lines }
    }

    /// Moves to `position`; `message` is only rendered when something is shown.
    pub fn update(&mut self, position: u64, message: impl FnOnce() -> String) {
        if let Some(bar) = &self.bar {
            bar.set_position(position);
            bar.set_message(message());
        } else if let Some(lines) = &mut self.lines {
            let now = Instant::now();
            lines.start.get_or_insert((now, position));
            if now.duration_since(lines.last) >= LINE_INTERVAL {
                eprintln!("{}", lines.line(position, now, &message()));
                lines.last = now;
            }
        }
    }

    pub fn finish(self) {
        if let Some(bar) = self.bar {
            bar.finish_and_clear();
        }
    }
}

/// Milliseconds elapsed since `start`: the unit every timing in rag's output is reported in.
pub fn ms_since(start: std::time::Instant) -> f64 {
    start.elapsed().as_secs_f64() * 1000.0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_line_says_how_far_and_how_long_is_left_from_this_process_rate() {
        let at = Instant::now();
        let lines = Lines {
            label: "train ese".into(),
            total: 600,
            last: at,
            // Resumed at step 100.
            start: Some((at, 100)),
        };
        // 50 steps in 100 s: the 450 left take 900 s.
        let now = at + Duration::from_secs(100);
        assert_eq!(
            lines.line(150, now, "loss 1.5"),
            "train ese: 25%, 15 minutes left | loss 1.5"
        );
        // Nothing done yet in this process: no estimate, and no empty message.
        assert_eq!(lines.line(100, now, ""), "train ese: 16%");
    }
}
