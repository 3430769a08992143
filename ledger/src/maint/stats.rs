//! Counts and sizes, and the commit-field index query.

use rusqlite::params;

use crate::error::{db_err, Result};
use crate::id::{CommitId, ObjectId};
use crate::store::Ledger;

use super::*;

impl Ledger {
    /// Counts and sizes.
    pub fn stats(&self) -> Result<Stats> {
        let q = |sql: &str| -> Result<u64> {
            self.db
                .query_row(sql, [], |r| r.get::<_, Option<i64>>(0))
                .map(|v| v.unwrap_or(0) as u64)
                .map_err(db_err("computing stats"))
        };
        Ok(Stats {
            objects: q("SELECT COUNT(*) FROM objects")?,
            commits: q("SELECT COUNT(*) FROM commits")?,
            packs: q("SELECT COUNT(*) FROM packs")?,
            logical_bytes: q("SELECT SUM(logical_bytes) FROM commits")?,
            stored_bytes: dir_size(&self.dir),
            pack_bytes: dir_size(&self.packs_dir()),
            unique_bytes: q(
                "SELECT SUM(raw_len) FROM objects WHERE encoding IN (1, 3) AND kind = 1",
            )?,
            delta_objects: q("SELECT COUNT(*) FROM objects WHERE encoding = 3")?,
            delta_logical_bytes: q("SELECT SUM(raw_len) FROM objects WHERE encoding = 3")?,
            delta_stored_bytes: q("SELECT SUM(stored_len) FROM objects WHERE encoding = 3")?,
            record_stored_bytes: q("SELECT SUM(stored_len) FROM objects WHERE encoding IN (1, 3)")?,
            pruned_files: self.pruned_files()?.len() as u64,
        })
    }

    /// Commits whose indexed field `key` equals `value`, newest first.
    pub fn commits_with_field(
        &self,
        key: &str,
        value: &crate::object::FieldValue,
    ) -> Result<Vec<CommitId>> {
        let v = field_sql(value);
        let mut st = self
            .db
            .prepare("SELECT f.commit_id FROM commit_fields f JOIN commits c ON c.id = f.commit_id WHERE f.key = ?1 AND f.value = ?2 ORDER BY c.time DESC, c.id")
            .map_err(db_err("querying fields"))?;
        let rows = st
            .query_map(params![key, v], |r| r.get::<_, Vec<u8>>(0))
            .map_err(db_err("querying fields"))?;
        let mut out = Vec::new();
        for r in rows {
            if let Some(id) = ObjectId::from_slice(&r.map_err(db_err("querying fields"))?) {
                out.push(CommitId(id));
            }
        }
        Ok(out)
    }
}

/// A field value as the catalog stores it.
pub(super) fn field_sql(value: &crate::object::FieldValue) -> rusqlite::types::Value {
    use crate::object::FieldValue as F;
    match value {
        F::Str(s) => s.clone().into(),
        F::Int(i) => (*i).into(),
        F::Float(f) => (*f).into(),
        F::Bool(b) => i64::from(*b).into(),
    }
}
