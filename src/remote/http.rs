//! The HTTP remote: a client of `bat serve` (protocol in
//! `ledger/PROTOCOL.d/http.md`). The transfer engine is synchronous, so the
//! client owns a small tokio runtime and blocks on each request.

use bat_ledger::{CommitId, ObjectId};
use reqwest::StatusCode;
use serde::Deserialize;

use super::iface::{Remote, RemoteError, WireObject};

/// Most ids sent in one `has` or `get` request (the server's default limit).
pub const IDS_PER_REQUEST: usize = 65_536;

/// Options of an HTTP remote.
#[derive(Debug, Clone, Default)]
pub struct HttpOptions {
    /// Bearer token (`--token` or `BAT_TOKEN`, read by the CLI).
    pub token: Option<String>,
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
        context: format!("talking to {url}"),
        source: std::io::Error::other(e.to_string()),
    }
}

/// Turn a non-success response into the matching error.
fn error_from(status: StatusCode, body: &[u8], name: &str) -> RemoteError {
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
        (StatusCode::UNAUTHORIZED, _) | (StatusCode::FORBIDDEN, _) => {
            RemoteError::Unauthorized { reason: message }
        }
        (StatusCode::NOT_FOUND, _) => RemoteError::NotFound { what: message },
        (StatusCode::PAYLOAD_TOO_LARGE, _) => RemoteError::LimitExceeded { what: message },
        _ => protocol(format!("server answered {status}: {message}")),
    }
}

impl HttpRemote {
    /// A client of the server at `url` (`http://HOST:PORT` or `https://…`,
    /// optionally with a path prefix).
    pub fn new(url: &str, options: HttpOptions) -> Result<HttpRemote, RemoteError> {
        if !(url.starts_with("http://") || url.starts_with("https://")) {
            return Err(protocol(format!("{url} is not an http(s) URL")));
        }
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|source| RemoteError::Io {
                context: "starting the HTTP client runtime".into(),
                source,
            })?;
        let client = reqwest::Client::builder()
            .user_agent(concat!("bat/", env!("CARGO_PKG_VERSION")))
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
                Err(error_from(status, &body, name))
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
        _ids: &[ObjectId],
        _sink: &mut dyn FnMut(WireObject) -> Result<(), RemoteError>,
    ) -> Result<(), RemoteError> {
        Err(protocol("object download over HTTP is not built yet"))
    }

    fn put(
        &mut self,
        _objects: &mut dyn Iterator<Item = Result<WireObject, RemoteError>>,
    ) -> Result<(), RemoteError> {
        Err(protocol("object upload over HTTP is not built yet"))
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
