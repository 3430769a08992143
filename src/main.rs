#![forbid(unsafe_code)]
//! The `bat` binary: parse, dispatch, print.

fn main() -> std::process::ExitCode {
    bat_cli::cli::main()
}
