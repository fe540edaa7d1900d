//! A test this machine cannot run (a CPU feature it lacks, a model or data missing) says so
//! loudly: cargo hides a passing test's output, so the skip also goes to `$RAG_SKIP_LOG`, which
//! `scripts/test.sh` lists at the end. Unit tests and the integration tests share this one home.

use std::io::Write;

/// Records that `test` ran nothing, and why: on stderr and, when set, in `$RAG_SKIP_LOG`.
pub fn skip(test: &str, why: &str) {
    eprintln!("SKIPPED {test}: {why}");
    if let Some(log) = std::env::var_os("RAG_SKIP_LOG") {
        // A log that cannot be written must not fail the test that only wanted to say it skipped.
        if let Ok(mut file) = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(log)
        {
            let _ = writeln!(file, "{test}: {why}");
        }
    }
}
