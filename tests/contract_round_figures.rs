//! The source grid, RNG and round views against figures extracted from the
//! conformance vectors (tests/data: ids, digests and structure, no prose).
//! Runs on a fresh clone: rounds are built from the default pack's own source
//! grid, whose prose differs from the reference's but whose ids, pools,
//! stages, views and slots must not.

use std::path::PathBuf;

use bat_contract::json::{self, Value};
use bat_contract::pack::Pack;
use bat_contract::prompt::Prompter;
use bat_contract::rng::{self, Mt19937};
use bat_contract::round::{self, BuildInputs};
use bat_contract::source;

fn data(name: &str) -> Value {
    let p = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data")
        .join(name);
    json::parse(&std::fs::read_to_string(&p).expect("test data present"))
        .expect("test data is JSON")
}

fn ints(v: &Value) -> Vec<i64> {
    v.as_array()
        .expect("list")
        .iter()
        .map(|x| {
            if let Value::Int(i) = x {
                *i
            } else {
                panic!("int")
            }
        })
        .collect()
}

fn strs(v: &Value) -> Vec<String> {
    v.as_array()
        .expect("list")
        .iter()
        .map(|x| x.as_str().expect("str").to_string())
        .collect()
}

#[test]
fn rng_matches_cpython_vectors() {
    let doc = data("rng-vectors.json");
    let vectors = doc
        .get("vectors")
        .and_then(Value::as_array)
        .expect("vectors");
    assert!(vectors.len() >= 5);
    for v in vectors {
        let seed = v.get("seed_string").and_then(Value::as_str).expect("seed");
        let key: Vec<i64> = rng::init_key(seed).into_iter().map(i64::from).collect();
        assert_eq!(
            key,
            ints(v.get("init_key_u32_le_order").expect("key")),
            "key of {seed}"
        );
        let mut g = Mt19937::from_str_seed(seed);
        let first: Vec<i64> = (0..8).map(|_| i64::from(g.next_u32())).collect();
        assert_eq!(
            first,
            ints(v.get("first_8_genrand_uint32").expect("outputs")),
            "outputs of {seed}"
        );
        for (n, f) in [(21, "shuffle_range_21"), (8, "shuffle_range_8")] {
            let got: Vec<i64> = rng::shuffled_indices(seed, n)
                .into_iter()
                .map(|i| i as i64)
                .collect();
            assert_eq!(got, ints(v.get(f).expect("shuffle")), "{f} of {seed}");
        }
    }
}

/// The sha256 of the default pack's source.jsonl. It changes exactly when
/// the default pack's abstract-condition prose (or the grid rules) change.
const DEFAULT_SOURCE_SHA256: &str =
    "e857734777e907150fbf32be76dff2af048ddcb8d037cc2f6c3547adfbb1d49e";

#[test]
fn source_grid_ids_match_the_reference() {
    let figs = data("round-figures.json");
    let k = Pack::default_pack().contract().expect("default pack valid");
    let built = source::build_source(&k).expect("grid builds");
    let rows: Vec<Value> = std::str::from_utf8(&built.jsonl)
        .expect("utf8")
        .lines()
        .map(|l| json::parse(l).expect("row"))
        .collect();
    let ids: Vec<String> = rows
        .iter()
        .map(|r| {
            r.get("source_state_id")
                .and_then(Value::as_str)
                .expect("id")
                .to_string()
        })
        .collect();
    assert_eq!(ids, strs(figs.get("source_state_ids").expect("ids")));
    let cells: Vec<Vec<String>> = figs
        .get("source_cells")
        .and_then(Value::as_array)
        .expect("cells")
        .iter()
        .map(strs)
        .collect();
    for (r, c) in rows.iter().zip(&cells) {
        for (key, want) in ["focus_stage", "track", "outcome_bucket"].iter().zip(c) {
            assert_eq!(r.get(key).and_then(Value::as_str), Some(want.as_str()));
        }
    }
    assert_eq!(json::sha256_hex(&built.jsonl), DEFAULT_SOURCE_SHA256);
    assert_eq!(
        built.manifest.get("source_sha256").and_then(Value::as_str),
        Some(DEFAULT_SOURCE_SHA256)
    );
    // And the grid reads back as a valid source.
    assert_eq!(
        source::read_source(&built.jsonl, &k).expect("valid").len(),
        126
    );
}

fn structure(row: &Value) -> Value {
    let e = row.get("extra_info").expect("extra_info");
    Value::Array(
        [
            "state_id",
            "source_state_id",
            "source_pool",
            "target_stage",
            "view_index",
            "core_batch_index",
            "core_batch_slot",
        ]
        .iter()
        .map(|k| e.get(k).cloned().expect("field"))
        .collect(),
    )
}

fn build(pack: &Pack, args: &Value) -> (Vec<u8>, Vec<Value>) {
    let k = pack.contract().expect("pack valid");
    let prompter = Prompter::new(&k);
    let src = source::build_source(&k).expect("grid");
    let sha = json::sha256_hex(&src.jsonl);
    let s = |key: &str| args.get(key).and_then(Value::as_str).map(str::to_string);
    let batches = match args.get("batches") {
        Some(Value::Int(b)) => *b,
        _ => panic!("batches"),
    };
    let (rid, target, seed) = (
        s("round_id").expect("rid"),
        s("target_stage").expect("target"),
        s("seed"),
    );
    let built = round::materialize(
        &k,
        &prompter,
        &BuildInputs {
            source_bytes: &src.jsonl,
            source_file_name: "source.jsonl",
            source_sha256: &sha,
            round_id: &rid,
            target_stage: Some(&target),
            prescription: None,
            batches,
            seed: seed.as_deref(),
        },
    )
    .expect("round builds");
    let rows = std::str::from_utf8(&built.train)
        .expect("utf8")
        .lines()
        .map(|l| json::parse(l).expect("row"))
        .collect();
    (built.train, rows)
}

#[test]
fn small_rounds_have_the_reference_structure() {
    let figs = data("round-figures.json");
    let pack = Pack::default_pack();
    for name in ["r01-S3-b2", "r03-S4-b1-seed"] {
        let v = figs
            .get("rounds")
            .and_then(|r| r.get(name))
            .expect("vector");
        let (_, rows) = build(&pack, v.get("args").expect("args"));
        let got: Vec<Value> = rows.iter().map(structure).collect();
        let want = v
            .get("structure")
            .and_then(Value::as_array)
            .expect("structure");
        assert_eq!(got.len(), want.len(), "{name}");
        for (i, (g, w)) in got.iter().zip(want).enumerate() {
            assert_eq!(g, w, "{name} row {i}");
        }
    }
}

fn batch_structure_shas(rows: &[Value]) -> Vec<String> {
    rows.chunks(8)
        .map(|b| {
            let text: String = b
                .iter()
                .map(|r| json::canonical_json(&structure(r)).expect("cj") + "\n")
                .collect();
            json::sha256_hex(text.as_bytes())
        })
        .collect()
}

#[test]
fn default_round_has_the_reference_structure() {
    let figs = data("round-figures.json");
    let v = figs
        .get("rounds")
        .and_then(|r| r.get("r01-S3-default"))
        .expect("vector");
    let (_, rows) = build(&Pack::default_pack(), v.get("args").expect("args"));
    assert_eq!(rows.len(), 3024);
    let want = strs(v.get("batch_structure_sha256").expect("shas"));
    let got = batch_structure_shas(&rows);
    let first_bad = got.iter().zip(&want).position(|(g, w)| g != w);
    assert_eq!(first_bad, None, "first batch whose structure differs");
    assert_eq!(
        &structure(&rows[0]),
        v.get("first_structure").expect("first")
    );
    assert_eq!(
        &structure(&rows[3023]),
        v.get("last_structure").expect("last")
    );
}

/// Byte-exact 378-batch round with a pack carrying the reference's wording,
/// which must stay outside the repository: set BAT_REFERENCE_PACK to run it.
#[test]
fn default_round_is_byte_exact_with_a_reference_pack() {
    let Some(path) = std::env::var_os("BAT_REFERENCE_PACK") else {
        eprintln!("note: BAT_REFERENCE_PACK not set; skipping the byte-exact 378-batch check");
        return;
    };
    let pack = Pack::load(std::path::Path::new(&path)).expect("reference pack");
    let figs = data("round-figures.json");
    let v = figs
        .get("rounds")
        .and_then(|r| r.get("r01-S3-default"))
        .expect("vector");
    let (train, _) = build(&pack, v.get("args").expect("args"));
    let want = strs(v.get("batch_sha256").expect("batch shas"));
    let lines: Vec<&[u8]> = train.split_inclusive(|c| *c == b'\n').collect();
    for (b, w) in want.iter().enumerate() {
        let chunk: Vec<u8> = lines[b * 8..b * 8 + 8].concat();
        assert_eq!(&json::sha256_hex(&chunk), w, "batch {b}");
    }
    assert_eq!(train.len(), 12_043_328);
    assert_eq!(
        json::sha256_hex(&train),
        v.get("train_sha256").and_then(Value::as_str).expect("sha")
    );
}
