//! The S3 remote: a ledger kept as plain objects in any S3-compatible store
//! through the `object_store` crate (layout in `ledger/PROTOCOL.d/s3.md`).
//!
//! * `PREFIX/objects/<hex id>`: one framed wire object;
//! * `PREFIX/refs/<full ref name>`: the commit's 64 hex digits and `\n`.
//!
//! Objects are written before refs. A ref moves only through a conditional
//! write (create-if-absent for a new ref, if-match on the e-tag/version read
//! for an existing one), so of two pushers racing for one ref exactly one
//! wins and the other is told to pull. There is no server to check
//! fast-forwards, so this client walks the remote's commits itself.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use bat_ledger::{Commit, CommitId, Kind, ObjectId};
use futures::stream::{FuturesUnordered, StreamExt};
use object_store::aws::{AmazonS3, AmazonS3Builder};
use object_store::path::Path as StorePath;
use object_store::{ObjectStore, ObjectStoreExt, PutMode, PutOptions, PutPayload, UpdateVersion};

use super::frame;
use bat_ledger::remote::{Remote, RemoteError, WireBody, WireObject};

/// How many requests run at once.
const PARALLEL: usize = 16;
/// Most commits walked for a fast-forward check.
const MAX_WALK: usize = 1_000_000;
/// Most bytes of a ref object.
const MAX_REF_BYTES: usize = 1024;

/// Connection settings; the CLI fills them from the standard AWS variables
/// (`AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY`, `AWS_SESSION_TOKEN`,
/// `AWS_REGION` / `AWS_DEFAULT_REGION`, `AWS_ENDPOINT_URL`) and `--endpoint`.
#[derive(Clone, Default)]
pub struct S3Options {
    /// Endpoint URL (`http://127.0.0.1:9000`); none = AWS itself.
    pub endpoint: Option<String>,
    /// Region (default `us-east-1`).
    pub region: Option<String>,
    /// Access key id.
    pub access_key_id: Option<String>,
    /// Secret access key.
    pub secret_access_key: Option<String>,
    /// Session token.
    pub session_token: Option<String>,
}

impl std::fmt::Debug for S3Options {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("S3Options")
            .field("endpoint", &self.endpoint)
            .field("region", &self.region)
            .field("access_key_id", &self.access_key_id)
            .field(
                "secret_access_key",
                &self.secret_access_key.as_ref().map(|_| "(set)"),
            )
            .field(
                "session_token",
                &self.session_token.as_ref().map(|_| "(set)"),
            )
            .finish()
    }
}

/// A ledger in an S3 bucket.
pub struct S3Remote {
    url: String,
    prefix: String,
    store: Arc<AmazonS3>,
    rt: tokio::runtime::Runtime,
}

fn protocol(reason: impl Into<String>) -> RemoteError {
    RemoteError::Protocol {
        reason: reason.into(),
    }
}

fn store_err(op: &'static str, e: object_store::Error) -> RemoteError {
    match e {
        object_store::Error::NotFound { path, .. } => RemoteError::NotFound {
            url: "s3".into(),
            what: path,
        },
        other => RemoteError::Io {
            op,
            path: "S3".into(),
            source: std::io::Error::other(other.to_string()),
        },
    }
}

/// Split `s3://bucket/prefix` into bucket and prefix (no slashes at the
/// ends; may be empty).
pub fn parse_s3_url(url: &str) -> Result<(String, String), RemoteError> {
    let rest = url
        .strip_prefix("s3://")
        .ok_or_else(|| protocol(format!("{url} is not an s3:// URL")))?;
    let (bucket, prefix) = rest.split_once('/').unwrap_or((rest, ""));
    if bucket.is_empty() {
        return Err(protocol(format!("{url}: the bucket name is missing")));
    }
    let prefix = prefix.trim_matches('/').to_string();
    if prefix.split('/').any(|p| p == "." || p == "..") {
        return Err(protocol(format!(
            "{url}: the prefix may not contain . or .."
        )));
    }
    Ok((bucket.to_string(), prefix))
}

impl S3Remote {
    /// Connect to `s3://bucket/prefix`.
    pub fn new(url: &str, options: S3Options) -> Result<S3Remote, RemoteError> {
        let (bucket, prefix) = parse_s3_url(url)?;
        let mut b = AmazonS3Builder::new()
            .with_bucket_name(&bucket)
            .with_region(options.region.as_deref().unwrap_or("us-east-1"));
        if let Some(ep) = &options.endpoint {
            b = b
                .with_endpoint(ep)
                .with_allow_http(ep.starts_with("http://"))
                .with_virtual_hosted_style_request(false);
        }
        if let Some(k) = &options.access_key_id {
            b = b.with_access_key_id(k);
        }
        if let Some(s) = &options.secret_access_key {
            b = b.with_secret_access_key(s);
        }
        if let Some(t) = &options.session_token {
            b = b.with_token(t);
        }
        let store = b
            .build()
            .map_err(|e| protocol(format!("cannot configure S3 for {url}: {e}")))?;
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .map_err(RemoteError::io("start the S3 client runtime for", url))?;
        Ok(S3Remote {
            url: url.to_string(),
            prefix,
            store: Arc::new(store),
            rt,
        })
    }

    fn key(&self, rest: &str) -> StorePath {
        if self.prefix.is_empty() {
            StorePath::from(rest)
        } else {
            StorePath::from(format!("{}/{rest}", self.prefix))
        }
    }

    fn object_key(&self, id: &ObjectId) -> StorePath {
        self.key(&format!("objects/{}", id.to_hex()))
    }

    /// Where the absent entry of a file pruned by the pusher is kept: apart
    /// from `objects/`, so `has` never counts it as stored and a later push
    /// of the bytes (from a ledger that has them) is not skipped.
    fn absent_key(&self, id: &ObjectId) -> StorePath {
        self.key(&format!("absent/{}", id.to_hex()))
    }

    /// Read one object's frame and decode it, checking it is `id`; when
    /// `objects/` lacks it, its absent entry if there is one.
    async fn fetch_object(
        store: Arc<AmazonS3>,
        key: StorePath,
        absent_key: Option<StorePath>,
        id: ObjectId,
    ) -> Result<WireObject, RemoteError> {
        let got = match (store.get(&key).await, absent_key) {
            (Err(object_store::Error::NotFound { .. }), Some(a)) => store.get(&a).await,
            (r, _) => r,
        };
        let bytes = got
            .map_err(|e| store_err("read an object from", e))?
            .bytes()
            .await
            .map_err(|e| store_err("read an object from", e))?;
        let obj = frame::decode_one(&bytes)?;
        if obj.id != id {
            return Err(RemoteError::Corrupt {
                id,
                reason: format!("the stored frame holds object {}", obj.id),
            });
        }
        Ok(obj)
    }

    /// The current value of a ref and the version to update it against.
    async fn read_ref(
        store: &AmazonS3,
        key: &StorePath,
        name: &str,
    ) -> Result<Option<(CommitId, UpdateVersion)>, RemoteError> {
        let got = match store.get(key).await {
            Ok(g) => g,
            Err(object_store::Error::NotFound { .. }) => return Ok(None),
            Err(e) => return Err(store_err("read a ref from", e)),
        };
        let version = UpdateVersion {
            e_tag: got.meta.e_tag.clone(),
            version: got.meta.version.clone(),
        };
        if got.meta.size > MAX_REF_BYTES as u64 {
            return Err(protocol(format!(
                "ref {name} is {} bytes long",
                got.meta.size
            )));
        }
        let bytes = got
            .bytes()
            .await
            .map_err(|e| store_err("read a ref from", e))?;
        let text =
            std::str::from_utf8(&bytes).map_err(|_| protocol(format!("ref {name} is not text")))?;
        let id = ObjectId::from_hex(text.trim_end_matches('\n'))
            .ok_or_else(|| protocol(format!("ref {name} does not hold a commit id")))?;
        Ok(Some((CommitId(id), version)))
    }

    /// Read and verify a commit stored on the remote.
    async fn read_commit(
        store: Arc<AmazonS3>,
        key: StorePath,
        id: CommitId,
    ) -> Result<Commit, RemoteError> {
        let obj = Self::fetch_object(store, key, None, id.0).await?;
        if obj.kind != Kind::Commit {
            return Err(RemoteError::Corrupt {
                id: id.0,
                reason: "expected a commit".into(),
            });
        }
        let raw = frame::raw_bytes(&obj)?;
        if Kind::Commit.id_of(&raw) != id.0 {
            return Err(RemoteError::Corrupt {
                id: id.0,
                reason: "digest mismatch".into(),
            });
        }
        Commit::decode(&raw).map_err(|reason| RemoteError::Corrupt { id: id.0, reason })
    }

    /// True when `old` is `new` or an ancestor of it, walking the remote's
    /// commits from `new`.
    async fn is_ancestor(&self, old: CommitId, new: CommitId) -> Result<bool, RemoteError> {
        let mut seen = HashSet::new();
        let mut frontier = vec![new];
        while !frontier.is_empty() {
            if frontier.contains(&old) {
                return Ok(true);
            }
            let mut pending = FuturesUnordered::new();
            for c in frontier.drain(..) {
                if seen.insert(c) {
                    pending.push(Self::read_commit(
                        self.store.clone(),
                        self.object_key(&c.0),
                        c,
                    ));
                }
            }
            if seen.len() > MAX_WALK {
                return Err(RemoteError::LimitExceeded {
                    what: format!("more than {MAX_WALK} commits walked checking a fast-forward"),
                });
            }
            while let Some(r) = pending.next().await {
                frontier.extend(r?.parents);
            }
        }
        Ok(false)
    }
}

/// A ref as read from the store: its value and the version a conditional
/// write must match (`None`: the ref does not exist).
#[derive(Debug, Clone)]
pub struct RefState(Option<(CommitId, UpdateVersion)>);

impl RefState {
    /// The ref's commit, if it exists.
    pub fn commit(&self) -> Option<CommitId> {
        self.0.as_ref().map(|(c, _)| *c)
    }
}

fn check_ref_name(name: &str) -> Result<(), RemoteError> {
    let ok = name.starts_with("refs/")
        && name.len() <= 1024
        && !name
            .split('/')
            .any(|p| p.is_empty() || p == "." || p == ".." || p.contains('\\'));
    if ok {
        Ok(())
    } else {
        Err(protocol(format!("bad ref name {name:?}")))
    }
}

impl S3Remote {
    /// First half of [`Remote::update_ref`]: read a ref and its version.
    pub fn read_ref_state(&mut self, name: &str) -> Result<RefState, RemoteError> {
        check_ref_name(name)?;
        let key = self.key(name);
        self.rt
            .block_on(Self::read_ref(&self.store, &key, name))
            .map(RefState)
    }

    /// Second half of [`Remote::update_ref`]: move the ref from `seen` to
    /// `new` with a conditional write (create-if-absent, or if-match on the
    /// version read). Refused with `NonFastForward` unless `seen` is an
    /// ancestor of `new` or `force`; with `RefMoved` when the ref changed
    /// since `seen` was read; with `NotFound` when `new` is not stored.
    pub fn write_ref_if(
        &mut self,
        name: &str,
        seen: RefState,
        new: CommitId,
        force: bool,
    ) -> Result<(), RemoteError> {
        check_ref_name(name)?;
        let key = self.key(name);
        let new_key = self.object_key(&new.0);
        self.rt.block_on(async {
            match self.store.head(&new_key).await {
                Ok(_) => {}
                Err(object_store::Error::NotFound { .. }) => {
                    return Err(RemoteError::MissingObject {
                        url: self.url.clone(),
                        id: new.0,
                    })
                }
                Err(e) => return Err(store_err("look for the new commit in", e)),
            }
            if let Some(old) = seen.commit() {
                if !force && !self.is_ancestor(old, new).await? {
                    return Err(RemoteError::NonFastForward {
                        name: name.to_string(),
                    });
                }
            }
            let mode = match seen.0 {
                None => PutMode::Create,
                Some((_, v)) => PutMode::Update(v),
            };
            let opts = PutOptions {
                mode,
                ..PutOptions::default()
            };
            let body = PutPayload::from(format!("{new}\n").into_bytes());
            match self.store.put_opts(&key, body, opts).await {
                Ok(_) => Ok(()),
                Err(object_store::Error::AlreadyExists { .. })
                | Err(object_store::Error::Precondition { .. }) => Err(RemoteError::RefMoved {
                    name: name.to_string(),
                }),
                Err(e) => Err(store_err("write a ref to", e)),
            }
        })
    }
}

impl Remote for S3Remote {
    fn url(&self) -> String {
        self.url.clone()
    }

    fn list_refs(&mut self) -> Result<Vec<(String, CommitId)>, RemoteError> {
        let refs_root = self.key("refs");
        let root_text = format!("{}/", refs_root.as_ref());
        let store = self.store.clone();
        self.rt.block_on(async move {
            let mut listing = store.list(Some(&refs_root));
            let mut keys = Vec::new();
            while let Some(meta) = listing.next().await {
                let meta = meta.map_err(|e| store_err("list refs in", e))?;
                keys.push(meta.location);
            }
            let mut out = Vec::new();
            let mut reads = futures::stream::iter(keys.into_iter().map(|k| {
                let store = store.clone();
                let root_text = root_text.clone();
                async move {
                    let name = format!(
                        "refs/{}",
                        k.as_ref()
                            .strip_prefix(root_text.as_str())
                            .unwrap_or(k.as_ref())
                    );
                    let v = Self::read_ref(&store, &k, &name).await?;
                    Ok::<_, RemoteError>(v.map(|(c, _)| (name, c)))
                }
            }))
            .buffer_unordered(PARALLEL);
            while let Some(r) = reads.next().await {
                if let Some(pair) = r? {
                    out.push(pair);
                }
            }
            out.sort();
            Ok(out)
        })
    }

    fn has(&mut self, ids: &[ObjectId]) -> Result<Vec<bool>, RemoteError> {
        let keys: Vec<StorePath> = ids.iter().map(|id| self.object_key(id)).collect();
        let store = self.store.clone();
        self.rt.block_on(async move {
            futures::stream::iter(keys.into_iter().map(|k| {
                let store = store.clone();
                async move {
                    match store.head(&k).await {
                        Ok(_) => Ok(true),
                        Err(object_store::Error::NotFound { .. }) => Ok(false),
                        Err(e) => Err(store_err("look for an object in", e)),
                    }
                }
            }))
            .buffered(PARALLEL)
            .collect::<Vec<_>>()
            .await
            .into_iter()
            .collect()
        })
    }

    fn get(
        &mut self,
        ids: &[ObjectId],
        sink: &mut dyn FnMut(WireObject) -> Result<(), RemoteError>,
    ) -> Result<(), RemoteError> {
        let wanted: HashSet<ObjectId> = ids.iter().copied().collect();
        let jobs: Vec<(StorePath, Option<StorePath>, ObjectId)> = ids
            .iter()
            .map(|id| (self.object_key(id), Some(self.absent_key(id)), *id))
            .collect();
        let store = self.store.clone();
        self.rt.block_on(async move {
            // Each read runs as its own task, so the next PARALLEL objects
            // keep arriving (and decoding) while the importer holds this
            // thread; `buffered` still hands them on in request order and
            // starts a read only when one is taken (memory: PARALLEL
            // objects).
            let mut stream = futures::stream::iter(jobs.into_iter().map(|(k, a, id)| {
                let task = tokio::spawn(Self::fetch_object(store.clone(), k, a, id));
                async move {
                    task.await.unwrap_or_else(|e| {
                        Err(protocol(format!("the task reading an object failed: {e}")))
                    })
                }
            }))
            .buffered(PARALLEL);
            // Bases first: an object whose base (delta base or chunk list)
            // is also requested but not yet delivered waits for it.
            let mut sent: HashSet<ObjectId> = HashSet::new();
            let mut waiting: HashMap<ObjectId, Vec<WireObject>> = HashMap::new();
            while let Some(obj) = stream.next().await {
                let obj = obj?;
                let dep = match &obj.body {
                    WireBody::Delta { base, .. } => Some(*base),
                    WireBody::Chunked { list } => Some(*list),
                    WireBody::Record { .. } | WireBody::Absent { .. } => None,
                };
                if let Some(d) = dep {
                    if wanted.contains(&d) && !sent.contains(&d) {
                        waiting.entry(d).or_default().push(obj);
                        continue;
                    }
                }
                let mut ready = vec![obj];
                while let Some(o) = ready.pop() {
                    let id = o.id;
                    sink(o)?;
                    sent.insert(id);
                    if let Some(more) = waiting.remove(&id) {
                        ready.extend(more);
                    }
                }
            }
            if let Some((base, _)) = waiting.into_iter().next() {
                return Err(protocol(format!(
                    "object {base} was requested but never delivered"
                )));
            }
            Ok(())
        })
    }

    fn put(
        &mut self,
        objects: &mut dyn Iterator<Item = Result<WireObject, RemoteError>>,
    ) -> Result<(), RemoteError> {
        let store = self.store.clone();
        let this = &*self;
        this.rt.block_on(async {
            let mut pending = FuturesUnordered::new();
            for obj in objects {
                let obj = obj?;
                let key = if obj.is_absent() {
                    this.absent_key(&obj.id)
                } else {
                    this.object_key(&obj.id)
                };
                let bytes = frame::encode_one(&obj);
                let store = store.clone();
                // A task of its own: the upload goes on while this thread
                // reads and frames the next objects.
                let task = tokio::spawn(async move {
                    store
                        .put(&key, PutPayload::from(bytes))
                        .await
                        .map_err(|e| store_err("write an object to", e))
                });
                pending.push(async move {
                    task.await.unwrap_or_else(|e| {
                        Err(protocol(format!("the task writing an object failed: {e}")))
                    })
                });
                while pending.len() >= PARALLEL {
                    if let Some(r) = pending.next().await {
                        r?;
                    }
                }
            }
            while let Some(r) = pending.next().await {
                r?;
            }
            Ok(())
        })
    }

    fn update_ref(
        &mut self,
        name: &str,
        expected: Option<CommitId>,
        new: CommitId,
        force: bool,
    ) -> Result<(), RemoteError> {
        let seen = self.read_ref_state(name)?;
        if seen.commit() != expected {
            return Err(RemoteError::RefMoved {
                name: name.to_string(),
            });
        }
        self.write_ref_if(name, seen, new, force)
    }
}
