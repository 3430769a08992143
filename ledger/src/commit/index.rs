//! The commit transaction: the commit object, pack and object rows, the
//! commit index, and the ref move, in one IMMEDIATE transaction.

use rusqlite::{params, Connection};

use crate::catalog::{self, ImmediateTx};
use crate::error::{db_err, Error, Result};
use crate::id::{CommitId, TreeId};
use crate::object::{Commit, FieldValue, Kind};
use crate::refs::{self};
use crate::store::{Ledger, Staging};

use super::*;

impl Ledger {
    /// Sync data, then in one IMMEDIATE transaction: write the commit object
    /// (parented on the tip seen inside the transaction), register pack and
    /// rows, index the commit, move the ref.
    pub(super) fn finish_commit(
        &mut self,
        staging: &mut Staging,
        tree: TreeId,
        logical: u64,
        req: &CommitRequest,
        expected_tip: Option<CommitId>,
    ) -> Result<CommitOutcome> {
        staging.sync()?;
        let refname = self.branch_ref_for(req)?;
        let time = req.time.unwrap_or_else(refs::now);
        let this = &*self;
        // IMMEDIATE: the catalog write lock is held from the tip read to the
        // ref update, which makes the compare-and-swap atomic.
        let tx = ImmediateTx::begin(&this.db)?;
        let cur = if refname == "HEAD" {
            refs::read_head(&tx)?.commit()
        } else {
            refs::ref_target(&tx, &refname)?
        };
        if cur != expected_tip && req.on_moved == OnMoved::Fail {
            return Err(Error::BranchMoved {
                name: refname,
                expected: expected_tip
                    .map(|c| c.to_string())
                    .unwrap_or("(none)".into()),
                found: cur.map(|c| c.to_string()).unwrap_or("(none)".into()),
            });
        }
        let parent = match cur {
            Some(c) => Some(c),
            // A new branch forks from HEAD's commit.
            None if req.branch.is_some() && !req.orphan => refs::read_head(&tx)?.commit(),
            None => None,
        };
        let commit = Commit {
            tree,
            parents: parent.into_iter().collect(),
            author: req.author.clone(),
            time,
            message: req.message.clone(),
            metadata: req.metadata.clone(),
            fields: req.fields.clone(),
        };
        let enc = commit
            .encode()
            .map_err(|message| Error::InvalidInput { message })?;
        let cid = CommitId(staging.put(this, Kind::Commit, &enc)?);
        staging.sync()?;
        let pack_name = staging.pack.as_ref().map(|p| p.name().to_string());
        catalog::insert_staged(&tx, pack_name.as_deref(), &staging.rows)?;
        index_commit(&tx, &cid, &commit, logical)?;
        let first_line = req.message.lines().next().unwrap_or("");
        refs::cas(
            &tx,
            &refname,
            Some(cur),
            Some(cid),
            &format!("commit: {first_line}"),
        )?;
        for m in &req.also_move {
            refs::cas(&tx, &m.name, Some(m.expected), Some(cid), &m.message)?;
        }
        tx.commit()?;
        let new_objects = staging.rows.len() as u64;
        let pack_bytes = staging.pack_len();
        Ok(CommitOutcome {
            commit: cid,
            tree,
            parents: commit.parents,
            refname,
            files: 0,
            logical_bytes: logical,
            new_objects,
            pack_bytes,
            base_pieces_from_files: 0,
        })
    }
}

/// Add a commit to the catalog's commit index (idempotent).
pub(crate) fn index_commit(
    conn: &Connection,
    id: &CommitId,
    c: &Commit,
    logical: u64,
) -> Result<()> {
    let idb = id.0.as_bytes().as_slice();
    // A copy of small commits' bytes lets history listings stay in the
    // catalog (readers verify it against the id; FORMAT.md "Commit index").
    let body = c
        .encode()
        .ok()
        .filter(|b| b.len() <= crate::catalog::MAX_INDEXED_BODY);
    conn.prepare_cached(
        "INSERT OR IGNORE INTO commits(id, tree, time, author, message, logical_bytes) VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
    )
    .and_then(|mut st| {
        st.execute(params![idb, c.tree.0.as_bytes().as_slice(), c.time, c.author, c.message, logical as i64])
    })
    .map_err(db_err("indexing a commit"))?;
    if let Some(body) = body {
        conn.prepare_cached("INSERT OR IGNORE INTO commit_bodies(id, body) VALUES (?1, ?2)")
            .and_then(|mut st| st.execute(params![idb, body]))
            .map_err(db_err("indexing a commit"))?;
    }
    for (i, p) in c.parents.iter().enumerate() {
        conn.execute(
            "INSERT OR IGNORE INTO commit_parents(commit_id, idx, parent) VALUES (?1, ?2, ?3)",
            params![idb, i as i64, p.0.as_bytes().as_slice()],
        )
        .map_err(db_err("indexing a commit"))?;
    }
    for (k, v) in &c.fields {
        let (ty, val): (&str, rusqlite::types::Value) = match v {
            FieldValue::Str(s) => ("str", s.clone().into()),
            FieldValue::Int(i) => ("int", (*i).into()),
            FieldValue::Float(f) => ("float", (*f).into()),
            FieldValue::Bool(b) => ("bool", i64::from(*b).into()),
        };
        conn.execute(
            "INSERT OR IGNORE INTO commit_fields(commit_id, key, type, value) VALUES (?1, ?2, ?3, ?4)",
            params![idb, k, ty, val],
        )
        .map_err(db_err("indexing a commit"))?;
    }
    Ok(())
}
