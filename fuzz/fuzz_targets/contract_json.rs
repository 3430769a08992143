//! The contract's JSON readers: the strict JSON parser, the evaluation
//! summary builder, the gate (two summaries), source/manifest rows and
//! round rows, and contract packs. The first byte picks the reader.
#![no_main]
use std::sync::OnceLock;

use bat_contract::pack::Pack;
use libfuzzer_sys::fuzz_target;

fn pack() -> &'static Pack {
    static P: OnceLock<Pack> = OnceLock::new();
    P.get_or_init(Pack::default_pack)
}

fuzz_target!(|data: &[u8]| {
    let Some((&which, rest)) = data.split_first() else {
        return;
    };
    let _ = bat_contract::json::parse_bytes(rest);
    match which % 5 {
        0 => {
            let _ = bat_contract::summary::build_summary(
                rest,
                "0000000000000000000000000000000000000000000000000000000000000000",
                pack(),
                bat_contract::numeric::SumMode::Plain,
            );
        }
        1 => {
            let mut parts = rest.splitn(2, |b| *b == 0);
            let a = parts.next().unwrap_or_default();
            let b = parts.next().unwrap_or_default();
            let (Ok(a), Ok(b)) = (
                bat_contract::json::parse_bytes(a),
                bat_contract::json::parse_bytes(b),
            ) else {
                return;
            };
            if let Ok(model) = bat_contract::gate::GateModel::from_pack(pack()) {
                let _ = bat_contract::gate::evaluate_gate(&a, &b, true, &model);
            }
        }
        2 => {
            if let Ok(k) = pack().contract() {
                if let Ok(rows) = bat_contract::source::read_source(rest, &k) {
                    let _ = bat_contract::source::validate_source(&rows, &k);
                }
            }
        }
        3 => {
            let rows: Vec<_> = rest
                .split(|b| *b == b'\n')
                .filter_map(|l| bat_contract::json::parse_bytes(l).ok())
                .collect();
            if let Some(target) = rows.first() {
                let _ = bat_contract::round::verify_round_rows(&rows[1..], target, 2);
            }
        }
        _ => {
            if let Ok(text) = std::str::from_utf8(rest) {
                let _ = Pack::parse(text, "fuzz");
            }
        }
    }
});
