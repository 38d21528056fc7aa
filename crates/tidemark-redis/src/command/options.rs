//! The module's load arguments: the defaults a `CREATE` takes for a parameter it is not given
//! ([`Defaults`]), and whether the names of older builds are registered too.
//!
//! ```text
//! loadmodule /path/to/libtidemark_redis.so EPSILON 0.005 PRECISION 12 DELTA 0.01 PHI 0.05
//! loadmodule /path/to/libtidemark_redis.so ALPHA 0.005
//! loadmodule /path/to/libtidemark_redis.so LEGACY-NAMES
//! ```
//!
//! `EPSILON` is the relative error of counters and frequency keys, `PRECISION` that of
//! distinct keys, `DELTA` and `PHI` the failure probability and heavy-item fraction of
//! frequency keys, `ALPHA` the relative accuracy of quantile keys; each is checked as a
//! `CREATE` checks it. `LEGACY-NAMES` also registers the
//! two-dot names of builds before 2026-12-04, for replaying their AOF files.

use crate::args::Args;
use crate::env::Defaults;
use crate::error::CmdError;

/// What the module's load arguments say.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ModuleOptions {
    /// The defaults.
    pub defaults: Defaults,
    /// Whether the names of builds before 2026-12-04 are registered too.
    pub legacy_names: bool,
}

/// The name load-argument errors carry.
const LOADING: &str = "loadmodule";

impl ModuleOptions {
    /// Reads the arguments after the module's path, each option once.
    pub fn parse(argv: &[&[u8]]) -> Result<ModuleOptions, CmdError> {
        // `Args` reads from position 1: put a name in front.
        let mut all: Vec<&[u8]> = vec![LOADING.as_bytes()];
        all.extend_from_slice(argv);
        let mut a = Args::new(LOADING, &all);
        let mut d = Defaults::BUILT_IN;
        let mut legacy_names = false;
        let mut seen = a.options();
        while a.left() > 0 {
            if a.option(&mut seen, "EPSILON")? {
                d.epsilon = a.epsilon("EPSILON")?;
            } else if a.option(&mut seen, "PRECISION")? {
                d.precision = a.precision("PRECISION")?;
            } else if a.option(&mut seen, "DELTA")? {
                d.delta = a.fraction("DELTA")?;
            } else if a.option(&mut seen, "PHI")? {
                d.phi = a.fraction("PHI")?;
            } else if a.option(&mut seen, "ALPHA")? {
                d.alpha = crate::types::quantile::alpha(&mut a, "ALPHA")?;
            } else if a.option(&mut seen, "LEGACY-NAMES")? {
                legacy_names = true;
            } else {
                a.done()?;
            }
        }
        // The frequency defaults must make a valid key, as a CREATE's would.
        tidemark::frequency::ItemCounts::new(d.epsilon, d.delta, d.phi).map_err(|e| {
            CmdError::Param {
                cmd: LOADING,
                msg: format!("EPSILON, DELTA and PHI make no frequency key: {e}"),
            }
        })?;
        Ok(ModuleOptions {
            defaults: d,
            legacy_names,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(s: &str) -> Result<ModuleOptions, String> {
        let words: Vec<&[u8]> = s.split_whitespace().map(str::as_bytes).collect();
        ModuleOptions::parse(&words).map_err(|e| e.to_string())
    }

    #[test]
    fn load_arguments_set_defaults_once_each() {
        let o = parse("").unwrap();
        assert_eq!(o.defaults, Defaults::BUILT_IN);
        assert!(!o.legacy_names);
        let o = parse("epsilon 0.005 PRECISION 12 legacy-names DELTA 0.001 PHI 0.1 alpha 0.02")
            .unwrap();
        assert_eq!(
            o.defaults,
            Defaults {
                epsilon: 0.005,
                precision: 12,
                delta: 0.001,
                phi: 0.1,
                alpha: 0.02,
            }
        );
        assert!(o.legacy_names);
        for (bad, says) in [
            ("PRECISION 3", "PRECISION"),
            ("PRECISION 19", "PRECISION"),
            ("EPSILON 0", "EPSILON"),
            ("EPSILON 1e-7", "EPSILON"),
            ("EPSILON", "EPSILON needs a value"),
            ("PRECISION 12 PRECISION 13", "given twice"),
            ("SPEED 3", "syntax error at 'SPEED'"),
            ("EPSILON 0.5 PHI 0.2", "frequency key"),
            ("ALPHA 1", "ALPHA must be a relative accuracy in [1e-9, 1)"),
            ("ALPHA 1e-10", "ALPHA must be"),
            ("ALPHA", "ALPHA needs a value"),
        ] {
            let e = parse(bad).unwrap_err();
            assert!(e.contains(says), "{bad}: {e}");
        }
    }
}
