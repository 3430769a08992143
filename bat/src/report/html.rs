//! `bat report`: one self-contained HTML page about a campaign and its
//! replays (no script or font from elsewhere, no network): per-round score
//! curves, the curriculum, the audit gap, compute, checkpoint drift, the
//! table of rounds and the facts a reviewer needs to reproduce it.
//!
//! The data is gathered by [`collect`] (reads the ledger) and turned into
//! bytes by [`render`] (pure), so the page for a given ledger state is
//! deterministic apart from the generation time the caller passes in.

use std::collections::BTreeSet;
use std::fmt::Write as _;

use bat_ledger::Ledger;
use serde::Deserialize;

use super::arm_scores::{arm_scores, ArmScoreRow};
use super::metrics::{round_metrics, union_keys, MetricKey, Metrics};
use super::svg::{self, esc, Plot, Point, Series};
use super::Source;
use crate::experiment::compare::{differences_of, Difference, Field};
use crate::experiment::stats::Bootstrap;
use crate::inspect::diff::DiffOptions;
use crate::inspect::drift::{candidate_drift, trained_from, Drift};
use crate::inspect::rounds::{round_rows, RoundRow, RoundsError, STAGES};
use crate::inspect::{InspectError, RoundTree};
use crate::round::steps::StepMetrics;
use bat_contract::pack::Pack;
use bat_contract::vocabulary::GateStatus;

/// Errors of `bat report`.
#[derive(Debug, thiserror::Error)]
pub enum ReportError {
    /// Listing rounds failed.
    #[error(transparent)]
    Rounds(#[from] RoundsError),
    /// Reading a round's files failed (boxed: large and rare).
    #[error(transparent)]
    Inspect(Box<InspectError>),
    /// A listed branch holds no round commit.
    #[error("{name} holds no round commits")]
    NoRounds {
        /// The branch or revision.
        name: String,
    },
    /// A branch or revision named does not resolve (boxed: large, rare).
    #[error(transparent)]
    Revision(Box<crate::round::RoundError>),
    /// An arm group names nothing or something unknown (boxed: large, rare).
    #[error(transparent)]
    Arms(Box<crate::experiment::ExperimentError>),
    /// `--metric KEY` names a metric no reported round has.
    #[error("no round of the reported arms has the metric {key}")]
    UnknownMetric {
        /// The key as given.
        key: String,
        /// Every metric key the reported rounds have, sorted.
        known: Vec<String>,
    },
}

impl bat_ledger::Diagnostic for ReportError {
    fn kind(&self) -> bat_ledger::ErrorKind {
        match self {
            ReportError::Rounds(e) => e.kind(),
            ReportError::Inspect(e) => e.kind(),
            ReportError::Revision(e) => e.kind(),
            ReportError::Arms(e) => e.kind(),
            ReportError::UnknownMetric { .. } => bat_ledger::ErrorKind::Usage,
            _ => bat_ledger::ErrorKind::User,
        }
    }

    fn hint(&self) -> Option<String> {
        match self {
            ReportError::Rounds(e) => e.hint(),
            ReportError::Inspect(e) => e.hint(),
            ReportError::Revision(e) => e.hint(),
            ReportError::Arms(e) => e.hint(),
            ReportError::UnknownMetric { known, .. } if known.is_empty() => Some(
                "these rounds record no health file numbers and no per-track or per-stage scores"
                    .to_string(),
            ),
            ReportError::UnknownMetric { known, .. } => {
                Some(format!("known metrics: {}", known.join(", ")))
            }
            _ => None,
        }
    }

    fn code(&self) -> Option<String> {
        match self {
            ReportError::Rounds(e) => e.code(),
            ReportError::Inspect(e) => e.code(),
            ReportError::Revision(e) => e.code(),
            ReportError::Arms(e) => e.code(),
            _ => None,
        }
    }
}

impl From<crate::round::RoundError> for ReportError {
    fn from(e: crate::round::RoundError) -> Self {
        ReportError::Revision(Box::new(e))
    }
}

impl From<crate::experiment::ExperimentError> for ReportError {
    fn from(e: crate::experiment::ExperimentError) -> Self {
        ReportError::Arms(Box::new(e))
    }
}

impl From<InspectError> for ReportError {
    fn from(e: InspectError) -> Self {
        ReportError::Inspect(Box::new(e))
    }
}

/// What to include.
#[derive(Debug, Clone)]
pub struct ReportOptions {
    /// Compute checkpoint drift (reads every candidate's safetensors).
    pub drift: bool,
    /// How a reader reaches the ledger, for the clone command.
    pub ledger_location: String,
    /// When the page was generated (shown, not used otherwise).
    pub generated: String,
    /// The bootstrap of the arm statistics (per-round Overall bands and
    /// the audit-gap slope flag).
    pub bootstrap: Bootstrap,
    /// Custom metrics to plot, one curve per arm each (`health.<key>`,
    /// `eval.track.<name>`, `eval.stage.<S>`; see [`super::metrics`]).
    pub metrics: Vec<String>,
    /// Differences between the arms the caller accepts
    /// (`--allow-difference`).
    pub allow: Vec<Field>,
}

/// One arm: a listed branch and its rounds.
#[derive(Debug, Clone)]
pub struct Arm {
    /// The branch as given.
    pub source: Source,
    /// Rounds, oldest first.
    pub rows: Vec<RoundRow>,
    /// Drift of each round's candidate from the checkpoint it trained from
    /// (same index as `rows`; `None` for rounds that trained from the
    /// initial checkpoint and where unavailable).
    pub drift: Vec<Option<Drift>>,
    /// Reproduction facts.
    pub facts: ArmFacts,
    /// The custom metrics of each round (same index as `rows`); empty
    /// when no `--metric` was asked for.
    pub metrics: Vec<Metrics>,
    /// The step metrics of each round (same index as `rows`; `None` for
    /// rounds whose trainer wrote none).
    pub steps: Vec<Option<StepMetrics>>,
}

/// What a reviewer needs to reproduce an arm.
#[derive(Debug, Clone, Default)]
pub struct ArmFacts {
    /// sha256 of the source grid the first round was built from.
    pub source_digest: Option<String>,
    /// The pack: a path, or the embedded default.
    pub pack: String,
    /// The pack's `reward_version`, when the pack could be read.
    pub reward_version: Option<String>,
    /// The evaluation protocol id.
    pub protocol_id: Option<String>,
    /// The campaign's run id.
    pub run_id: Option<String>,
    /// bat versions that recorded the rounds.
    pub bat_versions: Vec<String>,
    /// The command that replays (verifies or re-ablates) this arm.
    pub replay_command: String,
}

/// Everything the page shows.
#[derive(Debug, Clone)]
pub struct ReportData {
    /// Arm statistics (one arm per name given; a group's branches are its
    /// seeds), or why they could not be computed.
    pub arm_scores: Result<Vec<ArmScoreRow>, String>,
    /// Where the arms differ in what a comparison needs them to share
    /// (`bat compare`'s check), or why it could not be read.
    pub differences: Result<Vec<Difference>, String>,
    /// The arms, in the order given.
    pub arms: Vec<Arm>,
    /// Options used.
    pub options: ReportOptions,
    /// Whether drift was computed.
    pub drift: bool,
}

#[derive(Deserialize)]
struct Manifest {
    source: Option<ManifestSource>,
}

#[derive(Deserialize)]
struct ManifestSource {
    sha256: Option<String>,
}

/// The reproduction facts of an arm's rows (oldest first, at least one).
pub fn facts(ledger: &Ledger, rows: &[RoundRow]) -> Result<ArmFacts, ReportError> {
    let first = &rows[0];
    let last = &rows[rows.len() - 1];
    let tree = RoundTree::open(ledger, first.commit)?;
    let source_digest = tree
        .json("data/manifest.json")?
        .and_then(|v| serde_json::from_value::<Manifest>(v).ok())
        .and_then(|m| m.source)
        .and_then(|s| s.sha256);
    let campaign = tree
        .round
        .as_ref()
        .and_then(|m| m.loop_meta.as_ref())
        .map(|l| l.campaign.clone());
    let (pack, reward_version) = match campaign.as_ref().and_then(|c| c.pack.clone()) {
        None => (
            "the default pack embedded in bat".to_string(),
            Pack::default_pack()
                .get("reward_version")
                .and_then(|v| v.as_str())
                .map(str::to_string),
        ),
        Some(p) => (
            p.display().to_string(),
            Pack::load(&p).ok().and_then(|k| {
                k.get("reward_version")
                    .and_then(|v| v.as_str())
                    .map(str::to_string)
            }),
        ),
    };
    let bat_versions: BTreeSet<String> =
        rows.iter().filter_map(|r| r.bat_version.clone()).collect();
    let replay_command = match (&first.replay_of, &last.replay_of, &first.ablation) {
        (Some(a), Some(b), Some(ab)) if !ab.is_empty() => {
            let flags: Vec<String> = ab.split(',').map(|kv| format!("--ablate {kv}")).collect();
            format!("bat replay {a}..{b} {}", flags.join(" "))
        }
        (Some(a), Some(b), _) => format!("bat replay {a}..{b}"),
        _ => format!("bat replay {}..{} --verify", first.commit, last.commit),
    };
    Ok(ArmFacts {
        source_digest,
        pack,
        reward_version,
        protocol_id: campaign.map(|c| c.protocol_id),
        run_id: first.run_id.clone(),
        bat_versions: bat_versions.into_iter().collect(),
        replay_command,
    })
}

/// Read the rounds (and, with `opts.drift`, the candidates) of every
/// source.
pub fn collect(
    ledger: &Ledger,
    sources: &[Source],
    opts: &ReportOptions,
) -> Result<ReportData, ReportError> {
    let diff_opts = DiffOptions::default();
    let mut arms = Vec::with_capacity(sources.len());
    for s in sources {
        let rows = round_rows(ledger, &s.name, s.tip)?;
        if rows.is_empty() {
            return Err(ReportError::NoRounds {
                name: s.name.clone(),
            });
        }
        let mut drift = vec![None; rows.len()];
        if opts.drift {
            // Against what each round trained from (the promoted chain).
            let commits: Vec<_> = rows.iter().map(|r| r.commit).collect();
            for (i, base) in trained_from(ledger, &commits)?.into_iter().enumerate() {
                if let Some(base) = base {
                    let quiet = crate::Ctx::quiet();
                    drift[i] = candidate_drift(ledger, base, rows[i].commit, &diff_opts, &quiet)?;
                }
            }
        }
        let facts = facts(ledger, &rows)?;
        let metrics = if opts.metrics.is_empty() {
            Vec::new()
        } else {
            rows.iter()
                .map(|r| round_metrics(ledger, r.commit))
                .collect::<Result<Vec<Metrics>, InspectError>>()?
        };
        let steps = rows
            .iter()
            .map(|r| crate::round::steps::round_steps(ledger, r.commit))
            .collect::<Result<Vec<_>, InspectError>>()?;
        arms.push(Arm {
            source: s.clone(),
            rows,
            drift,
            facts,
            metrics,
            steps,
        });
    }
    check_metrics(&arms, &opts.metrics)?;
    let mut specs: Vec<String> = Vec::new();
    for s in sources {
        if !specs.contains(&s.arm) {
            specs.push(s.arm.clone());
        }
    }
    // The statistics read every evaluation cell; a ledger whose rounds
    // lack them still gets its report, with the reason in place of the
    // bands.
    let arm_scores = arm_scores(ledger, &specs, &opts.bootstrap, &crate::Ctx::quiet())
        .map_err(|e| e.to_string());
    let differences = differences_of(ledger, &specs, &opts.allow).map_err(|e| e.to_string());
    Ok(ReportData {
        arm_scores,
        differences,
        arms,
        drift: opts.drift,
        options: opts.clone(),
    })
}

/// Per-round `score` of each arm group: the mean over its seeds as the
/// line, the bootstrap interval as a band.
fn arm_band_plot(rows: &[ArmScoreRow], score: &str) -> Plot {
    let mut series: Vec<Series> = Vec::new();
    for r in rows
        .iter()
        .filter(|r| r.score == score && r.round.is_some())
    {
        let (Some(round), Some(mean)) = (r.round, r.mean) else {
            continue;
        };
        if series.last().is_none_or(|s| s.name != r.arm) {
            series.push(Series {
                name: r.arm.clone(),
                points: Vec::new(),
                line: true,
                band: Vec::new(),
            });
        }
        let s = series.last_mut().expect("pushed above");
        let x = round as f64;
        s.points.push(Point {
            x,
            y: mean,
            label: format!(
                "round {round} ({}) {} [{}, {}]",
                r.round_ids.as_deref().unwrap_or(""),
                fmt_num(mean),
                opt(r.ci_low),
                opt(r.ci_high)
            ),
            class: "",
        });
        if let (Some(lo), Some(hi)) = (r.ci_low, r.ci_high) {
            s.band.push((x, lo, hi));
        }
    }
    let name = if score == "overall" { "Overall" } else { score };
    Plot {
        id: format!(
            "plot-arms-{}",
            score.replace(|c: char| !c.is_ascii_alphanumeric(), "-")
        ),
        title: format!(
            "{name} per round: mean over each arm's seeds, with its confidence interval"
        ),
        y_ticks: None,
        series,
        empty_note: "no evaluation cells to resample".into(),
    }
}

/// Where the arms differ (nothing when they share every field): the
/// same fields and values as `bat compare`.
fn comparability_note(d: &ReportData, out: &mut String) {
    let Ok(diffs) = &d.differences else { return };
    if diffs.is_empty() {
        return;
    }
    let head = if diffs.iter().all(|x| x.allowed) {
        "Comparable only with allowed differences: the arms differ as listed."
    } else {
        "NOT COMPARABLE: the arms differ as listed (name each difference with --allow-difference FIELD to accept it)."
    };
    let _ = write!(out, "<div id=\"comparability\"><p><b>{head}</b></p><ul>");
    for x in diffs {
        let _ = write!(
            out,
            "<li><code>{}</code> differs{}<ul>",
            x.field.as_str(),
            if x.allowed { " (allowed)" } else { "" }
        );
        for (label, values) in &x.values {
            let _ = write!(out, "<li>{}: {}</li>", esc(label), esc(&values.join(" | ")));
        }
        out.push_str("</ul></li>");
    }
    out.push_str("</ul></div>");
}

/// The arm-statistics section: bands, the bootstrap used, and the
/// audit-gap slope of each arm with its flag.
fn arms_section(d: &ReportData, out: &mut String) {
    out.push_str("<h2 id=\"arms\">Arms with confidence intervals</h2>");
    comparability_note(d, out);
    let rows = match &d.arm_scores {
        Ok(rows) => rows,
        Err(why) => {
            let _ = write!(out, "<p class=\"muted\">Not computed: {}</p>", esc(why));
            return;
        }
    };
    let b = &d.options.bootstrap;
    let _ = write!(
        out,
        "<p class=\"muted\" id=\"bootstrap\">{:.0}% stratified bootstrap intervals: scheme <code>{}</code>, {} resamples, seed {} (the statistics of <code>bat compare</code>).</p><div class=\"grid2\">",
        b.level * 100.0,
        b.scheme.as_str(),
        b.resamples,
        b.seed
    );
    // Overall first, then every other score in the rows' order.
    let mut scores: Vec<&str> = vec!["overall"];
    for r in rows
        .iter()
        .filter(|r| r.round.is_some() && r.score != "audit_gap")
    {
        if !scores.contains(&r.score.as_str()) {
            scores.push(&r.score);
        }
    }
    for score in scores {
        svg::render(&arm_band_plot(rows, score), out);
    }
    out.push_str("</div>");
    let slopes: Vec<&ArmScoreRow> = rows
        .iter()
        .filter(|r| r.score == "audit_gap_slope")
        .collect();
    if slopes.is_empty() {
        out.push_str(
            "<p class=\"muted\">Audit-gap slope: fewer than two audited rounds in every arm.</p>",
        );
        return;
    }
    out.push_str("<table class=\"slopes\"><thead><tr><th class=\"l\">arm</th><th>audit-gap slope per round</th><th>CI low</th><th>CI high</th><th class=\"l\">flag</th></tr></thead><tbody>");
    for r in slopes {
        let flag = if r.above_zero() {
            "RISING: the gating scorer's lead over the audit grows (scorer overfitting)"
        } else {
            "–"
        };
        let _ = write!(
            out,
            "<tr data-arm=\"{a}\" data-rising=\"{}\"><td class=\"l\">{a}</td><td>{}</td><td>{}</td><td>{}</td><td class=\"l\">{flag}</td></tr>",
            r.above_zero(),
            r.mean.map(|v| format!("{v:+.4}")).unwrap_or_else(|| "–".into()),
            opt(r.ci_low),
            opt(r.ci_high),
            a = esc(&r.arm),
        );
    }
    out.push_str("</tbody></table>");
}

/// Every `--metric` key must name a metric some reported round has.
fn check_metrics(arms: &[Arm], wanted: &[String]) -> Result<(), ReportError> {
    if wanted.is_empty() {
        return Ok(());
    }
    let known: Vec<MetricKey> = union_keys(arms.iter().flat_map(|a| &a.metrics));
    for key in wanted {
        if !MetricKey::parse(key).is_some_and(|k| known.contains(&k)) {
            return Err(ReportError::UnknownMetric {
                key: key.clone(),
                known: known.iter().map(ToString::to_string).collect(),
            });
        }
    }
    Ok(())
}

/// One plot per `--metric` key, each arm a curve.
fn metric_plots(arms: &[Arm], wanted: &[String]) -> Vec<Plot> {
    wanted
        .iter()
        .filter_map(|key| MetricKey::parse(key).map(|k| (key, k)))
        .map(|(key, k)| {
            let series = arms
                .iter()
                .map(|a| {
                    series_of(a, |i, _| {
                        a.metrics.get(i).and_then(|m| m.get(&k)).map(|v| (*v, ""))
                    })
                })
                .collect();
            Plot {
                id: format!("plot-metric-{}", metric_slug(key)),
                title: key.clone(),
                y_ticks: None,
                series,
                empty_note: "no round has this metric".into(),
            }
        })
        .collect()
}

/// One plot per step metric name, each arm a curve over its global step
/// (a round's steps continue where the previous round's ended; see
/// [`super::tensorboard::global_steps`]). Empty when no round has steps.
fn step_plots(arms: &[Arm]) -> Vec<Plot> {
    let mut keys = std::collections::BTreeSet::new();
    for m in arms.iter().flat_map(|a| a.steps.iter().flatten()) {
        keys.extend(m.keys());
    }
    keys.into_iter()
        .map(|key| {
            let mut series = Vec::with_capacity(arms.len());
            for a in arms {
                let offsets = super::tensorboard::global_steps(&a.steps);
                let mut points = Vec::new();
                for ((m, r), off) in a.steps.iter().zip(&a.rows).zip(offsets) {
                    for (step, y) in m.iter().flat_map(|m| m.series(&key)) {
                        points.push(Point {
                            x: off as f64 + step as f64,
                            y,
                            label: format!("{} step {step} {}", r.round_id, fmt_num(y)),
                            class: "",
                        });
                    }
                }
                series.push(Series {
                    name: a.source.name.clone(),
                    points,
                    line: true,
                    band: Vec::new(),
                });
            }
            Plot {
                id: format!("plot-step-{}", metric_slug(&key)),
                title: format!("{key} per training step"),
                y_ticks: None,
                series,
                empty_note: "no round of this arm has this step metric".into(),
            }
        })
        .collect()
}

/// A key as an element id part: letters, digits and `-`.
fn metric_slug(key: &str) -> String {
    key.chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
        .collect()
}

const STYLE: &str = "
body{font:14px/1.45 system-ui,-apple-system,'Segoe UI',Roboto,sans-serif;margin:24px auto;max-width:1320px;padding:0 16px;color:#222}
h1{font-size:22px;margin:0 0 4px}h2{font-size:17px;margin:28px 0 8px;border-bottom:1px solid #ddd;padding-bottom:4px}
.grid2{display:grid;grid-template-columns:repeat(auto-fill,minmax(420px,1fr));gap:8px 18px}
figure{margin:0}figcaption{font-weight:600;font-size:13px}
svg.plot{width:100%;height:auto;background:#fff}
.frame{fill:none;stroke:#999;stroke-width:.6}.grid{stroke:#e6e6e6;stroke-width:.6}
.tick,.legend,.note{font-size:10px;fill:#555;stroke:none}.legend{fill:#222}
polyline{stroke-width:1.3}circle.hold{fill:#fff}circle.reverted{fill:#000;stroke:#000}
table{border-collapse:collapse;font-size:12px;font-variant-numeric:tabular-nums}
td,th{padding:2px 7px;border-bottom:1px solid #eee;text-align:right;white-space:nowrap}
th{background:#f6f6f6;position:sticky;top:0}td.l,th.l{text-align:left}
code,pre{font:12px ui-monospace,SFMono-Regular,Menlo,monospace}pre{background:#f6f6f6;padding:8px;overflow-x:auto}
.muted{color:#777}dl{display:grid;grid-template-columns:max-content 1fr;gap:2px 14px}dt{font-weight:600}dd{margin:0;word-break:break-all}
";

/// Records script errors on the root element before anything else runs,
/// so a test reading the DOM back sees them.
const ERROR_HOOK: &str = "window.addEventListener('error',function(e){var d=document.documentElement;d.setAttribute('data-errors',(d.getAttribute('data-errors')||'')+(e.message||'error')+';')});";

/// Checks that every plot drew the points it states and marks the body.
const SELF_CHECK: &str = "(function(){var bad=[];document.querySelectorAll('svg.plot').forEach(function(s){var n=s.querySelectorAll('circle.pt').length;if(String(n)!==s.getAttribute('data-points'))bad.push(s.id);s.querySelectorAll('g.series').forEach(function(g){if(String(g.querySelectorAll('circle.pt').length)!==g.getAttribute('data-points'))bad.push(s.id+'/'+g.getAttribute('data-series'))})});var b=document.body;b.setAttribute('data-plots',String(document.querySelectorAll('svg.plot').length));b.setAttribute('data-check',bad.length?'fail':'ok');if(bad.length)b.setAttribute('data-problems',bad.join(' '))})();";

fn series_of(arm: &Arm, f: impl Fn(usize, &RoundRow) -> Option<(f64, &'static str)>) -> Series {
    let points = arm
        .rows
        .iter()
        .enumerate()
        .filter_map(|(i, r)| {
            f(i, r).map(|(y, class)| Point {
                x: (i + 1) as f64,
                y,
                label: format!("{} {}", r.round_id, fmt_num(y)),
                class,
            })
        })
        .collect();
    Series {
        name: arm.source.name.clone(),
        points,
        line: true,
        band: Vec::new(),
    }
}

fn fmt_num(v: f64) -> String {
    if v == v.trunc() && v.abs() < 1e15 {
        format!("{v:.0}")
    } else if v.abs() >= 100.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.4}")
    }
}

fn plot(
    id: &str,
    title: &str,
    arms: &[Arm],
    empty: &str,
    f: impl Fn(&Arm, usize, &RoundRow) -> Option<(f64, &'static str)>,
) -> Plot {
    Plot {
        id: id.into(),
        title: title.into(),
        y_ticks: None,
        series: arms
            .iter()
            .map(|a| series_of(a, |i, r| f(a, i, r)))
            .collect(),
        empty_note: empty.into(),
    }
}

fn cumulative(arm: &Arm, pick: impl Fn(&RoundRow) -> Option<f64>) -> Vec<Option<f64>> {
    let mut sum = 0.0;
    arm.rows
        .iter()
        .map(|r| {
            pick(r).map(|v| {
                sum += v;
                sum
            })
        })
        .collect()
}

fn score_plots(arms: &[Arm]) -> Vec<Plot> {
    let mut out = vec![
        plot("plot-overall", "Overall", arms, "no scores", |_, _, r| {
            r.overall.map(|v| (v, ""))
        }),
        plot("plot-task", "Task mean", arms, "no scores", |_, _, r| {
            r.task.map(|v| (v, ""))
        }),
        plot(
            "plot-agentic",
            "Agentic mean",
            arms,
            "no scores",
            |_, _, r| r.agentic.map(|v| (v, "")),
        ),
    ];
    for (k, st) in STAGES.iter().enumerate() {
        out.push(plot(
            &format!("plot-{}", st.to_lowercase()),
            &format!("Stage {st}"),
            arms,
            "no scores",
            move |_, _, r| r.stage(k).map(|v| (v, "")),
        ));
    }
    out
}

fn curriculum_plot(arms: &[Arm]) -> Plot {
    let n = arms.len().max(1) as f64;
    let series = arms
        .iter()
        .enumerate()
        .map(|(ai, a)| {
            // Arms are nudged apart vertically so overlaid markers stay
            // visible.
            let nudge = (ai as f64 - (n - 1.0) / 2.0) * 0.12;
            let mut s = series_of(a, |_, r| {
                let stage = r.target_stage.as_deref()?;
                let k = STAGES.iter().position(|s| *s == stage)?;
                let class = if r.reverted {
                    "reverted"
                } else if r.gate_status.is_some_and(GateStatus::is_promote) {
                    "promote"
                } else {
                    "hold"
                };
                Some(((k + 1) as f64 + nudge, class))
            });
            for (p, r) in s.points.iter_mut().zip(a.rows.iter().filter(|r| {
                r.target_stage
                    .as_deref()
                    .is_some_and(|t| STAGES.contains(&t))
            })) {
                p.label = format!(
                    "{} {} {}{}",
                    r.round_id,
                    r.target_stage.as_deref().unwrap_or(""),
                    r.gate_status.map_or("?", GateStatus::as_str),
                    if r.reverted { " (reverted)" } else { "" }
                );
            }
            s
        })
        .collect();
    Plot {
        id: "plot-curriculum".into(),
        title:
            "Curriculum: target stage per round (filled: promoted, hollow: held, black: reverted)"
                .into(),
        y_ticks: Some(
            STAGES
                .iter()
                .enumerate()
                .map(|(i, s)| ((i + 1) as f64, s.to_string()))
                .collect(),
        ),
        series,
        empty_note: "no target stages recorded".into(),
    }
}

fn compute_plots(arms: &[Arm]) -> Vec<Plot> {
    let tokens = |r: &RoundRow| r.tokens;
    let wall = |r: &RoundRow| r.wall_seconds.or(r.trainer_wall_seconds);
    let cum_tokens: Vec<Vec<Option<f64>>> = arms.iter().map(|a| cumulative(a, tokens)).collect();
    let cum_wall: Vec<Vec<Option<f64>>> = arms.iter().map(|a| cumulative(a, wall)).collect();
    let arm_index = |a: &Arm| {
        arms.iter()
            .position(|b| std::ptr::eq(a, b))
            .expect("the arm is one of the list")
    };
    vec![
        plot(
            "plot-tokens",
            "Generated tokens per round",
            arms,
            "the trainer reported no token counts",
            |_, _, r| tokens(r).map(|v| (v, "")),
        ),
        plot(
            "plot-tokens-cumulative",
            "Generated tokens, cumulative",
            arms,
            "the trainer reported no token counts",
            |a, i, _| cum_tokens[arm_index(a)][i].map(|v| (v, "")),
        ),
        plot(
            "plot-wall",
            "Trainer wall seconds per round",
            arms,
            "no wall time recorded",
            |_, _, r| wall(r).map(|v| (v, "")),
        ),
        plot(
            "plot-wall-cumulative",
            "Trainer wall seconds, cumulative",
            arms,
            "no wall time recorded",
            |a, i, _| cum_wall[arm_index(a)][i].map(|v| (v, "")),
        ),
    ]
}

fn drift_plots(arms: &[Arm]) -> Vec<Plot> {
    let idx = |a: &Arm| {
        arms.iter()
            .position(|b| std::ptr::eq(a, b))
            .expect("the arm is one of the list")
    };
    vec![
        plot(
            "plot-drift-fraction",
            "Checkpoint drift: fraction of elements changed vs the checkpoint the round trained from",
            arms,
            "no safetensors candidates to compare",
            |a, i, _| {
                arms[idx(a)].drift[i]
                    .as_ref()
                    .and_then(|d| d.changed_fraction)
                    .map(|v| (v, ""))
            },
        ),
        plot(
            "plot-drift-l2",
            "Checkpoint drift: L2 norm of the update vs the checkpoint the round trained from",
            arms,
            "no safetensors candidates to compare",
            |a, i, _| arms[idx(a)].drift[i].as_ref().map(|d| (d.l2, "")),
        ),
    ]
}

fn opt(v: Option<f64>) -> String {
    v.map(fmt_num).unwrap_or_else(|| "–".into())
}

fn rounds_table(a: &Arm, out: &mut String) {
    out.push_str("<table class=\"rounds\"><thead><tr><th class=\"l\">round</th><th class=\"l\">commit</th><th class=\"l\">target</th><th class=\"l\">gate</th><th class=\"l\">promoted</th><th>Overall</th><th>task</th><th>agentic</th>");
    for s in STAGES {
        let _ = write!(out, "<th>{s}</th>");
    }
    out.push_str("<th>audit gap</th><th>steps</th><th>rollouts</th><th>tokens</th><th>wall s</th><th class=\"l\">checkpoint</th></tr></thead><tbody>");
    for r in &a.rows {
        let promoted = match (r.promoted, r.reverted) {
            (_, true) => "reverted",
            (true, false) => "yes",
            (false, false) => "no",
        };
        let _ = write!(
            out,
            "<tr data-commit=\"{c}\"><td class=\"l\">{}</td><td class=\"l\"><code title=\"{c}\">{}</code></td><td class=\"l\">{}</td><td class=\"l\">{}</td><td class=\"l\">{promoted}</td><td>{}</td><td>{}</td><td>{}</td>",
            esc(&r.round_id),
            r.commit.0.short(),
            esc(r.target_stage.as_deref().unwrap_or("–")),
            esc(r.gate_status.map_or("–", GateStatus::as_str)),
            opt(r.overall),
            opt(r.task),
            opt(r.agentic),
            c = r.commit,
        );
        for k in 0..STAGES.len() {
            let _ = write!(out, "<td>{}</td>", opt(r.stage(k)));
        }
        let _ = write!(
            out,
            "<td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td class=\"l\"><code title=\"{ck}\">{}</code></td></tr>",
            r.audit_gap.map(|g| format!("{g:+.3}")).unwrap_or_else(|| "–".into()),
            opt(r.steps),
            opt(r.rollouts),
            opt(r.tokens),
            opt(r.wall_seconds.or(r.trainer_wall_seconds)),
            esc(r.checkpoint.as_deref().map_or("–", |c| &c[..12.min(c.len())])),
            ck = esc(r.checkpoint.as_deref().unwrap_or("")),
        );
    }
    out.push_str("</tbody></table>");
}

fn compute_totals(arms: &[Arm], out: &mut String) {
    out.push_str("<table class=\"totals\"><thead><tr><th class=\"l\">arm</th><th class=\"l\">ablation</th><th>rounds</th><th>steps</th><th>rollouts</th><th>tokens</th><th>trainer wall s</th></tr></thead><tbody>");
    for a in arms {
        let sum = |f: fn(&RoundRow) -> Option<f64>| {
            let v: Vec<f64> = a.rows.iter().filter_map(f).collect();
            (!v.is_empty()).then(|| v.iter().sum::<f64>())
        };
        let ablation = a
            .rows
            .iter()
            .find_map(|r| r.ablation.clone())
            .unwrap_or_else(|| "(recorded method)".into());
        let _ = write!(
            out,
            "<tr><td class=\"l\">{}</td><td class=\"l\">{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            esc(&a.source.name),
            esc(&ablation),
            a.rows.len(),
            opt(sum(|r| r.steps)),
            opt(sum(|r| r.rollouts)),
            opt(sum(|r| r.tokens)),
            opt(sum(|r| r.wall_seconds.or(r.trainer_wall_seconds))),
        );
    }
    out.push_str("</tbody></table>");
}

fn facts_section(d: &ReportData, out: &mut String) {
    out.push_str("<h2 id=\"reproduce\">Reproduce</h2>");
    let loc = &d.options.ledger_location;
    let _ = write!(
        out,
        "<p>Clone the ledger (or the bundle or URL it was published as) and replay:</p><pre>bat clone {} campaign\ncd campaign\n",
        esc(loc)
    );
    for a in &d.arms {
        let _ = writeln!(out, "{}", esc(&a.facts.replay_command));
    }
    out.push_str("</pre>");
    for a in &d.arms {
        let f = &a.facts;
        let first = &a.rows[0];
        let last = &a.rows[a.rows.len() - 1];
        let _ = write!(
            out,
            "<h3>{}</h3><dl><dt>tip</dt><dd><code>{}</code></dd><dt>rounds</dt><dd>{} ({} … {})</dd><dt>first / last round commit</dt><dd><code>{}</code><br><code>{}</code></dd>",
            esc(&a.source.name),
            a.source.tip,
            a.rows.len(),
            esc(&first.round_id),
            esc(&last.round_id),
            first.commit,
            last.commit,
        );
        let row = |out: &mut String, k: &str, v: Option<&str>| {
            let _ = write!(
                out,
                "<dt>{}</dt><dd>{}</dd>",
                esc(k),
                v.map(esc)
                    .unwrap_or_else(|| "<span class=\"muted\">not recorded</span>".into())
            );
        };
        row(out, "run id", f.run_id.as_deref());
        row(out, "source grid sha256", f.source_digest.as_deref());
        row(out, "benchmark pack", Some(&f.pack));
        row(out, "reward version", f.reward_version.as_deref());
        row(out, "evaluation protocol", f.protocol_id.as_deref());
        row(out, "reward mode", first.reward_mode.as_deref());
        row(out, "ablation", first.ablation.as_deref());
        let versions = f.bat_versions.join(", ");
        row(
            out,
            "recorded by bat",
            (!versions.is_empty()).then_some(versions.as_str()),
        );
        out.push_str("</dl>");
    }
}

/// The page.
pub fn render(d: &ReportData) -> String {
    let arms = &d.arms;
    let total_rounds: usize = arms.iter().map(|a| a.rows.len()).sum();
    let mut out = String::with_capacity(64 * 1024 + total_rounds * 1200);
    let names: Vec<&str> = arms.iter().map(|a| a.source.name.as_str()).collect();
    let _ = write!(
        out,
        "<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\"><meta name=\"viewport\" content=\"width=device-width,initial-scale=1\"><title>bat report: {}</title><script>{ERROR_HOOK}</script><style>{STYLE}</style></head><body>",
        esc(&names.join(" vs "))
    );
    let _ = write!(
        out,
        "<h1>Campaign report: {}</h1><p class=\"muted\">{} rounds in {} arm(s); generated {} by bat {}. Arms are overlaid: x is the round's position in its arm.</p>",
        esc(&names.join(" vs ")),
        total_rounds,
        arms.len(),
        esc(&d.options.generated),
        env!("CARGO_PKG_VERSION"),
    );
    out.push_str("<h2 id=\"scores\">Scores per round (gating evaluation of each candidate)</h2><div class=\"grid2\">");
    for p in score_plots(arms) {
        svg::render(&p, &mut out);
    }
    out.push_str("</div><h2 id=\"curriculum\">Curriculum and gate</h2><div class=\"grid2\">");
    svg::render(&curriculum_plot(arms), &mut out);
    svg::render(
        &plot(
            "plot-audit-gap",
            "Audit gap per round (audit Overall − gating Overall; falling: scorer overfitting)",
            arms,
            "no audit evaluations attached (bat eval attach)",
            |_, _, r| r.audit_gap.map(|v| (v, "")),
        ),
        &mut out,
    );
    out.push_str("</div>");
    if !d.options.metrics.is_empty() {
        out.push_str("<h2 id=\"metrics\">Custom metrics (--metric)</h2><div class=\"grid2\">");
        for p in metric_plots(arms, &d.options.metrics) {
            svg::render(&p, &mut out);
        }
        out.push_str("</div>");
    }
    let steps = step_plots(arms);
    if !steps.is_empty() {
        out.push_str("<h2 id=\"steps\">Training steps (the trainer's step metrics; rounds follow one another on the step axis)</h2><div class=\"grid2\">");
        for p in steps {
            svg::render_with_x_label(&p, "step", &mut out);
        }
        out.push_str("</div>");
    }
    arms_section(d, &mut out);
    out.push_str("<h2 id=\"compute\">Compute</h2>");
    compute_totals(arms, &mut out);
    out.push_str("<div class=\"grid2\">");
    for p in compute_plots(arms) {
        svg::render(&p, &mut out);
    }
    out.push_str("</div><h2 id=\"drift\">Checkpoint drift</h2>");
    if d.drift {
        out.push_str("<div class=\"grid2\">");
        for p in drift_plots(arms) {
            svg::render(&p, &mut out);
        }
        out.push_str("</div>");
    } else {
        out.push_str("<p class=\"muted\">Not computed (--no-drift).</p>");
    }
    out.push_str("<h2 id=\"rounds\">Rounds</h2>");
    for a in arms {
        let _ = write!(out, "<h3>{}</h3>", esc(&a.source.name));
        rounds_table(a, &mut out);
    }
    facts_section(d, &mut out);
    let _ = writeln!(out, "<script>{SELF_CHECK}</script></body></html>");
    out
}
