//! Retention of checkpoint files: which round candidates a `bat gc --keep
//! POLICY` keeps, and which file objects it hands to the ledger to prune.
//!
//! The ledger is domain-free: it prunes the file objects it is given and
//! records them as pruned. What a checkpoint is lives here: the files under
//! `candidate/` in the tree of a round commit (metadata `kind` =
//! `bat_round`). A policy is a comma-separated list of terms, each keeping
//! the candidates of some round commits:
//!
//! - `promoted`: the commits `refs/promoted/*` point at;
//! - `last=N`: the newest N round commits on the first-parent history of
//!   each branch (and of a detached HEAD);
//! - `tagged`: the commits tags point at.
//!
//! A file is pruned only when every place history names it is the
//! `candidate/` of a round commit the policy does not keep: bytes shared
//! with a kept candidate, or with any file outside a candidate (data, an
//! initial checkpoint), stay.

use std::collections::{HashMap, HashSet};
use std::fmt;
use std::str::FromStr;

use bat_ledger::{CommitId, Ledger, ObjectId};

use crate::round::meta;

/// The path prefix of a round's checkpoint files in its commit tree.
pub const CANDIDATE_PREFIX: &str = "candidate/";

/// The policy `bat stats --reclaimable` uses when none is given.
pub const DEFAULT_POLICY: &str = "promoted,last=3";

/// One term of a retention policy.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum KeepTerm {
    /// What `refs/promoted/*` point at.
    Promoted,
    /// The last N rounds of each branch.
    Last(u32),
    /// What tags point at.
    Tagged,
}

impl fmt::Display for KeepTerm {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            KeepTerm::Promoted => write!(f, "promoted"),
            KeepTerm::Last(n) => write!(f, "last={n}"),
            KeepTerm::Tagged => write!(f, "tagged"),
        }
    }
}

/// A retention policy: the union of its terms.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeepPolicy {
    terms: Vec<KeepTerm>,
}

impl KeepPolicy {
    /// The terms, in the order given.
    pub fn terms(&self) -> &[KeepTerm] {
        &self.terms
    }

    fn promoted(&self) -> bool {
        self.terms.contains(&KeepTerm::Promoted)
    }

    fn tagged(&self) -> bool {
        self.terms.contains(&KeepTerm::Tagged)
    }

    /// The largest `last=N` (0 without one).
    fn last(&self) -> u32 {
        self.terms
            .iter()
            .filter_map(|t| match t {
                KeepTerm::Last(n) => Some(*n),
                _ => None,
            })
            .max()
            .unwrap_or(0)
    }
}

impl fmt::Display for KeepPolicy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let parts: Vec<String> = self.terms.iter().map(ToString::to_string).collect();
        write!(f, "{}", parts.join(","))
    }
}

/// Why a policy or duration does not parse.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PolicyError {
    /// Nothing given.
    #[error("empty retention policy; use terms such as promoted,last=3,tagged")]
    Empty,
    /// A term that is not one of the known ones.
    #[error("unknown retention term {term:?}; known terms: promoted, last=N, tagged")]
    UnknownTerm {
        /// The term as given.
        term: String,
    },
    /// `last=` without a positive count.
    #[error("{term:?}: last=N needs a whole number N of at least 1")]
    BadCount {
        /// The term as given.
        term: String,
    },
    /// A term given twice.
    #[error("retention term {term:?} is given twice")]
    Duplicate {
        /// The term as given.
        term: String,
    },
    /// A duration that does not parse.
    #[error("bad duration {text:?}: use now, or a whole number with s, m, h, d or w (30d, 12h)")]
    BadDuration {
        /// The duration as given.
        text: String,
    },
}

impl bat_ledger::Diagnostic for PolicyError {
    fn kind(&self) -> bat_ledger::ErrorKind {
        bat_ledger::ErrorKind::Usage
    }
}

impl FromStr for KeepPolicy {
    type Err = PolicyError;

    fn from_str(s: &str) -> Result<Self, PolicyError> {
        if s.trim().is_empty() {
            return Err(PolicyError::Empty);
        }
        let mut terms: Vec<KeepTerm> = Vec::new();
        for raw in s.split(',') {
            let t = raw.trim();
            let term = match t {
                "promoted" => KeepTerm::Promoted,
                "tagged" => KeepTerm::Tagged,
                _ => match t.strip_prefix("last=") {
                    Some(n) => match n.parse::<u32>() {
                        Ok(v) if v >= 1 && n.bytes().all(|b| b.is_ascii_digit()) => {
                            KeepTerm::Last(v)
                        }
                        _ => return Err(PolicyError::BadCount { term: t.into() }),
                    },
                    None => return Err(PolicyError::UnknownTerm { term: t.into() }),
                },
            };
            let dup = terms
                .iter()
                .any(|x| std::mem::discriminant(x) == std::mem::discriminant(&term));
            if dup {
                return Err(PolicyError::Duplicate { term: t.into() });
            }
            terms.push(term);
        }
        Ok(KeepPolicy { terms })
    }
}

/// Parse a reflog expiry duration into seconds: `now` (0), or a whole
/// number followed by `s`, `m`, `h`, `d` or `w`.
pub fn parse_duration(text: &str) -> Result<u64, PolicyError> {
    let bad = || PolicyError::BadDuration { text: text.into() };
    let t = text.trim();
    if t == "now" {
        return Ok(0);
    }
    let unit_at = t.len().checked_sub(1).ok_or_else(bad)?;
    if !t.is_char_boundary(unit_at) {
        return Err(bad());
    }
    let (num, unit) = t.split_at(unit_at);
    let mult: u64 = match unit {
        "s" => 1,
        "m" => 60,
        "h" => 3600,
        "d" => 86_400,
        "w" => 604_800,
        _ => return Err(bad()),
    };
    if num.is_empty() || !num.bytes().all(|b| b.is_ascii_digit()) {
        return Err(bad());
    }
    num.parse::<u64>()
        .ok()
        .and_then(|n| n.checked_mul(mult))
        .ok_or_else(bad)
}

/// What a policy keeps and prunes on one ledger.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct PrunePlan {
    /// The policy, canonical spelling.
    pub policy: String,
    /// Round commits reachable from refs and the reflog.
    pub rounds: usize,
    /// Round commits whose candidates the policy keeps (round id, commit).
    pub kept_rounds: Vec<(String, CommitId)>,
    /// Round commits with at least one checkpoint file to prune.
    pub pruned_rounds: Vec<(String, CommitId)>,
    /// Checkpoint file objects to prune.
    pub files: Vec<ObjectId>,
    /// Their total size in bytes.
    pub file_bytes: u64,
}

/// Why a plan cannot be made.
#[derive(Debug, thiserror::Error)]
pub enum RetentionError {
    /// Reading the ledger failed.
    #[error(transparent)]
    Ledger(#[from] bat_ledger::Error),
    /// A round commit's metadata does not decode.
    #[error("commit {commit}: round metadata: {reason}")]
    Metadata {
        /// The commit.
        commit: CommitId,
        /// What is wrong.
        reason: String,
    },
    /// A stale scratch folder could not be removed.
    #[error("cannot remove the scratch folder {}: {source}", path.display())]
    Scratch {
        /// The folder.
        path: std::path::PathBuf,
        /// The OS error.
        source: std::io::Error,
    },
}

impl bat_ledger::Diagnostic for RetentionError {
    fn kind(&self) -> bat_ledger::ErrorKind {
        match self {
            RetentionError::Ledger(e) => e.kind(),
            _ => bat_ledger::ErrorKind::User,
        }
    }

    fn hint(&self) -> Option<String> {
        match self {
            RetentionError::Ledger(e) => e.hint(),
            RetentionError::Scratch { .. } => Some(
                "check the folder's permissions, or remove it by hand once no bat process uses it"
                    .to_string(),
            ),
            _ => None,
        }
    }

    fn code(&self) -> Option<String> {
        match self {
            RetentionError::Ledger(e) => e.code(),
            _ => None,
        }
    }
}

/// One commit seen by the walk.
struct Seen {
    round_id: Option<String>,
    candidate: HashMap<ObjectId, u64>,
}

/// Work out what `policy` keeps and prunes: walks every commit reachable
/// from refs and the reflog (already-pruned files are just ids here; the
/// walk reads trees, never file bytes).
pub fn plan(ledger: &Ledger, policy: &KeepPolicy) -> Result<PrunePlan, RetentionError> {
    let mut commits: HashMap<CommitId, Seen> = HashMap::new();
    let mut outside: HashSet<ObjectId> = HashSet::new();
    let mut stack: Vec<CommitId> = ledger.root_commits()?.into_iter().map(|r| r.1).collect();
    let mut tree_files: HashMap<bat_ledger::TreeId, Vec<bat_ledger::FileEntry>> = HashMap::new();
    while let Some(id) = stack.pop() {
        if commits.contains_key(&id) {
            continue;
        }
        let c = ledger.read_commit(&id)?;
        stack.extend(c.parents.iter().copied());
        let round_id = meta::read(&c.metadata)
            .map_err(|e| RetentionError::Metadata {
                commit: id,
                reason: e.to_string(),
            })?
            .map(|m| m.round_id);
        let files = match tree_files.entry(c.tree) {
            std::collections::hash_map::Entry::Occupied(e) => e.into_mut(),
            std::collections::hash_map::Entry::Vacant(e) => e.insert(ledger.walk_files(&c.tree)?),
        };
        let mut candidate = HashMap::new();
        for f in files.iter() {
            if round_id.is_some() && f.path.starts_with(CANDIDATE_PREFIX) {
                candidate.insert(f.id, f.size);
            } else {
                outside.insert(f.id);
            }
        }
        commits.insert(
            id,
            Seen {
                round_id,
                candidate,
            },
        );
    }
    let keep = kept_commits(ledger, policy, &commits)?;
    let mut kept_files: HashSet<ObjectId> = outside;
    let mut out = PrunePlan {
        policy: policy.to_string(),
        ..Default::default()
    };
    for (id, s) in &commits {
        let Some(r) = &s.round_id else { continue };
        out.rounds += 1;
        if keep.contains(id) {
            kept_files.extend(s.candidate.keys().copied());
            out.kept_rounds.push((r.clone(), *id));
        }
    }
    let mut files: HashMap<ObjectId, u64> = HashMap::new();
    for (id, s) in &commits {
        let Some(r) = &s.round_id else { continue };
        let mut any = false;
        for (f, size) in &s.candidate {
            if !kept_files.contains(f) {
                files.insert(*f, *size);
                any = true;
            }
        }
        if any {
            out.pruned_rounds.push((r.clone(), *id));
        }
    }
    out.kept_rounds.sort();
    out.pruned_rounds.sort();
    out.files = files.keys().copied().collect();
    out.files.sort();
    out.file_bytes = files.values().sum();
    Ok(out)
}

/// The round commits whose candidates `policy` keeps.
fn kept_commits(
    ledger: &Ledger,
    policy: &KeepPolicy,
    commits: &HashMap<CommitId, Seen>,
) -> Result<HashSet<CommitId>, RetentionError> {
    let mut keep = HashSet::new();
    if policy.promoted() {
        for (_, c) in ledger.list_refs(crate::round::promote::PROMOTED_PREFIX)? {
            keep.insert(c);
        }
    }
    if policy.tagged() {
        for (_, c) in ledger.list_refs("refs/tags/")? {
            keep.insert(c);
        }
    }
    let n = policy.last() as usize;
    if n > 0 {
        let mut tips: Vec<CommitId> = ledger
            .list_refs("refs/heads/")?
            .into_iter()
            .map(|r| r.1)
            .collect();
        if let bat_ledger::Head::Detached { commit } = ledger.head()? {
            tips.push(commit);
        }
        for tip in tips {
            let mut cur = Some(tip);
            let mut found = 0;
            while let (Some(id), true) = (cur, found < n) {
                if commits.get(&id).is_some_and(|s| s.round_id.is_some()) {
                    keep.insert(id);
                    found += 1;
                }
                cur = ledger.read_commit(&id)?.parents.first().copied();
            }
        }
    }
    Ok(keep)
}

// ---------------------------------------------------------------------------
// Scratch: work folders under the ledger directory that are not the ledger.

/// The replays' work folders: `<ledger>/replays/<id>/`.
pub const REPLAYS_DIR: &str = "replays";
/// The runs' work folders: `<ledger>/runs/<run-id>/`.
pub const RUNS_DIR: &str = "runs";
/// The marker a replay keeps in its work folder ([`ReplayMarker`]).
pub const REPLAY_MARKER: &str = "replay.lock";
/// A replay folder younger than this with no marker yet may be a replay
/// being set up: `bat gc` leaves it alone.
pub const SETUP_GRACE_SECS: u64 = 120;

/// The marker of a replay's work folder: which process replays into it,
/// and whether it ended.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ReplayMarker {
    /// The replaying process.
    pub pid: u32,
    /// Its start time in clock ticks after boot, when known (a reused pid
    /// is not taken for the replay).
    #[serde(default)]
    pub pid_start_ticks: Option<u64>,
    /// What is replayed (`REV` or `A..B`).
    pub rev: String,
    /// Set once the replay ended (the folder is then left for
    /// inspection only).
    pub ended: bool,
}

impl ReplayMarker {
    /// A marker for this process.
    pub fn for_current_process(rev: &str) -> ReplayMarker {
        let pid = std::process::id();
        ReplayMarker {
            pid,
            pid_start_ticks: crate::engine::runlock::start_ticks(pid),
            rev: rev.to_string(),
            ended: false,
        }
    }

    /// Write it into the work folder `dir` (temporary file, rename).
    pub fn write(&self, dir: &std::path::Path) -> std::io::Result<()> {
        let mut bytes = serde_json::to_vec(self).map_err(std::io::Error::other)?;
        bytes.push(b'\n');
        bat_contract::fsutil::write_atomic(&dir.join(REPLAY_MARKER), &bytes)
    }
}

/// What a scratch folder is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ScratchKind {
    /// `replays/<id>/`: a replay's checkpoints, round folders and logs.
    Replay,
    /// `runs/<run-id>/`: a run's work folder, logs and restored inputs.
    Run,
}

/// Whether `bat gc` may remove a scratch folder.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ScratchState {
    /// A replay or run in progress uses it.
    Live,
    /// Needed later: the work folder of a run that committed rounds (its
    /// `--resume` continues from it).
    Kept,
    /// Left behind: a replay that ended (a failed one keeps its folder for
    /// inspection), or a run that committed no round.
    Stale,
}

/// One scratch folder.
#[derive(Debug, Clone, serde::Serialize)]
pub struct ScratchDir {
    /// Replay or run.
    pub kind: ScratchKind,
    /// The folder.
    pub path: std::path::PathBuf,
    /// Bytes of the files in it (symbolic links are not followed).
    pub bytes: u64,
    /// Whether gc may remove it.
    pub state: ScratchState,
}

/// Every scratch folder of a ledger.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct Scratch {
    /// Bytes under `replays/`.
    pub replay_bytes: u64,
    /// Bytes under `runs/`.
    pub run_bytes: u64,
    /// The folders, replays first, in name order.
    pub dirs: Vec<ScratchDir>,
}

impl Scratch {
    /// All scratch bytes.
    pub fn bytes(&self) -> u64 {
        self.replay_bytes + self.run_bytes
    }
}

/// Bytes of the files under `p` (symbolic links counted as links).
pub fn dir_bytes(p: &std::path::Path) -> u64 {
    let Ok(md) = std::fs::symlink_metadata(p) else {
        return 0;
    };
    if !md.is_dir() {
        return md.len();
    }
    std::fs::read_dir(p)
        .map(|rd| rd.flatten().map(|e| dir_bytes(&e.path())).sum())
        .unwrap_or(0)
}

fn age_secs(p: &std::path::Path) -> u64 {
    std::fs::metadata(p)
        .and_then(|m| m.modified())
        .ok()
        .and_then(|t| t.elapsed().ok())
        .map_or(0, |d| d.as_secs())
}

/// Whether the replay whose work folder is `dir` is in progress: its
/// marker names a live process and not an ended replay, or it has no
/// (readable) marker yet and is younger than [`SETUP_GRACE_SECS`].
pub fn replay_in_progress(dir: &std::path::Path) -> bool {
    let marker = std::fs::read(dir.join(REPLAY_MARKER))
        .ok()
        .and_then(|b| serde_json::from_slice::<ReplayMarker>(&b).ok());
    match marker {
        Some(m) => !m.ended && crate::engine::runlock::holder_alive(m.pid, m.pid_start_ticks),
        None => age_secs(dir) < SETUP_GRACE_SECS,
    }
}

/// The run ids recorded by round commits reachable from any ref.
fn committed_run_ids(ledger: &Ledger) -> Result<HashSet<String>, RetentionError> {
    let mut seen = HashSet::new();
    let mut ids = HashSet::new();
    let mut tips: Vec<CommitId> = ledger
        .list_refs("refs/")?
        .into_iter()
        .map(|r| r.1)
        .collect();
    tips.extend(ledger.head()?.commit());
    for tip in tips {
        for item in ledger.history(tip, None)? {
            let (id, c) = item?;
            if !seen.insert(id) {
                continue;
            }
            if let Some(run) = c
                .metadata
                .get("loop")
                .and_then(|l| l.get("run_id"))
                .and_then(serde_json::Value::as_str)
            {
                ids.insert(run.to_string());
            }
        }
    }
    Ok(ids)
}

fn subdirs(root: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut out: Vec<std::path::PathBuf> = std::fs::read_dir(root)
        .map(|rd| {
            rd.flatten()
                .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
                .map(|e| e.path())
                .collect()
        })
        .unwrap_or_default();
    out.sort();
    out
}

/// `bat stats`'s figures (the CLI's and Python's): the ledger's own, with
/// the scratch folders kept under `.bat` counted apart from stored bytes.
#[derive(Debug, Clone)]
pub struct LedgerStats {
    /// The ledger's statistics; `stored_bytes` excludes scratch.
    pub ledger: bat_ledger::Stats,
    /// The scratch folders.
    pub scratch: Scratch,
    /// Bytes of scratch folders `bat gc` would remove.
    pub stale_bytes: u64,
}

impl LedgerStats {
    /// The JSON document `bat stats --json` prints (without
    /// `reclaimable`).
    pub fn to_json(&self) -> serde_json::Value {
        let mut v = serde_json::to_value(&self.ledger).expect("ledger stats serialize");
        v["scratch_bytes"] = self.scratch.bytes().into();
        v["scratch_stale_bytes"] = self.stale_bytes.into();
        v["scratch"] = serde_json::to_value(&self.scratch).expect("scratch serializes");
        v
    }
}

/// The ledger's statistics with its scratch apart ([`LedgerStats`]).
pub fn stats(ledger: &Ledger) -> Result<LedgerStats, RetentionError> {
    let mut stats = ledger.stats()?;
    // The ledger's directory size includes the scratch folders kept in it:
    // they are not stored history.
    let scratch = scratch(ledger)?;
    stats.stored_bytes = stats.stored_bytes.saturating_sub(scratch.bytes());
    let stale_bytes = scratch
        .dirs
        .iter()
        .filter(|d| d.state == ScratchState::Stale)
        .map(|d| d.bytes)
        .sum();
    Ok(LedgerStats {
        ledger: stats,
        scratch,
        stale_bytes,
    })
}

/// The scratch folders of the ledger whose directory is `ledger.dir()`,
/// with their sizes and whether gc may remove them. A run folder counts
/// as live while the run lock (`run.lock`) names a live process: then no
/// run folder is stale. (A run takes the lock before it creates its
/// folder, and the folders are listed before the lock is read, so a run
/// starting meanwhile is never taken for a leftover.)
pub fn scratch(ledger: &Ledger) -> Result<Scratch, RetentionError> {
    let dir = ledger.dir();
    let mut out = Scratch::default();
    for p in subdirs(&dir.join(REPLAYS_DIR)) {
        let bytes = dir_bytes(&p);
        out.replay_bytes += bytes;
        let state = if replay_in_progress(&p) {
            ScratchState::Live
        } else {
            ScratchState::Stale
        };
        out.dirs.push(ScratchDir {
            kind: ScratchKind::Replay,
            path: p,
            bytes,
            state,
        });
    }
    let runs = subdirs(&dir.join(RUNS_DIR));
    if runs.is_empty() {
        return Ok(out);
    }
    let lock = dir.join(crate::engine::runlock::LOCK_FILE);
    let run_live = match crate::engine::runlock::read_lock(&lock) {
        Ok(Some(info)) => !info.living().is_empty(),
        Ok(None) => false,
        Err(_) => true,
    };
    let committed = committed_run_ids(ledger)?;
    for p in runs {
        let bytes = dir_bytes(&p);
        out.run_bytes += bytes;
        let name = p
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let state = if run_live {
            ScratchState::Live
        } else if committed.contains(&name) {
            ScratchState::Kept
        } else {
            ScratchState::Stale
        };
        out.dirs.push(ScratchDir {
            kind: ScratchKind::Run,
            path: p,
            bytes,
            state,
        });
    }
    Ok(out)
}

/// Remove the stale scratch folders (see [`ScratchState::Stale`]); with
/// `dry_run`, only say which. Returns the folders removed (or that would
/// be).
pub fn remove_stale_scratch(
    ledger: &Ledger,
    dry_run: bool,
) -> Result<Vec<ScratchDir>, RetentionError> {
    let mut removed = Vec::new();
    for d in scratch(ledger)?.dirs {
        if d.state != ScratchState::Stale {
            continue;
        }
        // Checked again just before: a replay may have started since.
        if d.kind == ScratchKind::Replay && replay_in_progress(&d.path) {
            continue;
        }
        if !dry_run {
            std::fs::remove_dir_all(&d.path).map_err(|source| RetentionError::Scratch {
                path: d.path.clone(),
                source,
            })?;
        }
        removed.push(d);
    }
    Ok(removed)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn policies_parse_and_print_canonically() {
        let p: KeepPolicy = "promoted,last=3,tagged".parse().unwrap();
        assert_eq!(
            p.terms(),
            &[KeepTerm::Promoted, KeepTerm::Last(3), KeepTerm::Tagged]
        );
        assert_eq!(p.to_string(), "promoted,last=3,tagged");
        let p: KeepPolicy = " last=10 , promoted".parse().unwrap();
        assert_eq!(p.to_string(), "last=10,promoted");
        assert_eq!(p.last(), 10);
    }

    #[test]
    fn bad_policies_are_named() {
        assert_eq!("".parse::<KeepPolicy>(), Err(PolicyError::Empty));
        assert!(matches!(
            "promoted,latest".parse::<KeepPolicy>(),
            Err(PolicyError::UnknownTerm { term }) if term == "latest"
        ));
        for bad in ["last=", "last=0", "last=-1", "last=x", "last=+3", "last= 3"] {
            assert!(
                matches!(bad.parse::<KeepPolicy>(), Err(PolicyError::BadCount { .. })),
                "{bad}"
            );
        }
        assert!(matches!(
            "last=2,last=3".parse::<KeepPolicy>(),
            Err(PolicyError::Duplicate { .. })
        ));
        assert!(matches!(
            "promoted,,tagged".parse::<KeepPolicy>(),
            Err(PolicyError::UnknownTerm { .. })
        ));
    }

    #[test]
    fn durations_parse() {
        assert_eq!(parse_duration("now"), Ok(0));
        assert_eq!(parse_duration("30d"), Ok(30 * 86_400));
        assert_eq!(parse_duration("12h"), Ok(12 * 3600));
        assert_eq!(parse_duration("2w"), Ok(2 * 604_800));
        assert_eq!(parse_duration("90s"), Ok(90));
        for bad in [
            "",
            "d",
            "30",
            "3x",
            "-3d",
            "1.5h",
            "é",
            "99999999999999999999w",
        ] {
            assert!(parse_duration(bad).is_err(), "{bad}");
        }
    }

    fn term() -> impl Strategy<Value = KeepTerm> {
        prop_oneof![
            Just(KeepTerm::Promoted),
            Just(KeepTerm::Tagged),
            (1u32..1000).prop_map(KeepTerm::Last),
        ]
    }

    proptest! {
        #[test]
        fn printed_policies_parse_back(terms in proptest::collection::vec(term(), 1..4)) {
            let mut uniq: Vec<KeepTerm> = Vec::new();
            for t in terms {
                if !uniq.iter().any(|u| std::mem::discriminant(u) == std::mem::discriminant(&t)) {
                    uniq.push(t);
                }
            }
            let p = KeepPolicy { terms: uniq };
            let back: KeepPolicy = p.to_string().parse().unwrap();
            prop_assert_eq!(back, p);
        }

        #[test]
        fn arbitrary_text_never_panics(s in ".{0,40}") {
            let _ = s.parse::<KeepPolicy>();
            let _ = parse_duration(&s);
        }
    }
}
