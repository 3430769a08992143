//! `bat export --format tensorboard -o DIR`: one run per branch, the round
//! scalars at step = round number with the commit time as wall time, the
//! step metrics at a global step. Read back twice: by a protobuf decoder
//! written here (both CRCs of every record checked), and by the
//! `tensorboard` package's own `EventAccumulator`.
//!
//! The Python half needs `BAT_TEST_TENSORBOARD_PYTHON`: the interpreter
//! printed by `examples/tensorboard/setup-tensorboard-venv.sh`. Unset, it
//! skips with a message (and fails under CI=true).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde_json::Value;

use bat::report::tensorboard::{read_records, EVENT_FILE};

use crate::common::{BatRunner, TestEnv};

/// One decoded event: wall time, step, file version, (tag, value)s.
#[derive(Debug, Default)]
struct Event {
    wall_time: f64,
    step: i64,
    file_version: Option<String>,
    values: Vec<(String, f32)>,
}

fn varint(b: &[u8], at: &mut usize) -> u64 {
    let mut v = 0u64;
    let mut shift = 0;
    loop {
        let byte = b[*at];
        *at += 1;
        v |= u64::from(byte & 0x7f) << shift;
        if byte & 0x80 == 0 {
            return v;
        }
        shift += 7;
    }
}

/// The fields of a protobuf message: (field number, wire type, payload).
fn fields(b: &[u8]) -> Vec<(u64, u64, &[u8])> {
    let mut out = Vec::new();
    let mut at = 0;
    while at < b.len() {
        let key = varint(b, &mut at);
        let (field, wire) = (key >> 3, key & 7);
        let start = at;
        let end = match wire {
            0 => {
                varint(b, &mut at);
                at
            }
            1 => at + 8,
            2 => {
                let n = varint(b, &mut at) as usize;
                let s = at;
                out.push((field, wire, &b[s..s + n]));
                at = s + n;
                continue;
            }
            5 => at + 4,
            w => panic!("unexpected wire type {w}"),
        };
        out.push((field, wire, &b[start..end]));
        at = end;
    }
    out
}

fn decode(data: &[u8]) -> Event {
    let mut e = Event::default();
    for (field, _, p) in fields(data) {
        match field {
            1 => e.wall_time = f64::from_le_bytes(p.try_into().expect("8 bytes")),
            2 => e.step = varint(p, &mut 0) as i64,
            3 => e.file_version = Some(String::from_utf8(p.to_vec()).expect("utf-8")),
            5 => {
                for (_, _, value) in fields(p) {
                    let mut tag = String::new();
                    let mut v = f32::NAN;
                    for (f, _, q) in fields(value) {
                        match f {
                            1 => tag = String::from_utf8(q.to_vec()).expect("utf-8 tag"),
                            2 => v = f32::from_le_bytes(q.try_into().expect("4 bytes")),
                            _ => {}
                        }
                    }
                    e.values.push((tag, v));
                }
            }
            _ => {}
        }
    }
    e
}

fn events(file: &Path) -> Vec<Event> {
    let bytes = std::fs::read(file).expect("the event file");
    read_records(&bytes)
        .expect("every record's CRCs check")
        .into_iter()
        .map(decode)
        .collect()
}

/// Two simulator arms: `main` (seed 0) and `arm/b` (seed 1).
fn ledger(t: &TestEnv) -> BatRunner {
    let b = t.init_ledger("ledger");
    b.ok(&["run", "--backend", "sim", "--rounds", "2", "--batches", "2"]);
    b.ok(&[
        "run",
        "--backend",
        "sim",
        "--rounds",
        "2",
        "--batches",
        "2",
        "--branch",
        "arm/b",
        "--new",
        "--seed",
        "1",
    ]);
    b
}

/// (round number → Overall, commit time) of a branch from `bat export`.
fn exported(b: &BatRunner, branch: &str) -> BTreeMap<i64, (f64, f64)> {
    let rows = b.json(&["export", branch]);
    rows.as_array()
        .expect("rows")
        .iter()
        .map(|r| {
            (
                r["round_number"].as_i64().expect("round number"),
                (
                    r["overall"].as_f64().expect("overall"),
                    r["time"].as_f64().expect("time"),
                ),
            )
        })
        .collect()
}

fn python() -> Option<PathBuf> {
    crate::common::external::file_from_env(
        "BAT_TEST_TENSORBOARD_PYTHON",
        "the output of `examples/tensorboard/setup-tensorboard-venv.sh`",
    )
}

#[test]
fn event_files_decode_to_the_ledger_s_numbers_and_tensorboard_reads_them() {
    let t = TestEnv::new();
    let b = ledger(&t);
    let out = t.path("tb");
    let out_s = out.to_str().expect("utf-8");
    b.ok(&["export", "--format", "tensorboard", "-o", out_s]);
    let first = std::fs::read(out.join("main").join(EVENT_FILE)).expect("main's run");
    // Deterministic: the same ledger gives the same bytes.
    b.ok(&["export", "--format", "tensorboard", "-o", out_s]);
    assert_eq!(
        std::fs::read(out.join("main").join(EVENT_FILE)).expect("again"),
        first
    );

    let mut step_counts = BTreeMap::new();
    for branch in ["main", "arm/b"] {
        let want = exported(&b, branch);
        let ev = events(&out.join(branch).join(EVENT_FILE));
        assert_eq!(ev[0].file_version.as_deref(), Some("brain.Event:2"));
        let mut seen = BTreeMap::new();
        let mut steps = Vec::new();
        for e in &ev[1..] {
            for (tag, v) in &e.values {
                if tag == "round/overall" {
                    seen.insert(e.step, (f64::from(*v), e.wall_time));
                }
                if tag == "steps/kl" {
                    steps.push(e.step);
                }
            }
        }
        assert_eq!(seen.len(), want.len(), "{branch}");
        for (n, (overall, time)) in &want {
            let (v, wall) = seen[n];
            assert_eq!(v as f32, *overall as f32, "{branch} round {n}");
            assert_eq!(wall, *time, "{branch} wall time is the commit time");
        }
        // Global steps: strictly increasing across the rounds.
        assert!(steps.windows(2).all(|w| w[0] < w[1]), "{steps:?}");
        let per_round = b.json(&[
            "query",
            "SELECT count(*) AS n FROM steps WHERE key = 'kl'",
            branch,
        ]);
        assert_eq!(
            steps.len() as i64,
            per_round[0]["n"].as_i64().expect("count"),
            "{branch}"
        );
        let tags: Vec<&str> = ev[1].values.iter().map(|(t, _)| t.as_str()).collect();
        for tag in [
            "round/task",
            "round/agentic",
            "round/S1",
            "round/S5",
            "round/steps",
        ] {
            assert!(tags.contains(&tag), "{branch}: {tag} in {tags:?}");
        }
        assert!(tags.iter().any(|t| t.starts_with("health/")), "{tags:?}");
        assert!(tags.iter().any(|t| t.starts_with("track/")), "{tags:?}");
        step_counts.insert(branch.to_string(), (seen, steps.len()));
    }

    let Some(py) = python() else { return };
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/tensorboard/read_events.py");
    let run = std::process::Command::new(&py)
        .arg(&script)
        .arg(&out)
        .output()
        .expect("spawn python");
    assert!(
        run.status.success(),
        "read_events.py failed: {}",
        String::from_utf8_lossy(&run.stderr)
    );
    let theirs: Value = serde_json::from_slice(&run.stdout).expect("reader JSON");
    for (branch, (seen, n_steps)) in &step_counts {
        let run = &theirs[branch.as_str()];
        let overall = run["round/overall"].as_array().expect("round/overall read");
        assert_eq!(overall.len(), seen.len(), "{branch}");
        for p in overall {
            let step = p[0].as_i64().expect("step");
            let (v, wall) = seen[&step];
            assert_eq!(p[1].as_f64(), Some(wall), "{branch}");
            assert_eq!(p[2].as_f64().map(|x| x as f32), Some(v as f32), "{branch}");
        }
        let kl = run["steps/kl"].as_array().expect("steps/kl read");
        assert_eq!(kl.len(), *n_steps, "{branch}");
    }
}
