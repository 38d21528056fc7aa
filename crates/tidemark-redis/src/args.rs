//! Reading an argument vector: numbers, times, options, each refused with the argument named.

use crate::error::CmdError;
use crate::limits::Limits;

/// A time argument: `*` (the server's clock, resolved before replication) or milliseconds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Time {
    /// `*`: the server's clock (never earlier than the key's latest time).
    Now,
    /// `*<ms>`: the server's clock as read when the command arrived, ms (never earlier than
    /// the key's latest time). The module's command filter writes it in place of a write's
    /// `*` before the command runs, so the command replicates as it stands: a replica or an
    /// AOF replay holds the same key state, so it resolves the same time.
    Clock(u64),
    /// Milliseconds since the epoch.
    At(u64),
}

/// A cursor over `argv[1..]` of one command.
pub struct Args<'a> {
    cmd: &'static str,
    argv: &'a [&'a [u8]],
    pos: usize,
    /// Whether the last argument taken was a keyword: a value missing after it is named.
    after_keyword: bool,
}

/// The options a command has seen, so that one given twice is refused.
#[derive(Debug, Default)]
pub struct Seen(Vec<&'static str>);

/// How a user argument shows in an error: printable, at most 64 characters, no line breaks.
pub fn show(arg: &[u8]) -> String {
    let text = String::from_utf8_lossy(&arg[..arg.len().min(64)]);
    let mut s: String = text
        .chars()
        .map(|c| if c.is_control() { '?' } else { c })
        .collect();
    if arg.len() > 64 {
        s.push_str("...");
    }
    s
}

impl<'a> Args<'a> {
    /// A cursor after the command name.
    pub fn new(cmd: &'static str, argv: &'a [&'a [u8]]) -> Self {
        Args {
            cmd,
            argv,
            pos: 1,
            after_keyword: false,
        }
    }

    /// Every argument left (at least one, else the arity error), taken.
    pub fn rest_nonempty(&mut self) -> Result<&'a [&'a [u8]], CmdError> {
        let rest = &self.argv[self.pos.min(self.argv.len())..];
        if rest.is_empty() {
            return Err(CmdError::Arity { cmd: self.cmd });
        }
        self.pos = self.argv.len();
        Ok(rest)
    }

    /// The command's name.
    pub fn cmd(&self) -> &'static str {
        self.cmd
    }

    /// Arguments left.
    pub fn left(&self) -> usize {
        self.argv.len() - self.pos
    }

    /// The next argument without taking it.
    pub fn peek(&self) -> Option<&'a [u8]> {
        self.argv.get(self.pos).copied()
    }

    /// The argument `i` places ahead.
    pub fn peek_at(&self, i: usize) -> Option<&'a [u8]> {
        self.argv.get(self.pos + i).copied()
    }

    /// The next argument, or the arity error.
    pub fn take(&mut self) -> Result<&'a [u8], CmdError> {
        let a = self
            .argv
            .get(self.pos)
            .copied()
            .ok_or(CmdError::Arity { cmd: self.cmd })?;
        self.pos += 1;
        self.after_keyword = false;
        Ok(a)
    }

    /// The next argument as the value `arg` (which must be `expected`): after a keyword, a
    /// missing value is named; elsewhere it is the arity error.
    fn value(&mut self, arg: &'static str, expected: &'static str) -> Result<&'a [u8], CmdError> {
        if self.left() == 0 && self.after_keyword {
            return Err(CmdError::MissingValue {
                cmd: self.cmd,
                arg,
                expected,
            });
        }
        self.take()
    }

    /// Whether the next argument is the keyword `word` (any case); takes it if so.
    pub fn keyword(&mut self, word: &str) -> bool {
        if self
            .peek()
            .is_some_and(|a| a.eq_ignore_ascii_case(word.as_bytes()))
        {
            self.pos += 1;
            self.after_keyword = true;
            true
        } else {
            false
        }
    }

    /// A fresh record of the options seen.
    pub fn options(&self) -> Seen {
        Seen::default()
    }

    /// [`Args::keyword`] for an option that may be given once: the second time is an error.
    pub fn option(&mut self, seen: &mut Seen, word: &'static str) -> Result<bool, CmdError> {
        if !self.keyword(word) {
            return Ok(false);
        }
        if seen.0.contains(&word) {
            return Err(CmdError::Repeated {
                cmd: self.cmd,
                arg: word,
            });
        }
        seen.0.push(word);
        Ok(true)
    }

    /// Fails unless every argument was used.
    pub fn done(&self) -> Result<(), CmdError> {
        match self.peek() {
            None => Ok(()),
            Some(a) => Err(CmdError::Syntax {
                cmd: self.cmd,
                got: show(a),
            }),
        }
    }

    fn bad(&self, arg: &'static str, expected: &'static str, got: &[u8]) -> CmdError {
        CmdError::BadArg {
            cmd: self.cmd,
            arg,
            expected,
            got: show(got),
        }
    }

    /// A non-negative integer at most `max`.
    pub fn u64(
        &mut self,
        arg: &'static str,
        expected: &'static str,
        max: u64,
    ) -> Result<u64, CmdError> {
        let a = self.value(arg, expected)?;
        parse_u64(a)
            .filter(|v| *v <= max)
            .ok_or_else(|| self.bad(arg, expected, a))
    }

    /// An integer in `1..=max`.
    pub fn positive(
        &mut self,
        arg: &'static str,
        expected: &'static str,
        max: u64,
    ) -> Result<u64, CmdError> {
        let a = self.value(arg, expected)?;
        parse_u64(a)
            .filter(|v| (1..=max).contains(v))
            .ok_or_else(|| self.bad(arg, expected, a))
    }

    /// A duration in ms, `1..=2^48`.
    pub fn ms(&mut self, arg: &'static str) -> Result<u64, CmdError> {
        self.positive(
            arg,
            "a positive integer of milliseconds (at most 2^48)",
            Limits::MAX_WINDOW_MS,
        )
    }

    /// A real number strictly between 0 and 1.
    pub fn fraction(&mut self, arg: &'static str) -> Result<f64, CmdError> {
        const EXPECTED: &str = "a number strictly between 0 and 1";
        let a = self.value(arg, EXPECTED)?;
        core::str::from_utf8(a)
            .ok()
            .and_then(|s| s.parse::<f64>().ok())
            .filter(|v| *v > 0.0 && *v < 1.0)
            .ok_or_else(|| self.bad(arg, EXPECTED, a))
    }

    /// A relative error ε in `[1e-6, 1)` (a counter keeps ⌈1/ε⌉ + 1 timestamps per size, so
    /// at most about 10^6).
    pub fn epsilon(&mut self, arg: &'static str) -> Result<f64, CmdError> {
        const EXPECTED: &str = "a number in [1e-6, 1)";
        let a = self.value(arg, EXPECTED)?;
        core::str::from_utf8(a)
            .ok()
            .and_then(|s| s.parse::<f64>().ok())
            .filter(|v| (1e-6..1.0).contains(v))
            .ok_or_else(|| self.bad(arg, EXPECTED, a))
    }

    /// A HyperLogLog precision, `4..=18` (2^p registers).
    pub fn precision(&mut self, arg: &'static str) -> Result<u8, CmdError> {
        const EXPECTED: &str = "an integer in 4..=18";
        let a = self.value(arg, EXPECTED)?;
        parse_u64(a)
            .filter(|p| (4..=18).contains(p))
            .map(|p| p as u8)
            .ok_or_else(|| self.bad(arg, EXPECTED, a))
    }

    /// A time: `*`, `*<ms>` or ms since the epoch.
    pub fn time(&mut self, arg: &'static str) -> Result<Time, CmdError> {
        let a = self.value(arg, "a time in ms since the epoch, or *")?;
        let (clock, digits) = match a.split_first() {
            Some((b'*', [])) => return Ok(Time::Now),
            Some((b'*', ms)) => (true, ms),
            _ => (false, a),
        };
        parse_u64(digits)
            .filter(|v| *v <= Limits::MAX_TIME_MS)
            .map(if clock { Time::Clock } else { Time::At })
            .ok_or_else(|| {
                self.bad(
                    arg,
                    "a non-negative integer of milliseconds since the epoch (at most 2^52), or * for the server's clock (*<ms>: that clock as stamped)",
                    a,
                )
            })
    }
}

/// ASCII digits only (no sign, no spaces), without overflow.
pub fn parse_u64(a: &[u8]) -> Option<u64> {
    if a.is_empty() || a.len() > 20 {
        return None;
    }
    // Nineteen digits stay below 10^19 < 2^64: only a twentieth can overflow (a time is
    // parsed on every timed write, so the common lengths skip the checked arithmetic).
    let (head, last) = if a.len() == 20 {
        (&a[..19], Some(a[19]))
    } else {
        (a, None)
    };
    let mut v: u64 = 0;
    let mut eights = head.chunks_exact(8);
    for chunk in &mut eights {
        let word = u64::from_le_bytes(chunk.try_into().ok()?);
        v = v * 100_000_000 + eight_digits(word)?;
    }
    for &c in eights.remainder() {
        let d = c.wrapping_sub(b'0');
        if d > 9 {
            return None;
        }
        v = v * 10 + u64::from(d);
    }
    match last {
        None => Some(v),
        Some(c) if c.is_ascii_digit() => v.checked_mul(10)?.checked_add(u64::from(c - b'0')),
        Some(_) => None,
    }
}

/// The value of eight ASCII digits read as a little-endian word (the first digit, the most
/// significant, in the low byte), or `None` if a byte is not a digit. A 13-digit time takes
/// one of these and five single digits.
fn eight_digits(word: u64) -> Option<u64> {
    let v = word.wrapping_sub(0x3030_3030_3030_3030);
    // A digit's byte is now 0..=9: its high nibble is clear, and adding 6 keeps it clear. A
    // byte below '0' wrapped to 0xD0 or more; one above '9' is 10 or more, so 16 or more
    // after adding 6 (a borrow or carry into a neighbour comes only from a byte refused here).
    if (v | v.wrapping_add(0x0606_0606_0606_0606)) & 0xF0F0_F0F0_F0F0_F0F0 != 0 {
        return None;
    }
    // Pairs, then fours, then the eight: each step weighs the more significant half (the
    // lower bytes) by the width of the other. No step overflows its lane (99, 9,999).
    let v = (v.wrapping_mul(10) + (v >> 8)) & 0x00FF_00FF_00FF_00FF;
    let v = (v.wrapping_mul(100) + (v >> 16)) & 0x0000_FFFF_0000_FFFF;
    Some((v.wrapping_mul(10_000) + (v >> 32)) & 0xFFFF_FFFF)
}
