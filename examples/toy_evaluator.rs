//! A toy evaluator for `bat run`: reads the model's safetensors weights and
//! the evaluation request, and writes a raw evaluation (contract §D input)
//! derived deterministically from the weights — one cell per track, whose
//! stage scores are the model's per-stage skill plus a fixed track offset.
//!
//! Template: `["toy_evaluator", "{checkpoint}", "{request}", "{output}"]`.
//! Test switch: `--fail` exits 3 without output.

use std::path::Path;

use safetensors::tensor::SafeTensors;

const TRACKS: [&str; 7] = [
    "classification",
    "detection",
    "enhancement",
    "report",
    "segmentation",
    "synthesis",
    "vqa",
];
const STAGES: [&str; 5] = ["S1", "S2", "S3", "S4", "S5"];

fn fail(msg: String) -> ! {
    eprintln!("toy_evaluator: {msg}");
    std::process::exit(3)
}

/// Round to 6 decimals so the raw file stays readable.
fn r6(x: f64) -> f64 {
    (x * 1e6).round() / 1e6
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.iter().any(|a| a == "--fail") {
        fail("simulated evaluator failure".into());
    }
    if args.len() < 3 {
        fail("usage: toy_evaluator CHECKPOINT REQUEST OUTPUT".into());
    }
    let request: serde_json::Value = serde_json::from_slice(
        &std::fs::read(&args[1]).unwrap_or_else(|e| fail(format!("{}: {e}", args[1]))),
    )
    .unwrap_or_else(|e| fail(e.to_string()));
    if request["artifact_kind"] != "bat_eval_request" {
        fail("not an evaluation request".into());
    }
    let repeats = request["repeats"].as_u64().unwrap_or(1);
    let weights = std::fs::read(Path::new(&args[0]).join("model.safetensors"))
        .unwrap_or_else(|e| fail(format!("{}: {e}", args[0])));
    let st = SafeTensors::deserialize(&weights).unwrap_or_else(|e| fail(e.to_string()));
    let t = st.tensor("skill").unwrap_or_else(|e| fail(e.to_string()));
    let skill: Vec<f64> = t
        .data()
        .chunks_exact(4)
        .map(|c| f64::from(f32::from_le_bytes([c[0], c[1], c[2], c[3]])))
        .collect();
    if skill.len() != STAGES.len() {
        fail("skill tensor must have 5 elements".into());
    }
    let mut cells = Vec::new();
    for (k, track) in TRACKS.iter().enumerate() {
        for repeat in 0..repeats {
            let offset = (k as f64 - 3.0) * 0.01;
            let mut stages = serde_json::Map::new();
            let mut sum = 0.0;
            for (i, s) in STAGES.iter().enumerate() {
                let v = r6((skill[i] + offset).clamp(0.0, 1.0));
                sum += v;
                stages.insert(s.to_string(), serde_json::json!(v));
            }
            cells.push(serde_json::json!({
                "track": track,
                "task_id": format!("toy-{track}"),
                "repeat": repeat,
                "valid": true,
                "task_score": r6(sum / 5.0),
                "stages": stages,
            }));
        }
    }
    let raw = serde_json::json!({"schema_version": 1, "status": "complete", "cells": cells});
    let text = serde_json::to_string_pretty(&raw).unwrap_or_else(|e| fail(e.to_string()));
    std::fs::write(&args[2], text + "\n").unwrap_or_else(|e| fail(format!("{}: {e}", args[2])));
    println!("toy_evaluator: wrote {} cells", cells.len());
}
