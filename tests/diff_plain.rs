//! `bat diff` outside rounds, through the real binary: two plain commits
//! list added/removed/changed files with sizes and per-tensor summaries of
//! a safetensors file outside `candidate/`; the reward section of a
//! terminal-reward replay names each side's reward mode and ablation.

use std::path::Path;

use safetensors::tensor::TensorView;
use safetensors::Dtype;
use serde_json::Value;

use crate::common::utf8 as p;
use crate::common::{json, ok, Demo};

fn safetensors_file(path: &Path, w: &[f32]) -> u64 {
    let bytes: Vec<u8> = w.iter().flat_map(|x| x.to_le_bytes()).collect();
    let bias: Vec<u8> = [1.0f32, 2.0].iter().flat_map(|x| x.to_le_bytes()).collect();
    let views = vec![
        (
            "bias".to_string(),
            TensorView::new(Dtype::F32, vec![2], &bias).expect("view"),
        ),
        (
            "w".to_string(),
            TensorView::new(Dtype::F32, vec![2, 4], &bytes).expect("view"),
        ),
    ];
    let data = safetensors::serialize(views, None).expect("serialize");
    std::fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
    std::fs::write(path, &data).expect("write");
    data.len() as u64
}

#[test]
fn plain_commits_list_files_with_sizes_and_tensor_summaries() {
    let t = tempfile::tempdir().expect("tmp");
    let ledger = t.path().join("ledger");
    std::fs::create_dir_all(&ledger).expect("mkdir");
    ok(&ledger, &["init"]);
    let work = t.path().join("work");
    std::fs::create_dir_all(work.join("docs")).expect("mkdir");
    std::fs::write(work.join("docs/readme.txt"), b"hello").expect("w");
    std::fs::write(work.join("gone.txt"), b"0123456789").expect("w");
    std::fs::write(work.join("same.txt"), b"same").expect("w");
    let w0: Vec<f32> = (0..8).map(|i| i as f32).collect();
    let st = work.join("ckpt/step-100/model.safetensors");
    let st_size = safetensors_file(&st, &w0);
    ok(&ledger, &["commit", p(&work), "-m", "v1"]);

    std::fs::write(work.join("docs/readme.txt"), b"hello, world").expect("w");
    std::fs::remove_file(work.join("gone.txt")).expect("rm");
    std::fs::write(work.join("new.bin"), [7u8; 33]).expect("w");
    let mut w1 = w0.clone();
    w1[3] += 2.0;
    w1[6] -= 0.5;
    safetensors_file(&st, &w1);
    ok(&ledger, &["commit", p(&work), "-m", "v2"]);

    let d = json(&ledger, &["diff", "HEAD~1", "HEAD"]);
    let f = &d["files"];
    assert_eq!(f["file_counts"]["added"], 1);
    assert_eq!(f["file_counts"]["removed"], 1);
    assert_eq!(f["file_counts"]["changed"], 2);
    assert_eq!(f["file_counts"]["unchanged"], 1);
    let by_path = |path: &str| -> &Value {
        f["files"]
            .as_array()
            .expect("files")
            .iter()
            .find(|x| x["path"] == path)
            .unwrap_or_else(|| panic!("{path} not listed: {f}"))
    };
    let readme = by_path("docs/readme.txt");
    assert_eq!(readme["status"], "changed");
    assert_eq!(readme["a"]["size"], 5);
    assert_eq!(readme["b"]["size"], 12);
    assert_eq!(readme["size_delta"], 7);
    let gone = by_path("gone.txt");
    assert_eq!(gone["status"], "removed");
    assert_eq!(gone["a"]["size"], 10);
    assert_eq!(gone["b"], Value::Null);
    let new = by_path("new.bin");
    assert_eq!(new["status"], "added");
    assert_eq!(new["b"]["size"], 33);
    assert!(
        f["files"]
            .as_array()
            .expect("files")
            .iter()
            .all(|x| x["path"] != "same.txt"),
        "unchanged files are counted, not listed"
    );
    // The checkpoint outside candidate/ gets per-tensor summaries.
    let ck = by_path("ckpt/step-100/model.safetensors");
    assert_eq!(ck["a"]["size"], st_size);
    let tensors = ck["tensors"].as_array().expect("tensors");
    let tw = tensors.iter().find(|x| x["name"] == "w").expect("w");
    assert_eq!(tw["status"], "changed");
    assert_eq!(tw["changed_fraction"], 0.25);
    assert_eq!(tw["max_abs_delta"], 2.0);
    let tb = tensors.iter().find(|x| x["name"] == "bias").expect("bias");
    assert_eq!(tb["status"], "unchanged");
    // The round sections still say absent for plain commits.
    assert_eq!(d["checkpoint"]["files"], "absent");
    assert_eq!(d["reward"]["mode"]["a"]["mode"], Value::Null);

    // --section files alone, and the text form.
    let only = json(&ledger, &["diff", "HEAD~1", "HEAD", "--section", "files"]);
    let keys: Vec<&String> = only.as_object().expect("obj").keys().collect();
    assert_eq!(keys, ["a", "b", "files"]);
    assert_eq!(only["files"], d["files"]);
    let text = ok(&ledger, &["diff", "HEAD~1", "HEAD"]);
    // The files table sizes its columns to the content: compare with runs
    // of blanks collapsed (the layout itself is in the insta snapshots).
    let squeezed: String = text
        .lines()
        .map(|l| l.split_whitespace().collect::<Vec<_>>().join(" "))
        .collect::<Vec<_>>()
        .join("\n");
    for needle in [
        "[files] 1 added, 1 removed, 2 changed, 1 unchanged",
        "added new.bin 33 bytes",
        "removed gone.txt 10 bytes",
        "changed docs/readme.txt 5 -> 12 bytes (+7)",
        "changed ckpt/step-100/model.safetensors",
        "changed 0.2500 of 8 elements, max|Δ| 2.0000",
    ] {
        assert!(squeezed.contains(needle), "text lacks {needle:?}:\n{text}");
    }
}

#[test]
fn a_safetensors_suffix_on_a_non_safetensors_file_does_not_fail_the_diff() {
    let t = tempfile::tempdir().expect("tmp");
    let ledger = t.path().join("ledger");
    std::fs::create_dir_all(&ledger).expect("mkdir");
    ok(&ledger, &["init"]);
    let work = t.path().join("work");
    std::fs::create_dir_all(&work).expect("mkdir");
    std::fs::write(work.join("x.safetensors"), b"not a header").expect("w");
    ok(&ledger, &["commit", p(&work), "-m", "v1"]);
    std::fs::write(work.join("x.safetensors"), b"still not one").expect("w");
    ok(&ledger, &["commit", p(&work), "-m", "v2"]);
    let d = json(&ledger, &["diff", "HEAD~1", "HEAD", "--section", "files"]);
    let x = &d["files"]["files"][0];
    assert_eq!(x["status"], "changed");
    assert!(x["tensors_error"].is_string(), "{x}");
}

#[test]
fn reward_section_of_a_terminal_reward_replay_shows_each_sides_mode() {
    let t = tempfile::tempdir().expect("tmp");
    let dir = t.path().join("demo");
    let demo = Demo::build(&dir, &["--rounds", "2"]);
    let branch = demo.replay_branch.as_str();

    let d = json(&dir, &["diff", "main", branch, "--section", "reward"]);
    let m = &d["reward"]["mode"];
    assert_eq!(m["a"]["mode"], "stage");
    assert_eq!(m["a"]["ablation"], Value::Null);
    assert_eq!(m["b"]["mode"], "terminal");
    assert_eq!(m["b"]["source"], "ablation");
    assert_eq!(m["b"]["ablation"], "reward=terminal");
    assert_eq!(m["changed"], true);
    assert_eq!(d["reward"]["changed"], true);

    let text = ok(&dir, &["diff", "main", branch, "--section", "reward"]);
    assert!(
        text.contains("terminal (ablation reward=terminal)"),
        "{text}"
    );
    assert!(text.contains("CHANGED"), "{text}");
    assert!(!text.contains("unchanged"), "{text}");
}

/// Between two plain commits the text shows only what applies: the files
/// and their tensors, no empty round sections (which `--section` still
/// shows, and `--json` keeps).
#[test]
fn plain_commit_text_has_only_the_sections_that_apply() {
    let t = tempfile::tempdir().expect("tmp");
    let ledger = t.path().join("ledger");
    std::fs::create_dir_all(&ledger).expect("mkdir");
    ok(&ledger, &["init"]);
    let work = t.path().join("work");
    std::fs::create_dir_all(&work).expect("mkdir");
    std::fs::write(work.join("notes.txt"), b"one").expect("w");
    let w0: Vec<f32> = (0..8).map(|i| i as f32).collect();
    safetensors_file(&work.join("model.safetensors"), &w0);
    ok(&ledger, &["commit", p(&work), "-m", "v1"]);
    std::fs::write(work.join("notes.txt"), b"one two").expect("w");
    let mut w1 = w0.clone();
    w1[1] = f32::NAN;
    w1[5] += 0.25;
    safetensors_file(&work.join("model.safetensors"), &w1);
    ok(&ledger, &["commit", p(&work), "-m", "v2"]);
    let text = ok(&ledger, &["diff", "HEAD~1", "HEAD"]);
    let _s = crate::common::snapshot_settings().bind_to_scope();
    insta::assert_snapshot!(text, @r"
    diff xxxxxxxxxxxx xxxxxxxxxxxx
    (neither commit is a round: round sections left out; --section shows them)

    [files]  0 added, 0 removed, 2 changed, 0 unchanged; N -> N bytes
      changed  model.safetensors  N -> N bytes (±N)
      changed  notes.txt          N -> N bytes (±N)
      model.safetensors
          bias                         unchanged
          w                            changed 0.2500 of 8 elements, max|Δ| 0.2500, L2 0.2500, 1 non-finite
    ");
    let asked = ok(&ledger, &["diff", "HEAD~1", "HEAD", "--section", "gate"]);
    assert!(asked.contains("[gate]"), "{asked}");
    let d = json(&ledger, &["diff", "HEAD~1", "HEAD"]);
    assert_eq!(d["checkpoint"]["files"], "absent", "{d}");
}
