//! `bat diff` reads the per-tensor numbers of a commit and its delta
//! parent from the statistics stored with the deltas (`tensors_from:
//! "deltas"`), gives exactly what `--decode` (both checkpoints decoded in
//! full) gives, and decodes pairs that are not stored as deltas of each
//! other.

use std::path::Path;

use safetensors::tensor::TensorView;
use safetensors::Dtype;
use serde_json::Value;

use crate::common::utf8 as p;
use crate::common::{json, ok};

/// A checkpoint above the chunking threshold: an f32 tensor of two pieces
/// (6 MB) and a small bf16 one.
fn checkpoint(path: &Path, big: &[f32], small: &[u16]) {
    let b: Vec<u8> = big.iter().flat_map(|x| x.to_le_bytes()).collect();
    let s: Vec<u8> = small.iter().flat_map(|x| x.to_le_bytes()).collect();
    let views = vec![
        (
            "big".to_string(),
            TensorView::new(Dtype::F32, vec![big.len()], &b).expect("view"),
        ),
        (
            "small".to_string(),
            TensorView::new(Dtype::BF16, vec![small.len()], &s).expect("view"),
        ),
    ];
    let data = safetensors::serialize(views, None).expect("serialize");
    std::fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
    std::fs::write(path, data).expect("write");
}

/// The checkpoint's entry of the files section.
fn entry(d: &Value) -> &Value {
    let files = d["files"]["files"].as_array().expect("files");
    files
        .iter()
        .find(|f| f["path"] == "model.safetensors")
        .expect("the checkpoint changed")
}

#[test]
fn consecutive_commits_diff_from_deltas_like_the_full_decode() {
    let t = tempfile::tempdir().expect("tmp");
    let ledger = t.path().join("ledger");
    std::fs::create_dir_all(&ledger).expect("mkdir");
    ok(&ledger, &["init"]);
    let work = t.path().join("work");
    let file = work.join("model.safetensors");
    let mut big: Vec<f32> = (0..1_500_000).map(|i| (i % 1000) as f32 / 8.0).collect();
    let mut small: Vec<u16> = (0..4096).map(|i| 0x3f80 + (i % 64) as u16).collect();
    checkpoint(&file, &big, &small);
    ok(&ledger, &["commit", p(&work), "-m", "r0"]);
    // Changes in both pieces of `big` (one to NaN), one in `small`.
    big[10] += 0.25;
    big[1_200_000] = f32::NAN;
    big[1_499_999] -= 3.0;
    small[7] = 0x4040;
    checkpoint(&file, &big, &small);
    ok(&ledger, &["commit", p(&work), "-m", "r1"]);
    big[20] += 1.0;
    checkpoint(&file, &big, &small);
    ok(&ledger, &["commit", p(&work), "-m", "r2"]);

    let fast = json(&ledger, &["diff", "HEAD~2", "HEAD~1", "--section", "files"]);
    let full = json(
        &ledger,
        &["diff", "HEAD~2", "HEAD~1", "--section", "files", "--decode"],
    );
    assert_eq!(entry(&fast)["tensors_from"], "deltas");
    assert_eq!(entry(&full)["tensors_from"], "decode");
    assert_eq!(entry(&fast)["tensors"], entry(&full)["tensors"]);
    let t = &entry(&fast)["tensors"];
    assert_eq!(t[0]["name"], "big");
    assert_eq!(t[0]["changed_elements"], 3);
    assert_eq!(t[0]["nonfinite_changed"], 1);
    assert_eq!(t[0]["max_abs_delta"], 3.0);
    assert_eq!(t[1]["name"], "small");
    assert_eq!(t[1]["changed_elements"], 1);

    // Two rounds apart: the pieces are deltas of the middle round, not of
    // each other, so the changed ones are decoded; same numbers.
    let apart = json(&ledger, &["diff", "HEAD~2", "HEAD", "--section", "files"]);
    let apart_full = json(
        &ledger,
        &["diff", "HEAD~2", "HEAD", "--section", "files", "--decode"],
    );
    assert_ne!(entry(&apart)["tensors_from"], "deltas");
    assert_eq!(entry(&apart)["tensors"], entry(&apart_full)["tensors"]);
    assert_eq!(entry(&apart)["tensors"][0]["changed_elements"], 4);

    // The text shows the same tensor lines either way.
    let text = ok(&ledger, &["diff", "HEAD~2", "HEAD~1"]);
    let text_full = ok(&ledger, &["diff", "HEAD~2", "HEAD~1", "--decode"]);
    assert_eq!(text, text_full);
    assert!(text.contains("big"), "{text}");
}
