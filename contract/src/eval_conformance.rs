//! Conformance families owned by the evaluation side: `eval` (summaries,
//! gates, error cases, and the informational CPython 3.12 vectors checked
//! with the Neumaier switch), `leakage`, `binding` and `protocol`.
//!
//! None of these depend on the pack's prose or version identifiers, so they
//! must pass byte for byte with any pack carrying the reference's numbers.

use std::path::{Path, PathBuf};

use bat_error::Diagnostic;

use super::binding::{build_binding, Arm};
use super::conformance_case::{case_result as result, read, read_json};
use super::conformance_case::{CaseResult, Options};
use super::firewall::{self, LeakageRules};
use super::gate::{evaluate_gate, training_healthy, GateModel};
use super::json::{self, Value};
use super::numeric::SumMode;
use super::protocol::runtime_protocol_binding;
use super::summary::build_summary;

/// Run the eval, leakage, binding and protocol families found under `dir`.
/// A family whose folder (or `cases.json`) is absent yields no rows.
pub fn run_eval_families(dir: &Path, opts: &Options<'_>) -> Vec<CaseResult> {
    let mut out = Vec::new();
    if dir.join("eval").is_dir() {
        out.extend(run_eval(&dir.join("eval"), opts));
    }
    if dir.join("leakage").is_dir() {
        out.extend(run_leakage(&dir.join("leakage"), opts));
    }
    if dir.join("binding").is_dir() {
        out.extend(run_binding(&dir.join("binding")));
    }
    if dir.join("protocol").is_dir() {
        out.extend(run_protocol(&dir.join("protocol")));
    }
    out
}

fn str_field<'a>(case: &'a Value, key: &str) -> Result<&'a str, String> {
    case.get(key)
        .and_then(Value::as_str)
        .ok_or_else(|| format!("case has no string `{key}`"))
}

/// Compare produced bytes with an expected file.
fn same_bytes(what: &str, got: &[u8], expected_path: &Path) -> Result<String, String> {
    let want = read(expected_path)?;
    if got == want.as_slice() {
        return Ok(format!("{what}: {} bytes identical", got.len()));
    }
    let at = got
        .iter()
        .zip(&want)
        .position(|(a, b)| a != b)
        .unwrap_or(got.len().min(want.len()));
    let ctx = |b: &[u8]| {
        String::from_utf8_lossy(&b[at.saturating_sub(20)..(at + 40).min(b.len())]).into_owned()
    };
    Err(format!(
        "{what}: first difference at byte {at}: got {:?}, expected {:?}",
        ctx(got),
        ctx(&want)
    ))
}

/// What the reference would print for `e`: its code where it has one (the
/// messages of errors are sentences), else the message itself (the
/// reference's own crash texts, which bat's messages reproduce).
fn reference_message(e: &dyn bat_error::Diagnostic) -> String {
    e.code().unwrap_or_else(|| e.to_string())
}

/// `ValueError: code` → `code`.
fn expected_code(case: &Value) -> Result<String, String> {
    let line = str_field(case, "stderr_last_line")?;
    Ok(line.split_once(": ").map_or(line, |(_, c)| c).to_string())
}

fn cases<'a>(doc: &'a Value, key: &str) -> &'a [Value] {
    doc.get(key)
        .and_then(Value::as_array)
        .map_or(&[], Vec::as_slice)
}

fn run_eval(dir: &Path, opts: &Options<'_>) -> Vec<CaseResult> {
    let mut out = Vec::new();
    let doc = match read_json(&dir.join("cases.json")) {
        Ok(d) => d,
        Err(e) => return vec![result("eval", "cases.json", Err(e))],
    };
    let model = match GateModel::from_pack(opts.pack) {
        Ok(m) => m,
        Err(e) => return vec![result("eval", "pack", Err(e.to_string()))],
    };
    let alt = dir.join("alt-cpython312");

    for case in cases(&doc, "summaries") {
        let name = case.get("name").and_then(Value::as_str).unwrap_or("?");
        let run = |mode: SumMode, expected: PathBuf| -> Result<String, String> {
            let raw = read(&dir.join(str_field(case, "raw")?))?;
            let ck = str_field(case, "checkpoint_sha256")?;
            let summary =
                build_summary(&raw, ck, opts.pack, mode).map_err(|e| format!("error: {e}"))?;
            same_bytes(
                "summary",
                json::pretty_json_file(&summary).as_bytes(),
                &expected,
            )
        };
        let expected = str_field(case, "expected_summary").map(|p| dir.join(p));
        out.push(result(
            "eval",
            &format!("summary/{name}"),
            expected.and_then(|p| run(SumMode::Plain, p)),
        ));
        let alt_file = alt.join("summary").join(format!("{name}.summary.json"));
        if alt_file.is_file() {
            out.push(result(
                "eval",
                &format!("alt-cpython312/summary/{name}"),
                run(SumMode::Neumaier, alt_file),
            ));
        }
    }

    for case in cases(&doc, "summary_errors") {
        let name = case.get("name").and_then(Value::as_str).unwrap_or("?");
        let outcome = (|| {
            let want = expected_code(case)?;
            let raw = read(&dir.join(str_field(case, "raw")?))?;
            let ck = str_field(case, "checkpoint_sha256")?;
            match build_summary(&raw, ck, opts.pack, SumMode::Plain) {
                Ok(_) => Err(format!("expected {want}, got a summary")),
                Err(e) if e.code().as_deref() == Some(want.as_str()) => Ok(format!("error {want}")),
                Err(e) => Err(format!("expected {want}, got {e}")),
            }
        })();
        out.push(result("eval", &format!("summary-error/{name}"), outcome));
    }

    for case in cases(&doc, "gates") {
        let name = case
            .get("name")
            .and_then(Value::as_str)
            .unwrap_or("?")
            .to_string();
        let gate_run = |summary_dir: Option<&Path>| -> Result<super::gate::GateOutcome, String> {
            // The 3.12 gates ran on the 3.12 summaries where those differ.
            let load = |key: &str| -> Result<Value, String> {
                let rel = str_field(case, key)?;
                if let Some(sd) = summary_dir {
                    let file = Path::new(rel).file_name().map(|f| sd.join(f));
                    if let Some(f) = file.filter(|f| f.is_file()) {
                        return read_json(&f);
                    }
                }
                read_json(&dir.join(rel))
            };
            let healthy = match case.get("training_health").and_then(Value::as_str) {
                Some(h) => training_healthy(&read_json(&dir.join(h))?),
                None => true,
            };
            evaluate_gate(
                &load("baseline_summary")?,
                &load("candidate_summary")?,
                healthy,
                &model,
            )
            .map_err(|e| format!("error: {e}"))
        };
        let outcome = (|| {
            let g = gate_run(None)?;
            let mut details = Vec::new();
            for (key, doc) in [
                ("expected_gate", &g.gate),
                ("expected_prescription", &g.prescription),
                ("expected_stdout", &g.stdout_document()),
            ] {
                details.push(same_bytes(
                    key,
                    json::pretty_json_file(doc).as_bytes(),
                    &dir.join(str_field(case, key)?),
                )?);
            }
            Ok(details.join("; "))
        })();
        out.push(result("eval", &format!("gate/{name}"), outcome));
        let alt_gate = alt.join("gate").join(&name).join("gate.json");
        if alt_gate.is_file() {
            let outcome = gate_run(Some(&alt.join("summary"))).and_then(|g| {
                same_bytes(
                    "gate",
                    json::pretty_json_file(&g.gate).as_bytes(),
                    &alt_gate,
                )
            });
            out.push(result(
                "eval",
                &format!("alt-cpython312/gate/{name}"),
                outcome,
            ));
        }
    }

    for case in cases(&doc, "gate_errors") {
        let name = case.get("name").and_then(Value::as_str).unwrap_or("?");
        let outcome = (|| {
            let want = expected_code(case)?;
            let b = read_json(&dir.join(str_field(case, "baseline_summary")?))?;
            let c = read_json(&dir.join(str_field(case, "candidate_summary")?))?;
            match evaluate_gate(&b, &c, true, &model) {
                Ok(_) => Err(format!("expected {want}, got a gate")),
                Err(e) if e.code().as_deref() == Some(want.as_str()) => Ok(format!("error {want}")),
                Err(e) => Err(format!("expected {want}, got {e}")),
            }
        })();
        out.push(result("eval", &format!("gate-error/{name}"), outcome));
    }
    out
}

fn run_leakage(dir: &Path, opts: &Options<'_>) -> Vec<CaseResult> {
    let doc = match read_json(&dir.join("cases.json")) {
        Ok(d) => d,
        Err(e) => return vec![result("leakage", "cases.json", Err(e))],
    };
    let rules = match LeakageRules::from_pack(opts.pack) {
        Ok(r) => r,
        Err(e) => return vec![result("leakage", "pack", Err(e.to_string()))],
    };
    let mut out = Vec::new();
    for case in cases(&doc, "cases") {
        let name = case.get("name").and_then(Value::as_str).unwrap_or("?");
        let outcome = (|| {
            let input = read(&dir.join(str_field(case, "input")?))?;
            let markers = match case.get("heldout_markers").and_then(Value::as_str) {
                Some(m) => firewall::parse_markers(&read(&dir.join(m))?),
                None => Ok(Vec::new()),
            };
            let markers = match (markers, case.get("stderr_last_line")) {
                (Err(e), Some(_)) => {
                    let want = expected_code(case)?;
                    return if reference_message(&e) == want {
                        Ok(format!("error {want}"))
                    } else {
                        Err(format!("expected {want}, got {e}"))
                    };
                }
                (Err(e), None) => return Err(format!("error: {e}")),
                (Ok(_), Some(_)) => return Err("expected a markers error".into()),
                (Ok(m), None) => m,
            };
            let violations = firewall::scan_bytes(&input, &markers, &rules)
                .map_err(|e| format!("error: {e}"))?;
            let exit = i64::from(!violations.is_empty());
            let want_exit = case.get("exit_code").and_then(|v| match v {
                Value::Int(i) => Some(*i),
                _ => None,
            });
            if want_exit != Some(exit) {
                return Err(format!("exit code {exit}, expected {want_exit:?}"));
            }
            same_bytes(
                "stdout",
                firewall::report_text(&violations).as_bytes(),
                &dir.join(str_field(case, "expected_stdout")?),
            )
        })();
        out.push(result("leakage", name, outcome));
    }
    out
}

fn run_binding(dir: &Path) -> Vec<CaseResult> {
    let doc = match read_json(&dir.join("cases.json")) {
        Ok(d) => d,
        Err(e) => return vec![result("binding", "cases.json", Err(e))],
    };
    let mut out = Vec::new();
    for case in cases(&doc, "cases") {
        let name = case.get("name").and_then(Value::as_str).unwrap_or("?");
        let outcome = (|| {
            let arm = match str_field(case, "arm")? {
                "baseline" => Arm::Baseline,
                "candidate" => Arm::Candidate,
                other => return Err(format!("unknown arm {other}")),
            };
            let step = match case.get("gate_step") {
                Some(Value::Int(i)) if *i >= 0 => *i as u64,
                _ => return Err("case has no gate_step".into()),
            };
            let binding = build_binding(
                &dir.join(str_field(case, "model_dir")?),
                str_field(case, "experiment_name")?,
                step,
                arm,
            )
            .map_err(|e| format!("error: {e}"))?;
            let want_id = str_field(case, "model_identity_sha256")?;
            if binding.get("model_identity_sha256").and_then(Value::as_str) != Some(want_id) {
                return Err("model_identity_sha256 differs".into());
            }
            same_bytes(
                "binding",
                json::pretty_json_file(&binding).as_bytes(),
                &dir.join(str_field(case, "expected_binding")?),
            )
        })();
        out.push(result("binding", name, outcome));
    }
    for case in cases(&doc, "error_cases") {
        let name = case.get("name").and_then(Value::as_str).unwrap_or("?");
        let outcome = (|| {
            let prefix = str_field(case, "stderr_last_line_prefix")?;
            let prefix = prefix.split_once(": ").map_or(prefix, |(_, m)| m);
            match build_binding(
                &dir.join(str_field(case, "model_dir")?),
                "bat-conformance",
                50,
                Arm::Candidate,
            ) {
                Ok(_) => Err(format!("expected `{prefix}`, got a binding")),
                Err(e) => {
                    let msg = e.to_string();
                    let rest = msg.strip_prefix(prefix).and_then(|r| r.strip_prefix(": "));
                    match rest {
                        Some(p) if p.starts_with('/') => {
                            Ok(format!("error `{prefix}: <absolute path>`"))
                        }
                        _ => Err(format!("expected `{prefix}: <absolute path>`, got `{msg}`")),
                    }
                }
            }
        })();
        out.push(result("binding", &format!("error/{name}"), outcome));
    }
    out
}

fn run_protocol(dir: &Path) -> Vec<CaseResult> {
    let file = dir.join("runtime-protocol-binding.json");
    let doc = match read_json(&file) {
        Ok(d) => d,
        Err(e) => return vec![result("protocol", "runtime-protocol-binding.json", Err(e))],
    };
    let mut out = Vec::new();
    for (i, v) in cases(&doc, "vectors").iter().enumerate() {
        let input = v.get("input").and_then(Value::as_str);
        let case = format!("runtime-protocol/{i}");
        let outcome = match (
            runtime_protocol_binding(input),
            v.get("binding"),
            v.get("error").and_then(Value::as_str),
        ) {
            (Ok(got), Some(want), _) => {
                // Compare canonical encodings: same members, same values.
                let (g, w) = (json::canonical_json(&got), json::canonical_json(want));
                if g.is_ok() && g == w {
                    Ok(format!("receipt for {input:?}"))
                } else {
                    Err(format!("receipt for {input:?} differs"))
                }
            }
            (Err(e), _, Some(code)) if reference_message(&e) == code => Ok(format!("error {code}")),
            (got, _, code) => Err(format!("input {input:?}: got {got:?}, expected {code:?}")),
        };
        out.push(result("protocol", &case, outcome));
    }
    out
}

/// Whether `pack` carries the reference's version identifiers as recorded in
/// the vectors under `dir` (the first task contract of
/// `rounds/prompt-matrix.jsonl`): `task_definition_version`,
/// `prompt_version` and `agentic_budget.version`, plus `reward_version`
/// where a vector records it. False when the vectors record none.
pub fn pack_matches_reference_versions(dir: &Path, pack: &super::pack::Pack) -> bool {
    let Ok(bytes) = std::fs::read(dir.join("rounds").join("prompt-matrix.jsonl")) else {
        return false;
    };
    let Some(first) = bytes.split(|b| *b == b'\n').find(|l| !l.is_empty()) else {
        return false;
    };
    let Ok(row) = json::parse_bytes(first) else {
        return false;
    };
    let Some(tc) = row.get("task_contract") else {
        return false;
    };
    let recorded = [
        (
            tc.get("task_definition_version"),
            pack.get("task_definition_version"),
        ),
        (tc.get("prompt_version"), pack.get("prompt_version")),
        (
            tc.get("agentic_budget").and_then(|b| b.get("version")),
            pack.get("agentic_budget").and_then(|b| b.get("version")),
        ),
        (tc.get("reward_version"), pack.get("reward_version")),
    ];
    let mut any = false;
    for (want, have) in recorded {
        if let Some(want) = want {
            any = true;
            if Some(want) != have {
                return false;
            }
        }
    }
    any
}
