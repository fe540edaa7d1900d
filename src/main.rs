use std::process::ExitCode;

use clap::Parser;

fn main() -> ExitCode {
    rag::util::use_best_blas_kernels();
    rag::util::keep_freed_memory();
    let cli = rag::cli::Cli::parse();
    match rag::cli::run(cli) {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            // One line: the error and its causes, outermost first.
            eprintln!("error: {err:#}");
            ExitCode::FAILURE
        }
    }
}
