//! Per-remote credentials: a token (copied from a token file) or a
//! credential helper (an argv whose first line of output is the token),
//! kept in `.bat/credentials` with mode 0600. The file lives beside the
//! catalog, not in it and not among the objects, so no push, bundle or
//! clone carries it; nothing here ever puts a token in a message.
//!
//! A token given on the command line (`--token`, `BAT_TOKEN`) wins over a
//! stored one, as an explicit flag does in git.

use std::collections::BTreeMap;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use serde::{Deserialize, Serialize};

/// The file name under the ledger's `.bat` directory.
pub const CREDENTIALS_FILE: &str = "credentials";
/// Longest token file, credentials file or helper output read.
pub const MAX_CREDENTIAL_BYTES: u64 = 64 << 10;

/// How a remote's token is found.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Credential {
    /// The token itself.
    Token(String),
    /// Run this argv (no shell); the first line it prints is the token.
    Helper(Vec<String>),
}

impl std::fmt::Debug for Credential {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.describe())
    }
}

impl Credential {
    /// What is stored, without the secret: "token" or "helper".
    pub fn describe(&self) -> &'static str {
        match self {
            Credential::Token(_) => "token",
            Credential::Helper(_) => "helper",
        }
    }
}

#[derive(Debug, Default, Serialize, Deserialize)]
struct CredentialsFile {
    remotes: BTreeMap<String, Credential>,
}

/// A credential that cannot be stored or found. No variant carries a
/// token.
#[derive(Debug, thiserror::Error)]
pub enum CredentialError {
    /// Reading or writing a file failed.
    #[error("cannot {op} {path}: {source}")]
    Io {
        /// What was being done.
        op: &'static str,
        /// The file.
        path: PathBuf,
        /// The OS error.
        source: std::io::Error,
    },
    /// A token file or the credentials file is not usable.
    #[error("{path}: {reason}")]
    Invalid {
        /// The file.
        path: PathBuf,
        /// What is wrong (never the token).
        reason: String,
    },
    /// The credentials file can be read by others than its owner.
    #[error("{path} is readable by other users (mode {mode:o}); run `chmod 600 {path}` (it holds remote tokens)")]
    TooOpen {
        /// The file.
        path: PathBuf,
        /// Its permission bits.
        mode: u32,
    },
    /// The credential helper of a remote failed or printed no token.
    #[error("the credential helper of remote {remote} ({program}) {reason}")]
    Helper {
        /// The remote.
        remote: String,
        /// The helper's program (its arguments are not shown).
        program: String,
        /// What went wrong.
        reason: String,
    },
}

impl bat_ledger::Diagnostic for CredentialError {
    fn kind(&self) -> bat_ledger::ErrorKind {
        bat_ledger::ErrorKind::User
    }

    fn hint(&self) -> Option<String> {
        Some(
            match self {
                CredentialError::Io { .. } => "check the path and its permissions",
                CredentialError::Invalid { .. } => {
                    "a token file holds the token on its first line; store it again with `bat remote credential NAME --token-file F`"
                }
                CredentialError::TooOpen { .. } => "only the owner may read stored credentials",
                CredentialError::Helper { .. } => {
                    "run the helper by hand; it must exit 0 and print the token on its first line"
                }
            }
            .to_string(),
        )
    }
}

type Result<T> = std::result::Result<T, CredentialError>;

fn io(op: &'static str, path: &Path) -> impl FnOnce(std::io::Error) -> CredentialError {
    let path = path.to_path_buf();
    move |source| CredentialError::Io { op, path, source }
}

/// The credentials file of the ledger whose `.bat` directory is `dir`.
pub fn credentials_path(dir: &Path) -> PathBuf {
    dir.join(CREDENTIALS_FILE)
}

fn read_capped(path: &Path) -> Result<Vec<u8>> {
    let f = std::fs::File::open(path).map_err(io("open", path))?;
    let mut buf = Vec::new();
    f.take(MAX_CREDENTIAL_BYTES + 1)
        .read_to_end(&mut buf)
        .map_err(io("read", path))?;
    if buf.len() as u64 > MAX_CREDENTIAL_BYTES {
        return Err(CredentialError::Invalid {
            path: path.to_path_buf(),
            reason: format!("longer than {MAX_CREDENTIAL_BYTES} bytes"),
        });
    }
    Ok(buf)
}

/// The token on the first line of `text` (surrounding white space
/// removed); `None` when it is empty or holds white space inside.
fn first_line_token(text: &[u8]) -> Option<String> {
    let s = std::str::from_utf8(text).ok()?;
    let t = s.lines().next()?.trim();
    (!t.is_empty() && !t.chars().any(char::is_whitespace)).then(|| t.to_string())
}

/// Read a token file: the token is its first line.
pub fn read_token_file(path: &Path) -> Result<String> {
    first_line_token(&read_capped(path)?).ok_or_else(|| CredentialError::Invalid {
        path: path.to_path_buf(),
        reason: "the first line holds no token (empty, not UTF-8, or with spaces inside)".into(),
    })
}

fn load(dir: &Path) -> Result<CredentialsFile> {
    use std::os::unix::fs::PermissionsExt;
    let path = credentials_path(dir);
    let meta = match std::fs::metadata(&path) {
        Ok(m) => m,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(CredentialsFile::default()),
        Err(e) => return Err(io("stat", &path)(e)),
    };
    let mode = meta.permissions().mode() & 0o777;
    if mode & 0o077 != 0 {
        return Err(CredentialError::TooOpen { path, mode });
    }
    serde_json::from_slice(&read_capped(&path)?).map_err(|e| CredentialError::Invalid {
        reason: format!("not a credentials file ({})", e.classify_name()),
        path,
    })
}

/// A name for a serde_json error class that never quotes the input.
trait Classify {
    fn classify_name(&self) -> &'static str;
}

impl Classify for serde_json::Error {
    fn classify_name(&self) -> &'static str {
        match self.classify() {
            serde_json::error::Category::Io => "read error",
            serde_json::error::Category::Syntax => "bad JSON",
            serde_json::error::Category::Data => "unexpected layout",
            serde_json::error::Category::Eof => "truncated",
        }
    }
}

/// Store (or with `None`, forget) the credential of `remote` in the
/// ledger whose `.bat` directory is `dir`: written whole, mode 0600.
pub fn set_credential(dir: &Path, remote: &str, cred: Option<Credential>) -> Result<()> {
    let mut f = load(dir)?;
    let changed = match cred {
        Some(c) => {
            f.remotes.insert(remote.to_string(), c);
            true
        }
        None => f.remotes.remove(remote).is_some(),
    };
    if !changed {
        return Ok(());
    }
    let path = credentials_path(dir);
    if f.remotes.is_empty() {
        return match std::fs::remove_file(&path) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(io("remove", &path)(e)),
            _ => Ok(()),
        };
    }
    let bytes = serde_json::to_vec_pretty(&f).expect("a map of strings serializes");
    bat_contract::fsutil::write_atomic_private(&path, &bytes).map_err(io("write", &path))
}

/// The stored credential of `remote`, if any.
pub fn credential(dir: &Path, remote: &str) -> Result<Option<Credential>> {
    Ok(load(dir)?.remotes.remove(remote))
}

/// The token of `remote` from its stored credential (running its helper),
/// if one is stored.
pub fn stored_token(dir: &Path, remote: &str) -> Result<Option<String>> {
    credential(dir, remote)?
        .map(|c| c.token(remote))
        .transpose()
}

/// Run a credential helper: stdin closed, stderr discarded (it is never
/// shown, in case it echoes a secret), the first line of stdout is the
/// token.
fn run_helper(remote: &str, argv: &[String]) -> Result<String> {
    let program = argv.first().cloned().unwrap_or_default();
    let fail = |reason: String| CredentialError::Helper {
        remote: remote.to_string(),
        program: program.clone(),
        reason,
    };
    if program.is_empty() {
        return Err(fail("is empty".into()));
    }
    let mut child = Command::new(&program)
        .args(&argv[1..])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .map_err(|e| fail(format!("could not start: {e}")))?;
    let mut out = Vec::new();
    if let Some(so) = child.stdout.take() {
        so.take(MAX_CREDENTIAL_BYTES)
            .read_to_end(&mut out)
            .map_err(|e| fail(format!("could not be read: {e}")))?;
    }
    let status = child
        .wait()
        .map_err(|e| fail(format!("could not be waited for: {e}")))?;
    if !status.success() {
        return Err(fail(format!("failed ({status})")));
    }
    first_line_token(&out).ok_or_else(|| fail("printed no token on its first line".into()))
}

impl Credential {
    /// The token this credential stands for (running the helper), for
    /// remote `remote` (named in errors).
    pub fn token(&self, remote: &str) -> Result<String> {
        match self {
            Credential::Token(t) => Ok(t.clone()),
            Credential::Helper(argv) => run_helper(remote, argv),
        }
    }
}

/// `net` with the token of `remote` filled in from its stored credential
/// when none was given explicitly.
pub fn with_stored_token(
    dir: &Path,
    remote: &str,
    net: &super::NetOptions,
) -> Result<super::NetOptions> {
    let mut out = net.clone();
    if out.token.is_none() {
        out.token = stored_token(dir, remote)?;
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn stores_with_mode_0600_and_never_debug_prints_the_token() {
        let t = tempfile::tempdir().expect("tempdir");
        let secret = "s3cr3t-token-value";
        set_credential(t.path(), "origin", Some(Credential::Token(secret.into()))).expect("store");
        let path = credentials_path(t.path());
        let mode = std::fs::metadata(&path).expect("stat").permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
        let c = credential(t.path(), "origin")
            .expect("load")
            .expect("stored");
        assert!(!format!("{c:?}").contains(secret));
        assert_eq!(
            stored_token(t.path(), "origin").expect("token").as_deref(),
            Some(secret)
        );
        assert_eq!(stored_token(t.path(), "other").expect("none"), None);
        set_credential(t.path(), "origin", None).expect("forget");
        assert!(
            !path.exists(),
            "the last credential removed removes the file"
        );
    }

    #[test]
    fn a_readable_credentials_file_is_refused() {
        let t = tempfile::tempdir().expect("tempdir");
        set_credential(
            t.path(),
            "origin",
            Some(Credential::Token("tok12345".into())),
        )
        .expect("store");
        let path = credentials_path(t.path());
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).expect("chmod");
        let e = stored_token(t.path(), "origin").expect_err("too open");
        assert!(
            matches!(e, CredentialError::TooOpen { mode: 0o644, .. }),
            "{e}"
        );
        assert!(!e.to_string().contains("tok12345"));
    }

    #[test]
    fn helper_prints_the_token_and_failures_do_not_leak_it() {
        let t = tempfile::tempdir().expect("tempdir");
        let argv = |script: &str| vec!["sh".to_string(), "-c".to_string(), script.to_string()];
        set_credential(
            t.path(),
            "origin",
            Some(Credential::Helper(argv("echo helper-token-1; echo second"))),
        )
        .expect("store");
        assert_eq!(
            stored_token(t.path(), "origin").expect("token").as_deref(),
            Some("helper-token-1")
        );
        set_credential(
            t.path(),
            "origin",
            Some(Credential::Helper(argv("echo leaked-token-2; exit 3"))),
        )
        .expect("store");
        let e = stored_token(t.path(), "origin").expect_err("exit 3");
        assert!(e.to_string().contains("failed"), "{e}");
        assert!(!e.to_string().contains("leaked-token-2"), "{e}");
    }

    #[test]
    fn token_file_first_line() {
        let t = tempfile::tempdir().expect("tempdir");
        let f = t.path().join("tok");
        std::fs::write(&f, "  abcdefgh12 \nrest\n").expect("write");
        assert_eq!(read_token_file(&f).expect("token"), "abcdefgh12");
        std::fs::write(&f, "\n").expect("write");
        let e = read_token_file(&f).expect_err("empty");
        assert!(matches!(e, CredentialError::Invalid { .. }), "{e}");
    }
}
