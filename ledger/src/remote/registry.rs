//! Named remotes and partial-clone settings, kept in the catalog's `meta`
//! table under `config.` keys (so they change transactionally and travel
//! with the ledger directory, never with a transfer).

use rusqlite::params;
use serde::Serialize;

use crate::error::{db_err, Error, Result};
use crate::id::{CommitId, ObjectId};
use crate::refs::validate_ref_name;
use crate::store::Ledger;

/// One registered remote.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RemoteConfig {
    /// Its name (`origin`, …).
    pub name: String,
    /// Where it is: a directory, a bundle file, `http(s)://…`, `s3://…`.
    pub url: String,
    /// True when this ledger is a partial clone of it: files the filter
    /// left behind are promised by this remote (fetched on demand).
    pub promisor: bool,
    /// The partial-clone filter, if any (e.g. `no-checkpoints`).
    pub filter: Option<String>,
}

const PREFIX: &str = "config.";

impl Ledger {
    /// A configuration value.
    pub fn config_get(&self, key: &str) -> Result<Option<String>> {
        use rusqlite::OptionalExtension;
        self.db
            .query_row(
                "SELECT value FROM meta WHERE key = ?1",
                [format!("{PREFIX}{key}")],
                |r| r.get(0),
            )
            .optional()
            .map_err(db_err("reading configuration"))
    }

    /// Set (or with `None` remove) a configuration value.
    pub fn config_set(&mut self, key: &str, value: Option<&str>) -> Result<()> {
        let k = format!("{PREFIX}{key}");
        self.write_tx(|c| {
            match value {
                Some(v) => c.execute(
                    "INSERT INTO meta(key, value) VALUES (?1, ?2) ON CONFLICT(key) DO UPDATE SET value = excluded.value",
                    params![k, v],
                ),
                None => c.execute("DELETE FROM meta WHERE key = ?1", [&k]),
            }
            .map_err(db_err("writing configuration"))?;
            Ok(())
        })
    }

    /// Configuration entries whose key starts with `prefix`, sorted.
    pub fn config_list(&self, prefix: &str) -> Result<Vec<(String, String)>> {
        let lo = format!("{PREFIX}{prefix}");
        let hi = format!("{lo}\u{10FFFF}");
        let mut st = self
            .db
            .prepare("SELECT key, value FROM meta WHERE key >= ?1 AND key < ?2 ORDER BY key")
            .map_err(db_err("reading configuration"))?;
        let rows = st
            .query_map(params![lo, hi], |r| {
                Ok((r.get::<_, String>(0)?, r.get::<_, String>(1)?))
            })
            .map_err(db_err("reading configuration"))?;
        let mut out = Vec::new();
        for r in rows {
            let (k, v) = r.map_err(db_err("reading configuration"))?;
            out.push((k[PREFIX.len()..].to_string(), v));
        }
        Ok(out)
    }

    /// Every ref with a commit, full names, plus `HEAD` when it resolves.
    pub fn all_refs(&self) -> Result<Vec<(String, CommitId)>> {
        let mut st = self
            .db
            .prepare("SELECT name, target FROM refs WHERE target IS NOT NULL AND name != 'HEAD' ORDER BY name")
            .map_err(db_err("listing refs"))?;
        let rows = st
            .query_map([], |r| {
                Ok((r.get::<_, String>(0)?, r.get::<_, Vec<u8>>(1)?))
            })
            .map_err(db_err("listing refs"))?;
        let mut out = Vec::new();
        for r in rows {
            let (n, t) = r.map_err(db_err("listing refs"))?;
            if let Some(id) = ObjectId::from_slice(&t) {
                out.push((n, CommitId(id)));
            }
        }
        if let Some(c) = self.head()?.commit() {
            out.push(("HEAD".into(), c));
        }
        Ok(out)
    }

    /// Register a remote; fails if the name is taken.
    pub fn add_remote(&mut self, name: &str, url: &str) -> Result<()> {
        validate_remote_name(name)?;
        if self.config_get(&format!("remote.{name}.url"))?.is_some() {
            return Err(Error::InvalidInput {
                message: format!("remote {name:?} already exists"),
            });
        }
        if url.is_empty() || url.contains('\n') {
            return Err(Error::InvalidInput {
                message: "a remote URL must be one non-empty line".into(),
            });
        }
        self.config_set(&format!("remote.{name}.url"), Some(url))
    }

    /// Forget a remote (its remote-tracking refs are deleted too).
    pub fn remove_remote(&mut self, name: &str) -> Result<()> {
        if self.config_get(&format!("remote.{name}.url"))?.is_none() {
            return Err(Error::InvalidInput {
                message: format!("no remote named {name:?}"),
            });
        }
        let prefix = format!("refs/remotes/{name}/");
        let tracking: Vec<(String, CommitId)> = self
            .all_refs()?
            .into_iter()
            .filter(|(n, _)| n.starts_with(&prefix))
            .collect();
        for (n, c) in tracking {
            self.update_ref(&n, Some(c), None, &format!("remote: removed {name}"))?;
        }
        for (k, _) in self.config_list(&format!("remote.{name}."))? {
            self.config_set(&k, None)?;
        }
        Ok(())
    }

    /// All registered remotes, by name.
    pub fn remotes(&self) -> Result<Vec<RemoteConfig>> {
        let mut out: Vec<RemoteConfig> = Vec::new();
        for (k, v) in self.config_list("remote.")? {
            let Some((name, field)) = k["remote.".len()..].rsplit_once('.') else {
                continue;
            };
            if out.last().is_none_or(|r| r.name != name) {
                out.push(RemoteConfig {
                    name: name.to_string(),
                    url: String::new(),
                    promisor: false,
                    filter: None,
                });
            }
            let r = out.last_mut().expect("pushed above");
            match field {
                "url" => r.url = v,
                "promisor" => r.promisor = v == "true",
                "filter" => r.filter = Some(v),
                _ => {}
            }
        }
        Ok(out.into_iter().filter(|r| !r.url.is_empty()).collect())
    }

    /// One remote by name.
    pub fn remote_config(&self, name: &str) -> Result<Option<RemoteConfig>> {
        Ok(self.remotes()?.into_iter().find(|r| r.name == name))
    }

    /// Mark this ledger a partial clone of `name` with `filter`.
    pub fn set_promisor(&mut self, name: &str, filter: &str) -> Result<()> {
        self.config_set(&format!("remote.{name}.promisor"), Some("true"))?;
        self.config_set(&format!("remote.{name}.filter"), Some(filter))
    }

    /// The remote that promises filtered-out files, if this is a partial
    /// clone.
    pub fn promisor(&self) -> Result<Option<RemoteConfig>> {
        Ok(self.remotes()?.into_iter().find(|r| r.promisor))
    }
}

/// A remote name: like a branch name without `/`.
pub fn validate_remote_name(name: &str) -> Result<()> {
    validate_ref_name(name)?;
    if name.contains('/') {
        return Err(Error::InvalidRefName {
            name: name.into(),
            reason: "a remote name must not contain '/'",
        });
    }
    Ok(())
}
