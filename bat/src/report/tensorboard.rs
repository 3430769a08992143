//! TensorBoard event files (`bat export --format tensorboard -o DIR`): one
//! run (sub-directory) per branch, one scalar event per number of a round
//! at step = its round number, and the round's step metrics at a global
//! step (see [`global_steps`]).
//!
//! The format is written here without a protobuf or TensorFlow crate: a
//! file is a sequence of TFRecords (little-endian u64 length, masked
//! CRC32C of those 8 bytes, the data, masked CRC32C of the data), each
//! record an `Event` message. The first event carries only
//! `file_version = "brain.Event:2"`; the others a `wall_time` (the round
//! commit's time, so the same ledger always gives the same bytes), a
//! `step` and a `Summary` of `Value { tag, simple_value }`.
//!
//! Tags: `round/<column>` for every numeric column of the round row
//! (`overall`, `task`, `agentic`, `S1`–`S5`, `audit_gap`, compute…),
//! `health/<key>`, `track/<name>` and `stage/<S>` for the custom metrics
//! of [`super::metrics`], `steps/<key>` for step metrics.

use std::path::{Path, PathBuf};

use bat_ledger::Ledger;

use super::export::{export_rows, ExportRow};
use super::metrics::MetricSource;
use super::Source;
use crate::inspect::rounds::{RoundsError, COLUMNS};
use crate::round::steps::StepMetrics;

/// The event file name's fixed part (TensorBoard looks for `tfevents`).
pub const EVENT_FILE: &str = "events.out.tfevents.0.bat";

/// Why an export did not finish.
#[derive(Debug, thiserror::Error)]
pub enum TensorBoardError {
    /// Reading the rounds failed.
    #[error(transparent)]
    Rounds(#[from] RoundsError),
    /// An event file or its folder could not be written.
    #[error("cannot write the TensorBoard events {}: {source}", path.display())]
    Write {
        /// The file or folder.
        path: PathBuf,
        /// The OS error.
        source: std::io::Error,
    },
    /// The caller cancelled the export.
    #[error("the TensorBoard export was cancelled; files already written are complete runs")]
    Cancelled,
}

impl bat_ledger::Diagnostic for TensorBoardError {
    fn kind(&self) -> bat_ledger::ErrorKind {
        match self {
            TensorBoardError::Rounds(e) => e.kind(),
            TensorBoardError::Cancelled => bat_ledger::ErrorKind::Interrupted,
            TensorBoardError::Write { .. } => bat_ledger::ErrorKind::User,
        }
    }

    fn hint(&self) -> Option<String> {
        match self {
            TensorBoardError::Rounds(e) => e.hint(),
            TensorBoardError::Write { .. } => {
                Some("choose an output directory you can write (-o DIR)".to_string())
            }
            TensorBoardError::Cancelled => None,
        }
    }

    fn code(&self) -> Option<String> {
        match self {
            TensorBoardError::Rounds(e) => e.code(),
            _ => None,
        }
    }
}

/// What an export wrote.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct TensorBoardRun {
    /// The branch.
    pub branch: String,
    /// The event file.
    pub file: PathBuf,
    /// Round events written.
    pub rounds: usize,
    /// Scalar values written (rounds and steps).
    pub scalars: usize,
}

// ---------------------------------------------------------------- encoding

const CRC32C_POLY: u32 = 0x82F6_3B78;

const fn crc_table() -> [u32; 256] {
    let mut t = [0u32; 256];
    let mut i = 0;
    while i < 256 {
        let mut c = i as u32;
        let mut k = 0;
        while k < 8 {
            c = if c & 1 != 0 {
                (c >> 1) ^ CRC32C_POLY
            } else {
                c >> 1
            };
            k += 1;
        }
        t[i] = c;
        i += 1;
    }
    t
}

static CRC_TABLE: [u32; 256] = crc_table();

/// CRC-32C (Castagnoli) of `bytes`.
pub fn crc32c(bytes: &[u8]) -> u32 {
    !bytes.iter().fold(!0u32, |c, b| {
        CRC_TABLE[((c ^ u32::from(*b)) & 0xff) as usize] ^ (c >> 8)
    })
}

/// TFRecord's masked CRC: rotated right by 15 bits plus a constant.
pub fn masked_crc(bytes: &[u8]) -> u32 {
    crc32c(bytes).rotate_right(15).wrapping_add(0xa282_ead8)
}

fn varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

fn length_delimited(out: &mut Vec<u8>, tag: u8, bytes: &[u8]) {
    out.push(tag);
    varint(out, bytes.len() as u64);
    out.extend_from_slice(bytes);
}

/// One TFRecord around `data`.
pub fn record(data: &[u8]) -> Vec<u8> {
    let len = (data.len() as u64).to_le_bytes();
    let mut out = Vec::with_capacity(data.len() + 16);
    out.extend_from_slice(&len);
    out.extend_from_slice(&masked_crc(&len).to_le_bytes());
    out.extend_from_slice(data);
    out.extend_from_slice(&masked_crc(data).to_le_bytes());
    out
}

/// The `Event` holding only the file version (the first of a file).
pub fn version_event(wall_time: f64) -> Vec<u8> {
    let mut e = vec![0x09];
    e.extend_from_slice(&wall_time.to_le_bytes());
    length_delimited(&mut e, 0x1a, b"brain.Event:2");
    e
}

/// An `Event` with a summary of scalar values (`simple_value` is a 32-bit
/// float in the format).
pub fn scalar_event(wall_time: f64, step: i64, scalars: &[(String, f64)]) -> Vec<u8> {
    let mut summary = Vec::new();
    for (tag, v) in scalars {
        let mut value = Vec::new();
        length_delimited(&mut value, 0x0a, tag.as_bytes());
        value.push(0x15);
        value.extend_from_slice(&(*v as f32).to_le_bytes());
        length_delimited(&mut summary, 0x0a, &value);
    }
    let mut e = vec![0x09];
    e.extend_from_slice(&wall_time.to_le_bytes());
    e.push(0x10);
    varint(&mut e, step as u64);
    length_delimited(&mut e, 0x2a, &summary);
    e
}

/// Split an event file into its records' data, checking both CRCs of each.
pub fn read_records(bytes: &[u8]) -> Result<Vec<&[u8]>, String> {
    let mut out = Vec::new();
    let mut at = 0usize;
    while at < bytes.len() {
        let head = bytes
            .get(at..at + 12)
            .ok_or_else(|| format!("truncated record header at byte {at}"))?;
        let (len_bytes, crc) = head.split_at(8);
        if masked_crc(len_bytes).to_le_bytes() != crc {
            return Err(format!("length CRC mismatch at byte {at}"));
        }
        let mut len8 = [0u8; 8];
        len8.copy_from_slice(len_bytes);
        let len = usize::try_from(u64::from_le_bytes(len8))
            .map_err(|_| format!("record length too large at byte {at}"))?;
        let start = at + 12;
        let data = bytes
            .get(start..start + len)
            .ok_or_else(|| format!("truncated record data at byte {start}"))?;
        let crc = bytes
            .get(start + len..start + len + 4)
            .ok_or_else(|| format!("truncated data CRC at byte {}", start + len))?;
        if masked_crc(data).to_le_bytes() != crc {
            return Err(format!("data CRC mismatch at byte {start}"));
        }
        out.push(data);
        at = start + len + 4;
    }
    Ok(out)
}

// ---------------------------------------------------------------- export

/// The tag of a round column, or `None` for columns that are not curves
/// (the step itself, the commit time, ids and flags).
fn column_tag(column: &str) -> Option<String> {
    (!matches!(column, "round_number" | "time")).then(|| format!("round/{column}"))
}

/// A row's scalars: its numeric columns, then its custom metrics (also
/// the metrics `bat mirror mlflow` logs).
pub fn round_scalars(r: &ExportRow) -> Vec<(String, f64)> {
    let mut out: Vec<(String, f64)> = COLUMNS
        .iter()
        .zip(r.row.values())
        .filter_map(|(c, v)| Some((column_tag(c)?, v.as_f64()?)))
        .collect();
    for (k, v) in &r.metrics {
        let prefix = match k.source {
            MetricSource::Health => "health",
            MetricSource::EvalTrack => "track",
            MetricSource::EvalStage => "stage",
        };
        out.push((format!("{prefix}/{}", k.name), *v));
    }
    out.retain(|(_, v)| v.is_finite());
    out.sort_by(|a, b| a.0.cmp(&b.0));
    out
}

/// The global step of each round's step metrics: a round's steps are
/// shifted by the end of the previous round's (its largest step + 1), so
/// a branch's steps form one increasing axis.
pub fn global_steps(rounds: &[Option<StepMetrics>]) -> Vec<i64> {
    let mut offset = 0i64;
    rounds
        .iter()
        .map(|s| {
            let here = offset;
            if let Some(max) = s.as_ref().and_then(|s| s.rows.iter().map(|r| r.step).max()) {
                let end = i64::try_from(max).unwrap_or(i64::MAX).saturating_add(1);
                offset = offset.saturating_add(end);
            }
            here
        })
        .collect()
}

/// The scalars of one round of a branch, as the trackers log them.
#[derive(Debug, Clone, PartialEq)]
pub struct RoundPoints {
    /// The round's step: its round number (its 1-based position in the
    /// branch for rounds recorded without one).
    pub step: i64,
    /// The round commit's time, seconds since the Unix epoch.
    pub time: i64,
    /// [`round_scalars`] of the round.
    pub values: Vec<(String, f64)>,
    /// Its step metrics (`steps/<key>`) at their global step (see
    /// [`global_steps`]), one entry per trainer step.
    pub steps: Vec<(i64, Vec<(String, f64)>)>,
}

/// The scalars per round of one branch's rows (oldest first): the one
/// source of what `bat export --format tensorboard` writes and `bat mirror
/// mlflow` logs.
pub fn round_points(ledger: &Ledger, rows: &[&ExportRow]) -> Result<Vec<RoundPoints>, RoundsError> {
    let steps = rows
        .iter()
        .map(|r| crate::round::steps::round_steps(ledger, r.row.commit))
        .collect::<Result<Vec<_>, _>>()
        .map_err(RoundsError::from)?;
    let offsets = global_steps(&steps);
    Ok(rows
        .iter()
        .zip(steps.iter().zip(offsets))
        .enumerate()
        .map(|(i, (r, (m, offset)))| RoundPoints {
            step: r.row.round_number.unwrap_or(i as i64 + 1),
            time: r.row.time,
            values: round_scalars(r),
            steps: m
                .iter()
                .flat_map(|m| m.rows.iter())
                .map(|row| {
                    let values = row
                        .values
                        .iter()
                        .filter(|(_, v)| v.is_finite())
                        .map(|(k, v)| (format!("steps/{k}"), *v))
                        .collect();
                    let g = offset.saturating_add(i64::try_from(row.step).unwrap_or(i64::MAX));
                    (g, values)
                })
                .collect(),
        })
        .collect())
}

/// The run folder of a branch: one path component per `/`-separated part
/// (`bat/s0` is the run `bat/s0` in TensorBoard), with `.` and `..` parts
/// made harmless.
fn run_dir(out: &Path, branch: &str) -> PathBuf {
    branch
        .split('/')
        .filter(|p| !p.is_empty())
        .fold(out.to_path_buf(), |d, p| match p {
            "." | ".." => d.join(p.replace('.', "_")),
            p => d.join(p),
        })
}

/// Write one event file per source into `out` (created if missing).
pub fn export_tensorboard(
    ledger: &Ledger,
    sources: &[Source],
    out: &Path,
    ctx: &crate::Ctx<'_>,
) -> Result<Vec<TensorBoardRun>, TensorBoardError> {
    let (_, rows) = export_rows(ledger, sources)?;
    let mut runs = Vec::new();
    for s in sources {
        if ctx.cancelled() {
            return Err(TensorBoardError::Cancelled);
        }
        let mine: Vec<&ExportRow> = rows.iter().filter(|r| r.row.branch == s.name).collect();
        let points = round_points(ledger, &mine)?;
        let first_time = mine.first().map_or(0.0, |r| r.row.time as f64);
        let mut bytes = record(&version_event(first_time));
        let mut scalars = 0;
        for p in &points {
            let wall = p.time as f64;
            scalars += p.values.len();
            bytes.extend(record(&scalar_event(wall, p.step, &p.values)));
            for (g, values) in &p.steps {
                scalars += values.len();
                bytes.extend(record(&scalar_event(wall, *g, values)));
            }
        }
        let dir = run_dir(out, &s.name);
        std::fs::create_dir_all(&dir).map_err(|source| TensorBoardError::Write {
            path: dir.clone(),
            source,
        })?;
        let file = dir.join(EVENT_FILE);
        bat_contract::fsutil::write_atomic(&file, &bytes).map_err(|source| {
            TensorBoardError::Write {
                path: file.clone(),
                source,
            }
        })?;
        runs.push(TensorBoardRun {
            branch: s.name.clone(),
            file,
            rounds: mine.len(),
            scalars,
        });
    }
    Ok(runs)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn crc32c_matches_the_standard_check_value() {
        // The CRC-32C check value of "123456789" (RFC 3720, appendix B.4).
        assert_eq!(crc32c(b"123456789"), 0xE306_9283);
        assert_eq!(crc32c(b""), 0);
    }

    #[test]
    fn records_round_trip_and_catch_a_flipped_bit() {
        let a = record(&version_event(1.5));
        let b = record(&scalar_event(2.0, 3, &[("round/overall".into(), 0.25)]));
        let mut file = a.clone();
        file.extend_from_slice(&b);
        let recs = read_records(&file).expect("valid records");
        assert_eq!(recs.len(), 2);
        assert_eq!(recs[0], &a[12..a.len() - 4]);
        let mut bad = file.clone();
        let last = bad.len() - 6;
        bad[last] ^= 1;
        assert!(read_records(&bad).is_err());
    }

    #[test]
    fn global_steps_continue_across_rounds() {
        let m = |steps: &[u64]| {
            Some(StepMetrics {
                rows: steps
                    .iter()
                    .map(|s| crate::round::steps::StepRow {
                        step: *s,
                        values: Default::default(),
                    })
                    .collect(),
            })
        };
        assert_eq!(
            global_steps(&[m(&[0, 1, 2]), None, m(&[1, 2]), m(&[0])]),
            vec![0, 3, 3, 6]
        );
    }
}
