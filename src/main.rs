//! The `rag` binary: flags in [`cli`], everything else in the library.

mod cli;

use std::process::ExitCode;

use clap::Parser;

fn main() -> ExitCode {
    rag::runtime::use_best_blas_kernels();
    rag::runtime::keep_freed_memory();
    let cli = cli::Cli::parse();
    match cli::run(cli) {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            // One line: the error and its causes, outermost first.
            eprintln!("error: {err:#}");
            ExitCode::FAILURE
        }
    }
}
