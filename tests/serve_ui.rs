//! `bat serve --ui`: the read-only live page.
//!
//! Plain HTTP (no browser): no token → a 401 page; `/ui?token=READ` → an
//! HttpOnly SameSite=Strict cookie and a redirect that drops the token;
//! the cookie opens the page, its state and the report but no protocol
//! path; hostile metadata is escaped in every HTML document served.
//!
//! Headless Chromium (BAT_TEST_CHROMIUM, driven over the DevTools protocol,
//! tests/common/cdp.rs): the page, opened before `bat run` starts, shows
//! new round rows and a moving phase without being reloaded, logs no
//! error, and shows hostile log lines and metadata as text without running
//! them.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::common::cdp::Browser;
use crate::common::external::chromium;
use crate::common::serve::{new_ledger, Server, READ_TOKEN, WRITE_TOKEN};
use crate::common::{bat, bat_exe, succeeded, write_json};

/// Markup that would set `window.__pwned` if it were ever parsed as HTML.
const HOSTILE_META: &str =
    "<img src=x onerror=\"window.__pwned=1\"><script>window.__pwned=2</script>";
/// The same, printed by the trainer (lands in the live log tail).
const HOSTILE_LOG: &str =
    "<img src=x onerror=\"window.__pwned=3\"></pre><script>window.__pwned=4</script>";

/// A command-backend campaign whose children are the simulator's, the
/// trainer printing [`HOSTILE_LOG`] and sleeping `sleep` seconds first.
struct Campaign {
    _tmp: tempfile::TempDir,
    root: PathBuf,
    ledger: PathBuf,
    args: Vec<String>,
}

fn campaign(rounds: u32, sleep: &str) -> Campaign {
    let tmp = tempfile::tempdir().expect("tempdir");
    let root = tmp.path().to_path_buf();
    let (ledger, l) = new_ledger(&root, "L");
    drop(l);
    succeeded(
        bat()
            .args(["source", "build", "--output-dir"])
            .arg(root.join("src"))
            .output()
            .expect("bat source build"),
    );
    succeeded(
        bat()
            .args(["sim", "init", "--seed", "5", "--output"])
            .arg(root.join("initial"))
            .output()
            .expect("bat sim init"),
    );
    let exe = bat_exe().to_string_lossy().into_owned();
    let script =
        format!("printf '%s\\n' '{HOSTILE_LOG}'; sleep {sleep}; exec \"$0\" sim train \"$@\"");
    // The simulator's own templates after the `{bat} sim VERB` head, with
    // this campaign's reward mode and seed, behind a shell prefix that
    // slows the children down (and, for the trainer, logs a hostile line).
    let args_of = |template: Vec<String>| -> Vec<String> {
        template
            .into_iter()
            .skip(3)
            .map(|a| match a.as_str() {
                "{reward_mode}" => "stage".to_string(),
                "{seed}" => "5".to_string(),
                _ => a,
            })
            .collect()
    };
    let mut trainer_argv = vec!["sh".to_string(), "-c".to_string(), script, exe.clone()];
    trainer_argv.extend(args_of(bat::sim::trainer_template()));
    trainer_argv.extend(["--threads".to_string(), "1".to_string()]);
    let trainer = write_json(&root.join("trainer.json"), json!(trainer_argv));
    let mut evaluator_argv = vec![
        "sh".to_string(),
        "-c".to_string(),
        "sleep 1.2; exec \"$0\" sim evaluate \"$@\"".to_string(),
        exe,
    ];
    evaluator_argv.extend(args_of(bat::sim::evaluator_template()));
    let evaluator = write_json(&root.join("evaluator.json"), json!(evaluator_argv));
    let p = |p: &Path| p.to_string_lossy().into_owned();
    let args = vec![
        "run".to_string(),
        "--source".into(),
        p(&root.join("src/source.jsonl")),
        "--initial-checkpoint".into(),
        p(&root.join("initial")),
        "--trainer".into(),
        p(&trainer),
        "--evaluator".into(),
        p(&evaluator),
        "--protocol-id".into(),
        HOSTILE_META.into(),
        "--runtime-tool-format".into(),
        "hermes".into(),
        "--rounds".into(),
        rounds.to_string(),
        "--batches".into(),
        "2".into(),
    ];
    Campaign {
        _tmp: tmp,
        root,
        ledger,
        args,
    }
}

impl Campaign {
    /// Start `bat run` in the background (output to files in the root).
    fn spawn_run(&self) -> Child {
        let out = std::fs::File::create(self.root.join("run.out")).expect("run.out");
        let err = std::fs::File::create(self.root.join("run.err")).expect("run.err");
        bat()
            .arg("-C")
            .arg(&self.ledger)
            .args(&self.args)
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(err)
            .spawn()
            .expect("spawn bat run")
    }

    fn run(&self) {
        let mut child = self.spawn_run();
        let status = child.wait().expect("wait bat run");
        assert!(status.success(), "bat run failed:\n{}", self.run_stderr());
    }

    fn run_stderr(&self) -> String {
        std::fs::read_to_string(self.root.join("run.err")).unwrap_or_default()
    }

    fn serve(&self, extra: &[&str]) -> Server {
        Server::with_tokens(&self.ledger, &self.root, extra)
    }
}

/// A response of [`get`].
struct Resp {
    status: u16,
    headers: Vec<(String, String)>,
    body: String,
}

impl Resp {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

/// One HTTP/1.1 request with `Connection: close` (bodies here are sized,
/// never chunked).
fn request(url: &str, method: &str, path: &str, headers: &[(&str, &str)]) -> Resp {
    let host = url.strip_prefix("http://").expect("http url");
    let mut s = TcpStream::connect(host).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(60)))
        .expect("timeout");
    let mut req = format!(
        "{method} {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\nContent-Length: 0\r\n"
    );
    for (k, v) in headers {
        req.push_str(&format!("{k}: {v}\r\n"));
    }
    req.push_str("\r\n");
    s.write_all(req.as_bytes()).expect("send");
    let mut raw = Vec::new();
    s.read_to_end(&mut raw).expect("read");
    let text = String::from_utf8_lossy(&raw).into_owned();
    let (head, body) = text.split_once("\r\n\r\n").expect("a full response");
    let mut lines = head.lines();
    let status = lines
        .next()
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|c| c.parse().ok())
        .expect("a status line");
    let headers = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_string(), v.trim().to_string()))
        .collect();
    Resp {
        status,
        headers,
        body: body.to_string(),
    }
}

fn get(url: &str, path: &str, headers: &[(&str, &str)]) -> Resp {
    request(url, "GET", path, headers)
}

#[test]
fn ui_needs_a_token_takes_it_once_and_escapes_the_ledger() {
    let c = campaign(2, "0");
    c.run();
    let srv = c.serve(&["--ui"]);
    let url = srv.url.as_str();

    // No token: a 401 page that says how to present one.
    let r = get(url, "/ui", &[]);
    assert_eq!(r.status, 401, "{}", r.body);
    assert!(r
        .header("content-type")
        .is_some_and(|v| v.starts_with("text/html")));
    assert!(r.body.contains("/ui?token="), "{}", r.body);
    assert_eq!(get(url, "/ui/state", &[]).status, 401);
    assert_eq!(get(url, "/ui/report", &[]).status, 401);
    assert_eq!(get(url, "/ui?token=not-a-known-token", &[]).status, 401);

    // The read token once: a cookie and a redirect without the token.
    let r = get(url, &format!("/ui?token={READ_TOKEN}"), &[]);
    assert_eq!(r.status, 303);
    assert_eq!(r.header("location"), Some("/ui"));
    let set = r.header("set-cookie").expect("a cookie").to_string();
    for attr in ["HttpOnly", "SameSite=Strict", "Path=/ui"] {
        assert!(set.contains(attr), "{set}");
    }
    assert!(
        !set.contains(READ_TOKEN),
        "the token is stored encoded: {set}"
    );
    let cookie = set.split(';').next().expect("name=value").to_string();
    let auth = [("Cookie", cookie.as_str())];

    // The page: its script and style carry the CSP's nonce, nothing else.
    let r = get(url, "/ui", &auth);
    assert_eq!(r.status, 200, "{}", r.body);
    let csp = r
        .header("content-security-policy")
        .expect("a CSP")
        .to_string();
    let nonce = csp
        .split("'nonce-")
        .nth(1)
        .and_then(|s| s.split('\'').next())
        .expect("a nonce in the CSP");
    assert!(csp.contains("default-src 'none'"), "{csp}");
    assert_eq!(r.body.matches("<script").count(), 1);
    assert!(r.body.contains(&format!("<script nonce=\"{nonce}\">")));
    assert!(!r.body.contains("src=\"http"), "no external resources");
    assert_eq!(r.header("x-content-type-options"), Some("nosniff"));
    // A second response has another nonce.
    let again = get(url, "/ui", &auth);
    assert_ne!(again.header("content-security-policy"), Some(csp.as_str()));

    // The state: branches, rounds, the finished run's live file.
    let r = get(url, "/ui/state", &auth);
    assert_eq!(r.status, 200, "{}", r.body);
    let s: Value = serde_json::from_str(&r.body).expect("JSON state");
    let main = &s["branches"][0];
    assert_eq!(main["round_count"], 2, "{s}");
    assert_eq!(main["rounds"].as_array().map(Vec::len), Some(2));
    let run = &s["runs"][0];
    assert_eq!(run["shown_status"], "complete", "{run}");
    assert_eq!(run["phase"], "ended");
    assert_eq!(run["rounds_recorded"], 2);
    assert!(
        run["log_tail"]
            .as_array()
            .expect("a log tail")
            .iter()
            .any(|l| l["text"] == HOSTILE_LOG),
        "{run}"
    );
    assert!(
        !run["steps"].as_array().expect("steps").is_empty(),
        "the simulator writes step metrics: {run}"
    );

    // The report: hostile metadata escaped, its scripts allowed by hash.
    let r = get(url, "/ui/report", &auth);
    assert_eq!(r.status, 200, "{}", r.body);
    assert!(!r.body.contains(HOSTILE_META), "raw markup in the report");
    assert!(!r.body.contains("<img src=x"), "raw markup in the report");
    assert!(
        r.body
            .contains("&lt;img src=x onerror=&quot;window.__pwned=1&quot;&gt;&lt;script&gt;"),
        "the protocol id is shown escaped"
    );
    let csp = r.header("content-security-policy").expect("a CSP");
    assert!(csp.contains("script-src 'sha256-"), "{csp}");
    assert!(!csp.contains("unsafe-inline'; script") && !csp.contains("script-src 'unsafe"));

    // The cookie is no protocol credential; the read token writes nothing.
    assert_eq!(get(url, "/v1/refs", &auth).status, 401);
    assert_eq!(request(url, "POST", "/v1/refs/update", &auth).status, 401);
    let read = format!("Bearer {READ_TOKEN}");
    assert_eq!(
        request(url, "POST", "/v1/put", &[("Authorization", read.as_str())]).status,
        403
    );
    // A bearer token opens the UI too (scripts, curl).
    assert_eq!(
        get(url, "/ui/state", &[("Authorization", read.as_str())]).status,
        200
    );
    assert_eq!(
        get(url, &format!("/ui?token={WRITE_TOKEN}"), &[]).status,
        303
    );
    drop(srv);

    // Without --ui there is no page.
    let srv = c.serve(&[]);
    let r = get(&srv.url, &format!("/ui?token={READ_TOKEN}"), &[]);
    assert_eq!(r.status, 404, "{}", r.body);
}

/// What the page shows, read from its DOM.
const OBSERVE: &str = r#"(function(){var p=document.querySelector('#runs .run .phase');var s=document.querySelector('#runs .run');return {rows:document.querySelectorAll('tr.round-row').length,phase:p?p.textContent:null,status:s?s.getAttribute('data-status'):null,steps:document.querySelectorAll('#runs tr.step-row').length,spark:Math.max.apply(null,[0].concat(Array.from(document.querySelectorAll('#runs svg.spark')).map(function(e){return Number(e.getAttribute('data-points'))}))),marker:window.__marker||null,updates:Number(document.body.getAttribute('data-updates')||0)}})()"#;

#[test]
fn live_page_follows_a_running_campaign_without_reloading() {
    let Some(chrome) = chromium() else {
        return;
    };
    let c = campaign(3, "1.5");
    let srv = c.serve(&["--ui"]);
    let browser = Browser::start(&chrome);
    let mut page = browser.open(&format!("{}/ui?token={READ_TOKEN}", srv.url));
    page.wait_for(
        "!!document.body&&Number(document.body.getAttribute('data-updates')||0)>0",
        Duration::from_secs(60),
        "the first state",
    );
    assert_eq!(page.eval("location.pathname+location.search"), json!("/ui"));
    // Survives only as long as the document does: a reload would drop it.
    page.eval("window.__marker='same-document'");
    assert_eq!(
        page.eval("document.querySelectorAll('tr.round-row').length"),
        json!(0)
    );

    let mut run = c.spawn_run();
    let start = Instant::now();
    let mut rows_seen = Vec::new();
    let mut phases_seen = Vec::new();
    let mut max_steps = 0;
    let mut max_spark = 0;
    loop {
        let o = page.eval(OBSERVE);
        assert_eq!(o["marker"], "same-document", "the page was reloaded");
        let rows = o["rows"].as_u64().expect("rows");
        if rows_seen.last() != Some(&rows) {
            rows_seen.push(rows);
        }
        if let Some(p) = o["phase"].as_str() {
            if phases_seen.last().map(String::as_str) != Some(p) {
                phases_seen.push(p.to_string());
            }
        }
        max_steps = max_steps.max(o["steps"].as_u64().unwrap_or(0));
        max_spark = max_spark.max(o["spark"].as_u64().unwrap_or(0));
        if rows == 3 && o["status"] == "complete" {
            break;
        }
        if let Some(st) = run.try_wait().expect("try_wait") {
            assert!(st.success(), "bat run failed:\n{}", c.run_stderr());
        }
        assert!(
            start.elapsed() < Duration::from_secs(240),
            "the page did not show the finished campaign; rows {rows_seen:?}, phases {phases_seen:?}, last {o}"
        );
        std::thread::sleep(Duration::from_millis(150));
    }
    assert!(run.wait().expect("wait").success(), "{}", c.run_stderr());
    eprintln!("rows seen {rows_seen:?}, phases seen {phases_seen:?}, most steps shown {max_steps}, longest step curve {max_spark}");
    // Rows came in one by one, and the phase moved through the loop.
    assert!(rows_seen.len() >= 3, "rows seen: {rows_seen:?}");
    assert_eq!(rows_seen.first(), Some(&0));
    for p in ["train", "evaluate"] {
        assert!(
            phases_seen.iter().any(|s| s == p),
            "phases seen: {phases_seen:?}"
        );
    }
    assert!(max_steps > 0, "no step metrics shown");
    assert!(max_spark > 1, "no step curve drawn");

    // Hostile strings are text, and none of them ran.
    let log = page.eval("document.querySelector('#runs pre.log').textContent");
    assert!(
        log.as_str().is_some_and(|t| t.contains(HOSTILE_LOG)),
        "{log}"
    );
    assert_eq!(
        page.eval("document.querySelectorAll('#runs img, #runs script').length"),
        json!(0)
    );
    page.wait_for(
        "(function(){var f=document.getElementById('report');var d=f&&f.contentDocument;return !!(d&&d.body&&d.body.getAttribute('data-check')==='ok'&&d.querySelectorAll('tr').length>0)})()",
        Duration::from_secs(60),
        "the report frame with its plots",
    );
    let report_text =
        page.eval("document.getElementById('report').contentDocument.body.textContent");
    assert!(
        report_text
            .as_str()
            .is_some_and(|t| t.contains(HOSTILE_META)),
        "the protocol id is shown as text in the report"
    );
    assert_eq!(
        page.eval(
            "document.getElementById('report').contentDocument.querySelectorAll('img').length"
        ),
        json!(0)
    );
    let branch = page.eval("Array.from(document.querySelectorAll('.branch-name')).map(function(e){return e.textContent})");
    assert!(branch.as_array().is_some_and(|a| !a.is_empty()), "{branch}");
    assert_eq!(page.eval("typeof window.__pwned"), json!("undefined"));
    assert_eq!(
        page.eval("document.getElementById('report').contentWindow.__pwned === undefined"),
        json!(true)
    );
    let errors = page.errors();
    assert!(errors.is_empty(), "the page reported errors: {errors:#?}");
}

/// The state the page gets, read with the read token.
fn ui_state(url: &str) -> Value {
    let auth = format!("Bearer {READ_TOKEN}");
    let r = get(url, "/ui/state", &[("Authorization", auth.as_str())]);
    assert_eq!(r.status, 200, "{}", r.body);
    serde_json::from_str(&r.body).expect("JSON state")
}

#[test]
fn a_run_killed_with_sigkill_shows_as_stopped() {
    let c = campaign(2, "0");
    // A trainer that records its own pid and then waits: it is caught in
    // the train phase, and stopped afterwards by exactly that pid.
    let pid_file = c.root.join("trainer.pid");
    write_json(
        &c.root.join("trainer.json"),
        json!([
            "sh",
            "-c",
            "echo $$ > \"$0\"; exec sleep 120",
            pid_file,
            "{checkpoint}",
            "{dataset}",
            "{output}",
            "{health}",
            "{runtime_tool_format}"
        ]),
    );
    let srv = c.serve(&["--ui"]);
    let mut run = c.spawn_run();
    let start = Instant::now();
    let trainer = loop {
        let s = ui_state(&srv.url);
        let pid = std::fs::read_to_string(&pid_file)
            .ok()
            .and_then(|t| t.trim().parse::<i32>().ok());
        if let (Some(pid), Some("train")) = (pid, s["runs"][0]["phase"].as_str()) {
            assert_eq!(s["runs"][0]["shown_status"], "running", "{s}");
            break pid;
        }
        if let Some(st) = run.try_wait().expect("try_wait") {
            panic!(
                "bat run ended ({st}) before its trainer ran:\n{}",
                c.run_stderr()
            );
        }
        assert!(
            start.elapsed() < Duration::from_secs(120),
            "the run never reached its trainer: {s}\n{}",
            c.run_stderr()
        );
        std::thread::sleep(Duration::from_millis(100));
    };
    run.kill().expect("SIGKILL bat run");
    run.wait().expect("reap bat run");
    let s = ui_state(&srv.url);
    let r = &s["runs"][0];
    assert_eq!(r["status"], "running", "the file still says running: {r}");
    assert_eq!(r["shown_status"], "stopped", "{r}");
    assert_eq!(r["phase"], "train");
    // The orphaned trainer (bat could not stop it): that one process only,
    // once it is certain to be our `sleep`.
    let cmdline = std::fs::read(format!("/proc/{trainer}/cmdline")).unwrap_or_default();
    if trainer > 1 && cmdline.starts_with(b"sleep\x00120") {
        let _ = nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(trainer),
            nix::sys::signal::Signal::SIGKILL,
        );
    }
}
