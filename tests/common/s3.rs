//! A real S3-compatible server (`s3s-fs`) on 127.0.0.1 for the S3-remote
//! tests. The binary comes from `BAT_TEST_S3S_FS` or `PATH`; without it the
//! tests fail under `CI=true` and are skipped loudly otherwise.

use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use bat::remote::s3::{S3Options, S3Remote};

pub const ACCESS_KEY: &str = "bat-test-access";
pub const SECRET_KEY: &str = "bat-test-secret-0123456789";
pub const BUCKET: &str = "ledgers";

/// Where `s3s-fs` is, if anywhere.
fn find_binary() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("BAT_TEST_S3S_FS") {
        let p = PathBuf::from(p);
        return p.is_file().then_some(p);
    }
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|d| d.join("s3s-fs"))
        .find(|p| p.is_file())
}

/// A running `s3s-fs`, killed on drop.
pub struct S3Server {
    child: Child,
    pub endpoint: String,
    pub root: PathBuf,
}

impl S3Server {
    /// Start one serving `root` (bucket `ledgers` created), or None when the
    /// binary is missing outside CI.
    pub fn start(root: &Path) -> Option<S3Server> {
        let Some(bin) = find_binary() else {
            let msg = "s3s-fs not found: set BAT_TEST_S3S_FS=/path/to/s3s-fs or put it on PATH \
                       (cargo install --locked s3s-fs@0.14.1 --features binary)";
            if std::env::var("CI").is_ok_and(|v| v == "true") {
                panic!("{msg}");
            }
            eprintln!("\n!!!!! SKIPPING S3 TEST: {msg} !!!!!\n");
            return None;
        };
        std::fs::create_dir_all(root.join(BUCKET)).expect("create the bucket directory");
        // A free port: bind, read, release. Retried if another process takes
        // it before s3s-fs binds.
        for _attempt in 0..5 {
            let port = TcpListener::bind("127.0.0.1:0")
                .and_then(|l| l.local_addr())
                .expect("find a free port")
                .port();
            let mut child = Command::new(&bin)
                .args(["--host", "127.0.0.1", "--port", &port.to_string()])
                .args(["--access-key", ACCESS_KEY, "--secret-key", SECRET_KEY])
                .arg(root)
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .expect("spawn s3s-fs");
            let addr: SocketAddr = format!("127.0.0.1:{port}").parse().expect("addr");
            // Wait until it accepts connections or exits.
            loop {
                if TcpStream::connect(addr).is_ok() {
                    return Some(S3Server {
                        child,
                        endpoint: format!("http://{addr}"),
                        root: root.to_path_buf(),
                    });
                }
                if child.try_wait().expect("poll s3s-fs").is_some() {
                    break;
                }
                std::thread::sleep(std::time::Duration::from_millis(20));
            }
        }
        panic!("s3s-fs did not start");
    }

    /// Options pointing at this server.
    pub fn options(&self) -> S3Options {
        S3Options {
            endpoint: Some(self.endpoint.clone()),
            region: Some("us-east-1".into()),
            access_key_id: Some(ACCESS_KEY.into()),
            secret_access_key: Some(SECRET_KEY.into()),
            session_token: None,
        }
    }

    /// A remote on `s3://ledgers/PREFIX`.
    pub fn remote(&self, prefix: &str) -> S3Remote {
        S3Remote::new(&format!("s3://{BUCKET}/{prefix}"), self.options()).expect("S3 remote")
    }
}

impl Drop for S3Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
