//! A command refused, in Redis's error style, with the argument or key it is about.

use core::fmt;

/// A command refused, in Redis's error style: the first word is the error code.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub enum CmdError {
    /// Not a TM command.
    UnknownCommand {
        /// The name given.
        name: String,
    },
    /// Too few (or too many) arguments.
    Arity {
        /// The command.
        cmd: &'static str,
    },
    /// An argument of the wrong form.
    BadArg {
        /// The command.
        cmd: &'static str,
        /// The argument's name.
        arg: &'static str,
        /// What it must be.
        expected: &'static str,
        /// What it was.
        got: String,
    },
    /// An argument that is no option of the command.
    Syntax {
        /// The command.
        cmd: &'static str,
        /// The argument.
        got: String,
    },
    /// A parameter refused with an explanation (a combination, a size).
    Param {
        /// The command.
        cmd: &'static str,
        /// Why.
        msg: String,
    },
    /// The key does not exist.
    NoSuchKey {
        /// The command.
        cmd: &'static str,
        /// The key.
        key: String,
    },
    /// `CREATE` on a key that exists.
    KeyExists {
        /// The command.
        cmd: &'static str,
        /// The key.
        key: String,
    },
    /// The key holds another type.
    WrongType {
        /// The command.
        cmd: &'static str,
        /// The key.
        key: String,
        /// What it holds (`None`: not a TM type).
        holds: Option<&'static str>,
    },
    /// A destination that holds another type than the string the command writes.
    NotAString {
        /// The command.
        cmd: &'static str,
        /// The key.
        key: String,
    },
    /// A time the key cannot take.
    Time {
        /// The command.
        cmd: &'static str,
        /// Why.
        msg: String,
    },
    /// An in-place filter that cannot grow any further.
    Full {
        /// The command.
        cmd: &'static str,
        /// The key.
        key: String,
        /// Items added before it filled.
        added: usize,
    },
    /// A value that would pass one of the module's bounds ([`crate::limits::Limits`]): what
    /// `INFO tidemark` counts as refused for limits.
    Limit {
        /// The command.
        cmd: &'static str,
        /// Which bound, and what the command would need.
        msg: String,
    },
    /// An option given without its value.
    MissingValue {
        /// The command.
        cmd: &'static str,
        /// The option.
        arg: &'static str,
        /// What its value must be.
        expected: &'static str,
    },
    /// An option given twice.
    Repeated {
        /// The command.
        cmd: &'static str,
        /// The option.
        arg: &'static str,
    },
    /// A destination string that is not a Redis HyperLogLog (which the command would replace).
    NotAnHll {
        /// The command.
        cmd: &'static str,
        /// The key.
        key: String,
    },
    /// `TM.LOAD` bytes refused.
    Load {
        /// The command.
        cmd: &'static str,
        /// Why.
        msg: String,
    },
}

/// An error line as Redis can carry it: ASCII only (Redis's module API sends error text
/// byte by byte, and clients refuse invalid UTF-8), no line breaks. The core's messages use a
/// few mathematical signs; they are spelled out.
pub fn ascii(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '\r' | '\n' => out.push(' '),
            c if c.is_ascii() && !c.is_ascii_control() => out.push(c),
            'ε' => out.push_str("epsilon"),
            'δ' => out.push_str("delta"),
            'φ' => out.push_str("phi"),
            'σ' => out.push_str("sigma"),
            'λ' => out.push_str("lambda"),
            '≤' => out.push_str("<="),
            '≥' => out.push_str(">="),
            '≠' => out.push_str("!="),
            '−' => out.push('-'),
            '×' | '·' => out.push('*'),
            '…' => out.push_str("..."),
            '⌈' => out.push_str("ceil("),
            '⌉' => out.push(')'),
            '√' => out.push_str("sqrt"),
            '–' | '—' => out.push('-'),
            _ => out.push('?'),
        }
    }
    out
}

impl fmt::Display for CmdError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut s = String::new();
        self.write_raw(&mut s)?;
        f.write_str(&ascii(&s))
    }
}

impl CmdError {
    fn write_raw(&self, f: &mut String) -> fmt::Result {
        use fmt::Write;
        match self {
            CmdError::UnknownCommand { name } => write!(f, "ERR unknown command '{name}'"),
            CmdError::Arity { cmd } => {
                write!(f, "ERR wrong number of arguments for '{cmd}' command")
            }
            CmdError::BadArg { cmd, arg, expected, got } => {
                write!(f, "ERR {cmd}: {arg} must be {expected}, got '{got}'")
            }
            CmdError::Syntax { cmd, got } => write!(f, "ERR {cmd}: syntax error at '{got}'"),
            CmdError::Param { cmd, msg } => write!(f, "ERR {cmd}: {msg}"),
            CmdError::NoSuchKey { cmd, key } => match cmd.rsplit_once('.') {
                Some((ty, _)) if ty != "TM" => {
                    write!(f, "ERR {cmd}: no such key '{key}'; create it with {ty}.CREATE")
                }
                _ => write!(f, "ERR {cmd}: no such key '{key}'"),
            },
            CmdError::KeyExists { cmd, key } => write!(f, "ERR {cmd}: key '{key}' already exists"),
            CmdError::NotAString { cmd, key } => write!(
                f,
                "WRONGTYPE {cmd}: key '{key}' holds another type than a string, which this \
                 command writes there"
            ),
            CmdError::WrongType { cmd, key, holds } => match holds {
                Some(t) => write!(
                    f,
                    "WRONGTYPE {cmd}: key '{key}' holds a TM {t} value, which this command does not take"
                ),
                None => write!(
                    f,
                    "WRONGTYPE {cmd}: key '{key}' holds a value that is not a tidemark type"
                ),
            },
            CmdError::Time { cmd, msg } => write!(f, "ERR {cmd}: {msg}"),
            CmdError::Full { cmd, key, added } => write!(
                f,
                "ERR {cmd}: filter '{key}' is full after {added} new item(s) of this call and cannot double again; create it with RESERVE bits or STACKED"
            ),
            CmdError::Limit { cmd, msg } => write!(f, "ERR {cmd}: {msg}"),
            CmdError::MissingValue { cmd, arg, expected } => {
                write!(f, "ERR {cmd}: {arg} needs a value, {expected}")
            }
            CmdError::Repeated { cmd, arg } => {
                write!(f, "ERR {cmd}: {arg} is given twice; give it once")
            }
            CmdError::NotAnHll { cmd, key } => write!(
                f,
                "WRONGTYPE {cmd}: key '{key}' holds a string that is not a valid HyperLogLog, \
                 which this command would overwrite (as PFMERGE refuses it)"
            ),
            CmdError::Load { cmd, msg } => write!(f, "ERR {cmd}: bytes refused: {msg}"),
        }
    }
}

impl CmdError {
    /// Whether the command was refused for one of the module's bounds (a size, a count, a
    /// full filter), which `INFO tidemark` counts.
    pub fn is_limit(&self) -> bool {
        matches!(self, CmdError::Limit { .. } | CmdError::Full { .. })
    }
}

impl std::error::Error for CmdError {}
