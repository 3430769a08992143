//! Property tests: the RNG shuffle is a permutation, and `verify_dataset`
//! accepts every round the builder makes and rejects tampered ones.

use std::sync::OnceLock;

use bat_contract::json::{self, Map, Value};
use bat_contract::pack::Pack;
use bat_contract::prompt::Prompter;
use bat_contract::rng::{self, Mt19937};
use bat_contract::round::{self, BuildInputs, BuiltRound};
use bat_contract::source;
use bat_contract::task::ContractPack;
use bat_ledger::Diagnostic;
use proptest::prelude::*;

fn pack() -> &'static ContractPack {
    static K: OnceLock<ContractPack> = OnceLock::new();
    K.get_or_init(|| Pack::default_pack().contract().expect("default pack valid"))
}

fn source_bytes() -> &'static [u8] {
    static S: OnceLock<Vec<u8>> = OnceLock::new();
    S.get_or_init(|| source::build_source(pack()).expect("grid").jsonl)
}

fn build(round_id: &str, stage: &str, batches: i64, seed: Option<&str>) -> BuiltRound {
    let k = pack();
    let prompter = Prompter::new(k);
    let sha = json::sha256_hex(source_bytes());
    round::materialize(
        k,
        &prompter,
        &BuildInputs {
            source_bytes: source_bytes(),
            source_file_name: "source.jsonl",
            source_sha256: &sha,
            round_id,
            target_stage: Some(stage),
            prescription: None,
            batches,
            seed,
        },
    )
    .expect("round builds")
}

fn verify(train: &[u8], manifest: &Value) -> Result<Value, round::ViewError> {
    let k = pack();
    round::verify_dataset(
        k,
        &Prompter::new(k),
        train,
        json::pretty_json_file(manifest).as_bytes(),
    )
}

fn with_train_sha(manifest: &Value, train: &[u8]) -> Value {
    let mut m = manifest.clone();
    if let Value::Object(o) = &mut m {
        o.insert(
            "train",
            Value::Object(
                Map::new()
                    .with("file", "train.jsonl")
                    .with("sha256", json::sha256_hex(train)),
            ),
        );
    }
    m
}

fn rows_of(train: &[u8]) -> Vec<Value> {
    std::str::from_utf8(train)
        .expect("utf8")
        .lines()
        .map(|l| json::parse(l).expect("row"))
        .collect()
}

fn encode(rows: &[Value]) -> Vec<u8> {
    round::encode_jsonl(rows).expect("encodes")
}

fn extra_mut(row: &mut Value) -> &mut Map {
    match row {
        Value::Object(m) => match m.get_mut("extra_info") {
            Some(Value::Object(e)) => e,
            _ => panic!("extra_info"),
        },
        _ => panic!("row"),
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    #[test]
    fn shuffle_is_a_permutation(seed in ".{0,40}", n in 0usize..60) {
        let mut v: Vec<usize> = (0..n).collect();
        Mt19937::from_str_seed(&seed).shuffle(&mut v);
        let mut sorted = v.clone();
        sorted.sort_unstable();
        prop_assert_eq!(sorted, (0..n).collect::<Vec<_>>());
        // A fresh generator with the same seed reproduces it.
        prop_assert_eq!(v, rng::shuffled_indices(&seed, n));
    }

    #[test]
    fn randbelow_stays_below(seed in "[a-z0-9:]{1,20}", n in 1u32..1000) {
        let mut g = Mt19937::from_str_seed(&seed);
        for _ in 0..20 {
            prop_assert!(g.randbelow(n) < n);
        }
    }

    #[test]
    fn verify_accepts_built_rounds_and_rejects_tampering(
        rid in "[a-z][a-z0-9]{0,6}",
        stage_i in 0usize..5,
        batches in 1i64..5,
        seed in proptest::option::of("[a-z0-9-]{0,10}"),
        victim in 0usize..1000,
        how in 0u8..5,
    ) {
        let stage = pack().stages[stage_i].clone();
        let b = build(&rid, &stage, batches, seed.as_deref());
        let res = verify(&b.train, &b.manifest).expect("a built round verifies");
        prop_assert_eq!(res.get("rows"), Some(&Value::Int(batches * 8)));

        let mut rows = rows_of(&b.train);
        let i = victim % rows.len();
        let want = match how {
            0 => {
                // Any change without a matching manifest: the digest.
                let mut t = b.train.clone();
                t.push(b'\n');
                prop_assert!(matches!(verify(&t, &b.manifest), Err(round::ViewError::TrainDigestMismatch)));
                return Ok(());
            }
            1 => {
                let other = rows[(i + 1) % rows.len()].get("extra_info").and_then(|e| e.get("state_id")).cloned().expect("sid");
                extra_mut(&mut rows[i]).insert("state_id", other);
                "round_state_id_duplicate"
            }
            2 => {
                extra_mut(&mut rows[i]).insert("source_pool", Value::Str("elsewhere".into()));
                "round_pool_composition_invalid"
            }
            3 => {
                if let Value::Object(m) = &mut rows[i] {
                    m.insert("prompt", json::parse(r#"[{"role":"system","content":"x"},{"role":"user","content":"y"}]"#).expect("json"));
                }
                "prompt_task_contract_mismatch"
            }
            _ => {
                rows.pop();
                "round_row_count_invalid"
            }
        };
        let t = encode(&rows);
        let err = verify(&t, &with_train_sha(&b.manifest, &t)).expect_err("tampered round rejected");
        // Each mutation trips exactly one check, and it comes first.
        let code = err.code();
        prop_assert_eq!(code.as_deref(), Some(want));
    }
}
