//! The command list: every command the module registers, written once. Registration, flags,
//! key positions, arity, `COMMAND DOCS`, the clock filter's list and each command's function
//! all come from it.
//!
//! # Names
//!
//! A module command is `PREFIX.COMMAND`, one dot, as every Redis module's are (`BF.ADD`,
//! `CMS.INCRBY`, `TS.ADD`): cluster clients such as redis-py's `RedisCluster` split a name on
//! its dot into module and command and refuse a name with two. Each type has its prefix, as
//! RedisBloom's have (`TMCOUNT.`, `TMDISTINCT.`, `TMFREQ.`, `TMFILTER.`, `TMQUANTILE.`), so a type's verbs
//! stay short and `redis-cli` lists them together; the commands that take any type keep the
//! module's own prefix (`TM.INFO`, `TM.DUMP`, `TM.LOAD`). Builds before 2026-12-04 named
//! them `TM.COUNT.ADD` and so on: those names are registered too when the module is loaded with
//! `LEGACY-NAMES`, so that an AOF file written by such a build replays (`docs/redis.md`,
//! "Upgrading").

use super::generic;
use crate::types::{count, distinct, filter, freq, quantile, window, Keys, Spec};

/// Every command. The module registers them in this order; each has a function of its own
/// there (its place here), so a call never looks its name up.
pub const COMMANDS: &[Spec] = &[
    count::CREATE,
    count::ADD,
    count::GET,
    distinct::CREATE,
    distinct::ADD,
    distinct::COUNT,
    distinct::TOPF,
    freq::CREATE,
    freq::ADD,
    freq::QUERY,
    freq::TOP,
    filter::CREATE,
    filter::ADD,
    filter::ADDAT,
    filter::EXISTS,
    filter::DEL,
    quantile::CREATE,
    quantile::ADD,
    quantile::QUANTILE,
    quantile::CDF,
    window::PUT,
    window::GET,
    generic::INFO,
    generic::DUMP,
    generic::LOAD,
];

/// Whether `arg` is `name` in any case. Every name is upper-case letters and dots, so a byte
/// matches when equal or when the name's letter is its upper-case form: one comparison a
/// byte, where `eq_ignore_ascii_case` folds both sides (a fast command's name is compared on
/// every call, by the command filter).
pub fn is_name(arg: &[u8], name: &str) -> bool {
    arg.len() == name.len()
        && arg
            .iter()
            .zip(name.as_bytes())
            .all(|(&a, &n)| a == n || (n.is_ascii_uppercase() && a == n | 0x20))
}

/// The position in [`COMMANDS`] of the command named `argv0` (any case; a legacy name too).
pub fn command_index(argv0: &[u8]) -> Option<usize> {
    COMMANDS
        .iter()
        .position(|c| is_name(argv0, c.name) || c.legacy.is_some_and(|l| is_name(argv0, l)))
}

/// The positions (in `argv`) of a command's keys, for cluster routing. A malformed command
/// reports its first argument, which is where every TM command keeps its (first) key.
pub fn key_positions(argv: &[&[u8]]) -> Vec<usize> {
    key_positions_as(
        command_index(argv.first().copied().unwrap_or(b"")).unwrap_or(usize::MAX),
        argv,
    )
}

/// [`key_positions`] for the command at `index` in [`COMMANDS`], whatever `argv[0]` says
/// (the module's functions know their command).
pub fn key_positions_as(index: usize, argv: &[&[u8]]) -> Vec<usize> {
    let last = argv.len().saturating_sub(1);
    match COMMANDS.get(index).map(|c| c.keys) {
        Some(Keys::FirstTwo) if last >= 2 => vec![1, 2],
        Some(Keys::UntilOption(options)) if last >= 1 => {
            let is_option = |a: &[u8]| options.iter().any(|o| a.eq_ignore_ascii_case(o.as_bytes()));
            // The first argument is a key whatever it spells (a key may be named WINDOW).
            let mut keys = vec![1];
            keys.extend((2..=last).take_while(|&i| !is_option(argv[i])));
            keys
        }
        _ if last >= 1 => vec![1],
        _ => Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::command::usage;

    #[test]
    fn names_have_one_dot_and_legacy_names_two() {
        for c in COMMANDS {
            assert_eq!(c.name.matches('.').count(), 1, "{}", c.name);
            assert!(c.name.bytes().all(|b| b.is_ascii_uppercase() || b == b'.'));
            if let Some(l) = c.legacy {
                assert!(l.starts_with("TM.") && l.matches('.').count() == 2, "{l}");
            }
            // Every name under 32 bytes: the module keeps each event name in a fixed buffer.
            assert!(c.name.len() < 32 && c.legacy.is_none_or(|l| l.len() < 32));
        }
        let mut names: Vec<&str> = COMMANDS
            .iter()
            .flat_map(|c| [Some(c.name), c.legacy])
            .flatten()
            .collect();
        let n = names.len();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), n, "a name is used twice");
    }

    #[test]
    fn every_usage_line_reads_and_matches_its_keys() {
        for c in COMMANDS {
            let args = usage::parse(c.usage).unwrap_or_else(|e| panic!("{}: {e}", c.name));
            assert_eq!(usage::render(&args), c.usage, "{}", c.name);
            let keys = args
                .iter()
                .filter(|a| a.kind == usage::ArgType::Key)
                .count();
            let expected = match c.keys {
                Keys::First | Keys::UntilOption(_) => 1,
                Keys::FirstTwo => 2,
            };
            assert_eq!(keys, expected, "{}", c.name);
            assert_eq!(args[0].kind, usage::ArgType::Key, "{}", c.name);
        }
    }

    #[test]
    fn key_positions_follow_the_list() {
        fn v(s: &str) -> Vec<&[u8]> {
            s.split(' ').map(str::as_bytes).collect()
        }
        assert_eq!(key_positions(&v("TMCOUNT.ADD k 1")), vec![1]);
        assert_eq!(key_positions(&v("tm.count.add k 1")), vec![1]);
        assert_eq!(
            key_positions(&v("TMDISTINCT.COUNT a b c WINDOW 60")),
            vec![1, 2, 3]
        );
        assert_eq!(key_positions(&v("TMDISTINCT.COUNT window AT 60")), vec![1]);
        assert_eq!(key_positions(&v("TMDISTINCT.TOPF a b")), vec![1, 2]);
        assert_eq!(key_positions(&v("TMDISTINCT.TOPF a")), vec![1]);
        assert_eq!(key_positions(&v("TM.INFO")), Vec::<usize>::new());
    }
}
