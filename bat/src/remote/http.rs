//! The HTTP remote: a client of `bat serve` (protocol in
//! `ledger/PROTOCOL.d/http.md`). The transfer engine is synchronous, so the
//! client owns a small tokio runtime and blocks on each request.

use std::collections::HashSet;
use std::time::Duration;

use bat_ledger::{CommitId, ObjectId};
use reqwest::StatusCode;
use serde::Deserialize;

use bat_ledger::remote::wire::{WireReader, WireWriter};
use bat_ledger::remote::{Remote, RemoteError, WireObject};

/// Most ids sent in one `has` or `get` request (the server's default limit).
pub const IDS_PER_REQUEST: usize = 65_536;

/// Default connect timeout (documented in PROTOCOL.md).
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(30);
/// Default longest silence while reading an answer: the server may be
/// verifying a large upload before it answers.
pub const READ_TIMEOUT: Duration = Duration::from_secs(600);

/// Options of an HTTP remote.
#[derive(Debug, Clone, Default)]
pub struct HttpOptions {
    /// Bearer token (`--token` or `BAT_TOKEN`, read by the CLI).
    pub token: Option<String>,
    /// `None` = [`CONNECT_TIMEOUT`].
    pub connect_timeout: Option<Duration>,
    /// `None` = [`READ_TIMEOUT`].
    pub read_timeout: Option<Duration>,
}

/// `url` with any `user:password@` part replaced, for messages.
pub fn redact_url(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_string();
    };
    let end = rest.find('/').unwrap_or(rest.len());
    match rest[..end].rfind('@') {
        Some(at) => format!("{scheme}://***@{}", &rest[at + 1..]),
        None => url.to_string(),
    }
}

/// A `bat serve` endpoint.
pub struct HttpRemote {
    base: String,
    token: Option<String>,
    client: reqwest::Client,
    rt: tokio::runtime::Runtime,
}

#[derive(Debug, Deserialize)]
struct ErrorBody {
    error: String,
    message: String,
}

#[derive(Debug, Deserialize)]
struct RefEntry {
    name: String,
    commit: String,
}

#[derive(Debug, Deserialize)]
struct RefsBody {
    refs: Vec<RefEntry>,
}

fn protocol(reason: impl Into<String>) -> RemoteError {
    RemoteError::Protocol {
        reason: reason.into(),
    }
}

fn transport(url: &str, e: reqwest::Error) -> RemoteError {
    RemoteError::Io {
        op: "talk to",
        path: url.into(),
        source: std::io::Error::other(error_chain(&e)),
    }
}

/// An error and its sources on one line (reqwest hides the cause).
fn error_chain(e: &dyn std::error::Error) -> String {
    let mut s = e.to_string();
    let mut cur = e.source();
    while let Some(c) = cur {
        s.push_str(": ");
        s.push_str(&c.to_string());
        cur = c.source();
    }
    s
}

/// Turn a non-success response into the matching error.
fn error_from(status: StatusCode, body: &[u8], name: &str, url: &str) -> RemoteError {
    let (code, message) = match serde_json::from_slice::<ErrorBody>(body) {
        Ok(b) => (b.error, b.message),
        Err(_) => (
            String::new(),
            String::from_utf8_lossy(&body[..body.len().min(512)]).into_owned(),
        ),
    };
    match (status, code.as_str()) {
        (_, "ref_moved") => RemoteError::RefMoved {
            name: name.to_string(),
        },
        (_, "non_fast_forward") => RemoteError::NonFastForward {
            name: name.to_string(),
        },
        (StatusCode::UNAUTHORIZED, _) | (StatusCode::FORBIDDEN, _) => RemoteError::Unauthorized {
            url: url.to_string(),
            reason: message,
        },
        (_, "corrupt") => protocol(format!("the server refused an object: {message}")),
        (StatusCode::NOT_FOUND, _) | (_, "missing_object") => RemoteError::NotFound {
            url: url.to_string(),
            what: message,
        },
        (StatusCode::PAYLOAD_TOO_LARGE, _) => RemoteError::LimitExceeded { what: message },
        _ => protocol(format!("server answered {status}: {message}")),
    }
}

impl HttpRemote {
    /// A client of the server at `url` (`http://HOST:PORT` or `https://…`,
    /// optionally with a path prefix).
    pub fn new(url: &str, options: HttpOptions) -> Result<HttpRemote, RemoteError> {
        if !(url.starts_with("http://") || url.starts_with("https://")) {
            return Err(protocol(format!(
                "{} is not an http(s) URL",
                redact_url(url)
            )));
        }
        // A token in the URL would be echoed in messages and stored in the
        // remote's configuration; it belongs in --token / BAT_TOKEN.
        if redact_url(url) != url {
            return Err(protocol(format!(
                "{} carries credentials in the URL; pass the token with --token or BAT_TOKEN",
                redact_url(url)
            )));
        }
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .map_err(RemoteError::io("start the HTTP client runtime for", url))?;
        let client = reqwest::Client::builder()
            .user_agent(concat!("bat/", env!("CARGO_PKG_VERSION")))
            .connect_timeout(options.connect_timeout.unwrap_or(CONNECT_TIMEOUT))
            .read_timeout(options.read_timeout.unwrap_or(READ_TIMEOUT))
            .build()
            .map_err(|e| transport(url, e))?;
        Ok(HttpRemote {
            base: url.trim_end_matches('/').to_string(),
            token: options.token,
            client,
            rt,
        })
    }

    fn request(&self, method: reqwest::Method, path: &str) -> reqwest::RequestBuilder {
        let rb = self.client.request(method, format!("{}{path}", self.base));
        match &self.token {
            Some(t) => rb.bearer_auth(t),
            None => rb,
        }
    }

    /// Send a request with a small body and read the whole answer.
    fn call(
        &self,
        rb: reqwest::RequestBuilder,
        name: &str,
        max_answer: usize,
    ) -> Result<Vec<u8>, RemoteError> {
        let base = self.base.clone();
        self.rt.block_on(async move {
            let resp = rb.send().await.map_err(|e| transport(&base, e))?;
            let status = resp.status();
            let body = read_limited(resp, max_answer, &base).await?;
            if status.is_success() {
                Ok(body)
            } else {
                Err(error_from(status, &body, name, &base))
            }
        })
    }
}

async fn read_limited(
    mut resp: reqwest::Response,
    max: usize,
    base: &str,
) -> Result<Vec<u8>, RemoteError> {
    let mut out = Vec::new();
    while let Some(chunk) = resp.chunk().await.map_err(|e| transport(base, e))? {
        if out.len() + chunk.len() > max {
            return Err(RemoteError::LimitExceeded {
                what: format!("answer from {base} larger than {max} bytes"),
            });
        }
        out.extend_from_slice(&chunk);
    }
    Ok(out)
}

/// Bytes per message of an upload.
const SEND_CHUNK: usize = 256 << 10;

/// A blocking `Read` over a streamed response body.
struct BodyReader<'a> {
    rt: &'a tokio::runtime::Runtime,
    resp: reqwest::Response,
    cur: bytes::Bytes,
}

impl std::io::Read for BodyReader<'_> {
    fn read(&mut self, out: &mut [u8]) -> std::io::Result<usize> {
        while self.cur.is_empty() {
            match self.rt.block_on(self.resp.chunk()) {
                Ok(Some(b)) => self.cur = b,
                Ok(None) => return Ok(0),
                Err(e) => return Err(std::io::Error::other(e.to_string())),
            }
        }
        let n = out.len().min(self.cur.len());
        out[..n].copy_from_slice(&self.cur[..n]);
        self.cur = self.cur.slice(n..);
        Ok(n)
    }
}

/// A `Write` feeding an upload's body channel in chunks.
struct SenderWriter {
    tx: tokio::sync::mpsc::Sender<Result<bytes::Bytes, std::io::Error>>,
    buf: Vec<u8>,
}

impl SenderWriter {
    fn send_buf(&mut self) -> std::io::Result<()> {
        if self.buf.is_empty() {
            return Ok(());
        }
        let chunk = bytes::Bytes::from(std::mem::replace(
            &mut self.buf,
            Vec::with_capacity(SEND_CHUNK),
        ));
        self.tx.blocking_send(Ok(chunk)).map_err(|_| {
            std::io::Error::new(
                std::io::ErrorKind::BrokenPipe,
                "the server stopped reading the upload",
            )
        })
    }
}

impl std::io::Write for SenderWriter {
    fn write(&mut self, data: &[u8]) -> std::io::Result<usize> {
        self.buf.extend_from_slice(data);
        if self.buf.len() >= SEND_CHUNK {
            self.send_buf()?;
        }
        Ok(data.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        self.send_buf()
    }
}

/// Most bytes of a JSON answer (ref listings included).
const MAX_JSON_ANSWER: usize = 64 << 20;

impl Remote for HttpRemote {
    fn url(&self) -> String {
        self.base.clone()
    }

    fn list_refs(&mut self) -> Result<Vec<(String, CommitId)>, RemoteError> {
        let body = self.call(
            self.request(reqwest::Method::GET, "/v1/refs"),
            "",
            MAX_JSON_ANSWER,
        )?;
        let parsed: RefsBody =
            serde_json::from_slice(&body).map_err(|e| protocol(format!("ref listing: {e}")))?;
        parsed
            .refs
            .into_iter()
            .map(|r| {
                let id = ObjectId::from_hex(&r.commit)
                    .ok_or_else(|| protocol(format!("ref {} has a bad commit id", r.name)))?;
                if !r.name.starts_with("refs/") {
                    return Err(protocol(format!("bad ref name {:?}", r.name)));
                }
                Ok((r.name, CommitId(id)))
            })
            .collect()
    }

    fn has(&mut self, ids: &[ObjectId]) -> Result<Vec<bool>, RemoteError> {
        let mut out = Vec::with_capacity(ids.len());
        for batch in ids.chunks(IDS_PER_REQUEST) {
            let mut body = Vec::with_capacity(batch.len() * 32);
            for id in batch {
                body.extend_from_slice(id.as_bytes());
            }
            let want = batch.len().div_ceil(8);
            let bits = self.call(
                self.request(reqwest::Method::POST, "/v1/has")
                    .header(reqwest::header::CONTENT_TYPE, "application/octet-stream")
                    .body(body),
                "",
                want,
            )?;
            if bits.len() != want {
                return Err(protocol(format!(
                    "has: expected a {want}-byte bitmap, got {} bytes",
                    bits.len()
                )));
            }
            out.extend((0..batch.len()).map(|i| bits[i / 8] & (1 << (i % 8)) != 0));
        }
        Ok(out)
    }

    fn get(
        &mut self,
        ids: &[ObjectId],
        sink: &mut dyn FnMut(WireObject) -> Result<(), RemoteError>,
    ) -> Result<(), RemoteError> {
        for batch in ids.chunks(IDS_PER_REQUEST) {
            let mut body = Vec::with_capacity(batch.len() * 32);
            for id in batch {
                body.extend_from_slice(id.as_bytes());
            }
            let rb = self
                .request(reqwest::Method::POST, "/v1/get")
                .header(reqwest::header::CONTENT_TYPE, "application/octet-stream")
                .body(body);
            let base = self.base.clone();
            let resp = self
                .rt
                .block_on(async { rb.send().await })
                .map_err(|e| transport(&base, e))?;
            let status = resp.status();
            if !status.is_success() {
                let body = self
                    .rt
                    .block_on(read_limited(resp, MAX_JSON_ANSWER, &base))?;
                return Err(error_from(status, &body, "", &base));
            }
            let reader = BodyReader {
                rt: &self.rt,
                resp,
                cur: bytes::Bytes::new(),
            };
            let mut wr = WireReader::new(reader)?.with_max_objects(batch.len() as u64);
            let wanted: HashSet<ObjectId> = batch.iter().copied().collect();
            let mut seen = 0usize;
            while let Some(o) = wr.next_object()? {
                if !wanted.contains(&o.id) {
                    return Err(protocol(format!(
                        "{base} sent object {} that was not asked for",
                        o.id
                    )));
                }
                seen += 1;
                sink(o)?;
            }
            if seen != batch.len() {
                return Err(protocol(format!(
                    "{base} sent {seen} objects for {} requested",
                    batch.len()
                )));
            }
        }
        Ok(())
    }

    fn put(
        &mut self,
        objects: &mut dyn Iterator<Item = Result<WireObject, RemoteError>>,
    ) -> Result<(), RemoteError> {
        let (tx, rx) = tokio::sync::mpsc::channel::<Result<bytes::Bytes, std::io::Error>>(8);
        let stream = futures::stream::unfold(rx, |mut rx| async move {
            rx.recv().await.map(|item| (item, rx))
        });
        let rb = self
            .request(reqwest::Method::POST, "/v1/put")
            .header(reqwest::header::CONTENT_TYPE, "application/x-bat-wire")
            .body(reqwest::Body::wrap_stream(stream));
        let base = self.base.clone();
        // The request runs on the runtime's worker while this thread encodes
        // objects into the channel.
        let task = self.rt.spawn(async move {
            let resp = rb.send().await.map_err(|e| transport(&base, e))?;
            let status = resp.status();
            let body = read_limited(resp, MAX_JSON_ANSWER, &base).await?;
            if status.is_success() {
                Ok(())
            } else {
                Err(error_from(status, &body, "", &base))
            }
        });
        let produced = (|| -> Result<(), RemoteError> {
            let mut w = WireWriter::new(SenderWriter {
                tx: tx.clone(),
                buf: Vec::with_capacity(SEND_CHUNK),
            })
            .map_err(|e| protocol(format!("sending: {e}")))?;
            for o in objects {
                w.write(&o?)
                    .map_err(|e| protocol(format!("sending: {e}")))?;
            }
            w.finish().map_err(|e| protocol(format!("sending: {e}")))?;
            Ok(())
        })();
        if let Err(e) = &produced {
            // Abort the upload: the server sees a broken stream and stores
            // nothing more.
            let _ = tx.blocking_send(Err(std::io::Error::other(e.to_string())));
        }
        drop(tx);
        let answer = self
            .rt
            .block_on(task)
            .map_err(|e| protocol(format!("upload task failed: {e}")))?;
        // A local failure explains a broken upload better than the server.
        produced?;
        answer
    }

    fn update_ref(
        &mut self,
        name: &str,
        expected: Option<CommitId>,
        new: CommitId,
        force: bool,
    ) -> Result<(), RemoteError> {
        let body = serde_json::json!({
            "name": name,
            "expected": expected.map(|c| c.to_string()),
            "new": new.to_string(),
            "force": force,
        });
        self.call(
            self.request(reqwest::Method::POST, "/v1/refs/update")
                .json(&body),
            name,
            MAX_JSON_ANSWER,
        )?;
        Ok(())
    }
}
