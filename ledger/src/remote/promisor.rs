//! The promisor layer of a partial clone: files a `--filter` left on the
//! remote are fetched when something reads them, through a
//! [`RemoteOpener`] the caller gives (it opens the remote with the caller's
//! credentials and options; the ledger reads no environment), and verified
//! on arrival like any fetched object. See [`crate::layers`] for how the
//! layers stack.

use std::cell::{Cell, RefCell};
use std::io::Write;
use std::path::PathBuf;
use std::sync::atomic::AtomicBool;

use super::{transfer, Remote, RemoteConfig, RemoteError};
use crate::error::{Error, Result};
use crate::id::ObjectId;
use crate::progress::{NoProgress, Progress};
use crate::source::ObjectSource;
use crate::store::Ledger;

/// Opens a remote by URL with the caller's credentials and options (a
/// token for `bat serve`, endpoint and keys for S3, ...). Any
/// `Fn(&str) -> Result<Box<dyn Remote>, RemoteError> + Send` is one.
pub trait RemoteOpener: Send {
    /// Open the remote at `url`.
    fn open(&self, url: &str) -> std::result::Result<Box<dyn Remote>, RemoteError>;
}

impl<F> RemoteOpener for F
where
    F: Fn(&str) -> std::result::Result<Box<dyn Remote>, RemoteError> + Send,
{
    fn open(&self, url: &str) -> std::result::Result<Box<dyn Remote>, RemoteError> {
        self(url)
    }
}

/// The layer below the packs in a partial clone. The remote is opened on
/// the first miss and kept for the handle's life; fetched objects are
/// stored through a second handle on the same ledger (reads take `&self`,
/// storing needs a writer), whose rows the reading handle sees at once.
pub struct Promisor {
    dir: PathBuf,
    remote_name: String,
    url: String,
    opener: Box<dyn RemoteOpener>,
    remote: RefCell<Option<Box<dyn Remote>>>,
    store: RefCell<Option<Ledger>>,
    fetched: Cell<u64>,
}

impl std::fmt::Debug for Promisor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Promisor")
            .field("remote", &self.remote_name)
            .field("url", &self.url)
            .field("fetched", &self.fetched.get())
            .finish()
    }
}

impl Promisor {
    fn new(dir: PathBuf, cfg: RemoteConfig, opener: Box<dyn RemoteOpener>) -> Promisor {
        Promisor {
            dir,
            remote_name: cfg.name,
            url: cfg.url,
            opener,
            remote: RefCell::new(None),
            store: RefCell::new(None),
            fetched: Cell::new(0),
        }
    }

    /// The promisor remote's URL.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// A remote failure as a ledger error naming the object and remote.
    fn fail(&self, id: ObjectId, e: RemoteError) -> Error {
        match e {
            RemoteError::Ledger(le) => le,
            RemoteError::Cancelled => Error::Cancelled,
            other => Error::PromisorFetch {
                id,
                remote: self.remote_name.clone(),
                source: Box::new(other),
            },
        }
    }

    /// Run `f` with the writing handle and the open remote, opening either
    /// on first use.
    fn with_remote<T>(
        &self,
        id: ObjectId,
        f: impl FnOnce(&mut Ledger, &mut dyn Remote) -> std::result::Result<T, RemoteError>,
    ) -> Result<T> {
        let mut store = self.store.borrow_mut();
        if store.is_none() {
            *store = Some(Ledger::open(&self.dir)?);
        }
        let mut remote = self.remote.borrow_mut();
        if remote.is_none() {
            *remote = Some(self.opener.open(&self.url).map_err(|e| self.fail(id, e))?);
        }
        let (Some(l), Some(r)) = (store.as_mut(), remote.as_mut()) else {
            unreachable!("both were just filled");
        };
        f(l, r.as_mut()).map_err(|e| self.fail(id, e))
    }
}

impl ObjectSource for Promisor {
    fn has(&self, id: &ObjectId) -> Result<bool> {
        self.with_remote(*id, |l, r| {
            if l.contains(id)? {
                return Ok(true);
            }
            Ok(r.has(&[*id])?.first().copied().unwrap_or(false))
        })
    }

    fn read_bytes_to(
        &self,
        id: &ObjectId,
        out: &mut dyn Write,
        cancel: &AtomicBool,
    ) -> Result<u64> {
        self.prefetch(&[*id], &NoProgress, cancel)?;
        let store = self.store.borrow();
        let l = store.as_ref().expect("prefetch opened the store");
        l.packs().read_bytes_to(id, out, cancel)
    }

    fn prefetch(
        &self,
        ids: &[ObjectId],
        progress: &dyn Progress,
        cancel: &AtomicBool,
    ) -> Result<u64> {
        let Some(first) = ids.first() else {
            return Ok(0);
        };
        let n = self.with_remote(*first, |l, r| {
            let mut want = Vec::new();
            for id in ids {
                if !l.contains(id)? && !want.contains(id) {
                    want.push(*id);
                }
            }
            transfer::fetch_files(l, r, &want, progress, cancel)?;
            Ok(want.len() as u64)
        })?;
        self.fetched.set(self.fetched.get() + n);
        Ok(n)
    }

    fn fetched(&self) -> u64 {
        self.fetched.get()
    }
}

impl Ledger {
    /// Give this handle a way to open remotes. In a partial clone (a
    /// promisor remote is configured) reads of promised files then fetch
    /// them from that remote through `opener`, verified on arrival; in a
    /// full clone nothing changes. Returns whether a promisor layer was
    /// installed.
    pub fn set_remote_opener(&mut self, opener: impl RemoteOpener + 'static) -> Result<bool> {
        self.promisor = match self.promisor()? {
            Some(cfg) => Some(Box::new(Promisor::new(
                self.dir.clone(),
                cfg,
                Box::new(opener),
            ))),
            None => None,
        };
        Ok(self.promisor.is_some())
    }

    /// Files this handle fetched from its promisor remote so far.
    pub fn fetched_on_demand(&self) -> u64 {
        self.promisor.as_ref().map_or(0, |p| p.fetched())
    }

    /// The promisor layer, when one is installed.
    pub(crate) fn promisor_layer(&self) -> Option<&dyn ObjectSource> {
        self.promisor.as_deref().map(|p| p as &dyn ObjectSource)
    }
}
