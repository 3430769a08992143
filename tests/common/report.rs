//! A `bat demo` ledger (campaign + terminal-reward replay, 3 rounds each,
//! one audit attached to the campaign's r02), its `bat report`, and a
//! reader of the plots' points, shared by the report tests.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde_json::Value;

pub use super::bat_assert as bat;

pub fn ok(out: std::process::Output) -> Vec<u8> {
    assert!(
        out.status.success(),
        "failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out.stdout
}

/// A demo ledger with an audit on main's r02.
pub struct Campaign {
    pub dir: PathBuf,
    pub replay: String,
    /// Rounds per arm, oldest first: `bat log --json` round entries.
    pub main_log: Vec<Value>,
    pub replay_log: Vec<Value>,
}

fn log_rounds(dir: &Path, branch: &str) -> Vec<Value> {
    let out = ok(bat()
        .arg("-C")
        .arg(dir)
        .args(["--json", "log", branch])
        .output()
        .expect("log"));
    let v: Value = serde_json::from_slice(&out).expect("log JSON");
    let mut r: Vec<Value> = v
        .as_array()
        .expect("array")
        .iter()
        .filter(|e| e["metadata"]["kind"] == "bat_round")
        .cloned()
        .collect();
    r.reverse();
    r
}

pub fn campaign(tmp: &Path) -> Campaign {
    let dir = tmp.join("demo");
    let out = ok(bat()
        .arg("--json")
        .arg("demo")
        .arg(&dir)
        .args(["--rounds", "3", "--seeds", "1"])
        .output()
        .expect("demo"));
    let report: Value = serde_json::from_slice(&out).expect("demo JSON");
    let replay = report["replay_branch"]
        .as_str()
        .expect("replay branch")
        .to_string();
    let main_log = log_rounds(&dir, "main");
    // An audit of r02: its own gating summary with Overall lowered.
    let r02 = main_log[1]["id"].as_str().expect("id").to_string();
    let summary = ok(bat()
        .arg("-C")
        .arg(&dir)
        .args(["cat", &format!("{r02}:candidate-eval/summary.json")])
        .output()
        .expect("cat"));
    let mut s: Value = serde_json::from_slice(&summary).expect("summary");
    let o = s["means"]["overall"].as_f64().expect("overall");
    s["means"]["overall"] = (o - 0.04).into();
    let f = tmp.join("audit-summary.json");
    std::fs::write(&f, serde_json::to_vec(&s).expect("encode")).expect("write");
    ok(bat()
        .arg("-C")
        .arg(&dir)
        .args(["eval", "attach", &r02, "--summary"])
        .arg(&f)
        .args(["--role", "audit", "--protocol-id", "audit-b"])
        .output()
        .expect("attach"));
    let main_log = log_rounds(&dir, "main");
    let replay_log = log_rounds(&dir, &replay);
    Campaign {
        dir,
        replay,
        main_log,
        replay_log,
    }
}

/// `bat report main REPLAY -o FILE`; returns the HTML.
pub fn render(c: &Campaign, file: &Path) -> String {
    ok(bat()
        .arg("-C")
        .arg(&c.dir)
        .args(["report", "main", &c.replay, "-o"])
        .arg(file)
        .output()
        .expect("report"));
    std::fs::read_to_string(file).expect("the report")
}

/// A plot as drawn: stated total, and circles counted per series.
#[derive(Debug, Default)]
pub struct PlotPoints {
    pub stated: usize,
    pub circles: usize,
    pub per_series: BTreeMap<String, usize>,
}

/// Every `<svg class="plot">` by id, its points counted from the markup.
pub fn plots(html: &str) -> BTreeMap<String, PlotPoints> {
    let mut out = BTreeMap::new();
    let mut rest = html;
    while let Some(i) = rest.find("<svg id=\"") {
        let s = &rest[i..];
        let end = s.find("</svg>").expect("a closed svg");
        let svg = &s[..end];
        let id = attr(svg, "id").expect("an id");
        let mut p = PlotPoints {
            stated: attr(svg, "data-points")
                .and_then(|n| n.parse().ok())
                .expect("data-points"),
            circles: svg.matches("<circle class=\"pt").count(),
            ..Default::default()
        };
        for g in svg.split("<g class=\"series\"").skip(1) {
            let name = attr(g, "data-series").expect("a series name");
            let body = &g[..g.find("</g>").expect("a closed group")];
            p.per_series
                .insert(unescape(&name), body.matches("<circle class=\"pt").count());
        }
        out.insert(id, p);
        rest = &s[end..];
    }
    out
}

fn attr(s: &str, name: &str) -> Option<String> {
    let k = format!(" {name}=\"");
    let i = s.find(&k)? + k.len();
    let j = s[i..].find('"')?;
    Some(s[i..i + j].to_string())
}

fn unescape(s: &str) -> String {
    s.replace("&quot;", "\"")
        .replace("&#39;", "'")
        .replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&amp;", "&")
}

/// Plots with one point per round of each arm.
pub const PER_ROUND: [&str; 13] = [
    "plot-overall",
    "plot-task",
    "plot-agentic",
    "plot-s1",
    "plot-s2",
    "plot-s3",
    "plot-s4",
    "plot-s5",
    "plot-curriculum",
    "plot-tokens",
    "plot-tokens-cumulative",
    "plot-wall",
    "plot-wall-cumulative",
];

/// Check every plot's points against the rounds of each arm.
pub fn assert_points_match_rounds(c: &Campaign, plots: &BTreeMap<String, PlotPoints>) {
    let arms = [("main", &c.main_log), (c.replay.as_str(), &c.replay_log)];
    for id in PER_ROUND {
        let p = plots.get(id).unwrap_or_else(|| panic!("plot {id} present"));
        assert_eq!(p.stated, p.circles, "{id}: stated = drawn");
        for (name, log) in arms {
            assert_eq!(p.per_series.get(name), Some(&log.len()), "{id} {name}");
        }
    }
    // Drift: every round but the first has a previous candidate.
    for id in ["plot-drift-fraction", "plot-drift-l2"] {
        let p = &plots[id];
        assert_eq!(p.stated, p.circles, "{id}");
        for (name, log) in arms {
            assert_eq!(
                p.per_series.get(name),
                Some(&(log.len() - 1)),
                "{id} {name}"
            );
        }
    }
    // The audit gap: only the audited round.
    let a = &plots["plot-audit-gap"];
    assert_eq!(a.per_series.get("main"), Some(&1));
    assert_eq!(a.per_series.get(c.replay.as_str()), Some(&0));
    // Arms with confidence intervals: one point per round of each arm.
    let b = &plots["plot-arms-overall"];
    assert_eq!(b.stated, b.circles, "plot-arms-overall");
    for (name, log) in arms {
        assert_eq!(b.per_series.get(name), Some(&log.len()), "bands {name}");
    }
    // Step curves: the simulator writes kl, reward_mean and tokens for
    // every step of every round (replays too), so each arm has at least
    // one point per round.
    let steps: Vec<&String> = plots
        .keys()
        .filter(|k| k.starts_with("plot-step-"))
        .collect();
    assert_eq!(steps.len(), 3, "{steps:?}");
    for id in &steps {
        let p = &plots[*id];
        assert_eq!(p.stated, p.circles, "{id}");
        for (name, log) in arms {
            let n = p.per_series.get(name).copied().unwrap_or(0);
            assert!(n >= log.len(), "{id} {name}: {n} points");
        }
    }
    // One band plot per score besides Overall (task, agentic, stages,
    // tracks), each with a point per round of each arm.
    let other_bands: Vec<&String> = plots
        .keys()
        .filter(|k| k.starts_with("plot-arms-") && *k != "plot-arms-overall")
        .collect();
    assert!(other_bands.len() >= 3, "{other_bands:?}");
    for id in &other_bands {
        assert_eq!(plots[*id].stated, plots[*id].circles, "{id}");
    }
    assert_eq!(
        plots.len() - other_bands.len(),
        PER_ROUND.len() + 4 + steps.len(),
        "{:?}",
        plots.keys()
    );
}
