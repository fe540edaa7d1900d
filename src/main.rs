//! The `rag` binary: flags in [`cli`], everything else in the library.

mod cli;

use std::process::ExitCode;

use clap::Parser;

fn main() -> ExitCode {
    rag::runtime::use_best_blas_kernels();
    rag::runtime::keep_freed_memory();
    let cli = cli::Cli::parse();
    if !matches!(cli.command, cli::Command::Serve(_)) {
        // Rust ignores SIGPIPE, so printing into a closed pipe (`rag search ... | head -1`)
        // panics; a command line tool dies of it quietly instead, as Unix tools do. The server
        // keeps ignoring it: a client that hangs up must not stop it.
        // SAFETY: only sets the disposition back to the default; no handler runs our code.
        unsafe {
            libc::signal(libc::SIGPIPE, libc::SIG_DFL);
        }
    }
    match cli::run(cli) {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            // One line: the error and its causes, outermost first.
            eprintln!("error: {}", cli::describe(&err));
            ExitCode::FAILURE
        }
    }
}
