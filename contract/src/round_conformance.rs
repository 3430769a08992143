//! The `source` and `rounds` conformance families: the source grid, every
//! round vector folder, the RNG vectors and the prompt/task-contract matrix.
//!
//! With a pack whose version identifiers are the reference's (`exact`), every
//! byte is compared. Otherwise the pack's own prose and version identifiers
//! legitimately change some fields; those (and the digests covering them)
//! are masked and everything else must still match.

use std::path::Path;

use super::conformance_case::{case_result as case, read, read_json};
use super::conformance_case::{CaseResult, Options};
use super::json::{self, Value};
use super::pack::Pack;
use super::prompt::Prompter;
use super::rng::{self, Mt19937};
use super::round::{self, BuildInputs};
use super::task::{self, ContractPack};

/// The reference's version identifiers (identifiers, not prose).
pub const REFERENCE_VERSIONS: [(&str, &str); 4] = [
    ("task_definition_version", "bat_core_track_native_v3"),
    (
        "prompt_version",
        "bat_core_agentic_prompt_v7_execute_code_arguments",
    ),
    ("reward_version", "bat_core_reward_v1"),
    ("agentic_budget.version", "bat_core_multiturn_budget_v3"),
];

/// Whether `pack` carries the reference's version identifiers, i.e. claims
/// the reference's wording, so vectors must match byte for byte.
pub fn has_reference_versions(pack: &Pack) -> bool {
    REFERENCE_VERSIONS.iter().all(|(path, want)| {
        let mut v = Some(pack.value());
        for part in path.split('.') {
            v = v.and_then(|x| x.get(part));
        }
        v.and_then(Value::as_str) == Some(*want)
    })
}

/// Replace the value at a dotted path with `"<masked>"` (if present).
fn mask(v: &mut Value, path: &str) {
    let mut cur = v;
    let parts: Vec<&str> = path.split('.').collect();
    for (i, p) in parts.iter().enumerate() {
        let Value::Object(m) = cur else { return };
        if i + 1 == parts.len() {
            if m.contains_key(p) {
                m.insert(*p, Value::Str("<masked>".into()));
            }
            return;
        }
        match m.get_mut(p) {
            Some(next) => cur = next,
            None => return,
        }
    }
}

fn masked(v: &Value, paths: &[&str]) -> Value {
    let mut c = v.clone();
    for p in paths {
        mask(&mut c, p);
    }
    c
}

fn cj(v: &Value) -> String {
    json::canonical_json(v).unwrap_or_else(|e| format!("<unencodable: {e}>"))
}

fn first_diff(a: &[u8], b: &[u8]) -> String {
    let i = a
        .iter()
        .zip(b)
        .position(|(x, y)| x != y)
        .unwrap_or(a.len().min(b.len()));
    let lo = i.saturating_sub(40);
    format!(
        "differs at byte {i}: got …{}… want …{}…",
        String::from_utf8_lossy(&a[lo..(i + 40).min(a.len())]),
        String::from_utf8_lossy(&b[lo..(i + 40).min(b.len())])
    )
}

fn compare_bytes(what: &str, got: &[u8], want: &[u8]) -> Result<(), String> {
    if got == want {
        Ok(())
    } else {
        Err(format!("{what}: {}", first_diff(got, want)))
    }
}

fn compare_masked(what: &str, got: &Value, want: &Value, paths: &[&str]) -> Result<(), String> {
    let (g, w) = (cj(&masked(got, paths)), cj(&masked(want, paths)));
    compare_bytes(what, g.as_bytes(), w.as_bytes())
}

fn jsonl_values(bytes: &[u8]) -> Result<Vec<Value>, String> {
    let text = std::str::from_utf8(bytes).map_err(|_| "not UTF-8".to_string())?;
    text.lines()
        .map(|l| json::parse(l).map_err(|e| e.to_string()))
        .collect()
}

/// Fields of a round row that the pack's prose and versions decide.
const ROW_MASK: [&str; 2] = ["prompt", "extra_info.task_definition_version"];

/// Run the `source` and `rounds` families found under `dir`.
pub fn run_source_and_rounds(dir: &Path, opts: &Options<'_>) -> Vec<CaseResult> {
    let mut out = Vec::new();
    let k = match opts.pack.contract() {
        Ok(k) => k,
        Err(e) => {
            out.push(case("rounds", "pack", Err(e.to_string())));
            return out;
        }
    };
    let source_dir = dir.join("source");
    if source_dir.is_dir() {
        out.push(case(
            "source",
            "grid",
            source_grid(&k, &source_dir, opts.exact),
        ));
    }
    let rounds_dir = dir.join("rounds");
    if !rounds_dir.is_dir() {
        return out;
    }
    let prompter = Prompter::new(&k);
    let source_bytes = read(&source_dir.join("source.jsonl"));
    let mut folders: Vec<_> = std::fs::read_dir(&rounds_dir)
        .map(|it| {
            it.filter_map(Result::ok)
                .map(|e| e.path())
                .filter(|p| p.join("manifest.json").is_file())
                .collect()
        })
        .unwrap_or_default();
    folders.sort();
    for folder in folders {
        let name = folder
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let src = source_bytes.as_deref().map_err(Clone::clone);
        let built = src.and_then(|s| build_vector(&k, &prompter, s, &folder));
        out.push(case(
            "rounds",
            &name,
            built
                .as_ref()
                .map_err(Clone::clone)
                .and_then(|b| compare_round(b, &folder, opts.exact)),
        ));
        if folder.join("trace.json").is_file() {
            out.push(case(
                "rounds",
                &format!("{name}/trace"),
                check_trace(&folder.join("trace.json")),
            ));
        }
        out.push(case(
            "rounds",
            &format!("{name}/verify"),
            verify_vector(&k, &prompter, &folder, built.ok(), opts.exact),
        ));
    }
    let rng_path = rounds_dir.join("rng-vectors.json");
    if rng_path.is_file() {
        out.push(case("rounds", "rng-vectors", check_rng(&rng_path)));
    }
    let pm = rounds_dir.join("prompt-matrix.jsonl");
    if pm.is_file() {
        out.push(case(
            "rounds",
            "prompt-matrix",
            check_prompt_matrix(&k, &prompter, &pm, opts.exact),
        ));
    }
    out
}

fn source_grid(k: &ContractPack, dir: &Path, exact: bool) -> Result<String, String> {
    let built = super::source::build_source(k).map_err(|e| e.to_string())?;
    let want_jsonl = read(&dir.join("source.jsonl"))?;
    let want_manifest = read(&dir.join("manifest.json"))?;
    let got_manifest = json::pretty_json_file(&built.manifest);
    if exact {
        compare_bytes("source.jsonl", &built.jsonl, &want_jsonl)?;
        compare_bytes("manifest.json", got_manifest.as_bytes(), &want_manifest)?;
        return Ok("source.jsonl and manifest.json byte-identical".into());
    }
    let (got, want) = (jsonl_values(&built.jsonl)?, jsonl_values(&want_jsonl)?);
    if got.len() != want.len() {
        return Err(format!("{} rows, want {}", got.len(), want.len()));
    }
    for (i, (g, w)) in got.iter().zip(&want).enumerate() {
        compare_masked(
            &format!("row {i}"),
            g,
            w,
            &["abstract_condition", "row_sha256"],
        )?;
    }
    let wm = json::parse_bytes(&want_manifest).map_err(|e| e.to_string())?;
    compare_masked("manifest.json", &built.manifest, &wm, &["source_sha256"])?;
    Ok(format!(
        "{} rows match with prose and row digests masked",
        got.len()
    ))
}

fn build_vector(
    k: &ContractPack,
    prompter: &Prompter<'_>,
    source: &[u8],
    folder: &Path,
) -> Result<round::BuiltRound, String> {
    let manifest = read_json(&folder.join("manifest.json"))?;
    let trace = if folder.join("trace.json").is_file() {
        Some(read_json(&folder.join("trace.json"))?)
    } else {
        None
    };
    let prescription = if folder.join("prescription.json").is_file() {
        Some(read(&folder.join("prescription.json"))?)
    } else {
        None
    };
    let s = |v: &Value, k: &str| v.get(k).and_then(Value::as_str).map(str::to_string);
    let round_id = s(&manifest, "round_id").ok_or("manifest has no round_id")?;
    let target = s(&manifest, "target_stage").ok_or("manifest has no target_stage")?;
    let batches = match manifest.get("batches") {
        Some(Value::Int(b)) => *b,
        _ => return Err("manifest has no integer batches".into()),
    };
    let seed = trace.as_ref().and_then(|t| s(t, "seed"));
    let sha = json::sha256_hex(source);
    let source_name = manifest
        .get("source")
        .and_then(|x| s(x, "file"))
        .unwrap_or_else(|| "source.jsonl".into());
    let inputs = BuildInputs {
        source_bytes: source,
        source_file_name: &source_name,
        source_sha256: &sha,
        round_id: &round_id,
        // The prescription vector passes no --target-stage.
        target_stage: if prescription.is_some() {
            None
        } else {
            Some(&target)
        },
        prescription: prescription.as_deref(),
        batches,
        seed: seed.as_deref(),
    };
    round::materialize(k, prompter, &inputs).map_err(|e| format!("build failed: {e}"))
}

fn compare_round(b: &round::BuiltRound, folder: &Path, exact: bool) -> Result<String, String> {
    let want_manifest = read(&folder.join("manifest.json"))?;
    let got_manifest = json::pretty_json_file(&b.manifest);
    let got_rows = || jsonl_values(&b.train);
    let mut checked = Vec::new();
    if exact {
        compare_bytes("manifest.json", got_manifest.as_bytes(), &want_manifest)?;
    } else {
        let wm = json::parse_bytes(&want_manifest).map_err(|e| e.to_string())?;
        compare_masked("manifest.json", &b.manifest, &wm, &["train.sha256"])?;
    }
    checked.push("manifest");
    let train = folder.join("train.jsonl");
    if train.is_file() {
        let want = read(&train)?;
        if exact {
            compare_bytes("train.jsonl", &b.train, &want)?;
        } else {
            let (g, w) = (got_rows()?, jsonl_values(&want)?);
            if g.len() != w.len() {
                return Err(format!("train.jsonl: {} rows, want {}", g.len(), w.len()));
            }
            for (i, (x, y)) in g.iter().zip(&w).enumerate() {
                compare_masked(&format!("train row {i}"), x, y, &ROW_MASK)?;
            }
        }
        checked.push("train.jsonl");
    }
    let sha_file = folder.join("train.sha256");
    if exact && sha_file.is_file() {
        let text = String::from_utf8_lossy(&read(&sha_file)?).into_owned();
        let want = text
            .split_whitespace()
            .next()
            .unwrap_or_default()
            .to_string();
        let got = json::sha256_hex(&b.train);
        if got != want {
            let hint = locate_batch(&b.train, folder).unwrap_or_default();
            return Err(format!("train sha256 {got}, want {want}{hint}"));
        }
        checked.push("train sha256");
    }
    let fl = folder.join("first-and-last-rows.jsonl");
    if fl.is_file() {
        let want = jsonl_values(&read(&fl)?)?;
        let got = got_rows()?;
        let pairs = [(got.first(), want.first()), (got.last(), want.last())];
        for (i, (g, w)) in pairs.into_iter().enumerate() {
            let (Some(g), Some(w)) = (g, w) else {
                return Err("first-and-last rows missing".into());
            };
            let paths: &[&str] = if exact { &[] } else { &ROW_MASK };
            compare_masked(if i == 0 { "first row" } else { "last row" }, g, w, paths)?;
        }
        checked.push("first and last rows");
    }
    let mode = if exact {
        "byte-identical"
    } else {
        "match with prompt/version masked"
    };
    Ok(format!(
        "{} ({} rows): {mode}",
        checked.join(", "),
        b.train.iter().filter(|c| **c == b'\n').count()
    ))
}

/// On a whole-file sha mismatch, name the first batch whose 8 lines differ.
fn locate_batch(train: &[u8], folder: &Path) -> Option<String> {
    let list = read_json(&folder.join("batch-sha256.json")).ok()?;
    let want = list.get("batches")?.as_array()?;
    let lines: Vec<&[u8]> = train.split_inclusive(|c| *c == b'\n').collect();
    for (b, w) in want.iter().enumerate() {
        let chunk: Vec<u8> = lines
            .iter()
            .skip(b * 8)
            .take(8)
            .flat_map(|l| l.iter().copied())
            .collect();
        if Some(json::sha256_hex(&chunk).as_str()) != w.as_str() {
            return Some(format!(" (first differing batch: {b})"));
        }
    }
    None
}

fn check_trace(path: &Path) -> Result<String, String> {
    let t = read_json(path)?;
    let mut views: Vec<&Value> = Vec::new();
    for key in ["target", "e2e", "batch_shuffles"] {
        views.extend(
            t.get(key)
                .and_then(Value::as_array)
                .map(|a| a.iter().collect::<Vec<_>>())
                .unwrap_or_default(),
        );
    }
    if let Some(Value::Object(mix)) = t.get("mix") {
        for (_, m) in mix.iter() {
            views.extend(
                m.get("views")
                    .and_then(Value::as_array)
                    .map(|a| a.iter().collect::<Vec<_>>())
                    .unwrap_or_default(),
            );
        }
    }
    for v in &views {
        let seed = v
            .get("seed_string")
            .and_then(Value::as_str)
            .ok_or("view without seed_string")?;
        let want: Vec<i64> = v
            .get("permutation")
            .and_then(Value::as_array)
            .ok_or("view without permutation")?
            .iter()
            .map(|x| if let Value::Int(i) = x { *i } else { -1 })
            .collect();
        let got: Vec<i64> = rng::shuffled_indices(seed, want.len())
            .into_iter()
            .map(|i| i as i64)
            .collect();
        if got != want {
            return Err(format!("shuffle of {seed:?}: got {got:?}, want {want:?}"));
        }
    }
    Ok(format!("{} shuffles reproduced", views.len()))
}

fn ints(v: Option<&Value>) -> Vec<i64> {
    v.and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .map(|x| if let Value::Int(i) = x { *i } else { -1 })
                .collect()
        })
        .unwrap_or_default()
}

fn check_rng(path: &Path) -> Result<String, String> {
    let doc = read_json(path)?;
    let vectors = doc
        .get("vectors")
        .and_then(Value::as_array)
        .ok_or("no vectors")?;
    for v in vectors {
        let seed = v
            .get("seed_string")
            .and_then(Value::as_str)
            .ok_or("vector without seed_string")?;
        let key: Vec<i64> = rng::init_key(seed).into_iter().map(i64::from).collect();
        if key != ints(v.get("init_key_u32_le_order")) {
            return Err(format!("init key of {seed:?} differs"));
        }
        let mut g = Mt19937::from_str_seed(seed);
        let first: Vec<i64> = (0..8).map(|_| i64::from(g.next_u32())).collect();
        if first != ints(v.get("first_8_genrand_uint32")) {
            return Err(format!("first outputs of {seed:?} differ"));
        }
        for (n, field) in [(21usize, "shuffle_range_21"), (8, "shuffle_range_8")] {
            let got: Vec<i64> = rng::shuffled_indices(seed, n)
                .into_iter()
                .map(|i| i as i64)
                .collect();
            if got != ints(v.get(field)) {
                return Err(format!("{field} of {seed:?} differs"));
            }
        }
    }
    Ok(format!(
        "{} seeds: keys, outputs and shuffles reproduced",
        vectors.len()
    ))
}

/// Contract fields the pack's prose and versions decide.
const CONTRACT_MASK: [&str; 6] = [
    "task_definition_version",
    "prompt_version",
    "agentic_budget.version",
    "contract_sha256",
    "task_name",
    "objective",
];

fn check_prompt_matrix(
    k: &ContractPack,
    prompter: &Prompter<'_>,
    path: &Path,
    exact: bool,
) -> Result<String, String> {
    let lines = jsonl_values(&read(path)?)?;
    for (i, line) in lines.iter().enumerate() {
        let mut input = line
            .get("input_extra_info")
            .cloned()
            .ok_or(format!("line {i}: no input_extra_info"))?;
        if !exact {
            // The vector names the reference's version; a pack with its own
            // version only accepts its own.
            if let Value::Object(m) = &mut input {
                m.insert(
                    "task_definition_version",
                    Value::Str(k.task_definition_version.clone()),
                );
            }
        }
        let contract = task::task_contract(k, &input).map_err(|e| format!("line {i}: {e}"))?;
        let prompt = prompter
            .render(&input)
            .map_err(|e| format!("line {i}: {e}"))?;
        let want_c = line
            .get("task_contract")
            .ok_or(format!("line {i}: no task_contract"))?;
        let want_p = line.get("prompt").ok_or(format!("line {i}: no prompt"))?;
        if exact {
            let got = json::canonical_json(&Value::Object(
                json::Map::new()
                    .with("input_extra_info", input.clone())
                    .with("prompt", prompt)
                    .with("task_contract", Value::Object(contract)),
            ))
            .map_err(|e| e.to_string())?;
            let want = cj(line);
            compare_bytes(&format!("line {i}"), got.as_bytes(), want.as_bytes())?;
        } else {
            compare_masked(
                &format!("line {i} task_contract"),
                &Value::Object(contract),
                want_c,
                &CONTRACT_MASK,
            )?;
            let shape = |p: &Value| {
                p.as_array()
                    .map(|a| a.iter().map(|m| m.get("role").cloned()).collect::<Vec<_>>())
                    .unwrap_or_default()
            };
            if shape(&prompt) != shape(want_p) {
                return Err(format!("line {i}: prompt roles differ"));
            }
        }
    }
    let mode = if exact {
        "byte-identical"
    } else {
        "contracts match with prose/versions masked"
    };
    Ok(format!("{} track×stage cells: {mode}", lines.len()))
}

fn verify_vector(
    k: &ContractPack,
    prompter: &Prompter<'_>,
    folder: &Path,
    built: Option<round::BuiltRound>,
    exact: bool,
) -> Result<String, String> {
    let train = folder.join("train.jsonl");
    if exact && train.is_file() {
        let r = round::verify_dataset(
            k,
            prompter,
            &read(&train)?,
            &read(&folder.join("manifest.json"))?,
        )
        .map_err(|e| format!("the vector's own round fails verification: {e}"))?;
        return Ok(format!("vector round verifies: {}", cj(&r)));
    }
    let b = built.ok_or("no built round to verify")?;
    let manifest = json::pretty_json_file(&b.manifest);
    round::verify_dataset(k, prompter, &b.train, manifest.as_bytes())
        .map_err(|e| format!("the built round fails verification: {e}"))?;
    Ok("built round verifies with this pack".into())
}
