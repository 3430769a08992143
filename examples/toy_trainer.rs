//! A toy trainer for `bat run`, used by the tests and as a template for real
//! backends. It reads the current checkpoint's safetensors weights, "trains"
//! on the round's data by moving the target stage's skill up (and, through
//! interference, another stage's down), and exports a new model folder with
//! `config.json` and `model.safetensors`; the health file is written last.
//!
//! Template (argv; every element is one placeholder or literal):
//! `["toy_trainer", "{checkpoint}", "{dataset}", "{output}", "{health}",
//!   "{runtime_tool_format}", "{round_id}", "{target_stage}"]`
//!
//! Test switches (appended to the template, each applies to one round):
//! `--fail-on R`, `--sleep-on R:SECS`, `--no-output-on R`,
//! `--bad-health-on R`. `toy_trainer --init DIR` writes an initial model.
//!
//! `--reward-mode {reward_mode}` (optional, every round): `stage` (the
//! default) trains the target stage; `terminal` ignores the target and
//! spreads a smaller gain over every stage (a terminal-reward stand-in).

use std::collections::HashMap;
use std::path::Path;

use safetensors::tensor::{Dtype, SafeTensors, TensorView};

const STAGES: [&str; 5] = ["S1", "S2", "S3", "S4", "S5"];

fn fail(msg: String) -> ! {
    eprintln!("toy_trainer: {msg}");
    std::process::exit(2)
}

fn read_f32(st: &SafeTensors<'_>, name: &str) -> Vec<f32> {
    let t = st
        .tensor(name)
        .unwrap_or_else(|e| fail(format!("tensor {name}: {e}")));
    if t.dtype() != Dtype::F32 {
        fail(format!("tensor {name} is not F32"));
    }
    t.data()
        .chunks_exact(4)
        .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect()
}

fn bytes(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

/// Write a model folder with the given skill vector and weight matrix.
fn export(dir: &Path, skill: &[f32], w: &[f32]) {
    std::fs::create_dir_all(dir).unwrap_or_else(|e| fail(format!("{}: {e}", dir.display())));
    let sb = bytes(skill);
    let wb = bytes(w);
    let tensors = vec![
        (
            "skill".to_string(),
            TensorView::new(Dtype::F32, vec![skill.len()], &sb)
                .unwrap_or_else(|e| fail(e.to_string())),
        ),
        (
            "w".to_string(),
            TensorView::new(Dtype::F32, vec![4, 4], &wb).unwrap_or_else(|e| fail(e.to_string())),
        ),
    ];
    let data = safetensors::serialize(tensors, None::<HashMap<String, String>>)
        .unwrap_or_else(|e| fail(e.to_string()));
    std::fs::write(dir.join("model.safetensors"), data).unwrap_or_else(|e| fail(e.to_string()));
    std::fs::write(
        dir.join("config.json"),
        "{\"model_type\": \"bat-toy\", \"num_stages\": 5}\n",
    )
    .unwrap_or_else(|e| fail(e.to_string()));
}

fn switch<'a>(args: &'a [String], flag: &str, round: &str) -> Option<&'a str> {
    args.windows(2).find_map(|w| {
        (w[0] == flag)
            .then_some(w[1].as_str())
            .and_then(|v| match v.split_once(':') {
                Some((r, rest)) if r == round => Some(rest),
                None if v == round => Some(""),
                _ => None,
            })
    })
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.first().map(String::as_str) == Some("--init") {
        let dir = args.get(1).unwrap_or_else(|| fail("--init DIR".into()));
        let w: Vec<f32> = (0..16).map(|i| (i as f32) / 16.0).collect();
        export(Path::new(dir), &[0.62, 0.58, 0.52, 0.5, 0.46], &w);
        return;
    }
    if args.len() < 7 {
        fail("usage: toy_trainer CHECKPOINT DATASET OUTPUT HEALTH FORMAT ROUND TARGET".into());
    }
    let (checkpoint, dataset, output, health) = (&args[0], &args[1], &args[2], &args[3]);
    let (format, round, target) = (&args[4], &args[5], &args[6]);
    let extra = &args[7..];
    if switch(extra, "--fail-on", round).is_some() {
        fail(format!("{round}: simulated training failure"));
    }
    if let Some(secs) = switch(extra, "--sleep-on", round) {
        let s: u64 = secs.parse().unwrap_or(30);
        eprintln!("toy_trainer: {round}: sleeping {s}s");
        std::thread::sleep(std::time::Duration::from_secs(s));
    }
    let t = STAGES
        .iter()
        .position(|s| s == target)
        .unwrap_or_else(|| fail(format!("unknown target stage {target}")));
    let weights = std::fs::read(Path::new(checkpoint).join("model.safetensors"))
        .unwrap_or_else(|e| fail(format!("{checkpoint}: {e}")));
    let st = SafeTensors::deserialize(&weights).unwrap_or_else(|e| fail(e.to_string()));
    let mut skill = read_f32(&st, "skill");
    let mut w = read_f32(&st, "w");
    if skill.len() != 5 || w.len() != 16 {
        fail("unexpected tensor shapes".into());
    }
    let rows = std::fs::read_to_string(dataset)
        .unwrap_or_else(|e| fail(format!("{dataset}: {e}")))
        .lines()
        .count();
    println!("toy_trainer: {round}: {rows} rows, target {target}, runtime format {format}");
    // The update: more data helps more, with diminishing returns.
    let steps = rows.div_ceil(8).max(1);
    let terminal = extra
        .windows(2)
        .any(|w| w[0] == "--reward-mode" && w[1] == "terminal");
    let gain = (0.3 * (1.0 - skill[t])) * (1.0 - 0.5f32.powi(steps as i32));
    if terminal {
        for x in skill.iter_mut() {
            *x += 0.1 * gain;
        }
    } else {
        skill[t] += gain;
        // Interference: training one stage disturbs the stage two after it.
        let j = (t + 2) % 5;
        skill[j] -= 0.6 * gain;
    }
    for (i, x) in w.iter_mut().enumerate() {
        *x += gain * ((i % 5) as f32 - 2.0) / 10.0;
    }
    for step in 1..=steps {
        println!("step {step}/{steps} skill[{target}]={:.4}", skill[t]);
    }
    if switch(extra, "--no-output-on", round).is_some() {
        return;
    }
    export(Path::new(output), &skill, &w);
    let status = if switch(extra, "--bad-health-on", round).is_some() {
        "{\"status\": \"passed\"".to_string()
    } else {
        format!(
            "{{\"status\": \"passed\", \"steps\": {steps}, \"rollouts\": {}, \"budget\": {{\"steps\": {steps}, \"continuations_per_state\": 4}}}}\n",
            rows * 4
        )
    };
    std::fs::write(health, status).unwrap_or_else(|e| fail(format!("{health}: {e}")));
}
