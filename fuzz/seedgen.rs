//! Writes the seed corpora of the ledger targets from a small real ledger
//! (three commits of a text file, a random file and a safetensors model
//! that changes a little, so records, chunk lists and deltas all occur):
//! `cargo +nightly fuzz run` is not needed, run the built binary:
//! `seedgen fuzz/seeds`.
use std::path::Path;
use std::sync::atomic::AtomicBool;

use bat_ledger::pack::RecordHeader;
use bat_ledger::remote::wire::encode_stream;
use bat_ledger::remote::WireBody;
use bat_ledger::{CommitRequest, Kind, Ledger, NoProgress};

fn model(seed: u8, n: usize) -> Vec<u8> {
    let header = format!(
        r#"{{"a":{{"dtype":"BF16","shape":[{n}],"data_offsets":[0,{}]}}}}"#,
        2 * n
    );
    let mut out = (header.len() as u64).to_le_bytes().to_vec();
    out.extend_from_slice(header.as_bytes());
    out.extend((0..2 * n).map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed)));
    out
}

fn main() {
    let out = std::env::args().nth(1).expect("usage: seedgen DIR");
    let out = Path::new(&out);
    let t = tempfile::tempdir().expect("tempdir");
    let mut l = Ledger::init(t.path()).expect("init");
    l.config.chunk_threshold = 1024;
    let d = t.path().join("d");
    let mut commits = Vec::new();
    for r in 0..3u8 {
        std::fs::create_dir_all(d.join("sub")).expect("mkdir");
        std::fs::write(d.join("notes.txt"), format!("round {r}\n")).expect("write");
        let noise: Vec<u8> = (0..3000u32).map(|i| (i * 7 + u32::from(r)) as u8).collect();
        std::fs::write(d.join("sub/blob.bin"), noise).expect("write");
        std::fs::write(d.join("model.safetensors"), model(r, 4096)).expect("write");
        let c = l
            .commit_dir(
                &d,
                &CommitRequest::new(format!("r{r}")),
                &NoProgress,
                &AtomicBool::new(false),
            )
            .expect("commit");
        commits.push(c.commit);
    }
    let w = |target: &str, name: String, bytes: &[u8]| {
        let dir = out.join(target);
        std::fs::create_dir_all(&dir).expect("mkdir");
        std::fs::write(dir.join(name), bytes).expect("write seed");
    };
    let plan = bat_ledger::remote::transfer::send_plan(
        &l,
        &commits,
        &mut |ids| Ok(vec![false; ids.len()]),
        &AtomicBool::new(false),
    )
    .expect("plan");
    let objs: Vec<_> = plan
        .iter()
        .map(|id| l.export_wire(id).expect("export"))
        .collect();
    for (i, o) in objs.iter().enumerate() {
        if let WireBody::Record {
            compression,
            payload,
        }
        | WireBody::Delta {
            compression,
            payload,
            ..
        } = &o.body
        {
            let h = RecordHeader::for_payload(o.kind, *compression, o.id, o.raw_len, payload);
            let mut rec = h.encode().to_vec();
            rec.extend_from_slice(payload);
            if rec.len() < 64 << 10 {
                w("record", format!("r{i}"), &rec);
            }
            if *compression == bat_ledger::pack::COMPRESSION_PLANES && o.raw_len % 8 == 0 {
                let mut p = u16::try_from(o.raw_len / 8)
                    .unwrap_or(u16::MAX)
                    .to_le_bytes()
                    .to_vec();
                p.extend_from_slice(payload);
                w("delta", format!("p{i}"), &p);
            }
        }
        if o.kind != Kind::Bytes {
            let raw = l.read_object(&o.id, o.kind).expect("raw");
            w("objects", format!("o{i}"), &raw);
        }
        w(
            "wire",
            format!("w{i}"),
            &encode_stream(std::slice::from_ref(o)),
        );
    }
    w("wire", "all".into(), &encode_stream(&objs));
    w("import", "all".into(), &encode_stream(&objs));
    let first: Vec<_> = bat_ledger::remote::transfer::send_plan(
        &l,
        &commits[..1],
        &mut |ids| Ok(vec![false; ids.len()]),
        &AtomicBool::new(false),
    )
    .expect("plan")
    .iter()
    .map(|id| l.export_wire(id).expect("export"))
    .collect();
    w("import", "first".into(), &encode_stream(&first));
    let b = t.path().join("x.bundle");
    bat_ledger::remote::bundle::create_bundle(
        &l,
        &b,
        &[("refs/heads/main".into(), commits[2])],
        &NoProgress,
        &AtomicBool::new(false),
    )
    .expect("bundle");
    w("bundle", "three".into(), &std::fs::read(&b).expect("read"));
    for e in std::fs::read_dir(l.dir().join("packs"))
        .expect("packs")
        .flatten()
    {
        let bytes = std::fs::read(e.path()).expect("read");
        if bytes.len() < 256 << 10 {
            w("pack", e.file_name().to_string_lossy().into_owned(), &bytes);
        }
    }
    println!("seeds written under {}", out.display());
}
