//! Builds a small campaign work dir in the reference loop's layout
//! (baseline-eval/, r01 promote, r02 hold, r03 promote) with bat's own
//! library and binary, so the tests need no reference files.

use std::path::{Path, PathBuf};

use assert_cmd::Command;
use bat_contract::binding::{build_binding, eval_run_receipt, evaluation_request, Arm};
use bat_contract::gate::{evaluate_gate, GateModel};
use bat_contract::json::{self, Value};
use bat_contract::numeric::SumMode;
use bat_contract::pack::Pack;
use bat_contract::summary::build_summary;

/// Held-out task ids of the toy evaluation.
pub const TASK_IDS: [&str; 3] = ["heldout-cls-7", "heldout-rep-3", "heldout-vqa-9"];
/// A string only the raw evaluations contain (in an ignored `notes` field).
pub const RAW_ONLY: &str = "raw-only-evaluator-notes-q81z";

pub fn bat(ledger: &Path) -> Command {
    let mut c = super::bat_assert();
    c.arg("-C").arg(ledger);
    c
}

fn write(p: &Path, bytes: &[u8]) {
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    std::fs::write(p, bytes).unwrap();
}

/// A tiny model folder: config.json + a one-tensor safetensors file.
pub fn write_model(dir: &Path, tag: &str, values: [f32; 2]) {
    write_model_with(dir, tag, values, 0);
}

/// [`write_model`] with a second BF16 tensor of `big` elements (a large
/// checkpoint when `big` is in the millions), which differs a little from
/// one `values` to the next.
pub fn write_model_with(dir: &Path, tag: &str, values: [f32; 2], big: usize) {
    write(
        &dir.join("config.json"),
        format!("{{\"model_type\":\"toy\",\"tag\":\"{tag}\"}}\n").as_bytes(),
    );
    let header = if big == 0 {
        r#"{"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}}"#.to_string()
    } else {
        format!(
            r#"{{"big":{{"dtype":"BF16","shape":[{big}],"data_offsets":[8,{}]}},"w":{{"dtype":"F32","shape":[2],"data_offsets":[0,8]}}}}"#,
            8 + 2 * big
        )
    };
    let mut st = (header.len() as u64).to_le_bytes().to_vec();
    st.extend_from_slice(header.as_bytes());
    for v in values {
        st.extend_from_slice(&v.to_le_bytes());
    }
    let step = values[0] as u64;
    for i in 0..big as u64 {
        // One element in eight moves by a code point per step.
        let moved = (0..step).filter(|s| (i * 7 + s * 3) % 8 == 0).count() as u64;
        let code = ((i.wrapping_mul(2654435761) >> 7) as u16).wrapping_add(moved as u16);
        st.extend_from_slice(&code.to_le_bytes());
    }
    write(&dir.join("model.safetensors"), &st);
}

/// A raw evaluation with every stage and task score shifted by `delta`
/// from an uneven base.
pub fn raw_eval(delta: f64) -> Vec<u8> {
    let base = [0.5, 0.45, 0.4, 0.55, 0.6];
    let tracks = ["classification", "report", "vqa"];
    let cells: Vec<String> = tracks
        .iter()
        .zip(TASK_IDS)
        .map(|(t, id)| {
            let stages: Vec<String> = base
                .iter()
                .enumerate()
                .map(|(i, b)| format!("\"S{}\": {:.3}", i + 1, b + delta))
                .collect();
            format!(
                "{{\"track\": \"{t}\", \"task_id\": \"{id}\", \"repeat\": 0, \"valid\": true, \"task_score\": {:.3}, \"stages\": {{{}}}, \"notes\": \"{RAW_ONLY}\"}}",
                0.5 + delta,
                stages.join(", ")
            )
        })
        .collect();
    format!(
        "{{\"schema_version\": 1, \"status\": \"complete\", \"cells\": [{}]}}\n",
        cells.join(", ")
    )
    .into_bytes()
}

/// Evaluate a model folder into `out` (the five files of §G.4).
pub fn evaluate(model: &Path, out: &Path, raw: &[u8], arm: Arm, step: u64) -> Value {
    let pack = Pack::default_pack();
    let binding = build_binding(model, "bat-loop", step, arm).unwrap();
    let id = binding
        .get("model_identity_sha256")
        .and_then(Value::as_str)
        .unwrap()
        .to_string();
    write(
        &out.join("checkpoint-binding.json"),
        json::pretty_json_file(&binding).as_bytes(),
    );
    let req = evaluation_request(&binding, "toy-protocol", 1).unwrap();
    write(
        &out.join("eval-request.json"),
        json::pretty_json_file(&req).as_bytes(),
    );
    write(&out.join("raw-evaluation.json"), raw);
    let summary = build_summary(raw, &id, &pack, SumMode::Plain).unwrap();
    let sbytes = json::pretty_json_file(&summary);
    write(&out.join("summary.json"), sbytes.as_bytes());
    let receipt = eval_run_receipt(
        &id,
        "toy-protocol",
        &["eval".to_string(), "{checkpoint}".to_string()],
        &json::sha256_hex(raw),
        &json::sha256_hex(sbytes.as_bytes()),
    );
    write(
        &out.join("receipt.json"),
        json::pretty_json_file(&receipt).as_bytes(),
    );
    summary
}

/// The campaign: work dir W with baseline-eval/ and rounds r01 (promote),
/// r02 (hold), r03 (promote).
pub struct Campaign {
    pub work: PathBuf,
    pub ledger: PathBuf,
}

impl Campaign {
    pub fn round(&self, r: &str) -> PathBuf {
        self.work.join(r)
    }
}

pub fn build_campaign(root: &Path) -> Campaign {
    build_campaign_with(root, 0)
}

/// [`build_campaign`] whose candidates hold a second tensor of `big`
/// elements ([`write_model_with`]).
pub fn build_campaign_with(root: &Path, big: usize) -> Campaign {
    let work = root.join("W");
    let src = root.join("src");
    bat(root)
        .args(["source", "build", "--output-dir"])
        .arg(&src)
        .assert()
        .success();
    let source = src.join("source.jsonl");
    let source_sha = json::sha256_hex(&std::fs::read(&source).unwrap());
    let init = root.join("initial");
    write_model(&init, "initial", [0.0, 0.0]);
    let mut baseline = evaluate(
        &init,
        &work.join("baseline-eval"),
        &raw_eval(0.0),
        Arm::Baseline,
        0,
    );
    let model = GateModel::from_pack(&Pack::default_pack()).unwrap();
    let mut target = "S3".to_string();
    for (i, delta) in [0.05, -0.15, 0.07].into_iter().enumerate() {
        let rid = format!("r{:02}", i + 1);
        let rd = work.join(&rid);
        bat(root)
            .args(["round", "build", "--source"])
            .arg(&source)
            .args(["--source-sha256", &source_sha, "--round-id", &rid])
            .args(["--target-stage", &target, "--batches", "1", "--output-dir"])
            .arg(rd.join("data"))
            .assert()
            .success();
        write_model_with(&rd.join("candidate"), &rid, [i as f32 + 1.0, 0.5], big);
        write(
            &rd.join("training-health.json"),
            br#"{"status":"passed","compute":{"steps":50,"rollouts":32,"generated_tokens":12345,"wall_seconds":61.5,"gpu_seconds":240.0}}"#,
        );
        let cand = evaluate(
            &rd.join("candidate"),
            &rd.join("candidate-eval"),
            &raw_eval(delta),
            Arm::Candidate,
            50,
        );
        let out = evaluate_gate(&baseline, &cand, true, &model).unwrap();
        write(
            &rd.join("gate.json"),
            json::pretty_json_file(&out.gate).as_bytes(),
        );
        write(
            &rd.join("prescription.json"),
            json::pretty_json_file(&out.prescription).as_bytes(),
        );
        if out.promoted {
            baseline = cand;
        }
        target = out.target_stage.clone();
    }
    let ledger = root.join("ledger");
    std::fs::create_dir_all(&ledger).unwrap();
    bat(&ledger).arg("init").assert().success();
    Campaign { work, ledger }
}

pub fn log_json(ledger: &Path) -> serde_json::Value {
    let out = bat(ledger).args(["--json", "log"]).output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}
