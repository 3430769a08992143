//! `bat report` in a real browser: the page of a `bat demo` ledger
//! (campaign + terminal-reward replay) opened in headless Chromium loads
//! with no script error or console error, every plot draws one point per
//! round of each arm (counted in the DOM Chromium built), and a screenshot
//! is kept at target/test-artifacts/report.png.
//!
//! Chromium is found through BAT_TEST_CHROMIUM (`.ci/run` installs Debian's
//! `chromium` and sets it). Without it the test prints why and passes,
//! except under CI=true, where it fails.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use report_common::{assert_points_match_rounds, campaign, plots, render};

use crate::common::report as report_common;

fn chromium() -> Option<PathBuf> {
    crate::common::external::chromium()
}

/// Run Chromium headless on `page` with `args`; (stdout, stderr).
fn headless(chrome: &Path, page: &Path, args: &[String], profile: &Path) -> (String, String) {
    let mut child = Command::new(chrome)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--no-first-run",
            "--disable-extensions",
            "--hide-scrollbars",
            "--enable-logging=stderr",
            "--v=0",
        ])
        .arg(format!("--user-data-dir={}", profile.display()))
        .args(args)
        .arg(format!("file://{}", page.display()))
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start chromium");
    let out_pipe = child.stdout.take().expect("piped");
    let err_pipe = child.stderr.take().expect("piped");
    let read = |mut p: Box<dyn std::io::Read + Send>| {
        std::thread::spawn(move || {
            let mut s = String::new();
            let _ = p.read_to_string(&mut s);
            s
        })
    };
    let (o, e) = (read(Box::new(out_pipe)), read(Box::new(err_pipe)));
    let start = Instant::now();
    loop {
        if child.try_wait().expect("wait").is_some() {
            break;
        }
        if start.elapsed() > Duration::from_secs(120) {
            let _ = child.kill();
            let _ = child.wait();
            panic!("chromium did not finish within 120 s");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    (o.join().expect("stdout"), e.join().expect("stderr"))
}

/// Console errors Chromium logged (uncaught exceptions, console.error).
fn console_errors(stderr: &str) -> Vec<&str> {
    stderr
        .lines()
        .filter(|l| l.contains("CONSOLE") && (l.contains("Uncaught") || l.contains(":ERROR:")))
        .collect()
}

fn body_attr(dom: &str, name: &str) -> Option<String> {
    let b = &dom[dom.find("<body")?..];
    let tag = &b[..b.find('>')?];
    let k = format!("{name}=\"");
    let i = tag.find(&k)? + k.len();
    Some(tag[i..i + tag[i..].find('"')?].to_string())
}

#[test]
fn report_renders_in_headless_chromium_with_a_point_per_round() {
    let Some(chrome) = chromium() else { return };
    let tmp = tempfile::tempdir().expect("temp dir");
    let profile = tmp.path().join("profile");
    let c = campaign(tmp.path());
    let page = tmp.path().join("report.html");
    render(&c, &page);

    // The checker really detects a broken page: a script error is reported
    // both in the DOM (the page's error hook) and on the console.
    let broken = tmp.path().join("broken.html");
    let html = std::fs::read_to_string(&page).expect("page");
    std::fs::write(
        &broken,
        html.replacen(
            "</body>",
            "<script>notDefinedAnywhere();</script></body>",
            1,
        ),
    )
    .expect("write");
    let (dom, err) = headless(&chrome, &broken, &["--dump-dom".into()], &profile);
    assert!(
        dom.contains("data-errors=\""),
        "the error hook saw the error"
    );
    assert!(
        !console_errors(&err).is_empty(),
        "the console error was logged: {err}"
    );

    // The real page: no error, the page's own check passed, and the DOM
    // Chromium built has one point per round of each arm in every plot.
    let (dom, err) = headless(&chrome, &page, &["--dump-dom".into()], &profile);
    assert!(dom.contains("<svg id=\"plot-overall\""), "the page loaded");
    assert!(!dom.contains("data-errors=\""), "script errors: {dom}");
    assert_eq!(console_errors(&err), Vec::<&str>::new());
    assert_eq!(
        body_attr(&dom, "data-check").as_deref(),
        Some("ok"),
        "the page's point check: {:?}",
        body_attr(&dom, "data-problems")
    );
    assert_points_match_rounds(&c, &plots(&dom));

    let artifacts = Path::new(env!("CARGO_MANIFEST_DIR")).join("target/test-artifacts");
    std::fs::create_dir_all(&artifacts).expect("artifact dir");
    let png = artifacts.join("report.png");
    let _ = std::fs::remove_file(&png);
    let (_, err) = headless(
        &chrome,
        &page,
        &[
            format!("--screenshot={}", png.display()),
            "--window-size=1360,2600".into(),
        ],
        &profile,
    );
    let bytes = std::fs::read(&png).unwrap_or_else(|e| panic!("no screenshot ({e}): {err}"));
    assert!(bytes.starts_with(b"\x89PNG"), "a PNG");
    assert!(bytes.len() > 20_000, "a real rendering, not a blank page");
    eprintln!("screenshot: {} ({} bytes)", png.display(), bytes.len());
}
