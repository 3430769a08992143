//! A real GRPO campaign on CPU: `examples/backends/trl/run.sh` drives TRL's
//! GRPOTrainer under `bat run` for 2 rounds (tiny Qwen2 made locally,
//! rewards from executing its tool calls in a sandbox, evaluation through
//! `transformers serve` and the OpenAI-API harness). Then the record is
//! checked the way a reader of the ledger would: real safetensors
//! candidates that moved away from their parents, a bit-for-bit
//! `bat replay r02 --verify`, and a terminal-reward ablation arm that
//! `bat compare` shows next to the original.
//!
//! Needs BAT_TEST_PYTHON (the backend venv); a few minutes on 2 busy cores.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use safetensors::SafeTensors;

use crate::common::python as python_common;

fn bat_dir() -> PathBuf {
    crate::common::bat_exe()
        .parent()
        .expect("bin dir")
        .to_path_buf()
}

fn path_with_bat() -> std::ffi::OsString {
    let mut paths = vec![bat_dir()];
    paths.extend(std::env::split_paths(
        &std::env::var_os("PATH").unwrap_or_default(),
    ));
    std::env::join_paths(paths).expect("PATH")
}

fn ok(out: Output, what: &str) -> String {
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "{what} failed ({:?})\nstdout:\n{stdout}\nstderr:\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
}

/// `bat -C LEDGER ARGS` from a new shell: without `BAT_PYTHON`, which only
/// run.sh reads (the templates name the interpreter), so a replay depends
/// only on what the rounds recorded.
fn bat(ledger: &Path, args: &[&str]) -> Output {
    crate::common::bat()
        .arg("-C")
        .arg(ledger)
        .args(args)
        .env("PATH", path_with_bat())
        .env_remove("BAT_PYTHON")
        .output()
        .expect("spawn bat")
}

/// Tensor name → raw bytes of a model folder's single safetensors file.
fn tensors(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    let bytes = std::fs::read(dir.join("model.safetensors")).expect("model.safetensors");
    let st = SafeTensors::deserialize(&bytes).expect("valid safetensors");
    st.tensors()
        .into_iter()
        .map(|(name, view)| (name, view.data().to_vec()))
        .collect()
}

#[test]
fn trl_grpo_campaign_replays_bit_for_bit_and_ablates_the_reward() {
    let Some(py) = python_common::python() else {
        return;
    };
    let tmp = tempfile::tempdir().expect("tmp");
    let w = tmp.path().join("campaign");
    let script = python_common::backends_dir().join("trl/run.sh");
    let started = std::time::Instant::now();
    ok(
        Command::new("bash")
            .arg(&script)
            .arg(&w)
            .env("PATH", path_with_bat())
            .env("BAT_PYTHON", &py)
            // One evaluated track (5 episodes per evaluation) keeps the
            // test's wall time down; run.sh's default is two.
            .env("BAT_TRL_TRACKS", "vqa")
            .output()
            .expect("spawn run.sh"),
        "run.sh",
    );
    eprintln!("run.sh took {:.0} s", started.elapsed().as_secs_f64());
    let ledger = w.join("ledger");

    // Two round commits on main.
    let log = ok(bat(&ledger, &["log"]), "bat log");
    for r in ["r01", "r02"] {
        assert!(log.contains(r), "no {r} in the log:\n{log}");
    }
    // The code the templates name (and the interpreter) is fingerprinted.
    let prov: serde_json::Value = serde_json::from_str(&ok(
        bat(&ledger, &["cat", "r02:provenance.json"]),
        "bat cat provenance",
    ))
    .expect("provenance json");
    let files = prov["code_files"].as_array().expect("code_files");
    for (role, index, name) in [
        ("trainer", 0, py.to_string_lossy().into_owned()),
        ("trainer", 1, "train_grpo.py".to_string()),
        ("evaluator", 1, "evaluate.sh".to_string()),
        ("evaluator", 3, py.to_string_lossy().into_owned()),
    ] {
        assert!(
            files.iter().any(|f| f["role"] == role
                && f["argv_index"] == index
                && f["named"].as_str().is_some_and(|n| n.ends_with(&name))
                && f["blake3"].is_string()),
            "no {role} argv[{index}] {name} in {files:?}"
        );
    }

    // Real candidates: the architecture's tensors, moved away from the parent.
    let base = tensors(&w.join("base"));
    for name in [
        "model.embed_tokens.weight",
        "model.layers.0.self_attn.q_proj.weight",
        "model.layers.1.mlp.down_proj.weight",
        "model.norm.weight",
    ] {
        assert!(base.contains_key(name), "base lacks {name}");
    }
    let c1 = tensors(&w.join("work/r01/candidate"));
    let c2 = tensors(&w.join("work/r02/candidate"));
    for (round, cand) in [("r01", &c1), ("r02", &c2)] {
        assert_eq!(
            cand.keys().collect::<Vec<_>>(),
            base.keys().collect::<Vec<_>>(),
            "{round}: tensor names"
        );
    }
    // GRPO learns from reward differences within a group: when every
    // rollout of r01 scored 0 (its health file's mean; rewards are in
    // [0, 1]) there is no advantage and the weights must stay as they were.
    // Which happens depends on the machine's float kernels (the tiny base
    // model's samples differ between CPUs), so both are checked exactly.
    let health1: serde_json::Value = serde_json::from_slice(
        &std::fs::read(w.join("work/r01/training-health.json")).expect("r01 health"),
    )
    .expect("r01 health json");
    let r01_mean = health1["reward"]["mean"]
        .as_f64()
        .unwrap_or_else(|| panic!("r01 health lacks reward.mean: {health1}"));
    if r01_mean > 0.0 {
        assert_ne!(
            c1, base,
            "r01 scored {r01_mean} but did not change the weights"
        );
    } else {
        assert_eq!(
            c1, base,
            "r01 scored 0 on every rollout but changed the weights"
        );
    }
    let gate: serde_json::Value =
        serde_json::from_slice(&std::fs::read(w.join("work/r01/gate.json")).expect("r01 gate"))
            .expect("gate json");
    let promoted = gate.to_string().contains("\"promote\"");
    let parent2 = if promoted { &c1 } else { &base };
    assert_ne!(&c2, parent2, "r02 did not change the weights of its parent");
    let health: serde_json::Value = serde_json::from_slice(
        &std::fs::read(w.join("work/r02/training-health.json")).expect("health"),
    )
    .expect("health json");
    assert_eq!(health["status"], "passed");
    for k in ["steps", "rollouts", "generated_tokens"] {
        assert!(
            health["compute"][k].as_u64().is_some_and(|n| n > 0),
            "health compute.{k}: {health}"
        );
    }

    // The last round reproduces bit for bit.
    let verify = ok(
        bat(&ledger, &["replay", "r02", "--verify"]),
        "bat replay r02 --verify",
    );
    let line = verify
        .lines()
        .find(|l| l.contains("artifacts identical"))
        .unwrap_or_else(|| panic!("no verify line:\n{verify}"));
    let counts = line
        .split_whitespace()
        .find(|t| t.contains('/') && t.chars().next().is_some_and(|c| c.is_ascii_digit()))
        .unwrap_or_else(|| panic!("no count in {line:?}"));
    let (same, all) = counts.split_once('/').expect("a/b");
    assert_eq!(same, all, "not every artifact identical: {line}");

    // The terminal-reward ablation arm, compared with the original.
    ok(
        bat(
            &ledger,
            &["replay", "r01..r02", "--ablate", "reward=terminal"],
        ),
        "bat replay --ablate reward=terminal",
    );
    let branches = ok(bat(&ledger, &["branch"]), "bat branch");
    let arm = branches
        .lines()
        .map(|l| {
            l.trim_start_matches(['*', ' '])
                .split_whitespace()
                .next()
                .unwrap_or("")
        })
        .find(|b| b.contains("reward-terminal"))
        .unwrap_or_else(|| panic!("no ablation branch in:\n{branches}"))
        .to_string();
    let cmp = ok(bat(&ledger, &["compare", "main", &arm]), "bat compare");
    assert!(cmp.contains("main") && cmp.contains(&arm), "{cmp}");
    for r in ["r01", "r02"] {
        assert!(cmp.contains(r), "compare lacks {r}:\n{cmp}");
    }
}
