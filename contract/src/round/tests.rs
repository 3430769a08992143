use super::plan::{state_id, state_id_from_cj};
use super::*;
use crate::json::{self, Value};
use crate::pack::{Pack, DEFAULT_PACK_JSON};
use crate::prompt::Prompter;
use crate::source;
use crate::task::E2E;

fn both_paths(pack_json: &str, stage: &str, batches: i64) {
    let pack = Pack::parse(pack_json, "test").expect("pack parses");
    let k = pack.contract().expect("pack valid");
    let prompter = Prompter::new(&k);
    let src = source::build_source(&k).expect("grid");
    let rows = source::read_source(&src.jsonl, &k).expect("source");
    let sha = json::sha256_hex(&src.jsonl);
    let req = RoundRequest {
        round_id: "r07",
        target_stage: stage,
        batches,
        seed: None,
        source_sha256: &sha,
    };
    let slow =
        encode_jsonl(&build_round(&k, &prompter, &rows, &req).expect("slow")).expect("encode");
    let (fast, lite) = build_round_jsonl(&k, &prompter, &rows, &req).expect("fast");
    assert_eq!(
        String::from_utf8_lossy(&fast),
        String::from_utf8_lossy(&slow)
    );
    assert_eq!(lite.len(), slow.iter().filter(|c| **c == b'\n').count());
    verify_round_rows(&lite, &Value::Str(stage.into()), batches).expect("verifies");
}

#[test]
fn state_id_shortcut_equals_the_digest() {
    for (rid, src, pool, stage, ord) in [
        (
            "r01",
            "bat-safe:0098af66e41682e216915948",
            POOL_E2E,
            E2E,
            0i64,
        ),
        ("é\"x", "a\\b", POOL_MIX, "S4", 3023),
    ] {
        let rid_cj = json::canonical_json(&Value::Str(rid.into())).expect("cj");
        let src_cj = json::canonical_json(&Value::Str(src.into())).expect("cj");
        assert_eq!(
            state_id_from_cj(&rid_cj, &src_cj, pool, stage, ord),
            state_id(rid, src, pool, stage, ord).expect("digest")
        );
    }
}

#[test]
fn spliced_rows_equal_encoded_rows() {
    both_paths(DEFAULT_PACK_JSON, "S2", 5);
}

#[test]
fn spliced_rows_survive_awkward_prose() {
    // Quotes, backslashes, control characters, non-ASCII and the splice
    // markers themselves in the prose: escaping must match, and a marker
    // in the prose must force the slow path rather than corrupt rows.
    let awkward = DEFAULT_PACK_JSON
        .replace(
            "Instance id: {state_id}",
            "Id \\\"{state_id}\\\" \\\\ é\\t✓ @@BAT3@@ {state_id}",
        )
        .replace(
            "toy lesion risk labelling",
            "toy \\\"lesion\\\" @@BAT0@@ labelling",
        );
    both_paths(&awkward, "S5", 3);
}
