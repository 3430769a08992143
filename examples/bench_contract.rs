//! Benchmark (not a test): build the default 378-batch round in-process, the
//! way `bat round build` does, and — when a reference checkout is given —
//! time the reference Python builder on the same source and arguments.
//!
//! ```text
//! cargo run --release --example bench_contract -- [REF_CHECKOUT] [--pack F] [--runs N]
//! ```
//!
//! REF_CHECKOUT is a plain checkout of the public reference (outside this
//! repository), e.g. `git --git-dir=<mirror> archive HEAD | tar -x -C DIR`.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use bat_cli::cli::round::{build, BuildArgs};
use bat_contract::json;
use bat_contract::pack::Pack;
use bat_contract::source;

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let (mut reference, mut pack, mut runs) = (None::<PathBuf>, None::<PathBuf>, 5usize);
    while let Some(a) = args.next() {
        match a.as_str() {
            "--pack" => pack = args.next().map(PathBuf::from),
            "--runs" => runs = args.next().and_then(|n| n.parse().ok()).unwrap_or(5).max(1),
            _ => reference = Some(PathBuf::from(a)),
        }
    }
    let scratch = tempfile::tempdir()?;
    let root = scratch.path();

    // The source: the reference's own grid when the checkout is given (both
    // builders then read identical bytes), else the pack's grid.
    let source_path = root.join("source/source.jsonl");
    std::fs::create_dir_all(root.join("source"))?;
    let python_ok = reference
        .as_ref()
        .is_some_and(|r| r.join("scripts/build_bat_core_dataset.py").is_file())
        && Command::new("python3")
            .arg("--version")
            .output()
            .is_ok_and(|o| o.status.success());
    if python_ok {
        let r = reference.as_ref().ok_or("no reference")?;
        let st = Command::new("python3")
            .args(["-m", "scripts.build_bat_semantic_source", "--output-dir"])
            .arg(root.join("source"))
            .current_dir(r)
            .output()?;
        if !st.status.success() {
            return Err(format!(
                "reference source builder failed: {}",
                String::from_utf8_lossy(&st.stderr)
            )
            .into());
        }
    } else {
        let k = Pack::load_or_default(pack.as_deref())?.contract()?;
        std::fs::write(&source_path, source::build_source(&k)?.jsonl)?;
        if reference.is_some() {
            eprintln!("note: python3 or the reference checkout is missing; timing bat only");
        }
    }
    let sha = json::sha256_hex(&std::fs::read(&source_path)?);

    let mut bat_times = Vec::new();
    let mut train_sha = String::new();
    for i in 0..runs {
        let out = root.join(format!("bat-{i}"));
        let t = Instant::now();
        let manifest = build(&BuildArgs {
            source: source_path.clone(),
            source_sha256: sha.clone(),
            round_id: "r01".into(),
            target_stage: Some("S3".into()),
            prescription: None,
            batches: 378,
            seed: None,
            output_dir: out.clone(),
            pack: pack.clone(),
        })
        .map_err(|e| e.message)?;
        bat_times.push(t.elapsed());
        train_sha = json::parse(&manifest)?
            .get("train")
            .and_then(|t| t.get("sha256"))
            .and_then(|s| s.as_str().map(str::to_string))
            .unwrap_or_default();
        std::fs::remove_dir_all(&out)?;
    }
    let bat_med = median(bat_times);

    // The same build without file I/O, to separate the contract work from
    // the durable write (temp file, fsync, rename) that the reference skips.
    let pack_obj = Pack::load_or_default(pack.as_deref())?;
    let k = pack_obj.contract()?;
    let prompter = bat_contract::prompt::Prompter::new(&k);
    let source_bytes = std::fs::read(&source_path)?;
    let mut mem_times = Vec::new();
    for _ in 0..runs {
        let t = Instant::now();
        let built = bat_contract::round::materialize(
            &k,
            &prompter,
            &bat_contract::round::BuildInputs {
                source_bytes: &source_bytes,
                source_file_name: "source.jsonl",
                source_sha256: &sha,
                round_id: "r01",
                target_stage: Some("S3"),
                prescription: None,
                batches: 378,
                seed: None,
            },
        )?;
        mem_times.push(t.elapsed());
        std::hint::black_box(built);
    }
    let mem_med = median(mem_times);

    println!("round build, 378 batches (3024 rows), median of {runs} runs");
    println!("train sha256 (bat): {train_sha}");
    println!("| builder | median ms |");
    println!("|---|---|");
    println!(
        "| bat (in-process, release={}) | {:.1} |",
        !cfg!(debug_assertions),
        ms(bat_med)
    );
    println!(
        "| bat materialize only (in memory, no file I/O) | {:.1} |",
        ms(mem_med)
    );
    if python_ok {
        let r = reference.as_ref().ok_or("no reference")?;
        let py_runs = runs.min(3);
        let mut py_times = Vec::new();
        let mut py_sha = String::new();
        for i in 0..py_runs {
            let out = root.join(format!("py-{i}"));
            let t = Instant::now();
            let o = Command::new("python3")
                .args(["-m", "scripts.build_bat_core_dataset", "--source"])
                .arg(&source_path)
                .args([
                    "--source-sha256",
                    &sha,
                    "--round-id",
                    "r01",
                    "--target-stage",
                    "S3",
                    "--output-dir",
                ])
                .arg(&out)
                .current_dir(r)
                .output()?;
            py_times.push(t.elapsed());
            if !o.status.success() {
                return Err(format!(
                    "reference builder failed: {}",
                    String::from_utf8_lossy(&o.stderr)
                )
                .into());
            }
            py_sha = json::sha256_hex(&std::fs::read(out.join("train.jsonl"))?);
            std::fs::remove_dir_all(&out)?;
        }
        let py_med = median(py_times);
        println!("| reference python3 (subprocess) | {:.1} |", ms(py_med));
        println!();
        println!("train sha256 (python): {py_sha}");
        println!(
            "speed-up: {:.1}x (bat build incl. durable write), {:.1}x (materialize only)",
            py_med.as_secs_f64() / bat_med.as_secs_f64(),
            py_med.as_secs_f64() / mem_med.as_secs_f64()
        );
        if pack.is_some() && py_sha != train_sha {
            println!("note: outputs differ (expected unless --pack carries the reference wording)");
        }
    }
    let _ = Path::new(".");
    Ok(())
}
