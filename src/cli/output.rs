//! Writing to stdout without panicking: `println!` panics when the reader
//! of a pipe went away (`bat log | head`). [`outln!`] and [`out!`] write
//! through [`write_out`] instead and turn a closed pipe into
//! [`ErrorKind::BrokenPipe`](super::error::ErrorKind::BrokenPipe), which
//! `main` reports with exit code 141 and no message (or, when a pager was
//! quitted early, as success).
//!
//! Output goes to stdout, or to the pager's stdin once [`route_to`] was
//! called ([`super::term::Pager`]); [`Stdout`] is the `io::Write` form for
//! verbs that stream through their own buffered writer.
//!
//! Everything written through [`write_out`] (and so [`outln!`], [`out!`],
//! [`super::print_json`]) or a [`Neutral`] writer passes through
//! [`super::term::neutralize`]: control characters from stored data reach
//! the terminal as visible `\uXXXX` escapes, never raw. The raw [`Stdout`]
//! is for byte streams the user asked for as they are (`bat cat`).

use std::io::{BufWriter, Write};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;

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

/// Whether colors are on: only then may [`Paint`](super::term::Paint)'s
/// own sequences pass [`Neutral`] unescaped.
static COLORS: AtomicBool = AtomicBool::new(false);

/// Record whether this invocation colors its output (set once in `main`).
pub fn set_colors(on: bool) {
    COLORS.store(on, Ordering::Relaxed);
}

/// The sequences [`Neutral`] lets through: the palette with colors on,
/// none without.
fn allowed() -> &'static [String] {
    if COLORS.load(Ordering::Relaxed) {
        super::term::palette()
    } else {
        &[]
    }
}

/// A writer that neutralizes control characters
/// ([`super::term::neutralize`]) in what it is given before passing it on.
/// Put it outside any buffering (`Neutral(BufWriter::new(..))`): `write!`
/// hands it each formatted piece whole, so a stored string or a color
/// sequence is never split between two calls.
#[derive(Debug)]
pub struct Neutral<W: Write>(pub W);

impl<W: Write> Write for Neutral<W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.write_all(buf)?;
        Ok(buf.len())
    }

    fn write_all(&mut self, buf: &[u8]) -> std::io::Result<()> {
        let text = String::from_utf8_lossy(buf);
        let safe = super::term::neutralize(&text, allowed());
        self.0.write_all(safe.as_bytes())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.0.flush()
    }
}

/// Where output goes instead of stdout (the pager), when set.
static ROUTE: Mutex<Option<BufWriter<Box<dyn Write + Send>>>> = Mutex::new(None);

/// Send all further output to `w` (a pager's stdin).
pub fn route_to(w: Box<dyn Write + Send>) {
    let mut r = ROUTE.lock().unwrap_or_else(|e| e.into_inner());
    *r = Some(BufWriter::with_capacity(1 << 16, w));
}

/// Stop routing; returns the writer so the caller can flush and close it.
pub fn unroute() -> Option<BufWriter<Box<dyn Write + Send>>> {
    ROUTE.lock().unwrap_or_else(|e| e.into_inner()).take()
}

/// The process's output (stdout or the pager) as an `io::Write`.
#[derive(Debug, Clone, Copy, Default)]
pub struct Stdout;

impl Write for Stdout {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let mut r = ROUTE.lock().unwrap_or_else(|e| e.into_inner());
        match r.as_mut() {
            Some(w) => w.write(buf),
            None => std::io::stdout().lock().write(buf),
        }
    }

    fn write_all(&mut self, buf: &[u8]) -> std::io::Result<()> {
        let mut r = ROUTE.lock().unwrap_or_else(|e| e.into_inner());
        match r.as_mut() {
            Some(w) => w.write_all(buf),
            None => std::io::stdout().lock().write_all(buf),
        }
    }

    fn flush(&mut self) -> std::io::Result<()> {
        let mut r = ROUTE.lock().unwrap_or_else(|e| e.into_inner());
        match r.as_mut() {
            Some(w) => w.flush(),
            None => std::io::stdout().lock().flush(),
        }
    }
}

/// Write formatted text to stdout, control characters neutralized.
pub fn write_out(args: std::fmt::Arguments<'_>) -> Result<(), CliError> {
    Neutral(Stdout).write_fmt(args).map_err(stdout_error)
}

/// Flush stdout at exit; a reader that left early is a broken pipe.
pub fn flush_stdout() -> Result<(), CliError> {
    Stdout.flush().map_err(stdout_error)
}
