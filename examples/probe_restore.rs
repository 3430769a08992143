use std::sync::atomic::AtomicBool;
use std::time::Instant;
fn main() -> Result<(), Box<dyn std::error::Error>> {
    let a: Vec<String> = std::env::args().collect();
    let l = bat_ledger::Ledger::open(std::path::Path::new(&a[1]))?;
    let c = l.resolve(&a[2])?;
    let tree = l.read_commit(&c)?.tree;
    let cancel = AtomicBool::new(false);
    for f in l.walk_files(&tree)? {
        let t = Instant::now();
        let mut sink = std::io::sink();
        let n = l.read_bytes_to(&f.id, &mut sink, &cancel)?;
        println!(
            "{} {} bytes to sink {:.2}s",
            f.path,
            n,
            t.elapsed().as_secs_f64()
        );
    }
    Ok(())
}
