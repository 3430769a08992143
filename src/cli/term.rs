//! Terminal presentation: when to color ([`ColorWhen`] → [`Paint`]) and the
//! pager that long output goes through. The choices are made once in
//! `main` from the global flags and the environment; verbs only receive a
//! [`Paint`] in the [`Session`](super::Session).
//!
//! [`neutralize`] is the one place that decides how control characters
//! taken from stored data (branch names, messages, metadata, file names)
//! are shown: everything printed for a human goes through it (see
//! [`super::output`]), so a hostile bundle cannot drive the terminal.

use std::borrow::Cow;
use std::fmt::Write as _;
use std::io::Write;
use std::process::{Child, Command, Stdio};

use anstyle::{AnsiColor, Style};

/// `--color WHEN`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ColorWhen {
    /// Color when stdout is a terminal and `NO_COLOR` is unset or empty.
    Auto,
    /// Always color (overrides `NO_COLOR`, as an explicit flag should).
    Always,
    /// Never color.
    Never,
}

impl ColorWhen {
    /// Resolve the choice: `auto` needs a terminal and no `NO_COLOR`.
    pub fn resolve(self, stdout_is_tty: bool, no_color_set: bool) -> bool {
        match self {
            ColorWhen::Always => true,
            ColorWhen::Never => false,
            ColorWhen::Auto => stdout_is_tty && !no_color_set,
        }
    }
}

/// What a piece of text is, for coloring. One place decides the palette so
/// every verb colors ids, decisions and changes the same way.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// A commit id (git's yellow).
    Id,
    /// A promote decision, an added file, a positive change.
    Good,
    /// A hold decision.
    Warn,
    /// A rollback/revert, a removed file, a negative change.
    Bad,
    /// HEAD and branch names.
    Ref,
    /// Table headers and section titles.
    Header,
    /// Secondary text (dates, "-").
    Dim,
}

impl Role {
    /// Every role, for the set of sequences [`Paint`] may emit.
    pub const ALL: [Role; 7] = [
        Role::Id,
        Role::Good,
        Role::Warn,
        Role::Bad,
        Role::Ref,
        Role::Header,
        Role::Dim,
    ];

    fn style(self) -> Style {
        match self {
            Role::Id => AnsiColor::Yellow.on_default(),
            Role::Good => AnsiColor::Green.on_default(),
            Role::Warn => AnsiColor::Yellow.on_default().bold(),
            Role::Bad => AnsiColor::Red.on_default(),
            Role::Ref => AnsiColor::Cyan.on_default().bold(),
            Role::Header => Style::new().bold(),
            Role::Dim => Style::new().dimmed(),
        }
    }

    /// The role of a gate decision (`promote`, `hold`, `rollback`, …).
    pub fn of_gate(status: &str) -> Option<Role> {
        match status {
            "promote" => Some(Role::Good),
            "hold" => Some(Role::Warn),
            "rollback" | "revert" | "reject" => Some(Role::Bad),
            _ => None,
        }
    }

    /// The role of a file/tensor status in a diff.
    pub fn of_change(status: &str) -> Option<Role> {
        match status {
            "added" => Some(Role::Good),
            "removed" => Some(Role::Bad),
            "changed" => Some(Role::Warn),
            _ => None,
        }
    }
}

/// Colors on or off for this invocation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Paint {
    /// Emit ANSI escape codes.
    pub on: bool,
}

impl Paint {
    /// `text` wrapped in the role's escape codes (unchanged when off).
    pub fn paint(self, role: Role, text: &str) -> String {
        self.maybe(Some(role), text)
    }

    /// [`Paint::paint`] when there is a role.
    pub fn maybe(self, role: Option<Role>, text: &str) -> String {
        match role {
            Some(r) if self.on && !text.is_empty() => {
                let s = r.style();
                format!("{}{text}{}", s.render(), s.render_reset())
            }
            _ => text.to_string(),
        }
    }
}

/// The escape sequences [`Paint`] emits when colors are on (each role's
/// start, and the reset), longest first: the only ones [`neutralize`] lets
/// through, and only when the caller says colors are on.
pub fn palette() -> &'static [String] {
    static PALETTE: std::sync::OnceLock<Vec<String>> = std::sync::OnceLock::new();
    PALETTE.get_or_init(|| {
        let mut p: Vec<String> = Role::ALL
            .iter()
            .flat_map(|r| {
                let s = r.style();
                [s.render().to_string(), s.render_reset().to_string()]
            })
            .filter(|s| !s.is_empty())
            .collect();
        p.sort_by(|a, b| b.len().cmp(&a.len()).then_with(|| a.cmp(b)));
        p.dedup();
        p
    })
}

/// Whether `c` must not reach a terminal raw: the C0 controls except tab
/// and newline (ESC, BEL, CR, backspace, …), DEL, and the C1 controls
/// U+0080–U+009F (U+009B is a one-character CSI on many terminals).
pub fn is_control(c: char) -> bool {
    matches!(c, '\u{0}'..='\u{8}' | '\u{b}'..='\u{1f}' | '\u{7f}'..='\u{9f}')
}

/// `text` with every [`is_control`] character replaced by a visible
/// `\uXXXX` escape (four lowercase hex digits: ESC is `\u001b`, DEL
/// `\u007f`, CSI `\u009b`); printable Unicode, tab and newline stay as
/// they are. The form is JSON's, so the same pass keeps a JSON document
/// valid and its values unchanged (serde already escapes C0; DEL and C1
/// are left raw by it). Sequences in `allowed` (the [`palette`], when
/// colors are on) are copied as they are. A backslash in the text is not
/// doubled, so a stored `\u001b` looks like an escaped ESC: the point is
/// that nothing stored can move the cursor, retitle the window, plant a
/// hyperlink or clear the screen, not a reversible encoding.
pub fn neutralize<'a>(text: &'a str, allowed: &[String]) -> Cow<'a, str> {
    if !text.chars().any(is_control) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 16);
    let mut rest = text;
    while let Some(c) = rest.chars().next() {
        if c == '\u{1b}' {
            if let Some(seq) = allowed.iter().find(|s| rest.starts_with(s.as_str())) {
                out.push_str(seq);
                rest = &rest[seq.len()..];
                continue;
            }
        }
        if is_control(c) {
            write!(out, "\\u{:04x}", u32::from(c)).expect("writing to a String cannot fail");
        } else {
            out.push(c);
        }
        rest = &rest[c.len_utf8()..];
    }
    Cow::Owned(out)
}

/// The pager command: `BAT_PAGER`, then `PAGER`, then `less -FRX` (quit at
/// once when the text fits one screen, pass colors, keep the screen). An
/// empty value or `cat` means no pager.
pub fn pager_command(bat_pager: Option<String>, pager: Option<String>) -> Option<String> {
    let cmd = bat_pager
        .or(pager)
        .unwrap_or_else(|| "less -FRX".to_string());
    let trimmed = cmd.trim();
    if trimmed.is_empty() || trimmed == "cat" {
        None
    } else {
        Some(trimmed.to_string())
    }
}

/// A running pager whose stdin receives the verb's output.
#[derive(Debug)]
pub struct Pager {
    child: Child,
}

impl Pager {
    /// Start `cmd` through `sh -c` (so `less -FRX` and user scripts with
    /// arguments work) with a piped stdin, and route [`super::output`] to
    /// it. `None` when it cannot be started: the output then goes to
    /// stdout as if there were no pager.
    pub fn start(cmd: &str) -> Option<Pager> {
        let mut child = Command::new("sh")
            .arg("-c")
            .arg(cmd)
            .stdin(Stdio::piped())
            // less reads LESS; give it the flags git gives it when unset
            // (the child inherits everything else).
            .env(
                "LESS",
                std::env::var("LESS").unwrap_or_else(|_| "FRX".into()),
            )
            .spawn()
            .ok()?;
        let stdin = child.stdin.take().expect("stdin was piped");
        super::output::route_to(Box::new(stdin));
        Some(Pager { child })
    }

    /// Close the pager's input and wait until the user quit it. A pager
    /// that left early (the user pressed `q`) is no error.
    pub fn finish(mut self) {
        if let Some(mut w) = super::output::unroute() {
            let _ = w.flush();
        }
        let _ = self.child.wait();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn auto_colors_only_on_a_terminal_without_no_color() {
        assert!(ColorWhen::Auto.resolve(true, false));
        assert!(!ColorWhen::Auto.resolve(true, true));
        assert!(!ColorWhen::Auto.resolve(false, false));
        assert!(ColorWhen::Always.resolve(false, true));
        assert!(!ColorWhen::Never.resolve(true, false));
    }

    #[test]
    fn pager_choice_order() {
        let s = |x: &str| Some(x.to_string());
        assert_eq!(pager_command(s("most"), s("more")), s("most"));
        assert_eq!(pager_command(None, s("more")), s("more"));
        assert_eq!(pager_command(None, None), s("less -FRX"));
        assert_eq!(pager_command(s(""), s("more")), None);
        assert_eq!(pager_command(None, s("cat")), None);
    }

    #[test]
    fn controls_become_visible_escapes() {
        let none: &[String] = &[];
        assert_eq!(
            neutralize("a\u{1b}]8;;http://x\u{7}b\u{1b}[2J", none),
            "a\\u001b]8;;http://x\\u0007b\\u001b[2J"
        );
        assert_eq!(
            neutralize("\u{9b}31m\u{7f}\r", none),
            "\\u009b31m\\u007f\\u000d"
        );
        // Printable Unicode, tab and newline are kept, and borrowed.
        let kept = "r\u{e9}sum\u{e9} \u{1f600}\tline\n";
        assert!(matches!(neutralize(kept, none), Cow::Borrowed(_)));
        assert_eq!(neutralize("\u{a0}\u{ff}", none), "\u{a0}\u{ff}");
    }

    #[test]
    fn only_the_palette_passes_and_only_when_allowed() {
        let colored = Paint { on: true }.paint(Role::Good, "ok");
        assert_eq!(neutralize(&colored, palette()), colored);
        assert!(!neutralize(&colored, &[]).contains('\u{1b}'));
        // A hostile sequence next to a real color is still escaped.
        let mixed = format!("{colored}\u{1b}]0;title\u{7}");
        let out = neutralize(&mixed, palette());
        assert!(out.starts_with(&colored), "{out}");
        assert!(out.ends_with("\\u001b]0;title\\u0007"), "{out}");
    }

    #[test]
    fn paint_off_is_identity() {
        assert_eq!(Paint { on: false }.paint(Role::Good, "x"), "x");
        assert!(Paint { on: true }
            .paint(Role::Good, "x")
            .starts_with("\u{1b}["));
    }
}
