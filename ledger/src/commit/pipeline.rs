//! The bounded parallel pipeline a commit streams its files through:
//! reading, CDC and whole-file hashing on the calling thread, BLAKE3 and
//! zstd on worker threads, one pack writer.

use std::fs::File;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;
use std::sync::mpsc::{sync_channel, Receiver, SyncSender};
use std::sync::{Arc, Mutex};

use rusqlite::Connection;

use crate::catalog;
use crate::delta::{self};
use crate::error::{io_err, Error, Result};
use crate::id::ObjectId;
use crate::object::Kind;
use crate::pack::{self, RecordHeader};
use crate::progress::{check_cancel, Progress};
use crate::store::Ledger;

use super::*;

/// A unit of work for the hashing/compression workers.
pub(super) struct Job {
    slot: usize,
    index: u32,
    /// For a tensor piece: element width, the statistics reading of its
    /// dtype and the base piece, if any.
    plan: Option<(u8, delta::StatsReading, Option<BaseRef>)>,
    /// Shared with the whole-file hasher thread for large files.
    data: Arc<Vec<u8>>,
}

/// The base of a tensor piece: its chunk id and, when the base file is
/// still where a commit read it ([`super::hints`]), that file and the
/// piece's offset in it.
pub(super) struct BaseRef {
    id: ObjectId,
    file: Option<(Arc<PathBuf>, u64)>,
}

/// A piece's new record: header, payload and delta base.
pub(super) type NewRecord = (RecordHeader, Vec<u8>, Option<ObjectId>);

/// A worker's answer: the chunk (or small file) id and, if the catalog does
/// not have it yet, the ready-to-append record.
pub(super) struct Done {
    slot: usize,
    index: u32,
    id: ObjectId,
    len: u64,
    record: Option<NewRecord>,
    /// Its base piece was read from the base file, not decoded.
    base_from_file: bool,
}

/// Per-file result of the pipeline.
#[derive(Default, Clone)]
pub(super) struct FileResult {
    /// Whole-file id for chunked files (computed while reading).
    pub(super) whole: Option<ObjectId>,
    pub(super) size: u64,
    pub(super) chunks: Vec<(u32, ObjectId, u64)>,
    /// Base pieces read from the base file instead of decoded.
    pub(super) bases_from_file: u64,
}

pub(super) struct WorkerCtx {
    conn: Connection,
    packs_dir: PathBuf,
    level: i32,
    max_depth: u32,
    /// Optional payload forms (`WriteConfig::joint_coding`,
    /// `WriteConfig::high_exceptions`).
    planes: delta::PlanesOptions,
    cache: crate::store::SharedPackCache,
}

/// The workers' shared job queue. `None` once the pipeline has failed: the
/// receiver is dropped so a reader blocked on a full queue wakes with an
/// error instead of waiting forever (a full disk made `bat commit` hang
/// holding the ledger lock).
pub(super) type JobQueue = Mutex<Option<Receiver<Job>>>;

/// Drop the job receiver: every later or blocked `send` fails.
pub(super) fn close_jobs(jobs: &JobQueue) {
    // A poisoned lock means a worker panicked; the scope re-raises that.
    if let Ok(mut rx) = jobs.lock() {
        rx.take();
    }
}

pub(super) fn worker(mut cx: WorkerCtx, jobs: &JobQueue, done: SyncSender<Result<Done>>) {
    // Whatever way this worker ends, a failure must not leave the reader
    // blocked on a queue nobody drains.
    struct CloseOnError<'a>(&'a JobQueue, bool);
    impl Drop for CloseOnError<'_> {
        fn drop(&mut self) {
            if self.1 {
                close_jobs(self.0);
            }
        }
    }
    let mut guard = CloseOnError(jobs, true);
    worker_loop(&mut cx, jobs, &done, &mut guard.1);
}

/// The worker's loop; clears `failed` when it ends because the queue ran
/// dry normally.
pub(super) fn worker_loop(
    cx: &mut WorkerCtx,
    jobs: &JobQueue,
    done: &SyncSender<Result<Done>>,
    failed: &mut bool,
) {
    let level = cx.level;
    let comps = zstd::bulk::Compressor::new(level)
        .and_then(|plain| Ok((plain, delta::planes_compressor(level)?)));
    let (mut comp, mut planes_comp) = match comps {
        Ok(c) => c,
        Err(e) => {
            let _ = done.send(Err(Error::InvalidInput {
                message: format!("zstd level {level}: {e}"),
            }));
            return;
        }
    };
    loop {
        let job = {
            let rx = jobs
                .lock()
                .expect("job queue lock poisoned only if a worker panicked");
            match rx.as_ref() {
                Some(rx) => rx.recv(),
                // Closed after a failure elsewhere: stop.
                None => return,
            }
        };
        let Ok(job) = job else {
            // The reader finished (or failed and dropped its sender).
            *failed = false;
            return;
        };
        let id = ObjectId::of_bytes(&job.data);
        let known = match catalog::has_object(&cx.conn, &id) {
            Ok(k) => k,
            Err(e) => {
                let _ = done.send(Err(e));
                return;
            }
        };
        let (record, base_from_file) = if known {
            (None, false)
        } else {
            match encode_job(cx, &mut comp, &mut planes_comp, &job, id) {
                Ok((r, from_file)) => (Some(r), from_file),
                Err(e) => {
                    let _ = done.send(Err(e));
                    return;
                }
            }
        };
        let d = Done {
            slot: job.slot,
            index: job.index,
            id,
            len: job.data.len() as u64,
            record,
            base_from_file,
        };
        // The piece buffer goes back to the pool once the hasher is done
        // with it too (whichever side lets go last recycles it).
        if let Some(buf) = Arc::into_inner(job.data) {
            delta::recycle(buf);
        }
        if done.send(Ok(d)).is_err() {
            return;
        }
    }
}

/// What one delta link adds to its chain's cost, which is bounded by
/// `delta_max_depth`: one unit per tenth of the raw length its payload
/// stores, at least one. Decoding cost follows the bytes to inflate, so a
/// sparse fine-tuning delta (about 0.065 × raw) counts 1 and the limit is a
/// plain depth for such chains, while a dense delta (every element changed,
/// about 0.35 × raw) counts 4: it inflates every plane, almost what a
/// keyframe costs, and nine of them would make a restore ten keyframes' work.
pub(crate) fn link_cost(stored_len: u64, raw_len: u64) -> u32 {
    let units = stored_len
        .saturating_mul(10)
        .div_ceil(raw_len.max(1))
        .max(1);
    u32::try_from(units).unwrap_or(u32::MAX)
}

/// What a resolved record chain costs against `delta_max_depth`: the sum
/// of its links' [`link_cost`] (the self-contained record at its root
/// counts nothing).
pub(crate) fn chain_cost(chain: &[crate::store::RecordRef]) -> u32 {
    chain
        .iter()
        .filter(|r| r.3.is_some())
        .map(|r| link_cost(r.2.stored_len, r.2.raw_len))
        .fold(0, u32::saturating_add)
}

/// The planes payload to store for a piece: its delta (payload, base) when
/// that is at most half the raw length, else the smaller of the delta and
/// the keyframe `keyframe` encodes (only called then).
pub(crate) fn choose_planes(
    delta: Option<(Vec<u8>, ObjectId)>,
    raw_len: u64,
    keyframe: impl FnOnce() -> Result<Vec<u8>>,
) -> Result<(Vec<u8>, Option<ObjectId>)> {
    match delta {
        Some((p, b)) if (p.len() as u64) * 2 <= raw_len => Ok((p, Some(b))),
        delta => {
            let key = keyframe()?;
            Ok(match delta {
                Some((p, b)) if p.len() < key.len() => (p, Some(b)),
                _ => (key, None),
            })
        }
    }
}

/// A base piece's bytes from the file a commit read it from: `len` bytes at
/// `start`, used only if their BLAKE3 is `id` (the file may have changed
/// since). `None` on any mismatch or read error.
fn base_from_file(file: &Path, start: u64, len: usize, id: &ObjectId) -> Option<Vec<u8>> {
    use std::os::unix::fs::FileExt;
    let f = File::open(file).ok()?;
    let mut buf = delta::take_buffer(len);
    if f.read_exact_at(&mut buf, start).is_ok() && ObjectId::of_bytes(&buf) == *id {
        return Some(buf);
    }
    delta::recycle(buf);
    None
}

/// Compress one piece: plain zstd, or byte planes (a delta against its base
/// piece when the chain stays within the depth limit and the delta is the
/// smaller encoding). Also whether the base piece was read from its file.
pub(super) fn encode_job(
    cx: &mut WorkerCtx,
    comp: &mut zstd::bulk::Compressor<'static>,
    planes_comp: &mut zstd::bulk::Compressor<'static>,
    job: &Job,
    id: ObjectId,
) -> Result<(NewRecord, bool)> {
    let raw_len = job.data.len() as u64;
    let Some((width, reading, base)) = &job.plan else {
        let (c, payload) = pack::compress(comp, &job.data);
        return Ok((
            (
                RecordHeader::for_payload(Kind::Bytes, c, id, raw_len, &payload),
                payload,
                None,
            ),
            false,
        ));
    };
    let width = *width;
    let mut from_file = false;
    let bad = |reason: String| Error::BadObject {
        id,
        kind: "tensor piece",
        reason,
    };
    let mut delta: Option<(Vec<u8>, ObjectId)> = None;
    if let Some(BaseRef { id: b, file }) = base {
        let b = *b;
        if let Some(row) = catalog::get_object(&cx.conn, &b)?.and_then(|r| r.ok()) {
            let (conn, dir, cache) = (&cx.conn, &cx.packs_dir, &cx.cache);
            let chain = crate::store::resolve_chain(
                row,
                &mut |x| Ok(catalog::get_object(conn, x)?.and_then(|r| r.ok())),
                &mut |pid, x| crate::store::open_pack_with(conn, dir, cache, pid, x),
            )?;
            let chain_cost = chain_cost(&chain);
            if chain_cost < cx.max_depth {
                // The base is checked against its digest, so a delta never
                // depends on damaged bytes; a base that does not verify
                // just means this piece is stored whole (fsck reports the
                // damage). Read from its file it costs a read and a hash;
                // decoded, a record per link.
                let read = file
                    .as_ref()
                    .and_then(|(f, start)| base_from_file(f, *start, job.data.len(), &b));
                from_file = read.is_some();
                let bytes = match read {
                    Some(b) => Ok(b),
                    None => crate::store::decode_chain(&chain),
                };
                if let Ok(bytes) = bytes {
                    let encoded = (bytes.len() == job.data.len()).then(|| {
                        delta::encode_planes_with(
                            planes_comp,
                            &job.data,
                            width.into(),
                            Some((&b, &bytes)),
                            delta::PlanesOptions {
                                stats: *reading,
                                ..cx.planes
                            },
                        )
                    });
                    delta::recycle(bytes);
                    if let Some(p) = encoded.transpose().map_err(bad)? {
                        if chain_cost + link_cost(p.len() as u64, raw_len) <= cx.max_depth {
                            delta = Some((p, b));
                        }
                    }
                }
            }
        }
    }
    let (payload, base) = choose_planes(delta, raw_len, || {
        delta::encode_planes_with(planes_comp, &job.data, width.into(), None, cx.planes)
            .map_err(bad)
    })?;
    Ok((
        (
            RecordHeader::for_payload(Kind::Bytes, pack::COMPRESSION_PLANES, id, raw_len, &payload),
            payload,
            base,
        ),
        from_file,
    ))
}

impl Ledger {
    pub(super) fn run_pipeline(
        &self,
        files: &[FileTask],
        sink: &mut RecordSink<'_>,
        progress: &dyn Progress,
        cancel: &AtomicBool,
    ) -> Result<Vec<FileResult>> {
        // One worker more than cores: the reader, hasher and writer threads
        // spend part of their time blocked in I/O, and the spare worker keeps
        // both cores busy meanwhile.
        let threads = if self.config.threads == 0 {
            std::thread::available_parallelism()
                .map(|n| n.get())
                .unwrap_or(2)
                + 1
        } else {
            self.config.threads
        };
        let cfg = self.config;
        // Deep enough queues to ride out a stalled read or write (a few tens of
        // MiB at most: every job is at most one max-size chunk).
        let (job_tx, job_rx) = sync_channel::<Job>(threads * 8);
        let (done_tx, done_rx) = sync_channel::<Result<Done>>(threads * 8);
        let job_rx: JobQueue = Mutex::new(Some(job_rx));
        let mut conns = Vec::new();
        for _ in 0..threads {
            conns.push(self.extra_connection()?);
        }
        let mut results: Vec<FileResult> = vec![FileResult::default(); files.len()];
        let (read_res, write_res) = std::thread::scope(|s| {
            for conn in conns {
                let done = done_tx.clone();
                let jr = &job_rx;
                let cx = WorkerCtx {
                    conn,
                    packs_dir: self.packs_dir(),
                    level: cfg.zstd_level,
                    max_depth: cfg.depth_limit(),
                    planes: cfg.planes_options(),
                    cache: self.shared_pack_cache(),
                };
                s.spawn(move || worker(cx, jr, done));
            }
            drop(done_tx);
            let jq = &job_rx;
            let writer = s.spawn(move || -> Result<Vec<Done>> {
                let r = write_records(done_rx, &mut *sink, progress);
                if r.is_err() {
                    // Wake a reader blocked on the full job queue; the
                    // workers then find the queue closed and stop.
                    close_jobs(jq);
                }
                r
            });
            let read_res = read_files(files, &cfg, &job_tx, &mut results, cancel);
            drop(job_tx);
            let write_res = writer.join().expect("writer thread does not panic");
            (read_res, write_res)
        });
        // A writer error explains a reader's "pipeline stopped"; report it first.
        let pieces = write_res?;
        read_res?;
        for d in pieces {
            let r = &mut results[d.slot];
            r.chunks.push((d.index, d.id, d.len));
            r.bases_from_file += u64::from(d.base_from_file);
            if r.whole.is_none() {
                r.size = d.len;
            }
        }
        Ok(results)
    }
}

/// The calling thread's part of the pipeline: read every file, cut large
/// ones with FastCDC over a reusable buffer (one copy per chunk into the job),
/// hash whole large files as they stream by, feed the workers.
pub(super) fn read_files(
    files: &[FileTask],
    cfg: &crate::store::WriteConfig,
    jobs: &SyncSender<Job>,
    results: &mut [FileResult],
    cancel: &AtomicBool,
) -> Result<()> {
    let stopped = || Error::InvalidInput {
        message: "ingest pipeline stopped".into(),
    };
    let (mask_s, mask_l) = fastcdc::v2020::select_masks(
        cfg.chunk_avg as usize,
        fastcdc::v2020::Normalization::Level1,
    );
    let max = cfg.chunk_max as usize;
    let bufsize = (16 << 20).max(4 * max);
    let mut buf: Vec<u8> = Vec::new();
    for (slot, f) in files.iter().enumerate() {
        check_cancel(cancel)?;
        let mut file = File::open(&f.path).map_err(io_err("open", &f.path))?;
        if f.size <= cfg.chunk_threshold {
            let mut data = Vec::with_capacity(f.size as usize);
            (&mut file)
                .take(cfg.chunk_threshold + 1)
                .read_to_end(&mut data)
                .map_err(io_err("read", &f.path))?;
            if data.len() as u64 > cfg.chunk_threshold {
                return Err(Error::InvalidInput {
                    message: format!("{} grew while being recorded", f.path.display()),
                });
            }
            check_unchanged(&file, f, data.len() as u64)?;
            jobs.send(Job {
                slot,
                index: 0,
                plan: None,
                data: Arc::new(data),
            })
            .map_err(|_| stopped())?;
            continue;
        }
        if cfg.delta {
            if let Some(pcs) = tensor_pieces(&mut file, f)? {
                let (whole, size) = send_pieces(&mut file, f, slot, &pcs, jobs, cancel)?;
                check_unchanged(&file, f, size)?;
                results[slot].whole = Some(whole);
                results[slot].size = size;
                continue;
            }
        }
        if buf.len() != bufsize {
            buf = vec![0u8; bufsize];
        }
        // The whole-file digest runs on its own thread over the same chunk
        // buffers, in order, so the reader only reads and cuts.
        let (htx, hrx) = sync_channel::<Arc<Vec<u8>>>(32);
        let (whole, size) = std::thread::scope(|s| -> Result<(ObjectId, u64)> {
            let hasher = s.spawn(move || {
                let mut h = blake3::Hasher::new();
                for block in hrx {
                    h.update(&block);
                }
                ObjectId(*h.finalize().as_bytes())
            });
            let mut cut_file = || -> Result<u64> {
                let (mut start, mut end, mut eof) = (0usize, 0usize, false);
                let mut index = 0u32;
                let mut size = 0u64;
                loop {
                    if !eof && end - start < max {
                        buf.copy_within(start..end, 0);
                        end -= start;
                        start = 0;
                        while end < buf.len() {
                            let n = file
                                .read(&mut buf[end..])
                                .map_err(io_err("read", &f.path))?;
                            if n == 0 {
                                eof = true;
                                break;
                            }
                            end += n;
                        }
                    }
                    if start == end {
                        break;
                    }
                    let (_, cut) = fastcdc::v2020::cut(
                        &buf[start..end],
                        cfg.chunk_min as usize,
                        cfg.chunk_avg as usize,
                        max,
                        mask_s,
                        mask_l,
                        mask_s << 1,
                        mask_l << 1,
                    );
                    let cut = cut.max(1).min(end - start);
                    check_cancel(cancel)?;
                    let data = Arc::new(buf[start..start + cut].to_vec());
                    htx.send(data.clone()).map_err(|_| stopped())?;
                    jobs.send(Job {
                        slot,
                        index,
                        plan: None,
                        data,
                    })
                    .map_err(|_| stopped())?;
                    index += 1;
                    size += cut as u64;
                    start += cut;
                }
                Ok(size)
            };
            let size = cut_file();
            drop(htx);
            let whole = hasher.join().expect("hasher thread does not panic");
            Ok((whole, size?))
        })?;
        check_unchanged(&file, f, size)?;
        results[slot].whole = Some(whole);
        results[slot].size = size;
    }
    Ok(())
}

/// Refuse a file that changed while it was read: what was recorded would
/// be a state that never existed on disk. `read` is how many bytes the
/// pipeline took.
pub(super) fn check_unchanged(file: &File, f: &FileTask, read: u64) -> Result<()> {
    let md = file.metadata().map_err(io_err("stat", &f.path))?;
    let same_time = f.mtime.is_none() || md.modified().ok() == f.mtime;
    if read != f.size || md.len() != f.size || !same_time {
        return Err(Error::InvalidInput {
            message: format!(
                "{} changed while being recorded (commit it again once it is stable)",
                f.path.display()
            ),
        });
    }
    Ok(())
}

/// If `file` is a well-formed safetensors file, its pieces; the file
/// position is back at 0 afterwards either way.
pub(super) fn tensor_pieces(file: &mut File, f: &FileTask) -> Result<Option<Vec<delta::Piece>>> {
    use std::io::{Seek, SeekFrom};
    let mut prefix = [0u8; 8];
    let r = file.read_exact(&mut prefix);
    let mut out = None;
    if r.is_ok() {
        if let Some(n) = delta::safetensors::header_len(&prefix, f.size) {
            let mut head = vec![0u8; 8 + n as usize];
            head[..8].copy_from_slice(&prefix);
            if file.read_exact(&mut head[8..]).is_ok() {
                out = delta::parse_layout(&head, f.size)
                    .map(|l| delta::pieces(&l, f.size, delta::MAX_PIECE));
            }
        }
    }
    file.seek(SeekFrom::Start(0))
        .map_err(io_err("seek", &f.path))?;
    Ok(out)
}

/// Stream a safetensors file piece by piece to the workers, hashing the
/// whole file on a helper thread. Returns (file id, size).
pub(super) fn send_pieces(
    file: &mut File,
    f: &FileTask,
    slot: usize,
    pcs: &[delta::Piece],
    jobs: &SyncSender<Job>,
    cancel: &AtomicBool,
) -> Result<(ObjectId, u64)> {
    let stopped = || Error::InvalidInput {
        message: "ingest pipeline stopped".into(),
    };
    let (htx, hrx) = sync_channel::<Arc<Vec<u8>>>(32);
    std::thread::scope(|s| -> Result<(ObjectId, u64)> {
        let hasher = s.spawn(move || {
            let mut h = blake3::Hasher::new();
            for block in hrx {
                h.update(&block);
                if let Some(buf) = Arc::into_inner(block) {
                    delta::recycle(buf);
                }
            }
            ObjectId(*h.finalize().as_bytes())
        });
        let mut send_all = || -> Result<u64> {
            let mut size = 0u64;
            for (index, p) in pcs.iter().enumerate() {
                check_cancel(cancel)?;
                // Pooled piece buffers: a fresh 4 MiB allocation per piece
                // cost the kernel a zeroed page per 4 KiB (a tenth of a
                // commit's CPU time on the main series).
                let mut data = delta::take_buffer(p.len as usize);
                file.read_exact(&mut data)
                    .map_err(|e| Error::InvalidInput {
                        message: format!("{} changed while being recorded: {e}", f.path.display()),
                    })?;
                let data = Arc::new(data);
                htx.send(data.clone()).map_err(|_| stopped())?;
                let plan = p.key.as_ref().map(|k| {
                    let base = f
                        .base
                        .as_ref()
                        .and_then(|m| m.get(k))
                        .filter(|b| b.len == p.len)
                        .map(|b| BaseRef {
                            id: b.id,
                            file: f.base_file.clone().map(|path| (path, b.start)),
                        });
                    (p.width, delta::StatsReading::of_dtype(&k.dtype), base)
                });
                let index = u32::try_from(index).map_err(|_| Error::InvalidInput {
                    message: format!("{} has too many pieces", f.path.display()),
                })?;
                jobs.send(Job {
                    slot,
                    index,
                    plan,
                    data,
                })
                .map_err(|_| stopped())?;
                size += p.len;
            }
            Ok(size)
        };
        let size = send_all();
        drop(htx);
        let whole = hasher.join().expect("hasher thread does not panic");
        Ok((whole, size?))
    })
}

/// Where the pipeline's writer puts each new record (the staging pack; a
/// failing stand-in in tests).
pub(super) type RecordSink<'a> =
    dyn FnMut(&RecordHeader, &[u8], Option<ObjectId>) -> Result<()> + Send + 'a;

/// The writer thread's loop: append every new record in arrival order.
pub(super) fn write_records(
    done: Receiver<Result<Done>>,
    sink: &mut RecordSink<'_>,
    progress: &dyn Progress,
) -> Result<Vec<Done>> {
    let mut pieces = Vec::new();
    for d in done {
        let mut d = d?;
        if let Some((h, payload, base)) = d.record.take() {
            sink(&h, &payload, base)?;
        }
        progress.inc(d.len);
        pieces.push(d);
    }
    Ok(pieces)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::progress::NoProgress;
    use std::sync::mpsc::channel;
    use std::time::Duration;

    /// Many distinct small files: far more jobs than the bounded queues
    /// hold, so a reader that is not woken on failure blocks for good.
    fn many_files(dir: &Path, n: usize) -> Vec<FileTask> {
        (0..n)
            .map(|i| {
                let path = dir.join(format!("f{i}"));
                let data: Vec<u8> = (0..4096u32)
                    .flat_map(|j| (j ^ i as u32).wrapping_mul(2654435761).to_le_bytes())
                    .collect();
                std::fs::write(&path, &data).expect("write test file");
                FileTask {
                    path,
                    size: data.len() as u64,
                    mtime: None,
                    base: None,
                    base_file: None,
                }
            })
            .collect()
    }

    /// Run the pipeline with a sink that fails (like a full disk) after
    /// `ok_records` records; the result must arrive within seconds.
    fn pipeline_with_failing_sink(threads: usize, ok_records: usize) -> Result<Vec<FileResult>> {
        let tmp = tempfile::tempdir().expect("tempdir");
        let mut ledger = Ledger::init(&tmp.path().join("l")).expect("init");
        ledger.config.threads = threads;
        let src = tmp.path().join("src");
        std::fs::create_dir(&src).expect("mkdir");
        let files = many_files(&src, 300);
        let (tx, rx) = channel();
        std::thread::spawn(move || {
            let mut n = 0usize;
            let mut sink = |_: &RecordHeader, _: &[u8], _: Option<ObjectId>| {
                n += 1;
                if n > ok_records {
                    return Err(Error::Io {
                        op: "write",
                        path: PathBuf::from("pack"),
                        source: std::io::Error::from_raw_os_error(28),
                    });
                }
                Ok(())
            };
            let r = ledger.run_pipeline(&files, &mut sink, &NoProgress, &AtomicBool::new(false));
            let _ = tx.send(r);
        });
        rx.recv_timeout(Duration::from_secs(60))
            .expect("the pipeline ended (no deadlock after a writer failure)")
    }

    #[test]
    fn writer_failure_at_first_record_ends_the_pipeline() {
        for threads in [1, 3] {
            let r = pipeline_with_failing_sink(threads, 0);
            let e = r.err().expect("a failing writer fails the pipeline");
            assert!(e.to_string().contains("No space left"), "{e}");
        }
    }

    #[test]
    fn writer_failure_mid_stream_ends_the_pipeline() {
        for at in [1, 7, 40, 200] {
            let r = pipeline_with_failing_sink(2, at);
            let e = r.err().expect("a failing writer fails the pipeline");
            assert!(e.to_string().contains("No space left"), "{e}");
        }
    }
}
