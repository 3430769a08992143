//! Writing a validated round: the private raw-evaluation copy, the commit
//! (tree in bat's layout, metadata and indexed fields) and the promotion ref.
//!
//! The commit tree holds `data/`, `candidate/`, `candidate-eval/` without
//! `raw-evaluation.json`, `gate.json`, `prescription.json`,
//! `training-health.json`, and bat's `round.json`, `baseline-summary.json`,
//! `firewall.json` and `provenance.json`, and the round's child logs under
//! `logs/` when its loop record names them. It is assembled in a staging
//! folder under `.bat/` (hard links, or copies across file systems) and
//! recorded with [`Ledger::commit_dir`].
//!
//! With `keep_raw_eval`, the raw evaluation's bytes go to
//! `.bat/private/raw-eval/<blake3 hex>` (temporary file, fsync, rename,
//! directory fsync). That area is outside every commit tree: it is never
//! checked out, handed to a trainer, or pushed.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use bat_ledger::{CommitRequest, FieldValue, Ledger, OnMoved, RefMove};
use serde_json::json;

use super::check::RoundCheck;
use super::layout::{committed_files, RoundLayout};
use super::meta::RoundMeta;
use super::promote::{promoted_ref, PROMOTED_PREFIX};
use super::validate::{BaselineSource, CheckedRound};
use super::{CommitRoundOptions, RoundCommit, RoundError};
use crate::Ctx;
use bat_contract::json::{self, Value};
use bat_contract::vocabulary::GateStatus;

/// Where private raw evaluations live, relative to the `.bat` directory.
pub const PRIVATE_RAW_EVAL_DIR: &str = "private/raw-eval";

fn write_err(path: &Path) -> impl FnOnce(std::io::Error) -> RoundError + '_ {
    move |source| RoundError::Write {
        path: path.to_path_buf(),
        source,
    }
}

/// Keep the raw evaluation's bytes in the private area; returns the path.
fn keep_private(ledger: &Ledger, blake3: &str, bytes: &[u8]) -> Result<PathBuf, RoundError> {
    let path = ledger.dir().join(PRIVATE_RAW_EVAL_DIR).join(blake3);
    if std::fs::read(&path).is_ok_and(|b| b == bytes) {
        return Ok(path);
    }
    // Private: the raw rows must not be readable by other users.
    bat_contract::fsutil::write_atomic_private(&path, bytes).map_err(write_err(&path))?;
    Ok(path)
}

/// Hard-link (or copy) `from` to `to`, creating parents.
fn link_or_copy(from: &Path, to: &Path) -> Result<(), RoundError> {
    if let Some(p) = to.parent() {
        std::fs::create_dir_all(p).map_err(write_err(p))?;
    }
    if std::fs::hard_link(from, to).is_err() {
        std::fs::copy(from, to).map_err(write_err(to))?;
    }
    Ok(())
}

/// Mirror the regular files and folders of `from` into `to`.
fn link_tree(from: &Path, to: &Path) -> Result<(), RoundError> {
    std::fs::create_dir_all(to).map_err(write_err(to))?;
    let rd = std::fs::read_dir(from).map_err(RoundError::io(from))?;
    for e in rd {
        let e = e.map_err(RoundError::io(from))?;
        let ft = e.file_type().map_err(RoundError::io(&e.path()))?;
        let dest = to.join(e.file_name());
        if ft.is_dir() {
            link_tree(&e.path(), &dest)?;
        } else if ft.is_file() {
            link_or_copy(&e.path(), &dest)?;
        } else {
            return Err(RoundError::from(RoundCheck::Candidate {
                path: Path::to_path_buf(&e.path()),
                reason: "only regular files and folders can be recorded in a round".into(),
            }));
        }
    }
    Ok(())
}

fn pretty(v: &serde_json::Value) -> Vec<u8> {
    let mut b = serde_json::to_vec_pretty(v).unwrap_or_default();
    b.push(b'\n');
    b
}

/// The scores of a summary: `overall`, `task`, `agentic` from `means`, then
/// the stage scores.
fn scores(summary: &Value) -> serde_json::Map<String, serde_json::Value> {
    let mut out = serde_json::Map::new();
    if let Some(m) = summary.get("means").and_then(Value::as_object) {
        for k in ["overall", "task", "agentic"] {
            if let Some(v) = m.get(k) {
                out.insert(k.to_string(), json::to_serde(v));
            }
        }
    }
    if let Some(s) = summary.get("stage_scores").and_then(Value::as_object) {
        for (k, v) in s.iter() {
            out.insert(k.clone(), json::to_serde(v));
        }
    }
    out
}

/// `[(k, v)…]` as a JSON object (keys in the order given).
fn ablation_object(a: &[(String, String)]) -> serde_json::Value {
    serde_json::Value::Object(a.iter().map(|(k, v)| (k.clone(), json!(v))).collect())
}

/// What [`record`] derives from the gate once and writes in several places.
struct Facts<'a> {
    gate_status: GateStatus,
    starting: &'a str,
    trained_from: &'a str,
    raw_kept: bool,
}

/// `round.json` of the commit, and the round's budget.
fn round_document(
    l: &RoundLayout,
    opts: &CommitRoundOptions,
    c: &CheckedRound,
    f: &Facts<'_>,
) -> (serde_json::Value, serde_json::Value) {
    let (gate_status, starting, trained_from, raw_kept) =
        (f.gate_status, f.starting, f.trained_from, f.raw_kept);
    let baseline_doc = match &c.baseline_source {
        BaselineSource::File(_) => json!({"source": "file"}),
        BaselineSource::Promoted(p) => json!({
            "source": "promoted_round",
            "round_id": p.round_id,
            "commit": p.commit.to_string(),
        }),
    };
    let mut baseline_doc = baseline_doc;
    if let Some(m) = baseline_doc.as_object_mut() {
        m.insert(
            "summary_sha256".into(),
            json!(json::sha256_hex(&c.baseline_bytes)),
        );
    }
    let manifest = std::fs::read(&l.manifest)
        .ok()
        .and_then(|b| json::parse_bytes(&b).ok())
        .unwrap_or(Value::Null);
    let budget = super::provenance::round_budget(&manifest, &c.health);
    let mut round_json = json!({
        "schema_version": 1,
        "artifact_kind": "bat_round_record",
        "kind": if opts.replay.is_some() { "replay" } else { "round" },
        "round_id": c.round_id,
        "target_stage": c.target_stage,
        "next_target_stage": c.gate.target_stage,
        "selection_reason": c.gate.selection_reason,
        "gate_status": gate_status,
        "candidate_checkpoint_sha256": c.candidate_identity,
        "starting_checkpoint_sha256": starting,
        "trained_from_checkpoint_sha256": trained_from,
        "train": {"sha256": c.train_sha256, "rows": c.rows},
        "raw_evaluation": {
            "sha256": c.raw.sha256,
            "blake3": c.raw.blake3,
            "bytes": c.raw.len,
            "kept_privately": raw_kept,
            "copies_in_candidate": c.raw_copies_in_candidate,
        },
        "baseline": baseline_doc,
        "budget": budget,
    });
    if let (Some(r), Some(m)) = (&opts.replay, round_json.as_object_mut()) {
        m.insert("replay_of".into(), json!(r.replay_of));
        m.insert("replay_of_round_id".into(), json!(r.replay_of_round_id));
        m.insert("ablation".into(), ablation_object(&r.ablation));
        m.insert("inherited".into(), json!(r.inherited));
    }
    (round_json, budget)
}

/// `firewall.json` of the commit (the scan passed, or validation refused).
fn firewall_document(c: &CheckedRound, opts: &CommitRoundOptions) -> serde_json::Value {
    json!({
        "schema_version": 1,
        "artifact_kind": "bat_round_firewall",
        "status": "passed",
        "scanned": "data/train.jsonl",
        "violations": [],
        "heldout_markers": {
            "count": c.marker_count,
            "sha256": c.markers_sha256,
            "derived_from": "evaluation task ids",
            "extra_file_given": opts.heldout_markers.is_some(),
        },
    })
}

/// Stage the commit's tree in a temporary folder under the ledger: the
/// round's files, the candidate and bat's own documents `docs`. Returns the
/// folder and its parent (removed after the commit when empty).
fn stage_tree(
    ledger: &Ledger,
    l: &RoundLayout,
    docs: [(&str, Vec<u8>); 4],
) -> Result<(tempfile::TempDir, PathBuf), RoundError> {
    // Stage the tree.
    let stage_root = ledger.dir().join("tmp-round");
    std::fs::create_dir_all(&stage_root).map_err(write_err(&stage_root))?;
    let stage = tempfile::Builder::new()
        .prefix("stage-")
        .tempdir_in(&stage_root)
        .map_err(write_err(&stage_root))?;
    for (rel, src) in committed_files(l) {
        link_or_copy(&src, &stage.path().join(&rel))?;
    }
    link_tree(&l.candidate, &stage.path().join("candidate"))?;
    for (name, bytes) in docs {
        let p = stage.path().join(name);
        std::fs::write(&p, bytes).map_err(write_err(&p))?;
    }

    Ok((stage, stage_root))
}

/// The candidate's files were committed through hard links in a staging
/// folder that is gone now: name their originals, so the next round's
/// commit reads its delta bases from there instead of decoding them.
fn remember_candidate(ledger: &Ledger, l: &RoundLayout, tree: &bat_ledger::TreeId) {
    let Ok(files) = ledger.walk_files(tree) else {
        return;
    };
    let originals: Vec<_> = files
        .into_iter()
        .filter_map(|f| {
            let rel = f.path.strip_prefix("candidate/")?;
            Some((f.id, l.candidate.join(rel)))
        })
        .collect();
    ledger.remember_file_sources(&originals);
}

/// Stage the round's child logs that its loop record names with a tree
/// path (`logs/<name>`, see [`super::meta::LogRef`]): the bytes must still
/// have the recorded sha256, so the metadata and the committed file agree.
/// The files outside the ledger are left alone; the loop removes them once
/// the commit is durable.
fn stage_logs(stage: &Path, opts: &CommitRoundOptions, round_id: &str) -> Result<(), RoundError> {
    let Some(lm) = &opts.loop_meta else {
        return Ok(());
    };
    let bad = |reason: String| RoundError::Metadata {
        what: format!("round {round_id}"),
        reason,
    };
    let mut seen = std::collections::BTreeSet::new();
    for (name, log) in &lm.logs {
        if log.tree.is_none() {
            continue;
        }
        let file = log.tree_file_name().ok_or_else(|| {
            bad(format!(
                "log {name} has a tree path outside logs/: {:?}",
                log.tree
            ))
        })?;
        if !seen.insert(file) {
            return Err(bad(format!("two logs are named logs/{file}")));
        }
        let src = Path::new(&log.path);
        let sha = super::meta::log_sha256(src).map_err(RoundError::io(src))?;
        if sha != log.sha256 {
            return Err(bad(format!(
                "log {} no longer has the recorded sha256 {}",
                src.display(),
                log.sha256
            )));
        }
        // The child has ended and bat wrote the file, so nothing changes
        // it between the check and the link.
        link_or_copy(src, &stage.join(super::meta::LOG_TREE_DIR).join(file))?;
    }
    Ok(())
}

/// The commit metadata: one typed document (see `super::meta`), which
/// also yields the commit's indexed fields.
fn commit_metadata(
    l: &RoundLayout,
    opts: &CommitRoundOptions,
    c: &CheckedRound,
    f: &Facts<'_>,
    budget: serde_json::Value,
) -> RoundMeta {
    let (gate_status, starting, trained_from, raw_kept) =
        (f.gate_status, f.starting, f.trained_from, f.raw_kept);
    RoundMeta {
        schema: super::meta::ROUND_META_SCHEMA,
        kind: super::meta::ROUND_KIND.into(),
        round_id: c.round_id.clone(),
        target_stage: c.target_stage.clone(),
        next_target_stage: c.gate.target_stage.clone(),
        gate_status,
        selection_reason: c.gate.selection_reason.into(),
        candidate_checkpoint_sha256: c.candidate_identity.clone(),
        starting_checkpoint_sha256: starting.to_string(),
        trained_from_checkpoint_sha256: trained_from.to_string(),
        raw_eval_sha256: c.raw.sha256.clone(),
        raw_eval_blake3: c.raw.blake3.clone(),
        raw_eval_kept: raw_kept,
        layout: l.layout.as_str().into(),
        scores: scores(&c.summary),
        budget,
        replay_of: opts.replay.as_ref().map(|r| r.replay_of.clone()),
        replay_of_round_id: opts.replay.as_ref().map(|r| r.replay_of_round_id.clone()),
        ablation: opts.replay.as_ref().map(|r| r.ablation_text()),
        ablation_overrides: opts.replay.as_ref().map(|r| ablation_object(&r.ablation)),
        inherited: opts.replay.as_ref().map(|r| r.inherited),
        loop_meta: opts.loop_meta.clone(),
    }
}

/// Record a validated round; `provenance` is `provenance.json`'s bytes.
pub(crate) fn record(
    ledger: &mut Ledger,
    l: &RoundLayout,
    opts: &CommitRoundOptions,
    branch: &str,
    c: CheckedRound,
    provenance: Vec<u8>,
    ctx: &Ctx<'_>,
) -> Result<RoundCommit, RoundError> {
    let gate_status = GateStatus::from_promoted(c.gate.promoted);
    let trained_from = c
        .gate
        .gate
        .get("baseline_checkpoint_sha256")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string();
    let starting = c
        .gate
        .prescription
        .get("starting_checkpoint_sha256")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string();

    // The private copy first: a failure afterwards leaves only a harmless file.
    let kept = match (&c.raw.bytes, &c.raw.blake3, opts.keep_raw_eval) {
        (Some(bytes), Some(b3), true) => Some(keep_private(ledger, b3, bytes)?),
        _ => None,
    };
    let raw_kept = kept.is_some()
        || c.raw
            .blake3
            .as_ref()
            .is_some_and(|b| ledger.dir().join(PRIVATE_RAW_EVAL_DIR).join(b).is_file());

    let facts = Facts {
        gate_status,
        starting: &starting,
        trained_from: &trained_from,
        raw_kept,
    };
    let (round_json, budget) = round_document(l, opts, &c, &facts);
    let firewall_json = firewall_document(&c, opts);

    let (stage, stage_root) = stage_tree(
        ledger,
        l,
        [
            ("round.json", pretty(&round_json)),
            ("firewall.json", pretty(&firewall_json)),
            ("provenance.json", provenance),
            ("baseline-summary.json", c.baseline_bytes.clone()),
        ],
    )?;
    stage_logs(stage.path(), opts, &c.round_id)?;

    let meta = commit_metadata(l, opts, &c, &facts, budget);
    let fields: BTreeMap<String, FieldValue> = meta.index_fields();
    let overall = meta
        .scores
        .get("overall")
        .and_then(serde_json::Value::as_f64)
        .map(|x| format!(" overall {x:.4}"))
        .unwrap_or_default();
    let message = opts.message.clone().unwrap_or_else(|| {
        format!(
            "Round {} ({}): {gate_status}{overall}",
            c.round_id, c.target_stage
        )
    });
    let req = CommitRequest {
        message,
        author: opts.author.clone().unwrap_or_else(|| "unknown".into()),
        time: None,
        metadata: meta.to_value(),
        fields,
        branch: (branch != "HEAD").then(|| branch.to_string()),
        // The round was validated against the branch's promoted state; a
        // branch that moved meanwhile may have changed it.
        on_moved: OnMoved::Fail,
        delta_base: None,
        orphan: opts.orphan_branch,
        // A promotion moves the branch's promoted ref in the commit's own
        // transaction: no state has the round without its promotion.
        also_move: if gate_status.is_promote() && branch != "HEAD" {
            vec![RefMove {
                name: format!("{PROMOTED_PREFIX}{branch}"),
                expected: promoted_ref(ledger, branch)?,
                message: format!("round {}: promote", c.round_id),
            }]
        } else {
            Vec::new()
        },
    };
    let out = ledger.commit_dir(stage.path(), &req, ctx.progress, ctx.cancel)?;
    drop(stage);
    let _ = std::fs::remove_dir(&stage_root);
    remember_candidate(ledger, l, &out.tree);

    Ok(RoundCommit {
        commit: out.commit,
        round_id: c.round_id,
        gate_status,
        refname: out.refname,
        metadata: meta,
        raw_eval_kept: kept,
        warnings: c
            .raw_copies_in_candidate
            .iter()
            .map(|p| {
                format!(
                    "{p} has the raw evaluation's bytes; it is part of the candidate model and so of the commit"
                )
            })
            .collect(),
    })
}
