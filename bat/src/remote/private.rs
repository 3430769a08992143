//! Copying the private area between ledger directories, only with
//! `--include-private`: `.bat/private/raw-eval/<blake3 hex>` files, each
//! verified against its name before it is written (temporary file, fsync,
//! rename). Nothing else under `.bat/private` is ever copied.

use std::path::Path;

use crate::round::record::PRIVATE_RAW_EVAL_DIR;

/// Copy every raw evaluation from the `.bat` directory `from` to `to`;
/// returns how many files were written. A file whose bytes do not hash to
/// its name is an error (nothing after it is copied).
pub fn copy_raw_evals(from: &Path, to: &Path) -> Result<u64, String> {
    let src = from.join(PRIVATE_RAW_EVAL_DIR);
    let dst = to.join(PRIVATE_RAW_EVAL_DIR);
    let Ok(rd) = std::fs::read_dir(&src) else {
        return Ok(0);
    };
    let mut names: Vec<String> = rd
        .flatten()
        .filter_map(|e| e.file_name().to_str().map(str::to_string))
        .filter(|n| {
            n.len() == 64
                && n.bytes()
                    .all(|c| c.is_ascii_hexdigit() && !c.is_ascii_uppercase())
        })
        .collect();
    names.sort();
    let mut n = 0;
    for name in names {
        let p = src.join(&name);
        let bytes = std::fs::read(&p).map_err(|e| format!("read {}: {e}", p.display()))?;
        if blake3::hash(&bytes).to_hex().as_str() != name {
            return Err(format!(
                "private raw evaluation {} does not match its BLAKE3 name",
                p.display()
            ));
        }
        let q = dst.join(&name);
        if std::fs::read(&q).is_ok_and(|b| b == bytes) {
            continue;
        }
        bat_contract::fsutil::write_atomic_private(&q, &bytes)
            .map_err(|e| format!("write {}: {e}", q.display()))?;
        n += 1;
    }
    Ok(n)
}
