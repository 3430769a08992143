//! A small Chrome DevTools Protocol client for browser tests: start
//! headless Chromium with `--remote-debugging-port=0`, open a page in a
//! tab of its own, evaluate JavaScript in it over time (the page is never
//! reloaded by the test), and collect every error the page reports
//! (uncaught exceptions, `console.error`/`console.assert`, and error
//! entries of the browser log such as CSP violations and failed loads).
//!
//! Chromium is found through BAT_TEST_CHROMIUM ([`chromium`]).

use std::io::{BufRead, BufReader};
use std::net::TcpStream;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use tungstenite::{Message, WebSocket};

/// A headless Chromium with its DevTools endpoint; killed on drop.
pub struct Browser {
    child: Child,
    ws_url: String,
    _profile: tempfile::TempDir,
}

impl Browser {
    /// Start `chrome` headless with a fresh profile and wait (up to 60 s)
    /// for its "DevTools listening on ws://..." line.
    pub fn start(chrome: &Path) -> Browser {
        let profile = tempfile::tempdir().expect("profile dir");
        let mut child = Command::new(chrome)
            .args([
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--no-first-run",
                "--disable-background-networking",
                "--disable-component-update",
                "--disable-sync",
                "--disable-extensions",
                "--remote-debugging-port=0",
                "--remote-debugging-address=127.0.0.1",
            ])
            .arg(format!("--user-data-dir={}", profile.path().display()))
            .arg("about:blank")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start chromium");
        let stderr = child.stderr.take().expect("piped stderr");
        let (tx, rx) = mpsc::channel();
        // Keep draining stderr so Chromium never blocks on it.
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                if let Some(i) = line.find("ws://") {
                    let _ = tx.send(line[i..].trim().to_string());
                }
            }
        });
        let ws_url = match rx.recv_timeout(Duration::from_secs(60)) {
            Ok(u) => u,
            Err(_) => {
                let _ = child.kill();
                let _ = child.wait();
                panic!("chromium printed no DevTools address within 60 s");
            }
        };
        Browser {
            child,
            ws_url,
            _profile: profile,
        }
    }

    /// Open `url` in a new tab and return it once the DevTools domains
    /// that report errors are enabled (they are enabled before the
    /// navigation, so nothing the page logs is missed).
    pub fn open(&self, url: &str) -> Page {
        let rest = self
            .ws_url
            .strip_prefix("ws://")
            .expect("a ws:// DevTools address");
        let host = rest.split('/').next().expect("host:port");
        let stream = TcpStream::connect(host).expect("connect to DevTools");
        stream
            .set_read_timeout(Some(Duration::from_secs(60)))
            .expect("read timeout");
        let (ws, _) =
            tungstenite::client(self.ws_url.as_str(), stream).expect("DevTools handshake");
        let mut page = Page {
            ws,
            session: None,
            next_id: 0,
            errors: Vec::new(),
        };
        let target = page.call("Target.createTarget", json!({ "url": "about:blank" }));
        let target_id = target["targetId"]
            .as_str()
            .expect("a target id")
            .to_string();
        let attached = page.call(
            "Target.attachToTarget",
            json!({ "targetId": target_id, "flatten": true }),
        );
        page.session = Some(
            attached["sessionId"]
                .as_str()
                .expect("a session id")
                .to_string(),
        );
        page.call("Runtime.enable", json!({}));
        page.call("Log.enable", json!({}));
        page.call("Page.enable", json!({}));
        page.call("Page.navigate", json!({ "url": url }));
        page
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// One tab, driven over the DevTools protocol.
pub struct Page {
    ws: WebSocket<TcpStream>,
    session: Option<String>,
    next_id: u64,
    errors: Vec<String>,
}

impl Page {
    /// Call `method`; its result. Events read while waiting are checked
    /// for errors.
    pub fn call(&mut self, method: &str, params: Value) -> Value {
        self.next_id += 1;
        let id = self.next_id;
        let mut msg = json!({ "id": id, "method": method, "params": params });
        if let Some(s) = &self.session {
            msg["sessionId"] = json!(s);
        }
        self.ws
            .send(Message::Text(msg.to_string().into()))
            .expect("send to DevTools");
        loop {
            let m = self.ws.read().expect("read from DevTools");
            let Message::Text(text) = m else { continue };
            let v: Value = serde_json::from_str(text.as_str()).expect("DevTools sends JSON");
            if v["id"].as_u64() == Some(id) {
                if let Some(e) = v.get("error") {
                    panic!("DevTools {method} failed: {e}");
                }
                return v["result"].clone();
            }
            self.note_event(&v);
        }
    }

    fn note_event(&mut self, v: &Value) {
        let p = &v["params"];
        match v["method"].as_str() {
            Some("Runtime.exceptionThrown") => {
                let d = &p["exceptionDetails"];
                self.errors.push(format!(
                    "exception: {} {}",
                    d["text"], d["exception"]["description"]
                ));
            }
            Some("Runtime.consoleAPICalled")
                if matches!(p["type"].as_str(), Some("error" | "assert")) =>
            {
                let args: Vec<String> = p["args"]
                    .as_array()
                    .map(|a| a.iter().map(|x| x["value"].to_string()).collect())
                    .unwrap_or_default();
                self.errors
                    .push(format!("console.{}: {}", p["type"], args.join(" ")));
            }
            Some("Log.entryAdded") if p["entry"]["level"] == "error" => {
                self.errors.push(format!(
                    "log ({}): {} {}",
                    p["entry"]["source"], p["entry"]["text"], p["entry"]["url"]
                ));
            }
            _ => {}
        }
    }

    /// Evaluate `expr` in the page (promises awaited); its value as JSON.
    pub fn eval(&mut self, expr: &str) -> Value {
        self.try_eval(expr)
            .unwrap_or_else(|e| panic!("evaluating {expr}: {e}"))
    }

    /// [`Page::eval`], with what `expr` threw as the error (e.g. while the
    /// document is still loading).
    pub fn try_eval(&mut self, expr: &str) -> Result<Value, Value> {
        let r = self.call(
            "Runtime.evaluate",
            json!({ "expression": expr, "returnByValue": true, "awaitPromise": true }),
        );
        match r.get("exceptionDetails") {
            Some(e) => Err(e.clone()),
            None => Ok(r["result"]["value"].clone()),
        }
    }

    /// Evaluate `expr` every 100 ms until it is truthy (an evaluation that
    /// throws counts as not yet); its value. Panics with `what` after
    /// `timeout`.
    pub fn wait_for(&mut self, expr: &str, timeout: Duration, what: &str) -> Value {
        let start = Instant::now();
        loop {
            let v = self.try_eval(expr).unwrap_or(Value::Null);
            let truthy =
                !matches!(&v, Value::Null | Value::Bool(false)) && v != json!(0) && v != json!("");
            if truthy {
                return v;
            }
            assert!(
                start.elapsed() < timeout,
                "{what}: not seen within {timeout:?} (errors so far: {:?})",
                self.errors
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// Every error the page reported so far.
    pub fn errors(&mut self) -> Vec<String> {
        // A round trip picks up events already sent.
        self.eval("0");
        self.errors.clone()
    }
}
