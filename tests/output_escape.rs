//! Stored strings cannot drive the terminal: a ledger whose commit
//! messages, author, metadata and file names hold escape sequences (an
//! OSC 8 hyperlink, a screen clear, a window title, C1 CSI, DEL, CR) is
//! shown by `log`, `show`, `ls`, `diff`, `reflog` and in error messages
//! with those characters as visible `\uXXXX` escapes, never raw; JSON keeps
//! the values exact; CSV export neutralizes spreadsheet formulas; the HTML
//! report shows `<script>` as text.

use std::path::Path;
use std::sync::atomic::AtomicBool;

use bat_ledger::{CommitId, CommitRequest, Ledger, NoProgress};
use serde_json::{json, Value};

use crate::common::{self, TestEnv};

const LINK: &str = "\u{1b}]8;;http://evil.example/\u{7}click\u{1b}]8;;\u{7}";
const CLEAR: &str = "\u{1b}[2J\u{1b}[H";
const TITLE: &str = "\u{1b}]0;pwned\u{7}";

/// Bytes that must never reach a terminal from stored data: ESC, BEL, CR,
/// backspace, DEL, and C1 controls (UTF-8 `C2 80`–`C2 9F`).
fn raw_controls(bytes: &[u8]) -> Vec<String> {
    let text = String::from_utf8_lossy(bytes);
    text.char_indices()
        .filter(|(_, c)| matches!(*c, '\u{0}'..='\u{8}' | '\u{b}'..='\u{1f}' | '\u{7f}'..='\u{9f}'))
        .map(|(i, c)| {
            let from = text[..i].char_indices().rev().nth(20).map_or(0, |(j, _)| j);
            format!("U+{:04X} after {:?}", u32::from(c), &text[from..i])
        })
        .collect()
}

fn commit(l: &mut Ledger, data: &Path, req: &CommitRequest) -> CommitId {
    l.commit_dir(data, req, &NoProgress, &AtomicBool::new(false))
        .expect("commit")
        .commit
}

/// A ledger in `dir` with two commits full of escape sequences (the
/// second adds a file whose name holds some); returns (first, second).
fn hostile_ledger(dir: &Path) -> (CommitId, CommitId) {
    std::fs::create_dir_all(dir).expect("mkdir");
    let mut l = Ledger::init(dir).expect("init");
    let data = dir.join("data");
    std::fs::create_dir_all(&data).expect("mkdir data");
    std::fs::write(data.join("a.txt"), b"one\n").expect("write");
    let mut req = CommitRequest::new(format!("first{CLEAR}{TITLE}\nbody {LINK}"));
    req.author = "eve\u{9b}31m\u{7f}".to_string();
    req.metadata = json!({ "note": LINK, "clear": CLEAR, "c1": "\u{9b}2J", "cr": "ok\rFAKE" });
    let first = commit(&mut l, &data, &req);
    std::fs::write(data.join("a.txt"), b"two\n").expect("write");
    std::fs::write(data.join(format!("evil{CLEAR}name.txt")), b"x").expect("write");
    let second = commit(
        &mut l,
        &data,
        &CommitRequest::new(format!("second\r\u{1b}[1A{LINK}")),
    );
    (first, second)
}

fn assert_neutral(what: &str, bytes: &[u8]) {
    let found = raw_controls(bytes);
    assert!(
        found.is_empty(),
        "{what} printed raw control characters: {found:?}"
    );
}

#[test]
fn log_show_ls_diff_reflog_print_no_raw_escape_from_stored_data() {
    let env = TestEnv::new();
    let dir = env.path("hostile");
    let (first, second) = hostile_ledger(&dir);
    let (first, second) = (first.to_string(), second.to_string());
    let bat = common::BatRunner::new(&dir);
    let cases: Vec<(&str, Vec<&str>)> = vec![
        ("log", vec!["log"]),
        ("log --graph", vec!["log", "--graph", "--all"]),
        ("show", vec!["show", &first]),
        ("show --metadata", vec!["show", "--metadata", &first]),
        ("show HEAD", vec!["show"]),
        ("ls", vec!["ls"]),
        ("diff", vec!["diff", &first, &second]),
        ("reflog", vec!["reflog"]),
    ];
    for (what, args) in &cases {
        let out = common::succeeded(bat.output(args));
        assert_neutral(what, &out.stdout);
        assert_neutral(what, &out.stderr);
    }
    // The stored text is shown, escaped, not dropped.
    let log = bat.ok(&["log"]);
    assert!(log.contains("first\\u001b[2J"), "{log}");
    let show = bat.ok(&["show", "--metadata", &first]);
    assert!(show.contains("\\u001b]8;;http://evil.example/"), "{show}");
    let ls = bat.ok(&["ls"]);
    assert!(ls.contains("evil\\u001b[2J\\u001b[Hname.txt"), "{ls}");
}

/// The attack as it arrives: a bundle made by a hostile party, cloned,
/// then read. (Only the first commit: its strings are in the message,
/// author and metadata, which no import policy refuses.)
#[test]
fn a_cloned_hostile_bundle_prints_no_raw_escape() {
    let env = TestEnv::new();
    let dir = env.path("hostile");
    let (first, _) = hostile_ledger(&dir);
    let bat = common::BatRunner::new(&dir);
    bat.ok(&["tag", "evil", &first.to_string()]);
    let bundle = env.path("evil.batb");
    let bundle_arg = bundle.to_str().expect("utf-8 temp path");
    bat.ok(&["bundle", "create", bundle_arg, "evil"]);
    let clone = env.path("victim");
    common::succeeded(
        common::bat()
            .arg("clone")
            .arg(&bundle)
            .arg(&clone)
            .output()
            .expect("run bat clone"),
    );
    let victim = common::BatRunner::new(&clone);
    for args in [
        vec!["log", "evil"],
        vec!["show", "evil"],
        vec!["show", "--metadata", "evil"],
        vec!["reflog"],
    ] {
        let out = common::succeeded(victim.output(&args));
        assert_neutral(&args.join(" "), &out.stdout);
        assert_neutral(&args.join(" "), &out.stderr);
    }
    assert!(victim.ok(&["log", "evil"]).contains("\\u001b]0;pwned"));
}

#[test]
fn colors_pass_but_stored_escapes_do_not() {
    let env = TestEnv::new();
    let dir = env.path("hostile");
    hostile_ledger(&dir);
    let out = common::succeeded(common::BatRunner::new(&dir).output(&["--color", "always", "log"]));
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(text.contains("\u{1b}["), "colors were asked for: {text}");
    for bad in [CLEAR, TITLE, "\u{1b}]8", "\u{9b}", "\u{7}", "\r"] {
        assert!(!text.contains(bad), "raw {bad:?} in colored log: {text}");
    }
    assert!(text.contains("\\u001b]0;pwned\\u0007"), "{text}");
}

#[test]
fn json_output_keeps_the_stored_values_exactly() {
    let env = TestEnv::new();
    let dir = env.path("hostile");
    let (first, _) = hostile_ledger(&dir);
    let out = common::succeeded(common::BatRunner::new(&dir).output(&["--json", "log"]));
    // No raw control character even in JSON (serde escapes C0; DEL and C1
    // become \u escapes of the same value).
    assert_neutral("log --json", &out.stdout);
    let v: Value = serde_json::from_slice(&out.stdout).expect("log --json is JSON");
    let entry = v
        .as_array()
        .expect("array")
        .iter()
        .find(|e| e["id"] == first.to_string())
        .expect("first commit listed");
    assert_eq!(entry["metadata"]["note"], LINK);
    assert_eq!(entry["metadata"]["c1"], "\u{9b}2J");
    assert_eq!(entry["author"], "eve\u{9b}31m\u{7f}");
}

#[test]
fn error_messages_quoting_input_are_neutralized() {
    let env = TestEnv::new();
    let dir = env.path("hostile");
    hostile_ledger(&dir);
    let bad = format!("nope{CLEAR}{TITLE}");
    let out = common::BatRunner::new(&dir).output(&["show", &bad]);
    assert!(!out.status.success(), "an unknown revision must fail");
    assert_neutral("show's error", &out.stderr);
    // The argument is quoted, visibly escaped, not dropped.
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("[2J"),
        "{}",
        common::stderr(&out)
    );
}

/// `bat export` of a round whose metadata holds a spreadsheet formula:
/// the cell is written as text (`'=…`, quoted), numbers stay numbers.
#[test]
fn csv_export_neutralizes_formulas() {
    let env = TestEnv::new();
    let demo = env.demo("demo", 1);
    let formula = "=HYPERLINK(\"http://evil.example/\",\"click\")";
    {
        let mut l = Ledger::discover(&demo.dir).expect("open the demo ledger");
        let head = l.resolve("HEAD").expect("HEAD");
        let c = l.read_commit(&head).expect("read HEAD");
        let mut meta = c.metadata.clone();
        meta["ablation"] = json!(formula);
        let mut req = CommitRequest::new("a round with a formula");
        req.metadata = meta;
        req.branch = Some("hostile".to_string());
        l.commit_tree(c.tree, &req)
            .expect("commit the hostile round");
    }
    let csv = demo.bat().ok(&["export", "hostile"]);
    let last = csv.lines().last().expect("rows");
    assert!(
        last.contains(",\"'=HYPERLINK(\"\"http://evil.example/\"\",\"\"click\"\")\","),
        "{last}"
    );
    // No cell starts with a formula character unless it is a number.
    for line in csv.lines() {
        for cell in line.split(',') {
            if cell.starts_with(['=', '+', '-', '@']) {
                assert!(
                    cell.parse::<f64>().is_ok(),
                    "live formula cell {cell:?} in {line}"
                );
            }
        }
    }
}

/// The HTML report escapes metadata: `<script>` shows as text.
#[test]
fn html_report_shows_script_in_metadata_as_text() {
    let env = TestEnv::new();
    let demo = env.demo("demo", 1);
    {
        let mut l = Ledger::discover(&demo.dir).expect("open the demo ledger");
        let head = l.resolve("HEAD").expect("HEAD");
        let c = l.read_commit(&head).expect("read HEAD");
        let mut meta = c.metadata.clone();
        meta["ablation"] = json!("<script>alert(1)</script>");
        let mut req = CommitRequest::new("<script>alert(2)</script>");
        req.metadata = meta;
        l.commit_tree(c.tree, &req)
            .expect("commit the hostile round");
    }
    let out = env.path("report.html");
    demo.bat()
        .ok(&["report", "-o", out.to_str().expect("utf-8 temp path")]);
    let html = std::fs::read_to_string(&out).expect("read the report");
    assert!(
        !html.contains("<script>alert("),
        "live script in the report"
    );
    assert!(
        html.contains("&lt;script&gt;alert(") || html.contains("\\u003cscript\\u003ealert("),
        "the hostile text is not shown at all"
    );
}
