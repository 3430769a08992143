//! The conformance loop case (3 rounds: promote, hold, promote) with real
//! `sh -c` child processes, compared file by file with the reference work dir.

use std::path::Path;

use bat::engine::rounds::{prepare_fresh, run_loop, RunOptions, Start};
use bat::round::campaign::Campaign;
use bat_contract::json;
use bat_contract::pack::Pack;
use bat_contract::prompt::Prompter;
use loop_support::*;

use crate::common::loop_support;

fn campaign(fx: &Path, source: &Path, work: &Path, pack: Option<&Path>) -> Campaign {
    Campaign {
        source: source.to_path_buf(),
        initial_checkpoint: fx.join("initial"),
        work_dir: work.to_path_buf(),
        trainer: trainer_template(fx),
        evaluator: evaluator_template(fx),
        protocol_id: "bat-conformance-protocol".into(),
        runtime_tool_format: "hermes".into(),
        rounds: 3,
        batches: 1,
        pack: pack.map(Path::to_path_buf),
        branch: None,
        extra_placeholders: Vec::new(),
        seed: None,
    }
}

fn run_case(pack_path: Option<&Path>) -> (tempfile::TempDir, std::path::PathBuf, String, Recorder) {
    let tmp = tempfile::tempdir().unwrap();
    let pack = Pack::load_or_default(pack_path).unwrap();
    let fx = fixtures(tmp.path());
    let src = source(tmp.path(), &pack);
    let work = tmp.path().join("W");
    let c = prepare_fresh(&campaign(&fx, &src, &work, pack_path)).unwrap();
    let mut obs = Collect::default();
    let mut rec = Recorder::new();
    let out = run_loop(
        &c,
        Start::Fresh,
        &RunOptions {
            pack: &pack,
            log_dir: Some(&tmp.path().join("logs")),
            run_id: "test",
            prune_round_dirs: false,
        },
        &mut obs,
        &mut rec,
    )
    .unwrap();
    (tmp, work, json::pretty_json_file(&out.document()), rec)
}

#[test]
fn conformance_loop_with_default_pack_matches_every_prose_free_file() {
    let (tmp, work, stdout, rec) = run_case(None);
    let expected = data().join("expected-work-dir");
    assert_eq!(
        stdout.as_bytes(),
        std::fs::read(data().join("expected-stdout.json")).unwrap()
    );
    let ours = files(&work);
    let (data_files, rest): (Vec<_>, Vec<_>) =
        ours.iter().cloned().partition(|f| f.contains("/data/"));
    assert_eq!(rest, files(&expected), "work dir file list");
    for f in &rest {
        assert_eq!(
            std::fs::read(work.join(f)).unwrap(),
            std::fs::read(expected.join(f)).unwrap(),
            "{f} differs"
        );
    }
    // data/: prompt text depends on the pack; the round must verify and
    // train the stage the history names.
    assert_eq!(data_files.len(), 6);
    let pack = Pack::default_pack();
    let k = pack.contract().unwrap();
    let prompter = Prompter::new(&k);
    for (i, target) in ["S3", "S4", "S4"].iter().enumerate() {
        let d = work.join(format!("r0{}/data", i + 1));
        let v = bat_contract::round::verify_dataset(
            &k,
            &prompter,
            &std::fs::read(d.join("train.jsonl")).unwrap(),
            &std::fs::read(d.join("manifest.json")).unwrap(),
        )
        .unwrap();
        assert_eq!(
            v.get("target_stage").and_then(|s| s.as_str()),
            Some(*target)
        );
    }
    // Each round was handed over once, in order, with state.json as its state.
    let ids: Vec<_> = rec
        .rounds
        .iter()
        .map(|r| (r.0.as_str(), r.1.as_str()))
        .collect();
    assert_eq!(
        ids,
        [("r01", "promote"), ("r02", "hold"), ("r03", "promote")]
    );
    let state: serde_json::Value =
        serde_json::from_slice(&std::fs::read(work.join("state.json")).unwrap()).unwrap();
    // The loop record holds this round's history element and the history
    // length (the history itself is a chain over the round commits).
    for (i, r) in rec.rounds.iter().enumerate() {
        assert_eq!(r.2["history_entry"], state["history"][i]);
        assert_eq!(r.2["history_len"], i + 1);
    }
    assert_eq!(
        rec.rounds[2].2["next_target_stage"],
        state["next_target_stage"]
    );
    assert_eq!(rec.rounds[1].2["current_checkpoint"]["round_id"], "r01");
    // Child logs are kept outside the work dir.
    let logs = tmp.path().join("logs");
    assert!(logs.join("r02/trainer.stdout").is_file());
    assert!(logs.join("baseline-eval/evaluator.stderr").is_file());
}

#[test]
fn conformance_loop_with_reference_pack_is_byte_identical() {
    let (Some(pack), Some(shared)) = (std::env::var_os("BAT_REFERENCE_PACK"), shared_loop()) else {
        eprintln!(
            "note: set BAT_REFERENCE_PACK to a reference-wording pack (with \
             /work/shared/conformance present) to run the exact byte comparison"
        );
        return;
    };
    let (_tmp, work, stdout, _rec) = run_case(Some(Path::new(&pack)));
    let expected = shared.join("expected-work-dir");
    assert_eq!(files(&work), files(&expected));
    for f in files(&expected) {
        assert_eq!(
            std::fs::read(work.join(&f)).unwrap(),
            std::fs::read(expected.join(&f)).unwrap(),
            "{f} differs"
        );
    }
    assert_eq!(
        stdout.as_bytes(),
        std::fs::read(shared.join("expected-stdout.json")).unwrap()
    );
}
