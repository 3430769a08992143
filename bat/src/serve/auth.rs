//! Tokens and scopes of `bat serve`.
//!
//! A token file holds one token per line as `read TOKEN` or `write TOKEN`
//! (blank lines and lines starting with `#` are ignored). A write token can
//! also read. Tokens are compared through their SHA-256 digests in constant
//! time, so neither the content nor the length of a stored token leaks
//! through response timing.

use sha2::{Digest, Sha256};

/// What a request may do.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Scope {
    /// Nothing at all.
    None,
    /// List refs, ask which objects exist, download objects.
    Read,
    /// Also upload objects and move refs.
    Write,
}

impl Scope {
    /// Lower-case name, as in the token file.
    pub fn name(self) -> &'static str {
        match self {
            Scope::None => "none",
            Scope::Read => "read",
            Scope::Write => "write",
        }
    }
}

/// A token file that does not parse.
#[derive(Debug, thiserror::Error)]
pub enum TokenFileError {
    /// A line is not `read TOKEN` / `write TOKEN`.
    #[error("token file line {line}: {reason}")]
    BadLine {
        /// 1-based line number.
        line: usize,
        /// What is wrong with it (never the token itself).
        reason: &'static str,
    },
}

impl bat_ledger::Diagnostic for TokenFileError {
    fn kind(&self) -> bat_ledger::ErrorKind {
        bat_ledger::ErrorKind::User
    }
}

/// The accepted tokens, kept only as digests.
#[derive(Clone, Default)]
pub struct TokenSet {
    entries: Vec<([u8; 32], Scope)>,
}

impl std::fmt::Debug for TokenSet {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TokenSet")
            .field("tokens", &self.entries.len())
            .finish()
    }
}

fn digest(token: &[u8]) -> [u8; 32] {
    let mut h = Sha256::new();
    h.update(b"bat serve token v1\0");
    h.update(token);
    h.finalize().into()
}

fn ct_eq(a: &[u8; 32], b: &[u8; 32]) -> bool {
    let mut diff = 0u8;
    for (x, y) in a.iter().zip(b.iter()) {
        diff |= x ^ y;
    }
    // Read through black_box so the loop is not turned into an early exit.
    std::hint::black_box(diff) == 0
}

impl TokenSet {
    /// No tokens: every request is anonymous.
    pub fn empty() -> TokenSet {
        TokenSet::default()
    }

    /// Number of tokens.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// True when there are no tokens.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Add one token.
    pub fn add(&mut self, token: &str, scope: Scope) {
        self.entries.push((digest(token.as_bytes()), scope));
    }

    /// Parse the text of a token file.
    pub fn parse(text: &str) -> Result<TokenSet, TokenFileError> {
        let mut set = TokenSet::empty();
        for (i, raw) in text.lines().enumerate() {
            let line = raw.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let mut parts = line.split_whitespace();
            let scope = match parts.next() {
                Some("read") => Scope::Read,
                Some("write") => Scope::Write,
                _ => {
                    return Err(TokenFileError::BadLine {
                        line: i + 1,
                        reason: "expected `read TOKEN` or `write TOKEN`",
                    })
                }
            };
            let token = parts.next().ok_or(TokenFileError::BadLine {
                line: i + 1,
                reason: "the token is missing",
            })?;
            if parts.next().is_some() {
                return Err(TokenFileError::BadLine {
                    line: i + 1,
                    reason: "a token may not contain spaces",
                });
            }
            if token.len() < 8 {
                return Err(TokenFileError::BadLine {
                    line: i + 1,
                    reason: "tokens must be at least 8 characters",
                });
            }
            set.add(token, scope);
        }
        Ok(set)
    }

    /// The scope of a presented token (`Scope::None` when unknown). Every
    /// stored token is compared, whatever matched first.
    pub fn scope_of(&self, presented: &str) -> Scope {
        let d = digest(presented.as_bytes());
        let mut best = Scope::None;
        for (stored, scope) in &self.entries {
            if ct_eq(stored, &d) && *scope > best {
                best = *scope;
            }
        }
        best
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_scopes_and_rejects_junk() {
        let set =
            TokenSet::parse("# comment\nread readtoken1\n\nwrite writetoken1\n").expect("valid");
        assert_eq!(set.len(), 2);
        assert_eq!(set.scope_of("readtoken1"), Scope::Read);
        assert_eq!(set.scope_of("writetoken1"), Scope::Write);
        assert_eq!(set.scope_of("writetoken"), Scope::None);
        assert_eq!(set.scope_of(""), Scope::None);
        assert!(TokenSet::parse("admin abcdefghij").is_err());
        assert!(TokenSet::parse("read").is_err());
        assert!(TokenSet::parse("read short").is_err());
        assert!(TokenSet::parse("read abcdefghij extra").is_err());
    }
}
