//! Appending a chain of commits in one pack segment and one transaction:
//! for importers, tests and benchmarks that need long histories without one
//! fsync round per commit.

use crate::catalog;
use crate::catalog::ImmediateTx;
use crate::commit::{index_commit, CommitRequest};
use crate::error::{Error, Result};
use crate::id::{CommitId, TreeId};
use crate::object::{Commit, Kind, Mode};
use crate::refs::{self, Head};
use crate::store::{Ledger, Staging};

impl Ledger {
    /// Append one commit per request, each recording `tree` (which must be
    /// stored already, e.g. by an earlier [`Ledger::commit_dir`]), as a
    /// first-parent chain on the branch HEAD is attached to (or on detached
    /// HEAD). Only `message`, `author`, `time`, `metadata` and `fields` of a
    /// request are used. The commit objects go into one new segment, which
    /// is fsynced before one IMMEDIATE transaction registers it, indexes the
    /// commits and moves the ref once (one reflog entry for the chain), so a
    /// crash leaves either the old tip or the whole chain. Returns the new
    /// commits, oldest first.
    pub fn commit_chain(
        &mut self,
        tree: TreeId,
        requests: impl IntoIterator<Item = CommitRequest>,
    ) -> Result<Vec<CommitId>> {
        let logical: u64 = self
            .walk_files(&tree)?
            .iter()
            .filter(|f| f.mode != Mode::Symlink)
            .map(|f| f.size)
            .sum();
        let mut staging = Staging::new(self);
        let this = &*self;
        let tx = ImmediateTx::begin(&this.db)?;
        let (refname, tip) = match refs::read_head(&tx)? {
            Head::Branch { name, commit } => (name, commit),
            Head::Detached { commit } => ("HEAD".to_string(), Some(commit)),
        };
        let mut parent = tip;
        let mut made = Vec::new();
        let mut commits = Vec::new();
        for req in requests {
            let commit = Commit {
                tree,
                parents: parent.into_iter().collect(),
                author: req.author,
                time: req.time.unwrap_or_else(refs::now),
                message: req.message,
                metadata: req.metadata,
                fields: req.fields,
            };
            let enc = commit
                .encode()
                .map_err(|message| Error::InvalidInput { message })?;
            let id = CommitId(staging.put(this, Kind::Commit, &enc)?);
            parent = Some(id);
            made.push(id);
            commits.push((id, commit));
        }
        let Some(last) = parent.filter(|_| !made.is_empty()) else {
            return Ok(made);
        };
        staging.sync()?;
        let pack_name = staging.pack.as_ref().map(|p| p.name().to_string());
        catalog::insert_staged(&tx, pack_name.as_deref(), &staging.rows)?;
        for (id, c) in &commits {
            index_commit(&tx, id, c, logical)?;
        }
        refs::cas(
            &tx,
            &refname,
            Some(tip),
            Some(last),
            &format!("commit chain: {} commits", made.len()),
        )?;
        tx.commit()?;
        Ok(made)
    }
}
