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
use bat_ledger::remote::transfer::read_ahead;
use bat_ledger::remote::wire::{WireReader, WireWriter};
use bat_ledger::remote::{ImportPipeline, RemoteError, WireObject};
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

/// Bytes of response exported per ledger opening: the ledger (and its
/// shared lock) is closed while they go out, so a client that stops
/// reading never keeps gc waiting.
const GROUP: usize = 8 << 20;

/// Room in a group's buffer: a group ends after the object that takes it
/// past [`GROUP`], and a piece's payload is at most about 4 MiB (bigger
/// records, rare, grow the buffer as before).
const GROUP_ROOM: usize = GROUP + (5 << 20);

/// Group buffers kept for reuse by one response: one being filled while
/// the one before is still going out.
const POOLED: usize = 2;

/// A `Write` into a buffer the sender drains between groups.
#[derive(Clone)]
struct SharedBuf(std::rc::Rc<std::cell::RefCell<Vec<u8>>>);

/// A response's spare group buffers. Why: a buffer freshly allocated for
/// every group, and grown by doubling while it filled, cost the server a
/// page fault per 4 KiB and a second copy of every byte, about a quarter
/// of its CPU time on a fetch.
#[derive(Clone, Default)]
struct Pool(Arc<std::sync::Mutex<Vec<Vec<u8>>>>);

impl Pool {
    /// An empty buffer with room for a group.
    fn take(&self) -> Vec<u8> {
        let spare = self.0.lock().ok().and_then(|mut p| p.pop());
        spare.unwrap_or_else(|| Vec::with_capacity(GROUP_ROOM))
    }
}

/// A sent group's bytes: handed back to the pool once the network side
/// has dropped every chunk of them.
struct Returned {
    bytes: Vec<u8>,
    pool: Pool,
}

impl AsRef<[u8]> for Returned {
    fn as_ref(&self) -> &[u8] {
        &self.bytes
    }
}

impl Drop for Returned {
    fn drop(&mut self) {
        let mut b = std::mem::take(&mut self.bytes);
        b.clear();
        // A poisoned pool only costs the reuse.
        if let Ok(mut p) = self.pool.0.lock() {
            if p.len() < POOLED {
                p.push(b);
            }
        }
    }
}

impl Write for SharedBuf {
    fn write(&mut self, data: &[u8]) -> std::io::Result<usize> {
        self.0.borrow_mut().extend_from_slice(data);
        Ok(data.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// The blocking side of a response: hands chunks to the network, waiting
/// at most the idle timeout for the client to take each one.
struct Sender {
    tx: mpsc::Sender<Result<Bytes, std::io::Error>>,
    handle: tokio::runtime::Handle,
    idle: std::time::Duration,
    deadline: tokio::time::Instant,
    pool: Pool,
}

impl Sender {
    fn send(&self, buf: &SharedBuf) -> Result<(), String> {
        // One buffer, handed out in slices (no copy per piece), and back
        // to the pool when the last slice has gone out.
        let bytes = std::mem::replace(&mut *buf.0.borrow_mut(), self.pool.take());
        let data = Bytes::from_owner(Returned {
            bytes,
            pool: self.pool.clone(),
        });
        for at in (0..data.len()).step_by(CHUNK) {
            let chunk = data.slice(at..data.len().min(at + CHUNK));
            let wait = (tokio::time::Instant::now() + self.idle).min(self.deadline);
            let sent = self
                .handle
                .block_on(tokio::time::timeout_at(wait, self.tx.send(Ok(chunk))));
            match sent {
                Ok(Ok(())) => {}
                Ok(Err(_)) => return Err("the client went away".into()),
                Err(_) => {
                    return Err(format!(
                        "the client took nothing for {}s (or the request took too long)",
                        self.idle.as_secs()
                    ))
                }
            }
        }
        Ok(())
    }
}

/// Export `order` as one wire stream through `sender`, opening the ledger
/// for each group of about [`GROUP`] bytes and closing it before sending.
fn send_objects(dir: &std::path::Path, order: &[ObjectId], sender: &Sender) -> Result<(), String> {
    let buf = SharedBuf(std::rc::Rc::new(std::cell::RefCell::new(
        sender.pool.take(),
    )));
    let mut w = WireWriter::new(buf.clone()).map_err(|e| e.to_string())?;
    let mut next = 0;
    while next < order.len() {
        {
            let l = Ledger::open(dir).map_err(|e| e.to_string())?;
            while next < order.len() && buf.0.borrow().len() < GROUP {
                let o = l
                    .export_wire_or_absent(&order[next])
                    .map_err(|e| e.to_string())?;
                w.write(&o).map_err(|e| e.to_string())?;
                next += 1;
            }
        }
        sender.send(&buf)?;
    }
    w.finish().map_err(|e| e.to_string())?;
    sender.send(&buf)
}

/// The order to send `ids` in: every delta base, chunk list, chunk, tree,
/// tree entry and parent commit that is itself requested goes before the
/// object needing it.
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
            let Some(row) = l.locate(&id).map_err(ledger_error)? else {
                // A file pruned here is sent as an absent entry.
                if l.pruned_file(&id).map_err(ledger_error)?.is_some() {
                    done.insert(id);
                    order.push(id);
                    continue;
                }
                return Err(ApiError::new(
                    StatusCode::NOT_FOUND,
                    "missing_object",
                    format!("object {id} is not stored here"),
                ));
            };
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
            // Trees before the commits and trees naming them, and parents
            // before their children, so a request in any order imports in
            // one pass (import checks a commit's parents and tree exist).
            match row.kind {
                Kind::Commit => {
                    let c = l.read_commit(&CommitId(id)).map_err(ledger_error)?;
                    deps.push(c.tree.0);
                    deps.extend(c.parents.iter().map(|p| p.0));
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
    let t = state.config.timeouts;
    let deadline = tokio::time::Instant::now() + t.request;
    let handle = tokio::runtime::Handle::current();
    tokio::task::spawn_blocking(move || {
        let err_tx = tx.clone();
        let sender = Sender {
            tx,
            handle,
            idle: t.idle,
            deadline,
            pool: Pool::default(),
        };
        if let Err(e) = send_objects(&dir, &order, &sender) {
            // Aborts the response: the client sees a stream without its end
            // marker and refuses it.
            let _ = err_tx.try_send(Err(std::io::Error::other(e)));
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

/// Read an upload's wire stream, handing each object to `emit`; nothing
/// may follow the end marker (a stream is one request body).
fn parse_upload(
    reader: ChannelReader,
    emit: &mut dyn FnMut(WireObject) -> bool,
) -> Result<(), ApiError> {
    let mut wr = WireReader::new(reader).map_err(remote_error)?;
    while let Some(o) = wr.next_object().map_err(remote_error)? {
        if !emit(o) {
            // The importer failed; its error is the answer.
            return Ok(());
        }
    }
    let mut rest = wr.into_inner();
    let mut probe = [0u8; 1];
    match rest.read(&mut probe) {
        Ok(0) => Ok(()),
        Ok(_) => Err(ApiError::new(
            StatusCode::BAD_REQUEST,
            "bad_stream",
            "trailing bytes after the stream's end marker",
        )),
        Err(e) => Err(ApiError::new(
            StatusCode::BAD_REQUEST,
            "bad_stream",
            format!("reading the request body: {e}"),
        )),
    }
}

/// An import's refusal of what was received is the client's fault (422);
/// anything else is the ledger's.
fn import_error(e: bat_ledger::Error) -> ApiError {
    match e {
        bat_ledger::Error::Received { .. } => {
            ApiError::new(StatusCode::UNPROCESSABLE_ENTITY, "corrupt", e.to_string())
        }
        other => ledger_error(other),
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
    let t = state.config.timeouts;
    let deadline = tokio::time::Instant::now() + t.request;
    let pump = tokio::spawn(async move {
        let mut stream = body.into_data_stream();
        let mut total: u64 = 0;
        loop {
            // A client that pauses longer than the idle timeout, or whose
            // request outlives the request timeout, is cut off.
            let wait = (tokio::time::Instant::now() + t.idle).min(deadline);
            let chunk = match tokio::time::timeout_at(wait, stream.next()).await {
                Ok(Some(c)) => c,
                Ok(None) => break,
                Err(_) => {
                    let _ = tx
                        .send(Err(format!(
                            "the client sent nothing for {}s (or the request took too long)",
                            t.idle.as_secs()
                        )))
                        .await;
                    return false;
                }
            };
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
    let dir = state.config.ledger_dir.clone();
    // The stream is parsed without the ledger open; the ledger (and its
    // shared lock, which gc needs free) is held only while a received batch
    // is imported, never while waiting on a slow client.
    let result = tokio::task::spawn_blocking(move || -> Result<PutBody, ApiError> {
        let reader = ChannelReader {
            rx,
            cur: Bytes::new(),
        };
        let mut batch: Vec<WireObject> = Vec::new();
        let mut batch_bytes: usize = 0;
        // One import per batch (a refused batch stores nothing). Each
        // batch's pieces are verified on two threads while the batch before
        // it is written and fsynced on a third; the trees of the chunked
        // files this upload brings (their lists come before their pieces)
        // check each file against its id from the pieces as they are
        // imported, not by decoding them again.
        let mut pipeline = ImportPipeline::new(&dir);
        // The stream is parsed on a second thread, up to
        // `READ_AHEAD_BYTES` ahead of the batch being imported, so the
        // client keeps sending while a batch is verified and stored.
        read_ahead(
            move |emit| parse_upload(reader, emit),
            &mut |o| {
                pipeline.note(&o).map_err(import_error)?;
                batch_bytes += o.payload_len() as usize;
                batch.push(o);
                if batch_bytes >= limits.put_batch_bytes || batch.len() >= limits.max_ids {
                    pipeline
                        .import(std::mem::take(&mut batch))
                        .map_err(import_error)?;
                    batch_bytes = 0;
                }
                Ok(())
            },
            || ApiError::internal("the thread reading the upload panicked"),
        )?;
        pipeline.import(batch).map_err(import_error)?;
        let s = pipeline.finish().map_err(import_error)?;
        Ok(PutBody {
            received: s.received,
            stored: s.stored,
            skipped: s.skipped,
        })
    })
    .await
    .map_err(|e| ApiError::internal(format!("worker failed: {e}")))
    .and_then(|r| r);
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
