//! `bat diff A B`: what changed between two recorded rounds, section by
//! section. Every section is a JSON object; a side whose files are missing
//! is reported as `"absent"`. Deltas are always B − A.
//!
//! Checkpoint files are compared by ledger object id. For `*.safetensors`
//! files that differ, the per-tensor numbers are read from the statistics
//! stored with their delta records when one side is stored as deltas of
//! the other ([`super::deltas`]; not with [`DiffOptions::decode`]).
//! Otherwise each side is materialised once — in memory when it is
//! at most [`DiffOptions::memory_limit`] bytes, otherwise streamed from the
//! ledger into an unnamed scratch file in [`DiffOptions::scratch_dir`] — and
//! the tensors are then compared window by window ([`super::tensors`]), so
//! no file is ever held in memory twice and large files are never held in
//! memory at all.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::str::FromStr;
use std::sync::atomic::AtomicBool;

use bat_ledger::{CommitId, Ledger, Mode, ObjectId, TreeId};
use serde_json::{json, Map, Value};
use sha2::Digest as _;

use super::audit::audit_gap;
use super::files::{files, TensorMemo};
use super::side::SideOptions;
use super::{InspectError, RoundTree, BINDING_PATH, SUMMARY_PATH};
use crate::Ctx;

/// The sections of a diff, in output order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Section {
    /// Target stage and the prescription's reason.
    Curriculum,
    /// Pool/stage/track/outcome counts, source rows in/out, digests.
    Mixture,
    /// Reward contracts by stage.
    Reward,
    /// Model identity, per-file and per-tensor changes.
    Checkpoint,
    /// Means, stages and tracks with signed deltas.
    Eval,
    /// Checks that flipped, decision change.
    Gate,
    /// Gating-vs-audit gap of each side.
    Audit,
    /// Every file of the trees: added, removed, changed, with sizes and
    /// per-tensor summaries of changed safetensors files ([`super::files`]).
    Files,
}

impl Section {
    /// Every section, in output order.
    pub const ALL: [Section; 8] = [
        Section::Curriculum,
        Section::Mixture,
        Section::Reward,
        Section::Checkpoint,
        Section::Eval,
        Section::Gate,
        Section::Audit,
        Section::Files,
    ];

    /// The `--section` / JSON key name.
    pub fn name(self) -> &'static str {
        match self {
            Section::Curriculum => "curriculum",
            Section::Mixture => "mixture",
            Section::Reward => "reward",
            Section::Checkpoint => "checkpoint",
            Section::Eval => "eval",
            Section::Gate => "gate",
            Section::Audit => "audit",
            Section::Files => "files",
        }
    }
}

impl FromStr for Section {
    type Err = String;
    fn from_str(s: &str) -> Result<Section, String> {
        Section::ALL
            .into_iter()
            .find(|x| x.name() == s)
            .ok_or_else(|| {
                let names: Vec<_> = Section::ALL.iter().map(|x| x.name()).collect();
                format!("unknown section {s:?} (choose from {})", names.join(", "))
            })
    }
}

/// How to diff.
#[derive(Debug, Clone)]
pub struct DiffOptions {
    /// Sections to compute (empty: all).
    pub sections: Vec<Section>,
    /// Where large safetensors files are materialised (default: the
    /// ledger's own folder, which is on the ledger's file system).
    pub scratch_dir: Option<PathBuf>,
    /// Files up to this size are compared in memory.
    pub memory_limit: u64,
    /// Compare safetensors files by decoding both in full, even where the
    /// change statistics stored with their deltas would do (for timing
    /// and checking the two paths against each other).
    pub decode: bool,
}

impl DiffOptions {
    /// How this diff materialises the sides of a safetensors comparison
    /// (a large side's read stops when `cancel` is set).
    pub(super) fn sides<'a>(&'a self, cancel: &'a AtomicBool) -> SideOptions<'a> {
        SideOptions {
            memory_limit: self.memory_limit,
            scratch_dir: self.scratch_dir.as_deref(),
            cancel,
            decode: self.decode,
        }
    }
}

impl Default for DiffOptions {
    fn default() -> Self {
        DiffOptions {
            sections: Vec::new(),
            scratch_dir: None,
            memory_limit: 64 << 20,
            decode: false,
        }
    }
}

/// Compute the diff of `a` and `b`: a JSON object with `a`, `b` (commit
/// ids) and one key per requested section. Reading a large checkpoint
/// file stops at `ctx`'s cancel flag ([`bat_ledger::Error::Cancelled`]).
pub fn diff_commits(
    ledger: &Ledger,
    a: CommitId,
    b: CommitId,
    opts: &DiffOptions,
    ctx: &Ctx<'_>,
) -> Result<Value, InspectError> {
    let ra = RoundTree::open(ledger, a)?;
    let rb = RoundTree::open(ledger, b)?;
    let mut sections = if opts.sections.is_empty() {
        Section::ALL.to_vec()
    } else {
        opts.sections.clone()
    };
    sections.sort();
    sections.dedup();
    let mut out = Map::new();
    out.insert("a".into(), json!(a));
    out.insert("b".into(), json!(b));
    // train.jsonl is parsed once per side for both sections that use it.
    let rows = if sections.contains(&Section::Mixture) || sections.contains(&Section::Reward) {
        Some((read_rows(&ra)?, read_rows(&rb)?))
    } else {
        None
    };
    let no_rows = (None, None);
    let rows = rows.as_ref().unwrap_or(&no_rows);
    let mut memo = TensorMemo::default();
    for s in sections {
        let v = match s {
            Section::Curriculum => curriculum(&ra, &rb)?,
            Section::Mixture => mixture(&ra, &rb, rows)?,
            Section::Reward => reward(rows, (&ra, &rb)),
            Section::Checkpoint => checkpoint(&ra, &rb, opts.sides(ctx.cancel), &mut memo)?,
            Section::Eval => eval(&ra, &rb)?,
            Section::Gate => gate(&ra, &rb)?,
            Section::Audit => json!({
                "a": audit_gap(ledger, &a)?,
                "b": audit_gap(ledger, &b)?,
            }),
            Section::Files => files(&ra, &rb, opts.sides(ctx.cancel), &mut memo)?,
        };
        out.insert(s.name().into(), v);
    }
    Ok(Value::Object(out))
}

const ABSENT: &str = "absent";

fn absent() -> Value {
    Value::String(ABSENT.into())
}

fn str_at<'v>(v: &'v Value, path: &[&str]) -> Option<&'v str> {
    let mut cur = v;
    for p in path {
        cur = cur.get(p)?;
    }
    cur.as_str()
}

// ---------------------------------------------------------------- curriculum

fn curriculum_side(r: &RoundTree<'_>) -> Result<Value, InspectError> {
    let manifest = r.json("data/manifest.json")?;
    let prescription = r.json("prescription.json")?;
    let target_meta = r.round_str(|m| &m.target_stage);
    let target_manifest = manifest.as_ref().and_then(|m| str_at(m, &["target_stage"]));
    let (target, source) = match (target_meta, target_manifest) {
        (Some(t), _) => (json!(t), "metadata"),
        (None, Some(t)) => (json!(t), "data/manifest.json"),
        (None, None) => (Value::Null, ABSENT),
    };
    let round_id = r
        .round_str(|m| &m.round_id)
        .or_else(|| manifest.as_ref().and_then(|m| str_at(m, &["round_id"])));
    let presc = match &prescription {
        Some(p) => json!({
            "target_stage": p.get("target_stage"),
            "reason": p.get("selection_reason"),
            "promotion_status": p.get("promotion_status"),
        }),
        None => absent(),
    };
    Ok(json!({
        "round_id": round_id,
        "target_stage": target,
        "target_source": source,
        "prescription": presc,
    }))
}

fn curriculum(a: &RoundTree<'_>, b: &RoundTree<'_>) -> Result<Value, InspectError> {
    let sa = curriculum_side(a)?;
    let sb = curriculum_side(b)?;
    let next = |s: &Value| {
        s.get("prescription")
            .and_then(|p| p.get("target_stage"))
            .cloned()
    };
    Ok(json!({
        "target_changed": sa["target_stage"] != sb["target_stage"],
        "next_target_changed": next(&sa) != next(&sb),
        "a": sa,
        "b": sb,
    }))
}

// ---------------------------------------------------------------- mixture

/// What the mixture and reward sections read from one `train.jsonl`.
#[derive(Default)]
struct Rows {
    rows: u64,
    by_pool: BTreeMap<String, u64>,
    by_stage: BTreeMap<String, u64>,
    by_track: BTreeMap<String, u64>,
    by_outcome: BTreeMap<String, u64>,
    sources: BTreeSet<String>,
    /// stage → contract digest → contract.
    contracts: BTreeMap<String, BTreeMap<String, Value>>,
    task_versions: BTreeSet<String>,
}

fn label(v: Option<&Value>) -> String {
    match v {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Null) | None => "(none)".into(),
        Some(other) => other.to_string(),
    }
}

/// sha256 of the compact JSON with sorted keys.
fn digest(v: &Value) -> String {
    // serde_json's default map is ordered by key, so `to_string` is canonical.
    hex::encode(sha2::Sha256::digest(v.to_string().as_bytes()))
}

fn read_rows(r: &RoundTree<'_>) -> Result<Option<Rows>, InspectError> {
    let Some(bytes) = r.bytes("data/train.jsonl")? else {
        return Ok(None);
    };
    let mut out = Rows::default();
    for (i, line) in bytes.split(|&c| c == b'\n').enumerate() {
        if line.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        let row: Value = serde_json::from_slice(line).map_err(|e| InspectError::Json {
            path: format!("data/train.jsonl line {}", i + 1),
            commit: r.id.to_string(),
            reason: e.to_string(),
        })?;
        let x = row.get("extra_info");
        let g = |k: &str| x.and_then(|x| x.get(k));
        out.rows += 1;
        *out.by_pool.entry(label(g("source_pool"))).or_default() += 1;
        *out.by_stage.entry(label(g("target_stage"))).or_default() += 1;
        *out.by_track.entry(label(g("track"))).or_default() += 1;
        *out.by_outcome
            .entry(label(g("outcome_bucket")))
            .or_default() += 1;
        if let Some(s) = g("source_state_id").and_then(Value::as_str) {
            out.sources.insert(s.to_string());
        }
        if let Some(t) = g("task_definition_version").and_then(Value::as_str) {
            out.task_versions.insert(t.to_string());
        }
        if let Some(c) = g("reward_contract") {
            out.contracts
                .entry(label(g("target_stage")))
                .or_default()
                .insert(digest(c), c.clone());
        }
    }
    Ok(Some(out))
}

fn count_delta(a: &BTreeMap<String, u64>, b: &BTreeMap<String, u64>) -> Value {
    let keys: BTreeSet<&String> = a.keys().chain(b.keys()).collect();
    let mut m = Map::new();
    for k in keys {
        let (x, y) = (
            a.get(k).copied().unwrap_or(0),
            b.get(k).copied().unwrap_or(0),
        );
        m.insert(
            k.clone(),
            json!({"a": x, "b": y, "delta": y as i64 - x as i64}),
        );
    }
    Value::Object(m)
}

fn digests_side(r: &RoundTree<'_>) -> Result<Value, InspectError> {
    let manifest = r.json("data/manifest.json")?;
    let id = |p: &str| -> Result<Value, InspectError> {
        Ok(r.file(p)?.map(|(id, _)| json!(id)).unwrap_or(Value::Null))
    };
    Ok(json!({
        "manifest_object": id("data/manifest.json")?,
        "train_object": id("data/train.jsonl")?,
        "train_sha256": manifest.as_ref().and_then(|m| str_at(m, &["train", "sha256"])),
        "source_sha256": manifest.as_ref().and_then(|m| str_at(m, &["source", "sha256"])),
        "rows": manifest.as_ref().and_then(|m| m.get("rows")).cloned(),
    }))
}

fn mixture(
    a: &RoundTree<'_>,
    b: &RoundTree<'_>,
    (ra, rb): &(Option<Rows>, Option<Rows>),
) -> Result<Value, InspectError> {
    let da = digests_side(a)?;
    let db = digests_side(b)?;
    let digests = json!({
        "train_changed": da["train_object"] != db["train_object"],
        "manifest_changed": da["manifest_object"] != db["manifest_object"],
        "source_changed": da["source_sha256"] != db["source_sha256"],
        "a": da,
        "b": db,
    });
    let counts = |r: &Option<Rows>| match r {
        Some(r) => json!({
            "rows": r.rows,
            "by_pool": r.by_pool,
            "by_stage": r.by_stage,
            "by_track": r.by_track,
            "by_outcome": r.by_outcome,
        }),
        None => absent(),
    };
    let mut out = json!({
        "a": counts(ra),
        "b": counts(rb),
        "digests": digests,
    });
    if let (Some(x), Some(y)) = (ra, rb) {
        out["delta"] = json!({
            "rows": y.rows as i64 - x.rows as i64,
            "by_pool": count_delta(&x.by_pool, &y.by_pool),
            "by_stage": count_delta(&x.by_stage, &y.by_stage),
            "by_track": count_delta(&x.by_track, &y.by_track),
            "by_outcome": count_delta(&x.by_outcome, &y.by_outcome),
        });
        let added: Vec<&String> = y.sources.difference(&x.sources).collect();
        let removed: Vec<&String> = x.sources.difference(&y.sources).collect();
        out["source_rows"] = json!({
            "a": x.sources.len(),
            "b": y.sources.len(),
            "common": x.sources.intersection(&y.sources).count(),
            "in_count": added.len(),
            "out_count": removed.len(),
            "in": added,
            "out": removed,
        });
    } else {
        out["delta"] = absent();
        out["source_rows"] = absent();
    }
    Ok(out)
}

// ---------------------------------------------------------------- reward

fn reward_side(r: &Option<Rows>) -> Value {
    match r {
        None => absent(),
        Some(r) => {
            let mut m = Map::new();
            for (stage, cs) in &r.contracts {
                let list: Vec<Value> = cs
                    .iter()
                    .map(|(d, c)| {
                        json!({
                            "sha256": d,
                            "mode": c.get("mode"),
                            "schema_version": c.get("schema_version"),
                        })
                    })
                    .collect();
                m.insert(stage.clone(), Value::Array(list));
            }
            json!({
                "contracts": m,
                "task_definition_versions": r.task_versions,
            })
        }
    }
}

/// How a side's rows were rewarded: the replay override
/// (`ablation_overrides.reward`), else the campaign's recorded
/// `{reward_mode}`, else `stage` for a round commit (the BaT default);
/// null for a commit without round metadata. With its source and the
/// side's whole ablation (`reward=terminal,…`, null for none).
fn reward_mode(r: &RoundTree<'_>) -> Value {
    let Some(m) = &r.round else {
        return json!({"mode": null, "source": ABSENT, "ablation": null});
    };
    let ablation = m.ablation.as_deref().filter(|x| !x.is_empty());
    let (mode, source) = if let Some(x) = m
        .ablation_overrides
        .as_ref()
        .and_then(|o| o.get("reward"))
        .and_then(Value::as_str)
    {
        (x.to_string(), "ablation")
    } else if let Some((_, x)) = m.loop_meta.as_ref().and_then(|l| {
        l.campaign
            .extra_placeholders
            .iter()
            .find(|(k, _)| k == "{reward_mode}")
    }) {
        (x.clone(), "campaign")
    } else {
        ("stage".to_string(), "default")
    };
    json!({"mode": mode, "source": source, "ablation": ablation})
}

fn reward(
    (ra, rb): &(Option<Rows>, Option<Rows>),
    (a, b): (&RoundTree<'_>, &RoundTree<'_>),
) -> Value {
    let mut out = json!({"a": reward_side(ra), "b": reward_side(rb)});
    let (ma, mb) = (reward_mode(a), reward_mode(b));
    let mode_changed = ma["mode"] != mb["mode"];
    out["mode"] = json!({
        "a": ma,
        "b": mb,
        "changed": mode_changed,
        "ablation_changed": ma["ablation"] != mb["ablation"],
    });
    if let (Some(x), Some(y)) = (ra, rb) {
        let stages: BTreeSet<&String> = x.contracts.keys().chain(y.contracts.keys()).collect();
        let mut changes = Map::new();
        let mut changed_any = false;
        for s in stages {
            let da: BTreeSet<&String> = x
                .contracts
                .get(s)
                .map(|c| c.keys().collect())
                .unwrap_or_default();
            let db: BTreeSet<&String> = y
                .contracts
                .get(s)
                .map(|c| c.keys().collect())
                .unwrap_or_default();
            let status = if da.is_empty() {
                "added"
            } else if db.is_empty() {
                "removed"
            } else if da == db {
                "unchanged"
            } else {
                "changed"
            };
            if status != "unchanged" {
                changed_any = true;
            }
            let versions = |r: &Rows| -> Vec<Value> {
                let mut v: Vec<Value> = r
                    .contracts
                    .get(s)
                    .map(|c| {
                        c.values()
                            .map(|c| c.get("schema_version").cloned().unwrap_or(Value::Null))
                            .collect()
                    })
                    .unwrap_or_default();
                v.dedup();
                v
            };
            changes.insert(
                s.clone(),
                json!({
                    "status": status,
                    "a": da, "b": db,
                    "schema_versions": {"a": versions(x), "b": versions(y)},
                }),
            );
        }
        out["by_stage"] = Value::Object(changes);
        // The contracts in the rows can be identical while the trainer was
        // told to reward only the terminal outcome: that is a change.
        out["changed"] = json!(changed_any || x.task_versions != y.task_versions || mode_changed);
        out["task_definition_version_changed"] = json!(x.task_versions != y.task_versions);
    } else {
        out["by_stage"] = absent();
    }
    out
}

// ---------------------------------------------------------------- checkpoint

/// `candidate/` files by path: (object id, size).
type FileMap = BTreeMap<String, (ObjectId, u64)>;

fn candidate_files(r: &RoundTree<'_>) -> Result<Option<(TreeId, FileMap)>, InspectError> {
    let l = r.ledger();
    match l.lookup_path(&r.commit.tree, "candidate")? {
        Some(e) if e.mode == Mode::Tree => {
            let tree = TreeId(e.id);
            let files = l
                .walk_files(&tree)?
                .into_iter()
                .filter(|f| f.mode != Mode::Symlink)
                .map(|f| (f.path, (f.id, f.size)))
                .collect();
            Ok(Some((tree, files)))
        }
        _ => Ok(None),
    }
}

fn identity_side(r: &RoundTree<'_>, tree: Option<&TreeId>) -> Result<Value, InspectError> {
    if let Some(b) = r.json(BINDING_PATH)? {
        if let Some(id) = b.get("model_identity_sha256").and_then(Value::as_str) {
            return Ok(json!({"identity": id, "source": BINDING_PATH}));
        }
    }
    if let Some(s) = r.json(SUMMARY_PATH)? {
        if let Some(id) = s.get("checkpoint_sha256").and_then(Value::as_str) {
            return Ok(json!({"identity": id, "source": SUMMARY_PATH}));
        }
    }
    Ok(match tree {
        Some(t) => json!({"identity": t, "source": "ledger tree of candidate/"}),
        None => json!({"identity": null, "source": ABSENT}),
    })
}

fn checkpoint(
    a: &RoundTree<'_>,
    b: &RoundTree<'_>,
    sides: SideOptions<'_>,
    memo: &mut TensorMemo,
) -> Result<Value, InspectError> {
    let fa = candidate_files(a)?;
    let fb = candidate_files(b)?;
    let ia = identity_side(a, fa.as_ref().map(|x| &x.0))?;
    let ib = identity_side(b, fb.as_ref().map(|x| &x.0))?;
    let mut out = json!({
        "identity_changed": ia["identity"] != ib["identity"],
        "a": ia,
        "b": ib,
    });
    let (Some((_, fa)), Some((_, fb))) = (&fa, &fb) else {
        out["files"] = absent();
        return Ok(out);
    };
    let paths: BTreeSet<&String> = fa.keys().chain(fb.keys()).collect();
    let mut files = Vec::new();
    let mut summary: BTreeMap<&str, u64> = BTreeMap::new();
    for p in paths {
        let (x, y) = (fa.get(p), fb.get(p));
        let status = match (x, y) {
            (Some(_), None) => "removed",
            (None, Some(_)) => "added",
            (Some(x), Some(y)) if x.0 == y.0 => "unchanged",
            _ => "changed",
        };
        *summary.entry(status).or_default() += 1;
        let mut f = json!({
            "path": p,
            "status": status,
            "a": x.map(|x| json!({"id": x.0, "size": x.1})),
            "b": y.map(|y| json!({"id": y.0, "size": y.1})),
        });
        let pruned = |l: &Ledger, id: &ObjectId| -> Result<bool, InspectError> {
            Ok(!l.contains(id)? && l.pruned_file(id)?.is_some())
        };
        if let (Some(x), Some(y), "changed", true) = (x, y, status, p.ends_with(".safetensors")) {
            // A retention gc dropped the bytes of a side: ids and sizes
            // still compare, the tensors cannot.
            if pruned(a.ledger(), &x.0)? || pruned(b.ledger(), &y.0)? {
                f["tensors_pruned"] = json!(true);
                files.push(f);
                continue;
            }
            let full = format!("candidate/{p}");
            let (t, from) = memo.get((a, b), &full, *x, *y, sides)?;
            f["tensors"] = t;
            f["tensors_from"] = json!(from.name());
        }
        files.push(f);
    }
    out["file_counts"] = json!(summary);
    out["files"] = Value::Array(files);
    Ok(out)
}

// ---------------------------------------------------------------- eval

fn triple(a: Option<f64>, b: Option<f64>) -> Value {
    let d = match (a, b) {
        (Some(x), Some(y)) => Some(y - x),
        _ => None,
    };
    json!({"a": a, "b": b, "delta": d})
}

fn triples(a: &BTreeMap<String, f64>, b: &BTreeMap<String, f64>) -> Value {
    let keys: BTreeSet<&String> = a.keys().chain(b.keys()).collect();
    let mut m = Map::new();
    for k in keys {
        m.insert(k.clone(), triple(a.get(k).copied(), b.get(k).copied()));
    }
    Value::Object(m)
}

fn eval(a: &RoundTree<'_>, b: &RoundTree<'_>) -> Result<Value, InspectError> {
    let (src_a, sa) = super::audit::gating_scores(a)?;
    let (src_b, sb) = super::audit::gating_scores(b)?;
    Ok(json!({
        "source": {"a": src_a, "b": src_b},
        "means": {
            "overall": triple(sa.overall, sb.overall),
            "task": triple(sa.task, sb.task),
            "agentic": triple(sa.agentic, sb.agentic),
        },
        "stages": triples(&sa.stages, &sb.stages),
        "tracks": triples(&sa.tracks, &sb.tracks),
    }))
}

// ---------------------------------------------------------------- gate

fn gate(a: &RoundTree<'_>, b: &RoundTree<'_>) -> Result<Value, InspectError> {
    let (ga, gb) = (a.json("gate.json")?, b.json("gate.json")?);
    let side = |g: &Option<Value>, r: &RoundTree<'_>| match g {
        Some(g) => json!({"status": g.get("status"), "promoted": g.get("promoted")}),
        None => match r.round_str(|m| m.gate_status.as_str()) {
            Some(s) => json!({"status": s, "promoted": null, "source": "metadata"}),
            None => absent(),
        },
    };
    let (sa, sb) = (side(&ga, a), side(&gb, b));
    let status = |s: &Value| s.get("status").cloned();
    let mut out = json!({
        "decision_changed": status(&sa) != status(&sb),
        "a": sa,
        "b": sb,
    });
    let checks = |g: &Option<Value>| -> BTreeMap<String, Value> {
        g.as_ref()
            .and_then(|g| g.get("checks"))
            .and_then(Value::as_object)
            .map(|m| m.iter().map(|(k, v)| (k.clone(), v.clone())).collect())
            .unwrap_or_default()
    };
    if ga.is_some() && gb.is_some() {
        let (ca, cb) = (checks(&ga), checks(&gb));
        let keys: BTreeSet<&String> = ca.keys().chain(cb.keys()).collect();
        let mut all = Map::new();
        let mut flipped = Vec::new();
        for k in keys {
            let (x, y) = (ca.get(k), cb.get(k));
            let f = x.and_then(Value::as_bool).is_some()
                && y.and_then(Value::as_bool).is_some()
                && x != y;
            if f {
                flipped.push(json!({"check": k, "a": x, "b": y}));
            }
            all.insert(k.clone(), json!({"a": x, "b": y, "flipped": f}));
        }
        out["checks"] = Value::Object(all);
        out["flipped"] = Value::Array(flipped);
    } else {
        out["checks"] = absent();
        out["flipped"] = absent();
    }
    Ok(out)
}
