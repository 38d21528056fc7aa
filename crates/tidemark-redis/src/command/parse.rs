//! Argument vector → [`Command`]. Every form is checked here; execution sees typed values.

use super::args::{show, Args, Time};
use super::CmdError;
use crate::value::Limits;

/// Every command: name, whether it writes, and how its keys sit (first, last, step; last
/// `-1`: to the end, as the command reports through the get-keys API).
pub const COMMANDS: &[(&str, bool, i32, i32, i32)] = &[
    ("TM.COUNT.CREATE", true, 1, 1, 1),
    ("TM.COUNT.ADD", true, 1, 1, 1),
    ("TM.COUNT.GET", false, 1, 1, 1),
    ("TM.DISTINCT.CREATE", true, 1, 1, 1),
    ("TM.DISTINCT.ADD", true, 1, 1, 1),
    ("TM.DISTINCT.COUNT", false, 1, -1, 1),
    ("TM.DISTINCT.TOPF", true, 1, 2, 1),
    ("TM.FREQ.CREATE", true, 1, 1, 1),
    ("TM.FREQ.ADD", true, 1, 1, 1),
    ("TM.FREQ.QUERY", false, 1, 1, 1),
    ("TM.FREQ.TOP", false, 1, 1, 1),
    ("TM.FILTER.CREATE", true, 1, 1, 1),
    ("TM.FILTER.ADD", true, 1, 1, 1),
    ("TM.FILTER.ADDAT", true, 1, 1, 1),
    ("TM.FILTER.EXISTS", false, 1, 1, 1),
    ("TM.FILTER.DEL", true, 1, 1, 1),
    ("TM.INFO", false, 1, 1, 1),
    ("TM.DUMP", false, 1, 1, 1),
    ("TM.LOAD", true, 1, 1, 1),
];

/// How a distinct key keeps its window.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DistinctShape {
    /// A ring of buckets of this many ms.
    Ring {
        /// Bucket width, ms.
        bucket: u64,
    },
    /// The sliding HyperLogLog.
    Sliding,
}

/// A parsed command; byte strings borrow the argument vector.
#[derive(Clone, Debug, PartialEq)]
#[allow(missing_docs)] // the fields are the documented arguments of each command
pub enum Command<'a> {
    CountCreate {
        key: &'a [u8],
        window: u64,
        epsilon: f64,
    },
    CountAdd {
        key: &'a [u8],
        time: Time,
        n: u64,
    },
    CountGet {
        key: &'a [u8],
        at: Option<Time>,
    },
    DistinctCreate {
        key: &'a [u8],
        window: u64,
        shape: DistinctShape,
        precision: u8,
    },
    DistinctAdd {
        key: &'a [u8],
        time: Time,
        /// At least one.
        items: &'a [&'a [u8]],
    },
    DistinctCount {
        keys: Vec<&'a [u8]>,
        window: Option<u64>,
        at: Option<Time>,
    },
    DistinctTopf {
        key: &'a [u8],
        dest: &'a [u8],
        window: Option<u64>,
    },
    FreqCreate {
        key: &'a [u8],
        window: u64,
        bucket: u64,
        epsilon: f64,
        delta: f64,
        phi: f64,
    },
    FreqAdd {
        key: &'a [u8],
        time: Time,
        items: Vec<(&'a [u8], u64)>,
    },
    FreqQuery {
        key: &'a [u8],
        items: Vec<&'a [u8]>,
        window: Option<u64>,
    },
    FreqTop {
        key: &'a [u8],
        k: u64,
        window: Option<u64>,
    },
    FilterCreate {
        key: &'a [u8],
        capacity: u64,
        fpr: f64,
        reserve: u32,
        stacked: bool,
        expire: Option<u64>,
    },
    FilterAdd {
        key: &'a [u8],
        time: Option<Time>,
        items: Vec<&'a [u8]>,
    },
    FilterExists {
        key: &'a [u8],
        items: Vec<&'a [u8]>,
    },
    FilterDel {
        key: &'a [u8],
        item: &'a [u8],
    },
    Info {
        key: &'a [u8],
    },
    Dump {
        key: &'a [u8],
    },
    Load {
        key: &'a [u8],
        bytes: &'a [u8],
    },
}

/// Whether `arg` is `name` in any case. Every TM name is upper-case letters and dots, so a
/// byte matches when equal or when the name's letter is its upper-case form: one comparison a
/// byte, where `eq_ignore_ascii_case` folds both sides (a fast command's name is compared on
/// every call, by the command filter).
pub fn is_name(arg: &[u8], name: &str) -> bool {
    arg.len() == name.len()
        && arg
            .iter()
            .zip(name.as_bytes())
            .all(|(&a, &n)| a == n || (n.is_ascii_uppercase() && a == n | 0x20))
}

/// The position in [`COMMANDS`] of the command named `argv0` (any case).
pub fn command_index(argv0: &[u8]) -> Option<usize> {
    COMMANDS.iter().position(|(n, ..)| is_name(argv0, n))
}

fn name_of(argv0: &[u8]) -> Result<usize, CmdError> {
    command_index(argv0).ok_or_else(|| CmdError::UnknownCommand { name: show(argv0) })
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
    match parse_as(index, argv) {
        Ok(Command::DistinctCount { keys, .. }) => (1..=keys.len()).collect(),
        Ok(Command::DistinctTopf { .. }) => vec![1, 2],
        _ if argv.len() > 1 => vec![1],
        _ => Vec::new(),
    }
}

/// Parses an argument vector (`argv[0]` the command's name, any case).
pub fn parse<'a>(argv: &'a [&'a [u8]]) -> Result<Command<'a>, CmdError> {
    parse_as(name_of(argv.first().copied().unwrap_or(b""))?, argv)
}

/// Parses an argument vector as the command at `index` in [`COMMANDS`], whatever `argv[0]`
/// says: Redis calls each registered command's own function, which knows its name.
pub fn parse_as<'a>(index: usize, argv: &'a [&'a [u8]]) -> Result<Command<'a>, CmdError> {
    let Some(&(name, ..)) = COMMANDS.get(index) else {
        return Err(CmdError::UnknownCommand {
            name: format!("#{index}"),
        });
    };
    let mut a = Args::new(name, argv);
    let cmd = match name {
        "TM.COUNT.CREATE" => {
            let key = a.take()?;
            let (mut window, mut epsilon) = (None, 0.01);
            while a.left() > 0 {
                if a.keyword("WINDOW") {
                    window = Some(a.ms("WINDOW")?);
                } else if a.keyword("EPSILON") {
                    epsilon = a.fraction("EPSILON")?;
                    if epsilon < 1e-6 {
                        return Err(CmdError::Param {
                            cmd: name,
                            msg: format!("EPSILON must be at least 1e-6 (k = ⌈1/ε⌉ at most 10^6), got {epsilon}"),
                        });
                    }
                } else {
                    a.done()?;
                }
            }
            let window = window.ok_or(CmdError::Param {
                cmd: name,
                msg: "WINDOW ms is required".into(),
            })?;
            Command::CountCreate {
                key,
                window,
                epsilon,
            }
        }
        "TM.COUNT.ADD" => {
            let key = a.take()?;
            let time = a.time("time")?;
            let n = if a.left() > 0 {
                a.u64(
                    "n",
                    "a non-negative integer (at most 2^40)",
                    Limits::MAX_COUNT_ADD,
                )?
            } else {
                1
            };
            a.done()?;
            Command::CountAdd { key, time, n }
        }
        "TM.COUNT.GET" => {
            let key = a.take()?;
            let at = if a.keyword("AT") {
                Some(a.time("AT")?)
            } else {
                None
            };
            a.done()?;
            Command::CountGet { key, at }
        }
        "TM.DISTINCT.CREATE" => {
            let key = a.take()?;
            let (mut window, mut shape, mut precision) = (None, None, 14u8);
            while a.left() > 0 {
                if a.keyword("WINDOW") {
                    window = Some(a.ms("WINDOW")?);
                } else if a.keyword("BUCKET") {
                    if shape.is_some() {
                        return Err(param(name, "give one of BUCKET ms and SLIDING"));
                    }
                    shape = Some(DistinctShape::Ring {
                        bucket: a.ms("BUCKET")?,
                    });
                } else if a.keyword("SLIDING") {
                    if shape.is_some() {
                        return Err(param(name, "give one of BUCKET ms and SLIDING"));
                    }
                    shape = Some(DistinctShape::Sliding);
                } else if a.keyword("PRECISION") {
                    precision = a.positive("PRECISION", "an integer in 4..=18", 18)? as u8;
                    if precision < 4 {
                        return Err(CmdError::BadArg {
                            cmd: name,
                            arg: "PRECISION",
                            expected: "an integer in 4..=18",
                            got: precision.to_string(),
                        });
                    }
                } else {
                    a.done()?;
                }
            }
            let window = window.ok_or_else(|| param(name, "WINDOW ms is required"))?;
            let shape = match shape {
                Some(s) => s,
                None if window % 60 == 0 => DistinctShape::Ring { bucket: window / 60 },
                None => {
                    return Err(param(
                        name,
                        "without BUCKET the ring has 60 buckets, so WINDOW must be a multiple of 60 ms; give BUCKET ms or SLIDING",
                    ))
                }
            };
            Command::DistinctCreate {
                key,
                window,
                shape,
                precision,
            }
        }
        "TM.DISTINCT.ADD" => {
            let key = a.take()?;
            let time = a.time("time")?;
            let items = a.rest_nonempty()?;
            Command::DistinctAdd { key, time, items }
        }
        "TM.DISTINCT.COUNT" => {
            let mut keys = vec![a.take()?];
            let is_option =
                |x: &[u8]| x.eq_ignore_ascii_case(b"WINDOW") || x.eq_ignore_ascii_case(b"AT");
            while a.peek().is_some_and(|x| !is_option(x)) {
                keys.push(a.take()?);
            }
            let (mut window, mut at) = (None, None);
            while a.left() > 0 {
                if a.keyword("WINDOW") {
                    window = Some(a.ms("WINDOW")?);
                } else if a.keyword("AT") {
                    at = Some(a.time("AT")?);
                } else {
                    a.done()?;
                }
            }
            Command::DistinctCount { keys, window, at }
        }
        "TM.DISTINCT.TOPF" => {
            let key = a.take()?;
            let dest = a.take()?;
            let window = if a.keyword("WINDOW") {
                Some(a.ms("WINDOW")?)
            } else {
                None
            };
            a.done()?;
            Command::DistinctTopf { key, dest, window }
        }
        "TM.FREQ.CREATE" => {
            let key = a.take()?;
            let (mut window, mut bucket) = (None, None);
            let (mut epsilon, mut delta, mut phi) = (0.01, 0.01, 0.05);
            while a.left() > 0 {
                if a.keyword("WINDOW") {
                    window = Some(a.ms("WINDOW")?);
                } else if a.keyword("BUCKET") {
                    bucket = Some(a.ms("BUCKET")?);
                } else if a.keyword("EPSILON") {
                    epsilon = a.fraction("EPSILON")?;
                } else if a.keyword("DELTA") {
                    delta = a.fraction("DELTA")?;
                } else if a.keyword("PHI") {
                    phi = a.fraction("PHI")?;
                } else {
                    a.done()?;
                }
            }
            let window = window.ok_or_else(|| param(name, "WINDOW ms is required"))?;
            let bucket = bucket.ok_or_else(|| param(name, "BUCKET ms is required"))?;
            Command::FreqCreate {
                key,
                window,
                bucket,
                epsilon,
                delta,
                phi,
            }
        }
        "TM.FREQ.ADD" => {
            let key = a.take()?;
            let time = a.time("time")?;
            let mut items = Vec::new();
            loop {
                let item = a.take()?;
                let count = match a.peek().and_then(super::args::parse_u64) {
                    Some(_) => a.positive(
                        "count",
                        "a positive integer (at most 2^40)",
                        Limits::MAX_FREQ_ADD,
                    )?,
                    None => 1,
                };
                items.push((item, count));
                if a.left() == 0 {
                    break;
                }
            }
            Command::FreqAdd { key, time, items }
        }
        "TM.FREQ.QUERY" => {
            let key = a.take()?;
            let mut rest: Vec<&[u8]> = Vec::new();
            while a.left() > 0 {
                rest.push(a.take()?);
            }
            let mut window = None;
            let n = rest.len();
            if n >= 3 && rest[n - 2].eq_ignore_ascii_case(b"WINDOW") {
                let mut w = Args::new(name, &rest[n - 2..]);
                window = Some(w.ms("WINDOW")?);
                rest.truncate(n - 2);
            }
            if rest.is_empty() {
                return Err(CmdError::Arity { cmd: name });
            }
            Command::FreqQuery {
                key,
                items: rest,
                window,
            }
        }
        "TM.FREQ.TOP" => {
            let key = a.take()?;
            let k = a.positive("k", "a positive integer (at most 2^31)", 1 << 31)?;
            let window = if a.keyword("WINDOW") {
                Some(a.ms("WINDOW")?)
            } else {
                None
            };
            a.done()?;
            Command::FreqTop { key, k, window }
        }
        "TM.FILTER.CREATE" => {
            let key = a.take()?;
            let (mut capacity, mut fpr, mut reserve, mut stacked, mut expire) =
                (None, None, None, false, None);
            while a.left() > 0 {
                if a.keyword("CAPACITY") {
                    capacity = Some(a.positive(
                        "CAPACITY",
                        "a positive integer (at most 2^38)",
                        1 << 38,
                    )?);
                } else if a.keyword("FPR") {
                    fpr = Some(a.fraction("FPR")?);
                } else if a.keyword("RESERVE") {
                    reserve = Some(a.u64("RESERVE", "an integer of bits in 0..=32", 32)? as u32);
                } else if a.keyword("STACKED") {
                    stacked = true;
                } else if a.keyword("EXPIRE") {
                    expire = Some(a.ms("EXPIRE")?);
                } else {
                    a.done()?;
                }
            }
            if stacked && reserve.is_some() {
                return Err(param(name, "give one of RESERVE bits and STACKED"));
            }
            let capacity = capacity.ok_or_else(|| param(name, "CAPACITY n is required"))?;
            let fpr = fpr.ok_or_else(|| param(name, "FPR r is required"))?;
            Command::FilterCreate {
                key,
                capacity,
                fpr,
                reserve: reserve.unwrap_or(0),
                stacked,
                expire,
            }
        }
        "TM.FILTER.ADD" | "TM.FILTER.ADDAT" | "TM.FILTER.EXISTS" => {
            let key = a.take()?;
            let time = if name == "TM.FILTER.ADDAT" {
                Some(a.time("time")?)
            } else {
                None
            };
            let mut items = vec![a.take()?];
            while a.left() > 0 {
                items.push(a.take()?);
            }
            if name == "TM.FILTER.EXISTS" {
                Command::FilterExists { key, items }
            } else {
                Command::FilterAdd { key, time, items }
            }
        }
        "TM.FILTER.DEL" => {
            let key = a.take()?;
            let item = a.take()?;
            a.done()?;
            Command::FilterDel { key, item }
        }
        "TM.INFO" | "TM.DUMP" => {
            let key = a.take()?;
            a.done()?;
            if name == "TM.INFO" {
                Command::Info { key }
            } else {
                Command::Dump { key }
            }
        }
        "TM.LOAD" => {
            let key = a.take()?;
            let bytes = a.take()?;
            a.done()?;
            Command::Load { key, bytes }
        }
        _ => {
            return Err(CmdError::UnknownCommand {
                name: name.to_string(),
            })
        }
    };
    Ok(cmd)
}

fn param(cmd: &'static str, msg: &str) -> CmdError {
    CmdError::Param {
        cmd,
        msg: msg.to_string(),
    }
}
