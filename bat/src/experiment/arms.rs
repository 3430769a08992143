//! Arm groups: one arm named on the command line, resolved to the
//! branches (or revisions) that are its seeds.
//!
//! An arm is written in one of three ways:
//! - a glob over branch names, `'bat/*'`: every branch it matches, sorted
//!   by name (local branches first, then remote-tracking branches such as
//!   `origin/bat/s0`, which `'origin/bat/*'` matches). `*` matches any run of characters except `/`, `?` one
//!   character except `/`; a pattern containing neither is not a glob.
//! - a comma list, `bat/s0,bat/s1`: each item a branch, tag or revision.
//! - one branch, tag or revision (`bat`, `r04`, `HEAD~2`): a group of one.
//!
//! A group is one arm of an experiment and its members are the arm's
//! seeds: statistics pool the members' runs (see [`super::stats`]).

use bat_ledger::{CommitId, Ledger};
use serde::Serialize;

use super::ExperimentError;
use crate::round::resolve_rev;

const HEADS: &str = "refs/heads/";
const REMOTES: &str = "refs/remotes/";

/// An arm as written, parsed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ArmSpec {
    /// A glob over branch names.
    Glob(String),
    /// A comma list of branches, tags or revisions (two or more).
    List(Vec<String>),
    /// One branch, tag or revision.
    One(String),
}

impl ArmSpec {
    /// Parse an arm as written on the command line. Whitespace around list
    /// items is ignored; an empty spec or an empty item is an error.
    pub fn parse(given: &str) -> Result<ArmSpec, ExperimentError> {
        let empty = || ExperimentError::EmptySpec {
            given: given.to_string(),
        };
        let given_t = given.trim();
        if given_t.is_empty() {
            return Err(empty());
        }
        if given_t.contains(',') {
            let items: Vec<String> = given_t.split(',').map(|s| s.trim().to_string()).collect();
            if items.iter().any(String::is_empty) {
                return Err(empty());
            }
            return Ok(ArmSpec::List(items));
        }
        if is_glob(given_t) {
            Ok(ArmSpec::Glob(given_t.to_string()))
        } else {
            Ok(ArmSpec::One(given_t.to_string()))
        }
    }

    /// The spec written back (`bat/*`, `a,b`, `main`).
    pub fn text(&self) -> String {
        match self {
            ArmSpec::Glob(p) | ArmSpec::One(p) => p.clone(),
            ArmSpec::List(v) => v.join(","),
        }
    }

    /// The arm's label in tables: a glob's fixed prefix without its
    /// trailing `/` (`bat/*` → `bat`), otherwise the spec as written.
    pub fn label(&self) -> String {
        match self {
            ArmSpec::Glob(p) => {
                let fixed = &p[..p.find(['*', '?']).unwrap_or(p.len())];
                let fixed = fixed.trim_end_matches(['/', '-', '_', '.']);
                if fixed.is_empty() {
                    p.clone()
                } else {
                    fixed.to_string()
                }
            }
            _ => self.text(),
        }
    }
}

/// Whether `s` contains a glob wildcard.
fn is_glob(s: &str) -> bool {
    s.contains(['*', '?'])
}

/// Whether `name` matches `pattern` (`*`: any run of non-`/` characters,
/// `?`: one non-`/` character, anything else itself).
pub fn glob_matches(pattern: &str, name: &str) -> bool {
    let p: Vec<char> = pattern.chars().collect();
    let n: Vec<char> = name.chars().collect();
    // Classic two-pointer match with one backtrack point per `*`; a `*`
    // may not swallow `/`, so backtracking stops at one.
    let (mut pi, mut ni) = (0usize, 0usize);
    let mut star: Option<(usize, usize)> = None;
    while ni < n.len() {
        if pi < p.len() && (p[pi] == n[ni] || (p[pi] == '?' && n[ni] != '/')) && p[pi] != '*' {
            pi += 1;
            ni += 1;
        } else if pi < p.len() && p[pi] == '*' {
            star = Some((pi, ni));
            pi += 1;
        } else if let Some((sp, sn)) = star {
            if n[sn] == '/' {
                return false;
            }
            star = Some((sp, sn + 1));
            pi = sp + 1;
            ni = sn + 1;
        } else {
            return false;
        }
    }
    p[pi..].iter().all(|&c| c == '*')
}

/// One member of an arm: a seed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ArmMember {
    /// The branch (or revision) as named.
    pub name: String,
    /// The commit it resolved to.
    pub head: CommitId,
}

/// One arm: its label and its members (seeds), in a stable order.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ArmGroup {
    /// The label shown in tables ([`ArmSpec::label`]).
    pub label: String,
    /// The spec as written.
    pub spec: String,
    /// The members, sorted by name for a glob, in the given order for a list.
    pub members: Vec<ArmMember>,
}

/// The ledger's branch names, sorted.
pub fn branch_names(ledger: &Ledger) -> Result<Vec<String>, ExperimentError> {
    Ok(ledger
        .list_refs(HEADS)?
        .into_iter()
        .map(|(n, _)| n)
        .collect())
}

/// Resolve `spec` against the ledger's branches and revisions.
pub fn resolve(ledger: &Ledger, spec: &ArmSpec) -> Result<ArmGroup, ExperimentError> {
    let one = |name: &str| -> Result<ArmMember, ExperimentError> {
        let head = resolve_rev(ledger, name).map_err(|_| ExperimentError::UnknownRevision {
            arm: spec.text(),
            name: name.to_string(),
        })?;
        Ok(ArmMember {
            name: name.to_string(),
            head,
        })
    };
    let members = match spec {
        ArmSpec::One(name) => vec![one(name)?],
        ArmSpec::List(names) => {
            let mut out: Vec<ArmMember> = Vec::with_capacity(names.len());
            for name in names {
                if out.iter().any(|m| &m.name == name) {
                    return Err(ExperimentError::DuplicateMember {
                        arm: spec.text(),
                        name: name.clone(),
                    });
                }
                out.push(one(name)?);
            }
            out
        }
        ArmSpec::Glob(pattern) => {
            // Local branches, then remote-tracking ones (`origin/bat/s0`):
            // `*` stops at `/`, so `bat/*` matches only local branches and
            // `origin/bat/*` only the seeds fetched from `origin`.
            let mut refs = ledger.list_refs(HEADS)?;
            refs.extend(ledger.list_refs(REMOTES)?);
            let out: Vec<ArmMember> = refs
                .iter()
                .filter(|(n, _)| glob_matches(pattern, n))
                .map(|(n, id)| ArmMember {
                    name: n.clone(),
                    head: *id,
                })
                .collect();
            if out.is_empty() {
                return Err(ExperimentError::NoMatch {
                    pattern: pattern.clone(),
                    branches: refs.into_iter().map(|(n, _)| n).collect(),
                });
            }
            out
        }
    };
    Ok(ArmGroup {
        label: spec.label(),
        spec: spec.text(),
        members,
    })
}

/// Parse and resolve in one step.
pub fn resolve_str(ledger: &Ledger, given: &str) -> Result<ArmGroup, ExperimentError> {
    resolve(ledger, &ArmSpec::parse(given)?)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicBool;

    #[test]
    fn parse_tells_the_three_forms_apart() {
        assert_eq!(
            ArmSpec::parse("bat/*").unwrap(),
            ArmSpec::Glob("bat/*".into())
        );
        assert_eq!(
            ArmSpec::parse("a, b").unwrap(),
            ArmSpec::List(vec!["a".into(), "b".into()])
        );
        assert_eq!(
            ArmSpec::parse("r04~1").unwrap(),
            ArmSpec::One("r04~1".into())
        );
        for bad in ["", "  ", "a,,b", "a,", ",a"] {
            assert!(
                matches!(ArmSpec::parse(bad), Err(ExperimentError::EmptySpec { .. })),
                "{bad:?}"
            );
        }
        assert_eq!(ArmSpec::parse("bat/*").unwrap().label(), "bat");
        assert_eq!(ArmSpec::parse("bat-s?").unwrap().label(), "bat-s");
        assert_eq!(ArmSpec::parse("bat-*").unwrap().label(), "bat");
        assert_eq!(ArmSpec::parse("*").unwrap().label(), "*");
        assert_eq!(ArmSpec::parse("a,b").unwrap().label(), "a,b");
    }

    #[test]
    fn glob_stars_stop_at_slashes() {
        assert!(glob_matches("bat/*", "bat/s0"));
        assert!(glob_matches("bat/s?", "bat/s1"));
        assert!(glob_matches("*/s0", "terminal/s0"));
        assert!(glob_matches("b*t/*", "bat/s0"));
        assert!(!glob_matches("bat/*", "bat/s0/x"));
        assert!(!glob_matches("bat*", "bat/s0"));
        assert!(!glob_matches("bat/*", "batx/s0"));
        assert!(!glob_matches("bat/s?", "bat/s10"));
        assert!(glob_matches("bat/*", "bat/"));
    }

    fn ledger_with(branches: &[&str]) -> (tempfile::TempDir, Ledger, CommitId) {
        let t = tempfile::tempdir().expect("temp dir");
        let data = t.path().join("data");
        std::fs::create_dir(&data).expect("data dir");
        std::fs::write(data.join("f.txt"), b"x").expect("file");
        let mut l = Ledger::init(&t.path().join("ledger")).expect("init");
        let out = l
            .commit_dir(
                &data,
                &bat_ledger::CommitRequest::new("one"),
                &bat_ledger::NoProgress,
                &AtomicBool::new(false),
            )
            .expect("commit");
        for b in branches {
            l.create_branch(b, out.commit).expect("branch");
        }
        (t, l, out.commit)
    }

    #[test]
    fn resolve_globs_lists_and_single_names() {
        let (_t, l, c) = ledger_with(&["bat/s1", "bat/s0", "terminal/s0", "bat/s0/x"]);
        let g = resolve_str(&l, "bat/*").unwrap();
        assert_eq!(g.label, "bat");
        let names: Vec<&str> = g.members.iter().map(|m| m.name.as_str()).collect();
        assert_eq!(names, ["bat/s0", "bat/s1"]);
        assert!(g.members.iter().all(|m| m.head == c));

        let g = resolve_str(&l, "terminal/s0,bat/s1").unwrap();
        let names: Vec<&str> = g.members.iter().map(|m| m.name.as_str()).collect();
        assert_eq!(names, ["terminal/s0", "bat/s1"]);

        let g = resolve_str(&l, "main").unwrap();
        assert_eq!(g.members.len(), 1);
        assert_eq!(g.members[0].head, c);
        let g = resolve_str(&l, &c.to_string()).unwrap();
        assert_eq!(g.members[0].head, c);
    }

    #[test]
    fn globs_match_remote_tracking_branches_by_their_remote_prefix() {
        let (_t, mut l, c) = ledger_with(&["bat/s0"]);
        for name in ["refs/remotes/origin/bat/s1", "refs/remotes/origin/bat/s0"] {
            l.update_ref(name, None, Some(c), "fetch")
                .expect("remote ref");
        }
        let g = resolve_str(&l, "origin/bat/*").unwrap();
        assert_eq!(g.label, "origin/bat");
        let names: Vec<&str> = g.members.iter().map(|m| m.name.as_str()).collect();
        assert_eq!(names, ["origin/bat/s0", "origin/bat/s1"]);
        // `*` stops at `/`: the local glob keeps to local branches.
        let g = resolve_str(&l, "bat/*").unwrap();
        let names: Vec<&str> = g.members.iter().map(|m| m.name.as_str()).collect();
        assert_eq!(names, ["bat/s0"]);
    }

    #[test]
    fn resolve_refuses_empty_matches_unknown_names_and_repeats() {
        let (_t, l, _) = ledger_with(&["bat/s0"]);
        match resolve_str(&l, "grpo/*") {
            Err(e @ ExperimentError::NoMatch { .. }) => {
                let m = e.to_string();
                assert!(
                    m.contains("grpo/*") && m.contains("bat/s0") && m.contains("main"),
                    "{m}"
                );
            }
            other => panic!("expected NoMatch, got {other:?}"),
        }
        assert!(matches!(
            resolve_str(&l, "bat/s0,nope"),
            Err(ExperimentError::UnknownRevision { name, .. }) if name == "nope"
        ));
        assert!(matches!(
            resolve_str(&l, "bat/s0,bat/s0"),
            Err(ExperimentError::DuplicateMember { .. })
        ));
    }
}
