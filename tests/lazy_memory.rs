//! A lazy checkout in a partial clone needs memory independent of how deep
//! the checkpoint's delta chain is: the real `bat` binary checks out round 0
//! (stored whole) and round 3 (three links deep) of a bf16 series the
//! clone left on the remote, and its peak RSS for round 3 stays within
//! 1.3× of round 0's. (Before the receiver spilled deltas that wait for
//! their base to scratch, it held every link of the chain in memory: round
//! 3 peaked at several times round 0 on this series.)

use std::io::Write;
use std::path::Path;
use std::process::{Child, Command};
use std::time::Duration;

use crate::common::{bat, succeeded, utf8};

/// bf16 elements per round (192 MiB), in this many tensors.
const ELEMENTS: usize = 96 << 20;
const TENSORS: usize = 8;

/// A small xorshift generator: the series is the same on every run.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
}

/// Weights as bf16 bit patterns of moderate magnitude (exponents 118–125,
/// either sign, any mantissa), like a trained model's.
fn initial(rng: &mut Rng) -> Vec<u16> {
    (0..ELEMENTS)
        .map(|_| {
            let r = rng.next();
            let sign = ((r >> 8) & 1) as u16;
            let exp = 118 + (r >> 16) as u16 % 8;
            (sign << 15) | (exp << 7) | (r & 0x7f) as u16
        })
        .collect()
}

/// One training round: about 3 elements in 8 get a new mantissa.
fn train(w: &mut [u16], rng: &mut Rng) {
    for x in w.iter_mut() {
        let r = rng.next();
        if r % 8 < 3 {
            *x = (*x & !0x7f) | ((r >> 20) & 0x7f) as u16;
        }
    }
}

/// `w` as a safetensors file of [`TENSORS`] equal tensors at `path`.
fn write_safetensors(path: &Path, w: &[u16]) {
    let per = w.len() / TENSORS;
    let mut header = String::from("{");
    for t in 0..TENSORS {
        if t > 0 {
            header.push(',');
        }
        header.push_str(&format!(
            r#""layer.{t}.weight":{{"dtype":"BF16","shape":[{per}],"data_offsets":[{},{}]}}"#,
            2 * per * t,
            2 * per * (t + 1)
        ));
    }
    header.push('}');
    let f = std::fs::File::create(path).expect("create the checkpoint");
    let mut out = std::io::BufWriter::with_capacity(1 << 20, f);
    out.write_all(&(header.len() as u64).to_le_bytes())
        .expect("write");
    out.write_all(header.as_bytes()).expect("write");
    for part in w.chunks(1 << 16) {
        let bytes: Vec<u8> = part.iter().flat_map(|x| x.to_le_bytes()).collect();
        out.write_all(&bytes).expect("write");
    }
    out.flush().expect("flush the checkpoint");
}

/// The peak RSS (`VmHWM`, kB) of a running child, polled from
/// `/proc/<pid>/status` until it exits (the high-water mark only grows, so
/// the last reading is the peak up to a few milliseconds before exit).
fn peak_kb(mut child: Child) -> u64 {
    let status = format!("/proc/{}/status", child.id());
    let mut peak = 0;
    loop {
        if let Ok(s) = std::fs::read_to_string(&status) {
            let hwm = s
                .lines()
                .find_map(|l| l.strip_prefix("VmHWM:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok());
            if let Some(kb) = hwm {
                peak = peak.max(kb);
            }
        }
        if let Some(st) = child.try_wait().expect("poll the checkout") {
            assert!(st.success(), "the lazy checkout failed: {st:?}");
            return peak;
        }
        std::thread::sleep(Duration::from_millis(2));
    }
}

/// A fresh partial clone of `origin` at `dest`; `bat checkout REV` of it
/// into `out` (fetching the checkpoint on demand), and the peak RSS in kB.
fn lazy_checkout_kb(origin: &Path, dest: &Path, rev: &str, out: &Path) -> u64 {
    succeeded(
        bat()
            .args(["clone", "--filter", "no-checkpoints"])
            .arg(origin)
            .arg(dest)
            .output()
            .expect("spawn bat clone"),
    );
    let child = bat()
        .arg("-C")
        .arg(dest)
        .args(["checkout", rev, "--to"])
        .arg(out)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("spawn bat checkout");
    peak_kb(child)
}

#[test]
fn lazy_checkout_memory_does_not_grow_with_chain_depth() {
    let t = tempfile::tempdir().expect("tempdir");
    let origin = t.path().join("origin");
    let work = t.path().join("work");
    std::fs::create_dir_all(&work).expect("mkdir work");
    succeeded(
        bat()
            .arg("init")
            .arg(&origin)
            .output()
            .expect("spawn bat init"),
    );
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let mut w = initial(&mut rng);
    let ckpt = work.join("model.safetensors");
    for round in 0..4 {
        if round > 0 {
            train(&mut w, &mut rng);
        }
        write_safetensors(&ckpt, &w);
        succeeded(
            Command::new(crate::common::bat_exe())
                .env("BAT_AUTHOR", "tester")
                .arg("-C")
                .arg(&origin)
                .args(["commit", "--plain", "-m", &format!("round {round}")])
                .arg(&work)
                .output()
                .expect("spawn bat commit"),
        );
    }
    drop(w);
    // Round 3 is stored three links deep, round 0 whole.
    let st: serde_json::Value = serde_json::from_slice(
        &succeeded(
            bat()
                .arg("-C")
                .arg(&origin)
                .args(["--json", "stats"])
                .output()
                .expect("spawn bat stats"),
        )
        .stdout,
    )
    .expect("stats JSON");
    assert!(
        st["delta_objects"].as_u64().unwrap_or(0) > 0
            || st["stats"]["delta_objects"].as_u64().unwrap_or(0) > 0,
        "the later rounds are stored as deltas: {st}"
    );
    let depth0 = lazy_checkout_kb(
        &origin,
        &t.path().join("p0"),
        "HEAD~3",
        &t.path().join("o0"),
    );
    let depth3 = lazy_checkout_kb(&origin, &t.path().join("p3"), "HEAD", &t.path().join("o3"));
    let restored = std::fs::read(t.path().join("o3/model.safetensors")).expect("restored round 3");
    assert_eq!(
        restored,
        std::fs::read(&ckpt).expect("round 3"),
        "round 3 restores byte for byte from {}",
        utf8(&t.path().join("p3"))
    );
    eprintln!("lazy checkout peak RSS: depth 0 {depth0} kB, depth 3 {depth3} kB");
    assert!(
        depth3 as f64 <= 1.3 * depth0 as f64,
        "a lazy checkout three links deep peaked at {depth3} kB, over 1.3x the {depth0} kB of one stored whole"
    );
}
