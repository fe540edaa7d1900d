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
    lines: Option<(String, Instant)>,
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
        let lines = (mode == ProgressMode::Lines).then(|| (label.to_string(), Instant::now()));
        Self { bar, lines }
    }

    /// Moves to `position`; `message` is only rendered when something is shown.
    pub fn update(&mut self, position: u64, message: impl FnOnce() -> String) {
        if let Some(bar) = &self.bar {
            bar.set_position(position);
            bar.set_message(message());
        } else if let Some((label, last)) = &mut self.lines {
            if last.elapsed() >= LINE_INTERVAL {
                eprintln!("{label}: {}", message());
                *last = Instant::now();
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
