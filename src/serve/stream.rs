//! Object download (`POST /v1/get`) and upload (`POST /v1/put`): wire
//! streams (`bat_ledger::remote::wire`) produced and consumed on the
//! blocking pool, joined to the async body through bounded channels, so
//! memory stays bounded whatever the transfer size.

use std::collections::HashSet;
use std::io::{Read, Write};
use std::sync::Arc;

use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use bat_ledger::remote::wire::{WireReader, WireWriter};
use bat_ledger::remote::{RemoteError, WireObject};
use bat_ledger::{CommitId, Kind, Ledger, Location, ObjectId, TreeId};
use futures::StreamExt;
use serde::{Deserialize, Serialize};
use tokio::sync::mpsc;

use super::auth::Scope;
use super::handlers::{authorize, ledger_error, parse_ids, with_ledger, ApiError};
use super::AppState;

/// Bytes handed to the network per message.
const CHUNK: usize = 256 << 10;
/// Messages in flight between the blocking side and the network side.
const DEPTH: usize = 8;

/// A `Write` that sends full chunks into a bounded channel (blocking when
/// the network is slower than the ledger).
struct ChannelWriter {
    tx: mpsc::Sender<Result<Bytes, std::io::Error>>,
    buf: Vec<u8>,
}

impl ChannelWriter {
    fn send_buf(&mut self) -> std::io::Result<()> {
        if self.buf.is_empty() {
            return Ok(());
        }
        let chunk = Bytes::from(std::mem::replace(&mut self.buf, Vec::with_capacity(CHUNK)));
        self.tx.blocking_send(Ok(chunk)).map_err(|_| {
            std::io::Error::new(std::io::ErrorKind::BrokenPipe, "the client went away")
        })
    }
}

impl Write for ChannelWriter {
    fn write(&mut self, data: &[u8]) -> std::io::Result<usize> {
        self.buf.extend_from_slice(data);
        if self.buf.len() >= CHUNK {
            self.send_buf()?;
        }
        Ok(data.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        self.send_buf()
    }
}

/// The order to send `ids` in: every delta base, chunk list, chunk, tree
/// and tree entry that is itself requested goes before the object needing
/// it.
fn send_order(l: &Ledger, ids: &[ObjectId]) -> Result<Vec<ObjectId>, ApiError> {
    let wanted: HashSet<ObjectId> = ids.iter().copied().collect();
    let mut done: HashSet<ObjectId> = HashSet::new();
    let mut order = Vec::with_capacity(ids.len());
    for &root in ids {
        // Iterative depth-first post-order over requested dependencies.
        let mut stack = vec![(root, false)];
        while let Some((id, expanded)) = stack.pop() {
            if done.contains(&id) {
                continue;
            }
            if expanded {
                done.insert(id);
                order.push(id);
                continue;
            }
            let row = l.locate(&id).map_err(ledger_error)?.ok_or_else(|| {
                ApiError::new(
                    StatusCode::NOT_FOUND,
                    "missing_object",
                    format!("object {id} is not stored here"),
                )
            })?;
            stack.push((id, true));
            let mut deps = Vec::new();
            match row.location {
                Location::Delta { base, .. } => deps.push(base),
                Location::Chunked { list } => {
                    deps.push(list);
                    if wanted.contains(&list) {
                        let cl = l.read_chunk_list(&list).map_err(ledger_error)?;
                        deps.extend(cl.chunks.iter().map(|c| c.id));
                    }
                }
                Location::Packed { .. } => {}
            }
            // Trees before the commits and trees naming them, so a request
            // in any order imports in one pass.
            match row.kind {
                Kind::Commit => {
                    let c = l.read_commit(&CommitId(id)).map_err(ledger_error)?;
                    deps.push(c.tree.0);
                }
                Kind::Tree => {
                    let t = l.read_tree(&TreeId(id)).map_err(ledger_error)?;
                    deps.extend(t.entries.iter().map(|e| e.id));
                }
                Kind::Bytes | Kind::ChunkList => {}
            }
            for d in deps.into_iter().rev() {
                if wanted.contains(&d) && !done.contains(&d) {
                    stack.push((d, false));
                }
            }
        }
    }
    Ok(order)
}

pub(crate) async fn get_objects(
    State(state): State<Arc<AppState>>,
    headers: HeaderMap,
    body: Bytes,
) -> Result<Response, ApiError> {
    authorize(&state, &headers, Scope::Read)?;
    let ids = parse_ids(&body, state.config.limits.max_ids)?;
    // Every id must be stored before the 200 goes out; the order puts
    // requested bases first.
    let order = with_ledger(&state, move |l| send_order(l, &ids)).await?;
    let (tx, rx) = mpsc::channel::<Result<Bytes, std::io::Error>>(DEPTH);
    let dir = state.config.ledger_dir.clone();
    tokio::task::spawn_blocking(move || {
        let err_tx = tx.clone();
        let run = move || -> Result<(), String> {
            let l = Ledger::open(&dir).map_err(|e| e.to_string())?;
            let mut w = WireWriter::new(ChannelWriter {
                tx,
                buf: Vec::with_capacity(CHUNK),
            })
            .map_err(|e| e.to_string())?;
            for id in &order {
                let o = l.export_wire(id).map_err(|e| e.to_string())?;
                w.write(&o).map_err(|e| e.to_string())?;
            }
            let mut out = w.finish().map_err(|e| e.to_string())?;
            out.flush().map_err(|e| e.to_string())
        };
        if let Err(e) = run() {
            // Aborts the response: the client sees a stream without its end
            // marker and refuses it.
            let _ = err_tx.blocking_send(Err(std::io::Error::other(e)));
        }
    });
    let stream = tokio_stream_from(rx);
    Ok((
        [(header::CONTENT_TYPE, "application/x-bat-wire")],
        Body::from_stream(stream),
    )
        .into_response())
}

fn tokio_stream_from(
    mut rx: mpsc::Receiver<Result<Bytes, std::io::Error>>,
) -> impl futures::Stream<Item = Result<Bytes, std::io::Error>> + Send + 'static {
    futures::stream::poll_fn(move |cx| rx.poll_recv(cx))
}

/// A `Read` over body chunks arriving through a bounded channel.
struct ChannelReader {
    rx: mpsc::Receiver<Result<Bytes, String>>,
    cur: Bytes,
}

impl Read for ChannelReader {
    fn read(&mut self, out: &mut [u8]) -> std::io::Result<usize> {
        while self.cur.is_empty() {
            match self.rx.blocking_recv() {
                None => return Ok(0),
                Some(Ok(b)) => self.cur = b,
                Some(Err(e)) => return Err(std::io::Error::other(e)),
            }
        }
        let n = out.len().min(self.cur.len());
        out[..n].copy_from_slice(&self.cur[..n]);
        self.cur = self.cur.slice(n..);
        Ok(n)
    }
}

/// `POST /v1/put` answer.
#[derive(Debug, Serialize, Deserialize)]
pub struct PutBody {
    /// Objects in the stream.
    pub received: u64,
    /// Objects newly stored.
    pub stored: u64,
    /// Objects already present.
    pub skipped: u64,
}

fn remote_error(e: RemoteError) -> ApiError {
    match e {
        RemoteError::LimitExceeded { what } => {
            ApiError::new(StatusCode::PAYLOAD_TOO_LARGE, "limit_exceeded", what)
        }
        RemoteError::Corrupt { .. } => {
            ApiError::new(StatusCode::UNPROCESSABLE_ENTITY, "corrupt", e.to_string())
        }
        other => ApiError::new(StatusCode::BAD_REQUEST, "bad_stream", other.to_string()),
    }
}

pub(crate) async fn put_objects(
    State(state): State<Arc<AppState>>,
    headers: HeaderMap,
    body: Body,
) -> Result<Response, ApiError> {
    authorize(&state, &headers, Scope::Write)?;
    let limits = state.config.limits.clone();
    let (tx, rx) = mpsc::channel::<Result<Bytes, String>>(DEPTH);
    // Network side: forward body chunks, enforcing the size limit.
    let max = limits.max_put_bytes;
    let pump = tokio::spawn(async move {
        let mut stream = body.into_data_stream();
        let mut total: u64 = 0;
        while let Some(chunk) = stream.next().await {
            let msg = match chunk {
                Ok(b) => {
                    total += b.len() as u64;
                    if total > max {
                        let _ = tx
                            .send(Err(format!("request body larger than {max} bytes")))
                            .await;
                        return true;
                    }
                    Ok(b)
                }
                Err(e) => Err(format!("reading the request body: {e}")),
            };
            let failed = msg.is_err();
            if tx.send(msg).await.is_err() || failed {
                return false;
            }
        }
        false
    });
    let result = with_ledger(&state, move |l| {
        let reader = ChannelReader {
            rx,
            cur: Bytes::new(),
        };
        let mut wr = WireReader::new(reader).map_err(remote_error)?;
        let mut totals = PutBody {
            received: 0,
            stored: 0,
            skipped: 0,
        };
        let mut batch: Vec<WireObject> = Vec::new();
        let mut batch_bytes: usize = 0;
        let import = |l: &mut Ledger,
                      batch: Vec<WireObject>,
                      totals: &mut PutBody|
         -> Result<(), ApiError> {
            let s = l.import_wire(batch).map_err(|e| match e {
                bat_ledger::Error::Received { .. } => {
                    ApiError::new(StatusCode::UNPROCESSABLE_ENTITY, "corrupt", e.to_string())
                }
                other => ledger_error(other),
            })?;
            totals.received += s.received;
            totals.stored += s.stored;
            totals.skipped += s.skipped;
            Ok(())
        };
        while let Some(o) = wr.next_object().map_err(remote_error)? {
            batch_bytes += o.payload_len() as usize;
            batch.push(o);
            if batch_bytes >= limits.put_batch_bytes || batch.len() >= limits.max_ids {
                import(l, std::mem::take(&mut batch), &mut totals)?;
                batch_bytes = 0;
            }
        }
        import(l, batch, &mut totals)?;
        Ok(totals)
    })
    .await;
    let over_limit = pump.await.unwrap_or(false);
    match result {
        Ok(t) => Ok(Json(t).into_response()),
        Err(_) if over_limit => Err(ApiError::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            "limit_exceeded",
            format!("request body larger than {max} bytes"),
        )),
        Err(e) => Err(e),
    }
}
