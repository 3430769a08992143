//! The recorded evaluation cells of an arm, read from the ledger, and the
//! score matrices built from them.
//!
//! # Where cells come from
//! Every round commit holds its candidate's evaluation summary at
//! `candidate-eval/summary.json` and, in its first round, the initial
//! checkpoint's at `baseline-summary.json`. A summary lists its *cells*: one
//! per (track, task, repeat), each with `task_score`, `agentic_score`,
//! `overall_score` (= ½ task + ½ agentic) and the stage scores `S1`…`S5`.
//! An audit of a round (`bat eval attach --role audit`) is a side commit
//! tagged `audits/<round id>/<protocol>` whose tree adds
//! `audit/<protocol>/summary.json`, with cells of the same form.
//!
//! # How each headline score maps to cells
//! The summary's headline numbers are plain means over its cells
//! ([`bat_contract::summary::build_summary`]), so each [`Score`] picks one
//! number per cell and the stratum of a cell is its (track, task):
//!
//! | score      | value of a cell        | cells used        |
//! |------------|------------------------|-------------------|
//! | `overall`  | `overall_score`        | all               |
//! | `task`     | `task_score`           | all               |
//! | `agentic`  | `agentic_score`        | all               |
//! | `S1`…`S5`  | `stages.Sk`            | all               |
//! | `track:T`  | `overall_score`        | cells of track T  |
//!
//! For one seed, the mean of a score's matrix is exactly the summary's
//! `means.overall`, `means.task`, `means.agentic`, `stage_scores.Sk` or
//! `track_scores.T`. For an arm of several seeds the runs of a stratum are
//! every seed's repeats of that task, pooled.
//!
//! # Which checkpoint
//! The *checkpoint after round k* of a member is the candidate of its
//! newest round up to k that was inherited (promoted, or any candidate of a
//! `gate=off` replay) and not reverted since (`bat revert` in the member's
//! history), scored by that round's candidate evaluation; with
//! none inherited yet it is the initial checkpoint, scored by the first
//! round's `baseline-summary.json`. The *final* checkpoint is the
//! checkpoint after the member's last round.

use std::collections::BTreeMap;

use bat_ledger::{CommitId, Ledger};
use serde::Serialize;

use super::arms::ArmGroup;
use super::stats::{ScoreMatrix, Stratum};
use super::ExperimentError;
use crate::inspect::audit::list_audits;
use crate::round::meta::RoundMeta;
use crate::round::{reverted_rounds, round_commits};

/// One evaluation cell.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Cell {
    /// Track.
    pub track: String,
    /// Task id.
    pub task: String,
    /// Repeat, as written (a number in text form).
    pub repeat: String,
    /// `task_score`.
    pub task_score: f64,
    /// `agentic_score`.
    pub agentic: f64,
    /// `overall_score`.
    pub overall: f64,
    /// Stage scores by stage id.
    pub stages: BTreeMap<String, f64>,
}

/// The cells of one evaluation summary.
#[derive(Debug, Clone, PartialEq, Default, Serialize)]
pub struct Evaluation {
    /// Its cells, in the summary's order.
    pub cells: Vec<Cell>,
}

/// A quantity compared between arms.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(into = "String")]
pub enum Score {
    /// `overall_score` of every cell.
    Overall,
    /// `task_score` of every cell.
    Task,
    /// `agentic_score` of every cell.
    Agentic,
    /// One stage's score of every cell.
    Stage(String),
    /// `overall_score` of the cells of one track.
    Track(String),
}

impl From<Score> for String {
    fn from(s: Score) -> String {
        s.name()
    }
}

impl Score {
    /// `overall`, `task`, `agentic`, `S3`, `track:T`.
    pub fn name(&self) -> String {
        match self {
            Score::Overall => "overall".into(),
            Score::Task => "task".into(),
            Score::Agentic => "agentic".into(),
            Score::Stage(s) => s.clone(),
            Score::Track(t) => format!("track:{t}"),
        }
    }

    /// This score's value for `cell` (`None`: the cell does not count).
    pub fn value(&self, cell: &Cell) -> Option<f64> {
        match self {
            Score::Overall => Some(cell.overall),
            Score::Task => Some(cell.task_score),
            Score::Agentic => Some(cell.agentic),
            Score::Stage(s) => cell.stages.get(s).copied(),
            Score::Track(t) => (cell.track == *t).then_some(cell.overall),
        }
    }

    /// Every score the evaluations have: overall, task, agentic, each stage,
    /// each track (sorted).
    pub fn all_of<'a>(evals: impl IntoIterator<Item = &'a Evaluation>) -> Vec<Score> {
        let mut stages = std::collections::BTreeSet::new();
        let mut tracks = std::collections::BTreeSet::new();
        for e in evals {
            for c in &e.cells {
                stages.extend(c.stages.keys().cloned());
                tracks.insert(c.track.clone());
            }
        }
        let mut out = vec![Score::Overall, Score::Task, Score::Agentic];
        out.extend(stages.into_iter().map(Score::Stage));
        out.extend(tracks.into_iter().map(Score::Track));
        out
    }
}

impl Evaluation {
    /// Read the cells of a summary document (`cells` of a
    /// `bat_eval_summary`); `None` when it has none.
    pub fn from_summary(v: &serde_json::Value) -> Option<Evaluation> {
        let cells = v.get("cells")?.as_array()?;
        let mut out = Vec::with_capacity(cells.len());
        for c in cells {
            let s = |k: &str| {
                c.get(k)
                    .and_then(serde_json::Value::as_str)
                    .map(str::to_string)
            };
            let f = |k: &str| c.get(k).and_then(serde_json::Value::as_f64);
            let (Some(track), Some(task), Some(task_score), Some(agentic), Some(overall)) = (
                s("track"),
                s("task_id"),
                f("task_score"),
                f("agentic_score"),
                f("overall_score"),
            ) else {
                continue;
            };
            let stages = c
                .get("stages")
                .and_then(serde_json::Value::as_object)
                .map(|m| {
                    m.iter()
                        .filter_map(|(k, v)| v.as_f64().map(|x| (k.clone(), x)))
                        .collect()
                })
                .unwrap_or_default();
            let repeat = match c.get("repeat") {
                Some(serde_json::Value::String(r)) => r.clone(),
                Some(r) => r.to_string(),
                None => String::new(),
            };
            out.push(Cell {
                track,
                task,
                repeat,
                task_score,
                agentic,
                overall,
                stages,
            });
        }
        (!out.is_empty()).then_some(Evaluation { cells: out })
    }

    /// The (track, task) strata and how many repeats each has.
    pub fn repeats(&self) -> BTreeMap<(String, String), usize> {
        let mut out = BTreeMap::new();
        for c in &self.cells {
            *out.entry((c.track.clone(), c.task.clone())).or_insert(0) += 1;
        }
        out
    }
}

/// The matrix of `score` over `evals` (one per seed): one stratum per
/// (track, task), sorted; its runs every matching cell of every
/// evaluation, grouped by evaluation in the order given, and `seeds` how
/// many runs each evaluation gave (a seed's repeats stay together, so the
/// bootstrap can draw seeds before their repeats).
pub fn matrix<'a>(evals: impl IntoIterator<Item = &'a Evaluation>, score: &Score) -> ScoreMatrix {
    // (track, task) → (runs, runs per seed)
    type Runs = (Vec<f64>, Vec<usize>);
    let mut by: BTreeMap<(&str, &str), Runs> = BTreeMap::new();
    let evals: Vec<&Evaluation> = evals.into_iter().collect();
    for (k, e) in evals.iter().enumerate() {
        for c in &e.cells {
            if let Some(x) = score.value(c) {
                let (runs, seeds) = by.entry((&c.track, &c.task)).or_default();
                runs.push(x);
                seeds.resize(k + 1, 0);
                seeds[k] += 1;
            }
        }
    }
    ScoreMatrix {
        strata: by
            .into_iter()
            .map(|((t, k), (runs, seeds))| Stratum {
                track: t.to_string(),
                task: k.to_string(),
                runs,
                seeds: seeds.into_iter().filter(|n| *n > 0).collect(),
            })
            .collect(),
    }
}

/// One recorded audit of a round.
#[derive(Debug, Clone, Serialize)]
pub struct Audit {
    /// The audit's protocol id.
    pub protocol_id: String,
    /// Its cells.
    pub evaluation: Evaluation,
}

/// One round of a member.
#[derive(Debug, Clone, Serialize)]
pub struct RoundCells {
    /// Round id (`r01`).
    pub round_id: String,
    /// The round commit.
    pub commit: CommitId,
    /// Whether its candidate became the member's checkpoint and stayed it
    /// (a round whose promotion `bat revert` undid did not).
    pub inherited: bool,
    /// The candidate's evaluation (the gating one).
    pub candidate: Option<Evaluation>,
    /// The round's audits.
    pub audits: Vec<Audit>,
    /// The round metadata.
    #[serde(skip)]
    pub meta: RoundMeta,
}

/// One member (seed) of an arm with its rounds, oldest first.
#[derive(Debug, Clone, Serialize)]
pub struct MemberCells {
    /// The branch or revision.
    pub name: String,
    /// Its commit.
    pub head: CommitId,
    /// The initial checkpoint's evaluation (`baseline-summary.json` of the
    /// first round).
    pub base: Option<Evaluation>,
    /// Rounds, oldest first.
    pub rounds: Vec<RoundCells>,
}

impl MemberCells {
    /// The evaluation of the checkpoint after the round at `index` (see the
    /// module docs), with the round id whose candidate it is (`None`: the
    /// initial checkpoint).
    pub fn checkpoint_after(&self, index: usize) -> (Option<&str>, Option<&Evaluation>) {
        let end = (index + 1).min(self.rounds.len());
        for r in self.rounds[..end].iter().rev() {
            if r.inherited {
                if let Some(e) = &r.candidate {
                    return (Some(&r.round_id), Some(e));
                }
            }
        }
        (None, self.base.as_ref())
    }

    /// The final checkpoint's evaluation.
    pub fn final_checkpoint(&self) -> (Option<&str>, Option<&Evaluation>) {
        if self.rounds.is_empty() {
            return (None, self.base.as_ref());
        }
        self.checkpoint_after(self.rounds.len() - 1)
    }
}

/// An arm with every member's cells.
#[derive(Debug, Clone, Serialize)]
pub struct ArmCells {
    /// The arm.
    pub group: ArmGroup,
    /// Its members, in the group's order.
    pub members: Vec<MemberCells>,
}

fn summary_at(
    ledger: &Ledger,
    commit: &CommitId,
    path: &str,
) -> Result<Option<Evaluation>, ExperimentError> {
    let c = ledger.read_commit(commit)?;
    let Some(e) = ledger.lookup_path(&c.tree, path)? else {
        return Ok(None);
    };
    let bytes = ledger.read_bytes(&e.id)?;
    let v: serde_json::Value =
        serde_json::from_slice(&bytes).map_err(|err| ExperimentError::BadSummary {
            commit: commit.to_string(),
            path: path.to_string(),
            reason: err.to_string(),
        })?;
    Ok(Evaluation::from_summary(&v))
}

/// Read every member's rounds, evaluations and audits.
pub fn gather(ledger: &Ledger, group: &ArmGroup) -> Result<ArmCells, ExperimentError> {
    let mut members = Vec::with_capacity(group.members.len());
    for m in &group.members {
        let mut infos = round_commits(ledger, m.head).map_err(|e| ExperimentError::Round {
            name: m.name.clone(),
            reason: e.to_string(),
        })?;
        if infos.is_empty() {
            return Err(ExperimentError::NoRounds {
                arm: group.spec.clone(),
                name: m.name.clone(),
            });
        }
        infos.reverse();
        let reverted = reverted_rounds(ledger, m.head).map_err(|e| ExperimentError::Round {
            name: m.name.clone(),
            reason: e.to_string(),
        })?;
        let base = summary_at(ledger, &infos[0].commit, "baseline-summary.json")?;
        let mut rounds = Vec::with_capacity(infos.len());
        for info in infos {
            let candidate = summary_at(ledger, &info.commit, crate::inspect::SUMMARY_PATH)?;
            let mut audits = Vec::new();
            for (protocol_id, audit_commit) in
                list_audits(ledger, &info.commit).map_err(|e| ExperimentError::Round {
                    name: m.name.clone(),
                    reason: e.to_string(),
                })?
            {
                let path = format!("audit/{protocol_id}/summary.json");
                if let Some(evaluation) = summary_at(ledger, &audit_commit, &path)? {
                    audits.push(Audit {
                        protocol_id,
                        evaluation,
                    });
                }
            }
            rounds.push(RoundCells {
                round_id: info.round_id.clone(),
                commit: info.commit,
                inherited: info.metadata.inherited() && !reverted.contains(&info.commit),
                candidate,
                audits,
                meta: info.metadata,
            });
        }
        members.push(MemberCells {
            name: m.name.clone(),
            head: m.head,
            base,
            rounds,
        });
    }
    Ok(ArmCells {
        group: group.clone(),
        members,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn summary() -> serde_json::Value {
        serde_json::json!({"cells": [
            {"track": "a", "task_id": "t1", "repeat": 0, "task_score": 0.2, "agentic_score": 0.4,
             "overall_score": 0.3, "stages": {"S1": 0.1, "S2": 0.7}},
            {"track": "a", "task_id": "t1", "repeat": 1, "task_score": 0.6, "agentic_score": 0.0,
             "overall_score": 0.3, "stages": {"S1": 0.3, "S2": 0.5}},
            {"track": "b", "task_id": "t2", "repeat": 0, "task_score": 1.0, "agentic_score": 0.8,
             "overall_score": 0.9, "stages": {"S1": 0.5, "S2": 0.9}},
        ]})
    }

    #[test]
    fn matrices_rederive_the_summary_means() {
        let e = Evaluation::from_summary(&summary()).expect("cells");
        let scores = Score::all_of([&e]);
        let names: Vec<String> = scores.iter().map(Score::name).collect();
        assert_eq!(
            names,
            ["overall", "task", "agentic", "S1", "S2", "track:a", "track:b"]
        );
        let mean = |s: &Score| super::super::stats::mean(&matrix([&e], s));
        assert!((mean(&Score::Overall) - 0.5).abs() < 1e-12);
        assert!((mean(&Score::Task) - 0.6).abs() < 1e-12);
        assert!((mean(&Score::Stage("S2".into())) - 0.7).abs() < 1e-12);
        assert!((mean(&Score::Track("a".into())) - 0.3).abs() < 1e-12);
        let m = matrix([&e, &e], &Score::Overall);
        assert_eq!(m.strata.len(), 2);
        assert_eq!(m.strata[0].runs.len(), 4, "two seeds × two repeats");
        assert_eq!(m.strata[0].seeds, [2, 2]);
        assert_eq!(e.repeats()[&("a".to_string(), "t1".to_string())], 2);
    }
}
