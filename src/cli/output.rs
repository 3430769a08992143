//! Writing to stdout without panicking: `println!` panics when the reader
//! of a pipe went away (`bat log | head`). [`outln!`] and [`out!`] write
//! through [`write_out`] instead and turn a closed pipe into
//! [`ErrorKind::BrokenPipe`](super::error::ErrorKind::BrokenPipe), which
//! `main` reports with exit code 141 and no message.

use std::io::Write;

use super::error::{stdout_error, CliError};

/// `println!` for verbs: returns early with a [`CliError`] when stdout
/// cannot be written (a closed pipe becomes a quiet broken-pipe exit).
macro_rules! outln {
    () => {
        $crate::cli::output::write_out(format_args!("\n"))?
    };
    ($($arg:tt)*) => {
        $crate::cli::output::write_out(format_args!("{}\n", format_args!($($arg)*)))?
    };
}

/// `print!` for verbs; see [`outln!`].
macro_rules! out {
    ($($arg:tt)*) => {
        $crate::cli::output::write_out(format_args!($($arg)*))?
    };
}

/// Write formatted text to stdout.
pub fn write_out(args: std::fmt::Arguments<'_>) -> Result<(), CliError> {
    std::io::stdout()
        .lock()
        .write_fmt(args)
        .map_err(stdout_error)
}

/// Flush stdout at exit; a reader that left early is a broken pipe.
pub fn flush_stdout() -> Result<(), CliError> {
    std::io::stdout().lock().flush().map_err(stdout_error)
}
