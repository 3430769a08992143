//! One install for Python users: the `batledger` wheel installed into a
//! fresh venv gives both `import batledger` and the `bat` command (a
//! console script entering the same Rust `main` through the extension).
//! From that venv's `bin/`: `bat demo`, then the notebook-style script
//! examples/python/campaign.py (open the ledger, `rounds_frame()`, plot to
//! PNG); `bat --version`, output, a closed pipe and Ctrl-C behave as the
//! native binary cargo built for this run.
//!
//! The venv comes from `BAT_TEST_WHEEL_VENV` (`.ci/run` builds the wheel
//! once and installs it into a fresh venv with pandas and matplotlib).
//! Absent, the tests skip with a message; under `CI=true` they fail.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::Duration;

use crate::common::{bat, isolate, stderr, succeeded, text, utf8};

/// The venv's `bin/`, or `None` (after printing why) when the test must skip.
fn venv_bin() -> Option<PathBuf> {
    let why = match std::env::var_os("BAT_TEST_WHEEL_VENV") {
        Some(v) => {
            let bin = Path::new(&v).join("bin");
            if bin.join("bat").is_file() && bin.join("python").is_file() {
                return Some(bin);
            }
            format!(
                "BAT_TEST_WHEEL_VENV={} has no bin/bat and bin/python",
                Path::new(&v).display()
            )
        }
        None => "BAT_TEST_WHEEL_VENV is not set".to_string(),
    };
    if std::env::var("CI").is_ok_and(|v| v == "true") {
        panic!("{why}; .ci/run builds the wheel and installs it into a fresh venv");
    }
    eprintln!(
        "SKIPPED: {why} (make a venv, `pip install ./python pandas matplotlib` into it \
         and export the venv's folder as BAT_TEST_WHEEL_VENV)"
    );
    None
}

/// The venv's `bat` as an activated venv runs it: first on PATH, with the
/// isolated test environment.
fn wheel_bat(bin: &Path) -> Command {
    let mut c = Command::new(bin.join("bat"));
    isolate(&mut c);
    let path = std::env::var_os("PATH").unwrap_or_default();
    let mut dirs = vec![bin.to_path_buf()];
    dirs.extend(std::env::split_paths(&path));
    c.env("PATH", std::env::join_paths(dirs).expect("PATH entries"));
    c
}

/// No Python traceback or interrupt noise in a child's stderr.
fn assert_no_traceback(err: &str, what: &str) {
    for noise in [
        "Traceback",
        "KeyboardInterrupt",
        "BrokenPipeError",
        "Exception ignored",
    ] {
        assert!(!err.contains(noise), "{what}: `{noise}` in stderr: {err}");
    }
}

/// Width and height from a PNG's IHDR chunk, or `None` when `bytes` is not
/// a PNG.
fn png_size(bytes: &[u8]) -> Option<(u32, u32)> {
    let sig: &[u8] = b"\x89PNG\r\n\x1a\n";
    if bytes.len() < 24 || &bytes[..8] != sig || &bytes[12..16] != b"IHDR" {
        return None;
    }
    let be = |b: &[u8]| u32::from_be_bytes([b[0], b[1], b[2], b[3]]);
    Some((be(&bytes[16..20]), be(&bytes[20..24])))
}

#[test]
fn wheel_bat_runs_the_demo_and_the_notebook_script() {
    let Some(bin) = venv_bin() else { return };
    let tmp = tempfile::tempdir().expect("temporary directory");
    let ledger = tmp.path().join("demo");
    let out = succeeded(
        wheel_bat(&bin)
            .arg("demo")
            .arg(&ledger)
            .output()
            .expect("run the venv's bat demo"),
    );
    let said = text(&out.stdout);
    // The commands it prints name the venv's `bat` (on PATH), not the
    // interpreter the console script runs in.
    assert!(said.contains("bat -C "), "{said}");
    assert!(
        !said.contains("python"),
        "the demo names the interpreter: {said}"
    );
    assert_no_traceback(&stderr(&out), "bat demo");

    // The native binary reads the same history from the ledger.
    let log = |c: &mut Command| {
        text(
            &succeeded(
                c.arg("-C")
                    .arg(&ledger)
                    .args(["--json", "log", "--all"])
                    .output()
                    .expect("bat log"),
            )
            .stdout,
        )
    };
    assert_eq!(log(&mut wheel_bat(&bin)), log(&mut bat()));

    let png = tmp.path().join("campaign.png");
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/python/campaign.py");
    let out = succeeded(
        Command::new(bin.join("python"))
            .arg(&script)
            .arg(&ledger)
            .arg("--out")
            .arg(&png)
            .env("MPLBACKEND", "Agg")
            .env("MPLCONFIGDIR", tmp.path().join("mpl"))
            .output()
            .expect("run the notebook script"),
    );
    let table = text(&out.stdout);
    for round in ["r01", "r10", "promote"] {
        assert!(
            table.contains(round),
            "no {round} in the rounds frame: {table}"
        );
    }
    let bytes = std::fs::read(&png).expect("the notebook script wrote its PNG");
    let (w, h) = png_size(&bytes).expect("campaign.png is a PNG");
    assert!(w >= 400 && h >= 300, "a {w}x{h} plot");
    assert!(
        bytes.len() > 20_000,
        "a near-empty plot: {} bytes",
        bytes.len()
    );
}

#[test]
fn wheel_bat_is_the_native_bat_of_the_same_version() {
    let Some(bin) = venv_bin() else { return };
    let version = |c: &mut Command| {
        text(&succeeded(c.arg("--version").output().expect("bat --version")).stdout)
    };
    let native = version(&mut bat());
    assert_eq!(version(&mut wheel_bat(&bin)), native);
    let module = succeeded(
        Command::new(bin.join("python"))
            .args(["-c", "import batledger; print(batledger.__version__)"])
            .output()
            .expect("import batledger"),
    );
    assert_eq!(
        native.trim(),
        format!("bat {}", text(&module.stdout).trim())
    );

    // Usage errors: the same message and exit code, no traceback.
    let bad = |c: &mut Command| c.arg("no-such-verb").output().expect("bat no-such-verb");
    let (w, n) = (bad(&mut wheel_bat(&bin)), bad(&mut bat()));
    assert_eq!(w.status.code(), Some(2));
    assert_eq!((w.status.code(), stderr(&w)), (n.status.code(), stderr(&n)));
}

/// `bat ARGS` with its stdout a pipe whose reader is gone before it writes.
fn closed_pipe(mut c: Command, ledger: &Path) -> Output {
    let mut child = c
        .arg("-C")
        .arg(ledger)
        .args(["log", "--all"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn bat log");
    drop(child.stdout.take());
    child.wait_with_output().expect("wait for bat log")
}

#[test]
fn wheel_bat_into_a_closed_pipe_is_quiet() {
    let Some(bin) = venv_bin() else { return };
    let tmp = tempfile::tempdir().expect("temporary directory");
    let ledger = tmp.path().join("demo");
    succeeded(
        bat()
            .arg("demo")
            .arg(&ledger)
            .args(["--seeds", "1", "--rounds", "3"])
            .output()
            .expect("bat demo"),
    );
    let (w, n) = (
        closed_pipe(wheel_bat(&bin), &ledger),
        closed_pipe(bat(), &ledger),
    );
    // The native binary's outcome (a reader gone before the last line is
    // no failure: exit 0, or 141 when a line was refused midway), without
    // a word on stderr.
    assert_eq!(stderr(&w), "", "bat log into a closed pipe");
    assert_eq!((w.status.code(), stderr(&w)), (n.status.code(), stderr(&n)));

    // `bat log | head -1` as a shell runs it.
    let out = Command::new("sh")
        .arg("-c")
        .arg(format!(
            "'{}' -C '{}' log --all | head -1",
            utf8(&bin.join("bat")),
            utf8(&ledger)
        ))
        .output()
        .expect("sh");
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(text(&out.stdout).lines().count(), 1);
    assert_eq!(stderr(&out), "", "bat log | head -1");
}

#[test]
fn wheel_bat_stops_at_ctrl_c_with_130() {
    let Some(bin) = venv_bin() else { return };
    let tmp = tempfile::tempdir().expect("temporary directory");
    let w = tmp.path();
    succeeded(bat().current_dir(w).arg("init").output().expect("bat init"));
    // 96 MiB of xorshift output: a commit the progress delay makes last.
    let data = w.join("data");
    std::fs::create_dir_all(&data).expect("data folder");
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    for i in 0..6 {
        let mut f = std::io::BufWriter::new(
            std::fs::File::create(data.join(format!("b{i}.bin"))).expect("create"),
        );
        for _ in 0..(16 << 20) / 8 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            f.write_all(&x.to_le_bytes()).expect("write");
        }
        f.flush().expect("flush");
    }
    let mut child = wheel_bat(&bin)
        .current_dir(w)
        .args(["commit", "data", "-m", "big", "--plain"])
        .env("BAT_TEST_PROGRESS_DELAY_MS", "40")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn the venv's bat commit");
    // Once the interpreter loaded the extension, the CLI is a moment away
    // from its signal handler; the commit runs for seconds after that.
    let maps = format!("/proc/{}/maps", child.id());
    for _ in 0..600 {
        if std::fs::read_to_string(&maps).is_ok_and(|m| m.contains("batledger")) {
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    std::thread::sleep(Duration::from_millis(800));
    assert!(
        child.try_wait().expect("poll bat commit").is_none(),
        "bat commit finished before the signal"
    );
    let kill = Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .expect("kill -INT");
    assert!(kill.success());
    let out = child.wait_with_output().expect("wait for bat commit");
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(130), "stderr: {err}");
    assert!(err.contains("interrupted:"), "{err}");
    assert!(
        err.contains("to finish, run again: bat commit data -m big --plain"),
        "{err}"
    );
    assert_no_traceback(&err, "Ctrl-C");
}
