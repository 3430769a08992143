//! Write settings a ledger keeps (`bat config`), in the catalog's `meta`
//! table under `config.write.` keys. They are applied to
//! [`WriteConfig`] whenever the ledger is opened, so every later commit,
//! round commit and gc of this ledger uses them; a library caller may still
//! change [`Ledger::config`] for one handle.
//!
//! Why kept in the ledger: a chain depth chosen for one commit alone was
//! undone by the next commit and by gc, which re-rooted chains to the
//! default depth.

use super::{Ledger, WriteConfig, MAX_DELTA_DEPTH};
use crate::error::{Error, Result};

/// A write setting a ledger can keep.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Setting {
    /// [`WriteConfig::delta_max_depth`]: `0..=32`.
    DeltaDepth,
    /// [`WriteConfig::reuse_base_files`]: `true` or `false`.
    BaseFiles,
    /// [`WriteConfig::gc_auto`]: a pack count, `0`/`false` (off) or
    /// `true` (the default count).
    GcAuto,
}

impl Setting {
    /// Every setting, in listing order.
    pub const ALL: [Setting; 3] = [Setting::DeltaDepth, Setting::BaseFiles, Setting::GcAuto];

    /// Its name on the command line.
    pub fn name(self) -> &'static str {
        match self {
            Setting::DeltaDepth => "delta-depth",
            Setting::BaseFiles => "base-files",
            Setting::GcAuto => "gc.auto",
        }
    }

    /// The setting called `name`.
    pub fn from_name(name: &str) -> Option<Setting> {
        Setting::ALL.into_iter().find(|s| s.name() == name)
    }

    /// What it does, in a line.
    pub fn about(self) -> &'static str {
        match self {
            Setting::DeltaDepth => {
                "longest chain of checkpoint deltas before a piece is stored whole (0..=32)"
            }
            Setting::BaseFiles => {
                "read delta bases from the previous version's file when it is unchanged (true/false)"
            }
            Setting::GcAuto => {
                "gc after commit and run when more small packs than this wait to be merged (0/false: never)"
            }
        }
    }

    /// Its `meta` key, without the `config.` prefix.
    fn key(self) -> &'static str {
        match self {
            Setting::DeltaDepth => "write.delta_depth",
            Setting::BaseFiles => "write.base_files",
            Setting::GcAuto => "gc.auto",
        }
    }

    /// Check `value`; its canonical text.
    pub fn parse(self, value: &str) -> std::result::Result<String, String> {
        match self {
            Setting::DeltaDepth => match value.trim().parse::<u32>() {
                Ok(d) if d <= MAX_DELTA_DEPTH => Ok(d.to_string()),
                _ => Err(format!(
                    "delta-depth must be a whole number from 0 to {MAX_DELTA_DEPTH}, not {value:?}"
                )),
            },
            Setting::BaseFiles => match value.trim() {
                "true" | "on" | "yes" | "1" => Ok("true".into()),
                "false" | "off" | "no" | "0" => Ok("false".into()),
                _ => Err(format!("base-files must be true or false, not {value:?}")),
            },
            Setting::GcAuto => match value.trim() {
                "false" | "off" | "no" => Ok("0".into()),
                "true" | "on" | "yes" => Ok(WriteConfig::default().gc_auto.to_string()),
                v => match v.parse::<u32>() {
                    Ok(n) => Ok(n.to_string()),
                    Err(_) => Err(format!(
                        "gc.auto must be a pack count (0 or false: off, true: the default), not {value:?}"
                    )),
                },
            },
        }
    }

    /// Its value in `c`, as text.
    pub fn value_in(self, c: &WriteConfig) -> String {
        match self {
            Setting::DeltaDepth => c.delta_max_depth.to_string(),
            Setting::BaseFiles => c.reuse_base_files.to_string(),
            Setting::GcAuto => c.gc_auto.to_string(),
        }
    }

    /// Set it in `c` from a value [`Setting::parse`] accepts (`None`: the
    /// default); false if `value` is not one.
    fn apply(self, value: Option<&str>, c: &mut WriteConfig) -> bool {
        let d = WriteConfig::default();
        let Some(v) = value else {
            match self {
                Setting::DeltaDepth => c.delta_max_depth = d.delta_max_depth,
                Setting::BaseFiles => c.reuse_base_files = d.reuse_base_files,
                Setting::GcAuto => c.gc_auto = d.gc_auto,
            }
            return true;
        };
        let Ok(v) = self.parse(v) else {
            return false;
        };
        match self {
            Setting::DeltaDepth => c.delta_max_depth = v.parse().expect("parse checked it"),
            Setting::BaseFiles => c.reuse_base_files = v == "true",
            Setting::GcAuto => c.gc_auto = v.parse().expect("parse checked it"),
        }
        true
    }
}

impl Ledger {
    /// The value this ledger keeps for `s`, as stored (`None`: the default
    /// applies).
    pub fn setting(&self, s: Setting) -> Result<Option<String>> {
        self.config_get(s.key())
    }

    /// Keep `value` for `s` (checked first), or with `None` forget it; this
    /// handle's [`Ledger::config`] follows.
    pub fn set_setting(&mut self, s: Setting, value: Option<&str>) -> Result<()> {
        let value = value
            .map(|v| {
                s.parse(v)
                    .map_err(|message| Error::InvalidInput { message })
            })
            .transpose()?;
        self.config_set(s.key(), value.as_deref())?;
        s.apply(value.as_deref(), &mut self.config);
        Ok(())
    }

    /// Apply the kept settings to this handle's config. A stored value that
    /// does not parse (edited by hand) is left out, so the ledger still
    /// opens and `bat config` can show and replace it.
    pub(crate) fn apply_settings(&mut self) -> Result<()> {
        for s in Setting::ALL {
            if let Some(v) = self.setting(s)? {
                s.apply(Some(&v), &mut self.config);
            }
        }
        Ok(())
    }
}
