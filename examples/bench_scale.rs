//! Benchmark at the paper's scale: a Qwen3-4B-shaped checkpoint series
//! (bf16, two Hugging Face shards per round), stored and restored by `bat`
//! and by `tar | zstd -1 -T0` in one run. Every command runs as a child
//! under `/usr/bin/time`, which reports its wall time, CPU seconds (user +
//! system of all its processes and threads) and peak RSS (`wait4`).
//!
//! Usage: cargo run --release --example bench_scale -- WORK_DIR [flags]
//!
//! Flags: `--layers N` (default 36, the 4B model: 8.05 GB per round;
//! `--layers 2` is about 1.2 GB, mostly the embedding), `--rounds R`
//! (default 4: chain depths 0..3), `--seed S`, `--repeat N` (checkouts,
//! diff, and the full clone beside a copy of the ledger's files; default
//! 1), `--no-cold` (skip the cold-cache checkouts, which need root for
//! `/proc/sys/vm/drop_caches`), `--no-one-core` (skip the
//! `taskset -c 0` runs of commit and checkout), `--keep-previous` (keep
//! the previous round's files while committing the next, as a training
//! loop would, so the commit reads its delta bases from them instead of
//! decoding them from the ledger: needs twice the raw size of disk),
//! `--lazy 0,3` (the chain depths of the lazy checkouts; default every
//! depth), `--keep` (keep WORK_DIR), `--stores-and-checkouts` (stop after
//! the checkouts: to compare two builds of `bat` whose ledgers differ, each
//! in its own run).
//!
//! The model: 36 decoder layers of hidden size 2560, MLP 9728, 32 query
//! and 8 key/value heads of 128, vocabulary 151,936 with tied input and
//! output embeddings (Qwen3-4B ties them: no `lm_head.weight`),
//! 4.02 G parameters. Round 0's weights are N(0, 0.02) (norm weights near
//! 1); each later round changes 13 % of the elements, each chosen afresh,
//! by 1 or 2 bf16 units in the last place, up or down: what a small
//! learning-rate step does to bf16 weights (most updates round to
//! nothing). Every value is a function of (seed, tensor, element, round),
//! so a round is generated tensor by tensor in 64 MB pieces, in bounded
//! memory, without its predecessor.
//!
//! Disk: one raw round (two with `--keep-previous`), the ledger, one
//! tar.zst (the last round's is kept for the restores), one checkout at a
//! time: about 2.6× the raw round size at the peak.
//!
//! The `bat` binary is the one beside this example (build it with
//! `cargo build --release --bin bat`).

#[path = "support/series.rs"]
mod series;

use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use rayon::prelude::*;
use series::{clock_ticks, load, proc_cost, timed, Cost};

/// The Qwen3-4B dimensions.
const HIDDEN: usize = 2560;
const INTERMEDIATE: usize = 9728;
const Q_HEADS: usize = 32;
const KV_HEADS: usize = 8;
const HEAD_DIM: usize = 128;
const VOCAB: usize = 151_936;
/// Elements changed per round, in units of 1/10,000.
const CHANGED_PER_10K: u64 = 1300;

/// One tensor of the model: its name, shape, and whether it is a norm
/// weight (values near 1) rather than a projection (values near 0).
struct Tensor {
    name: String,
    shape: Vec<usize>,
    norm: bool,
}

impl Tensor {
    fn len(&self) -> usize {
        self.shape.iter().product()
    }
}

/// The tensors of a model with `layers` decoder layers, split into two
/// shards of about equal size in the order Hugging Face writes them.
fn model(layers: usize) -> [Vec<Tensor>; 2] {
    let t = |name: String, shape: &[usize], norm: bool| Tensor {
        name,
        shape: shape.to_vec(),
        norm,
    };
    let mut all = vec![t(
        "model.embed_tokens.weight".into(),
        &[VOCAB, HIDDEN],
        false,
    )];
    for l in 0..layers {
        let p = format!("model.layers.{l}");
        all.push(t(format!("{p}.input_layernorm.weight"), &[HIDDEN], true));
        all.push(t(
            format!("{p}.mlp.down_proj.weight"),
            &[HIDDEN, INTERMEDIATE],
            false,
        ));
        all.push(t(
            format!("{p}.mlp.gate_proj.weight"),
            &[INTERMEDIATE, HIDDEN],
            false,
        ));
        all.push(t(
            format!("{p}.mlp.up_proj.weight"),
            &[INTERMEDIATE, HIDDEN],
            false,
        ));
        all.push(t(
            format!("{p}.post_attention_layernorm.weight"),
            &[HIDDEN],
            true,
        ));
        all.push(t(format!("{p}.self_attn.k_norm.weight"), &[HEAD_DIM], true));
        let kv = KV_HEADS * HEAD_DIM;
        all.push(t(
            format!("{p}.self_attn.k_proj.weight"),
            &[kv, HIDDEN],
            false,
        ));
        let q = Q_HEADS * HEAD_DIM;
        all.push(t(
            format!("{p}.self_attn.o_proj.weight"),
            &[HIDDEN, q],
            false,
        ));
        all.push(t(format!("{p}.self_attn.q_norm.weight"), &[HEAD_DIM], true));
        all.push(t(
            format!("{p}.self_attn.q_proj.weight"),
            &[q, HIDDEN],
            false,
        ));
        all.push(t(
            format!("{p}.self_attn.v_proj.weight"),
            &[kv, HIDDEN],
            false,
        ));
    }
    all.push(t("model.norm.weight".into(), &[HIDDEN], true));
    let total: usize = all.iter().map(Tensor::len).sum();
    let mut first = Vec::new();
    let mut acc = 0usize;
    let mut rest = all.into_iter();
    for tensor in rest.by_ref() {
        acc += tensor.len();
        first.push(tensor);
        if acc * 2 >= total {
            break;
        }
    }
    [first, rest.collect()]
}

fn splitmix(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// Element `i` of tensor number `t` in round `round`, as bf16 bits.
fn element(seed: u64, t: u64, i: u64, norm: bool, round: u64) -> u16 {
    let key = |k: u64| splitmix(seed ^ (k << 56) ^ (t << 36) ^ i);
    let h = key(0);
    // About normal: the sum of four uniforms, centred and scaled.
    let u: u64 = (0..4).map(|s| (h >> (16 * s)) & 0xffff).sum();
    let g = (u as f32 / 65536.0 - 2.0) * 3f32.sqrt();
    let x = if norm { 1.0 + 0.05 * g } else { 0.02 * g };
    let b = x.to_bits();
    let mut bits = ((b + 0x7fff + ((b >> 16) & 1)) >> 16) as u16;
    // Rounds 1, 2, ... draw on the 16-bit lanes of later hashes, four
    // rounds a hash: 14 bits choose whether the element changes, two how.
    let mut h = 0;
    for k in 1..=round {
        if (k - 1) % 4 == 0 {
            h = key(1 + (k - 1) / 4);
        }
        let lane = (h >> (16 * ((k - 1) % 4))) & 0xffff;
        if (lane >> 2) < CHANGED_PER_10K * (1 << 14) / 10_000 {
            let ulps = 1 + (lane & 1) as u16;
            bits = if (lane >> 1) & 1 == 1 || bits & 0x7fff < 4 {
                bits.wrapping_add(ulps)
            } else {
                bits.wrapping_sub(ulps)
            };
        }
    }
    bits
}

/// Write round `round` into `dir` (two shards, their index, config.json);
/// the BLAKE3 digests of the files written, by name.
fn write_round(
    dir: &Path,
    layers: usize,
    seed: u64,
    round: u64,
) -> std::io::Result<Vec<(String, String)>> {
    std::fs::create_dir_all(dir)?;
    let shards = model(layers);
    let mut digests = Vec::new();
    let mut weight_map = serde_json::Map::new();
    let mut total = 0usize;
    let mut t_index = 0u64;
    for (s, tensors) in shards.iter().enumerate() {
        let name = format!("model-{:05}-of-00002.safetensors", s + 1);
        let mut header = serde_json::Map::new();
        header.insert("__metadata__".into(), serde_json::json!({"format": "pt"}));
        let mut off = 0usize;
        for tensor in tensors {
            let n = 2 * tensor.len();
            header.insert(
                tensor.name.clone(),
                serde_json::json!({"dtype": "BF16", "shape": tensor.shape, "data_offsets": [off, off + n]}),
            );
            weight_map.insert(tensor.name.clone(), name.clone().into());
            off += n;
        }
        total += off;
        let mut h = serde_json::to_string(&header)?;
        while h.len() % 8 != 0 {
            h.push(' ');
        }
        let mut out = std::fs::File::create(dir.join(&name))?;
        let mut hasher = blake3::Hasher::new();
        let mut put = |bytes: &[u8]| -> std::io::Result<()> {
            hasher.update(bytes);
            out.write_all(bytes)
        };
        put(&(h.len() as u64).to_le_bytes())?;
        put(h.as_bytes())?;
        const PIECE: usize = 32 << 20; // elements: 64 MB
        let mut buf = vec![0u8; 2 * PIECE];
        for tensor in tensors {
            let n = tensor.len();
            let mut at = 0usize;
            while at < n {
                let len = PIECE.min(n - at);
                let part = &mut buf[..2 * len];
                part.par_chunks_mut(1 << 16)
                    .enumerate()
                    .for_each(|(c, ch)| {
                        let first = at + c * (1 << 15);
                        for (j, pair) in ch.chunks_exact_mut(2).enumerate() {
                            let v = element(seed, t_index, (first + j) as u64, tensor.norm, round);
                            pair.copy_from_slice(&v.to_le_bytes());
                        }
                    });
                put(part)?;
                at += len;
            }
            t_index += 1;
        }
        out.sync_all()?;
        digests.push((name, hasher.finalize().to_hex().to_string()));
    }
    let index = serde_json::json!({"metadata": {"total_size": total}, "weight_map": weight_map});
    std::fs::write(
        dir.join("model.safetensors.index.json"),
        serde_json::to_vec_pretty(&index)?,
    )?;
    let config = serde_json::json!({
        "architectures": ["Qwen3ForCausalLM"], "hidden_size": HIDDEN,
        "intermediate_size": INTERMEDIATE, "num_hidden_layers": layers,
        "num_attention_heads": Q_HEADS, "num_key_value_heads": KV_HEADS,
        "head_dim": HEAD_DIM, "vocab_size": VOCAB, "tie_word_embeddings": true,
        "torch_dtype": "bfloat16"
    });
    std::fs::write(dir.join("config.json"), serde_json::to_vec_pretty(&config)?)?;
    Ok(digests)
}

/// Whether the shards under `dir` have the digests they were written with.
fn identical(dir: &Path, digests: &[(String, String)]) -> bool {
    digests.iter().all(|(name, want)| {
        let Ok(mut f) = std::fs::File::open(dir.join(name)) else {
            return false;
        };
        let mut hasher = blake3::Hasher::new();
        let mut buf = vec![0u8; 8 << 20];
        loop {
            match f.read(&mut buf) {
                Ok(0) => break,
                Ok(n) => {
                    hasher.update(&buf[..n]);
                }
                Err(_) => return false,
            }
        }
        hasher.finalize().to_hex().as_str() == want
    })
}

/// Median, min and max.
#[derive(Clone, Copy)]
struct Spread(f64, f64, f64);

impl Spread {
    fn of(v: &[f64]) -> Spread {
        let mut v = v.to_vec();
        v.sort_by(f64::total_cmp);
        Spread(v[v.len() / 2], v[0], v[v.len() - 1])
    }

    fn show(&self, digits: usize) -> String {
        if self.1 == self.2 {
            format!("{:.*}", digits, self.0)
        } else {
            format!(
                "{:.*} ({:.*}–{:.*})",
                digits, self.0, digits, self.1, digits, self.2
            )
        }
    }
}

/// The measurements of the run, printed as one table at the end.
struct Table {
    rows: Vec<String>,
}

impl Table {
    /// A row: what, tool, the repetitions' costs, and the bytes the
    /// MB/s column divides by (0: no MB/s).
    fn add(&mut self, what: &str, tool: &str, costs: &[Cost], bytes: u64, note: &str) {
        let wall = Spread::of(&costs.iter().map(|c| c.wall).collect::<Vec<_>>());
        let cpu = Spread::of(&costs.iter().map(|c| c.cpu).collect::<Vec<_>>());
        let rss = Spread::of(&costs.iter().map(|c| c.rss_mb).collect::<Vec<_>>());
        let mbs = if bytes > 0 && wall.0 > 0.0 {
            format!("{:.0}", bytes as f64 / 1e6 / wall.0)
        } else {
            String::new()
        };
        let row = format!(
            "| {what} | {tool} | {} | {} | {:.0} | {mbs} | {note} |",
            wall.show(2),
            cpu.show(1),
            rss.2
        );
        println!("{row}");
        self.rows.push(row);
    }
}

struct Bench {
    work: PathBuf,
    ticks: f64,
    logs: PathBuf,
    n: usize,
}

impl Bench {
    /// Run `argv` timed (see [`timed`]); panics with the command's error.
    fn run(&mut self, argv: &[String], one_core: bool) -> Cost {
        self.n += 1;
        let log = self.logs.join(format!("{:03}.log", self.n));
        timed(argv, one_core, &log).unwrap_or_else(|e| panic!("{e}"))
    }

    /// `sh -c SCRIPT` timed: pipelines and a closing `sync`.
    fn sh(&mut self, script: &str, one_core: bool) -> Cost {
        self.run(&["sh".into(), "-c".into(), script.into()], one_core)
    }

    fn bat(&self) -> String {
        q(&series::bat_binary())
    }

    fn drop_caches(&self) -> bool {
        Command::new("sh")
            .arg("-c")
            .arg("sync && echo 3 > /proc/sys/vm/drop_caches")
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
    }

    /// Start `bat serve` on the ledger `dir`; the child and its URL.
    fn serve(&self, dir: &Path) -> (std::process::Child, String) {
        let mut server = Command::new(series::bat_binary())
            .arg("-C")
            .arg(dir)
            .args([
                "serve",
                "--bind",
                "127.0.0.1:0",
                "--allow-anonymous-read",
                "--read-only",
            ])
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("start bat serve");
        let mut line = String::new();
        BufReader::new(server.stdout.take().expect("stdout"))
            .read_line(&mut line)
            .expect("bat serve prints where it listens");
        let url = line.trim().trim_start_matches("listening on ").to_string();
        (server, url)
    }

    /// Stop a server; its peak RSS (MB) and CPU seconds.
    fn stop(&self, mut server: std::process::Child) -> Cost {
        let (rss_mb, cpu) = proc_cost(server.id(), self.ticks);
        let _ = server.kill();
        let _ = server.wait();
        Cost {
            wall: 0.0,
            cpu,
            rss_mb,
        }
    }
}

/// A path quoted for `sh`.
fn q(p: &Path) -> String {
    format!("'{}'", p.display().to_string().replace('\'', r"'\''"))
}

fn du(p: &Path) -> u64 {
    bat_ledger::maint::dir_size(p)
}

struct Opts {
    work: PathBuf,
    layers: usize,
    rounds: u64,
    seed: u64,
    repeat: usize,
    cold: bool,
    one_core: bool,
    keep_previous: bool,
    keep: bool,
    /// Stop after the checkouts (`--stores-and-checkouts`).
    stop_early: bool,
    /// Chain depths of the lazy checkouts (`--lazy 0,3`; default every
    /// depth).
    lazy: Option<Vec<u64>>,
}

fn opts() -> Opts {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let Some(work) = args.first().filter(|a| !a.starts_with("--")) else {
        eprintln!("usage: bench_scale WORK_DIR [--layers N] [--rounds R] [--seed S] [--repeat N] [--no-cold] [--no-one-core] [--keep-previous] [--keep] [--lazy D,D,..] [--stores-and-checkouts]");
        std::process::exit(2);
    };
    let num = |name: &str, default: u64| -> u64 {
        args.iter()
            .position(|a| a == name)
            .and_then(|i| args.get(i + 1))
            .and_then(|v| v.parse().ok())
            .unwrap_or(default)
    };
    let has = |name: &str| args.iter().any(|a| a == name);
    Opts {
        work: PathBuf::from(work),
        layers: num("--layers", 36) as usize,
        rounds: num("--rounds", 4).max(2),
        seed: num("--seed", 34),
        repeat: num("--repeat", 1).max(1) as usize,
        cold: !has("--no-cold"),
        one_core: !has("--no-one-core"),
        keep_previous: has("--keep-previous"),
        keep: has("--keep"),
        stop_early: has("--stores-and-checkouts"),
        lazy: args
            .iter()
            .position(|a| a == "--lazy")
            .and_then(|i| args.get(i + 1))
            .map(|v| v.split(',').filter_map(|d| d.parse().ok()).collect()),
    }
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let o = opts();
    let _ = std::fs::remove_dir_all(&o.work);
    std::fs::create_dir_all(o.work.join("logs"))?;
    let work = o.work.canonicalize()?;
    let mut b = Bench {
        work: work.clone(),
        ticks: clock_ticks(),
        logs: work.join("logs"),
        n: 0,
    };
    let params: usize = model(o.layers).iter().flatten().map(Tensor::len).sum();
    let raw_round = 2 * params as u64;
    println!(
        "Qwen3-4B-shaped series: {} layers, {:.3} G parameters, {:.2} GB per round (bf16, 2 shards), {} rounds, {:.0}% of elements changed per round, seed {}; {} cores; load at start {}",
        o.layers,
        params as f64 / 1e9,
        raw_round as f64 / 1e9,
        o.rounds,
        CHANGED_PER_10K as f64 / 100.0,
        o.seed,
        std::thread::available_parallelism().map_or(1, |n| n.get()),
        load()
    );
    println!("bat: {}", series::bat_binary().display());
    let mut table = Table { rows: Vec::new() };
    println!("\n| operation | tool | wall s | CPU s | peak RSS MB | MB/s | note |");
    println!("|---|---|---|---|---|---|---|");
    let bat = b.bat();
    let origin = work.join("origin");
    let origin1 = work.join("origin-1core");
    b.run(
        &[
            series::bat_binary().display().to_string(),
            "init".into(),
            origin.display().to_string(),
        ],
        false,
    );
    let mut digests = Vec::new();
    let tz = |r: u64| work.join(format!("r{r:02}.tar.zst"));
    let raw = work.join("raw");
    for r in 0..o.rounds {
        let dir = raw.join(format!("r{r:02}"));
        digests = write_round(&dir, o.layers, o.seed, r)?;
        let round_bytes = du(&dir);
        let last = r + 1 == o.rounds;
        let c = b.sh(
            &format!(
                "tar -C {} -cf - r{r:02} | zstd -q -1 -T0 -o {} && sync",
                q(&raw),
                q(&tz(r))
            ),
            false,
        );
        let tz_bytes = std::fs::metadata(tz(r)).map_or(0, |m| m.len());
        table.add(
            &format!("store round {r}"),
            "tar + zstd -1 -T0",
            &[c],
            round_bytes,
            &format!("{:.3} × raw", tz_bytes as f64 / round_bytes as f64),
        );
        if !last {
            std::fs::remove_file(tz(r))?;
        }
        let before = du(&origin.join(".bat"));
        let msg = format!("round {r}");
        let c = b.sh(
            &format!(
                "{bat} -C {} commit --plain -m '{msg}' {} && sync",
                q(&origin),
                q(&dir)
            ),
            false,
        );
        let added = du(&origin.join(".bat")).saturating_sub(before);
        table.add(
            &format!("store round {r}"),
            "bat commit",
            &[c],
            round_bytes,
            &format!("{:.4} × raw added", added as f64 / round_bytes as f64),
        );
        if o.one_core && r < 2 {
            if r == 0 {
                b.run(
                    &[
                        series::bat_binary().display().to_string(),
                        "init".into(),
                        origin1.display().to_string(),
                    ],
                    false,
                );
            }
            let c = b.sh(
                &format!(
                    "tar -C {} -cf - r{r:02} | zstd -q -1 -T0 -o {} && sync",
                    q(&raw),
                    q(&work.join("one.tar.zst"))
                ),
                true,
            );
            std::fs::remove_file(work.join("one.tar.zst"))?;
            table.add(
                &format!("store round {r}"),
                "tar + zstd -1 -T0, taskset -c 0",
                &[c],
                round_bytes,
                "1 core",
            );
            let c = b.sh(
                &format!(
                    "{bat} -C {} commit --plain -m '{msg}' {} && sync",
                    q(&origin1),
                    q(&dir)
                ),
                true,
            );
            table.add(
                &format!("store round {r}"),
                "bat commit, taskset -c 0",
                &[c],
                round_bytes,
                "1 core",
            );
            if r == 1 {
                std::fs::remove_dir_all(&origin1)?;
            }
        }
        // This round's files go now, or with --keep-previous after the next
        // commit used them as its delta bases.
        let gone = if o.keep_previous {
            r.checked_sub(1)
        } else {
            Some(r)
        };
        if let Some(g) = gone {
            std::fs::remove_dir_all(raw.join(format!("r{g:02}")))?;
        }
    }
    let _ = std::fs::remove_dir_all(&raw);
    let depth = o.rounds - 1;
    let stored = du(&origin.join(".bat"));
    let note_load = format!("load {}", load());
    println!("| ledger after {} rounds | bat | | | | | {:.2} GB stored ({:.4} × raw of all rounds); {note_load} |", o.rounds, stored as f64 / 1e9, stored as f64 / (raw_round * o.rounds) as f64);

    // Restores of the last (deepest) round.
    let out = work.join("out");
    let mut caches = vec![("warm", false)];
    if o.cold {
        if b.drop_caches() {
            caches.push(("cold", true));
        } else {
            println!(
                "| (cold restores skipped: cannot write /proc/sys/vm/drop_caches) | | | | | | |"
            );
        }
    }
    let mut same = true;
    for (cache, cold) in caches {
        let mut tools: Vec<(String, String, bool)> = vec![
            (
                "zstd -d + tar -x".into(),
                format!(
                    "mkdir -p {o} && zstd -q -d -c {} | tar -C {o} -xf - && sync",
                    q(&tz(depth)),
                    o = q(&out)
                ),
                false,
            ),
            (
                "bat checkout".into(),
                format!(
                    "{bat} -C {} checkout HEAD --to {} && sync",
                    q(&origin),
                    q(&out)
                ),
                false,
            ),
        ];
        if o.one_core {
            let more: Vec<(String, String, bool)> = tools
                .iter()
                .map(|(t, s, _)| (format!("{t}, taskset -c 0"), s.clone(), true))
                .collect();
            tools.extend(more);
        }
        for (tool, script, one) in tools {
            let mut costs = Vec::new();
            for _ in 0..o.repeat {
                let _ = std::fs::remove_dir_all(&out);
                if cold {
                    b.drop_caches();
                }
                costs.push(b.sh(&script, one));
                let dir = if tool.starts_with("zstd") {
                    out.join(format!("r{depth:02}"))
                } else {
                    out.clone()
                };
                same &= identical(&dir, &digests);
            }
            let note = if one { "1 core" } else { "" };
            table.add(
                &format!("checkout depth {depth}, {cache}"),
                &tool,
                &costs,
                raw_round,
                note,
            );
        }
    }
    let _ = std::fs::remove_dir_all(&out);
    std::fs::remove_file(tz(depth))?;
    println!("| restores byte-identical | | | | | | {same} |");
    if o.stop_early {
        return finish(&o, &b.work);
    }

    // Diff of the two last rounds, fsck.
    let costs: Vec<Cost> = (0..o.repeat)
        .map(|_| b.sh(&format!("{bat} -C {} diff HEAD~1 HEAD", q(&origin)), false))
        .collect();
    table.add(
        "diff of consecutive rounds",
        "bat diff HEAD~1 HEAD",
        &costs,
        2 * raw_round,
        "MB/s of both rounds",
    );
    let c = b.sh(&format!("{bat} -C {} fsck", q(&origin)), false);
    table.add("fsck", "bat fsck", &[c], stored, "MB/s of stored bytes");

    // Full clone over HTTP, beside a plain copy of the ledger's files (the
    // transfer target's second measure: a clone at half a local copy's
    // speed), alternated so that both see the same disk and load.
    let clone = work.join("clone");
    let (mut copies, mut clones, mut servers) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..o.repeat {
        copies.push(b.sh(
            &format!("cp -r {} {} && sync", q(&origin.join(".bat")), q(&clone)),
            false,
        ));
        let _ = std::fs::remove_dir_all(&clone);
        let (server, url) = b.serve(&origin);
        clones.push(b.sh(&format!("{bat} clone {url} {} && sync", q(&clone)), false));
        servers.push(b.stop(server));
        let _ = std::fs::remove_dir_all(&clone);
    }
    table.add(
        "local copy of .bat",
        "cp -r + sync",
        &copies,
        stored,
        "MB/s of stored bytes",
    );
    table.add(
        "full clone over HTTP",
        "bat clone",
        &clones,
        stored,
        "MB/s of stored bytes",
    );
    table.add(
        "full clone over HTTP",
        "bat serve",
        &servers,
        0,
        "server CPU and peak over the clone",
    );

    // Partial clone, then a checkout of the round `d` links deep, which
    // fetches its checkpoint on demand.
    let depths = o.lazy.clone().unwrap_or_else(|| (0..=depth).collect());
    for d in depths.into_iter().filter(|d| *d <= depth) {
        let (server, url) = b.serve(&origin);
        let c = b.sh(
            &format!("{bat} clone --filter no-checkpoints {url} {}", q(&clone)),
            false,
        );
        table.add(
            &format!("lazy clone (depth {d})"),
            "bat clone --filter no-checkpoints",
            &[c],
            0,
            "",
        );
        let rev = format!("HEAD~{}", depth - d);
        let c = b.sh(
            &format!(
                "{bat} -C {} checkout {rev} --to {} && sync",
                q(&clone),
                q(&out)
            ),
            false,
        );
        let s = b.stop(server);
        table.add(
            &format!("lazy checkout depth {d}"),
            "bat checkout",
            &[c],
            raw_round,
            "fetches on demand",
        );
        table.add(
            &format!("lazy checkout depth {d}"),
            "bat serve",
            &[s],
            0,
            "server over clone + checkout",
        );
        let _ = std::fs::remove_dir_all(&clone);
        let _ = std::fs::remove_dir_all(&out);
    }

    // gc, then the deepest round again.
    let c = b.sh(&format!("{bat} -C {} gc && sync", q(&origin)), false);
    table.add("gc", "bat gc", &[c], stored, "MB/s of stored bytes");
    let costs: Vec<Cost> = (0..o.repeat)
        .map(|_| {
            let _ = std::fs::remove_dir_all(&out);
            b.sh(
                &format!(
                    "{bat} -C {} checkout HEAD --to {} && sync",
                    q(&origin),
                    q(&out)
                ),
                false,
            )
        })
        .collect();
    let after = identical(&out, &digests);
    table.add(
        &format!("checkout round {depth} after gc, warm"),
        "bat checkout",
        &costs,
        raw_round,
        &format!("identical {after}"),
    );
    let _ = std::fs::remove_dir_all(&out);
    finish(&o, &work)
}

/// The closing load line; WORK_DIR removed unless `--keep`.
fn finish(o: &Opts, work: &Path) -> Result<(), Box<dyn std::error::Error>> {
    println!("\nload at end {}", load());
    if o.keep {
        println!("kept {}", work.display());
    } else {
        std::fs::remove_dir_all(work)?;
    }
    Ok(())
}
