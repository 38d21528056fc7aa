//! Event time: parsing a record's time field, and durations in the config.
//!
//! Internally every time is a `u64` count of milliseconds since the Unix epoch (event time,
//! never the wall clock). A time field is read as epoch seconds, epoch milliseconds or an
//! RFC 3339 timestamp, as the config says; seconds may carry a fraction (`1700000000.25`).
//! Times before 1970 are refused: the pipeline's buckets start at tick 0. Times after
//! [`MAX_TIME`] (the last millisecond of the year 9999) are refused too: one such record
//! would carry the watermark past every real event and every bucket end past `u64`. Durations
//! are at most [`MAX_DURATION`] (100 years), so `time + duration` never overflows.
//!
//! ```
//! use tidemark_stream::time::{parse_duration, parse_rfc3339, TimeFormat};
//!
//! assert_eq!(TimeFormat::EpochSeconds.parse("90").unwrap(), 90_000);
//! assert_eq!(TimeFormat::EpochMillis.parse("90500").unwrap(), 90_500);
//! assert_eq!(parse_rfc3339("1970-01-01T00:01:30.5Z").unwrap(), 90_500);
//! assert_eq!(parse_rfc3339("1970-01-01T01:01:30+01:00").unwrap(), 90_000);
//! assert_eq!(parse_duration("5m").unwrap(), 300_000);
//! ```

use core::fmt;

/// The latest event time accepted, ms: 9999-12-31T23:59:59.999Z. The parser refuses later
/// times, and the engine never holds one, so no bucket end, window or snapshot field can
/// leave the range its reader checks.
pub const MAX_TIME: u64 = 253_402_300_799_999;

/// The longest duration a config may give (bucket, window, retention, lateness), ms: 100 years
/// of 365.25 days. With [`MAX_TIME`] it keeps every sum of a time and a duration far below
/// `u64::MAX`.
pub const MAX_DURATION: u64 = 36_525 * 86_400_000;

/// How a record's time field is written.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum TimeFormat {
    /// Seconds since the epoch, optionally with a fraction (`1700000000`, `1700000000.250`).
    EpochSeconds,
    /// Milliseconds since the epoch (`1700000000250`).
    EpochMillis,
    /// RFC 3339 (`2023-11-14T22:13:20.25Z`, `2023-11-14T23:13:20+01:00`).
    Rfc3339,
}

/// A time field that could not be read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TimeError {
    /// What the field should have been.
    pub expected: &'static str,
    /// The text, shortened to 40 characters.
    pub got: String,
}

impl TimeError {
    fn new(expected: &'static str, got: &str) -> TimeError {
        TimeError {
            expected,
            got: got.chars().take(40).collect(),
        }
    }
}

impl fmt::Display for TimeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "bad time: expected {}, got {:?}",
            self.expected, self.got
        )
    }
}

impl std::error::Error for TimeError {}

impl TimeFormat {
    /// The config spelling: `epoch_s`, `epoch_ms`, `rfc3339`.
    pub fn from_name(name: &str) -> Option<TimeFormat> {
        match name {
            "epoch_s" => Some(TimeFormat::EpochSeconds),
            "epoch_ms" => Some(TimeFormat::EpochMillis),
            "rfc3339" => Some(TimeFormat::Rfc3339),
            _ => None,
        }
    }

    /// Parses a field into epoch milliseconds.
    #[inline]
    pub fn parse(self, text: &str) -> Result<u64, TimeError> {
        TimeReader::new(self).read(text)
    }
}

/// A [`TimeFormat`] reading a stream's time fields, one after another. It remembers the last
/// RFC 3339 time's minute (its first 17 bytes, `2023-11-14T22:13:`) and what that minute is in
/// seconds since the epoch, because a log's consecutive records mostly share their minute and
/// the calendar arithmetic is most of a timestamp's cost; and the last epoch time's text and
/// value, because consecutive records mostly share their second (on the demo's flow log, about
/// 3,600 records a second), and its digits cost more than comparing them. Equal bytes are an
/// equal time, so every answer is the one [`TimeFormat::parse`] gives.
#[derive(Clone, Debug)]
pub(crate) struct TimeReader {
    format: TimeFormat,
    minute: Option<([u8; MINUTE_BYTES], i64)>,
    epoch: Option<(EpochText, u64)>,
}

/// The bytes of an RFC 3339 time up to its seconds: `YYYY-MM-DDTHH:MM:`.
const MINUTE_BYTES: usize = 17;

/// The longest epoch time remembered: 20 digits, a point and three more.
const EPOCH_BYTES: usize = 24;

/// An epoch time's text, remembered.
#[derive(Clone, Copy, Debug)]
struct EpochText {
    bytes: [u8; EPOCH_BYTES],
    len: usize,
}

impl EpochText {
    fn of(text: &[u8]) -> Option<EpochText> {
        let mut bytes = [0; EPOCH_BYTES];
        bytes.get_mut(..text.len())?.copy_from_slice(text);
        Some(EpochText {
            bytes,
            len: text.len(),
        })
    }

    fn is(&self, text: &[u8]) -> bool {
        self.bytes.get(..self.len) == Some(text)
    }
}

impl TimeReader {
    pub(crate) fn new(format: TimeFormat) -> TimeReader {
        TimeReader {
            format,
            minute: None,
            epoch: None,
        }
    }

    /// Reads a field into epoch milliseconds.
    #[inline]
    pub(crate) fn read(&mut self, text: &str) -> Result<u64, TimeError> {
        // A field whose first and last bytes are visible ASCII has nothing to trim (such a
        // byte is a whole character, and not a space): the Unicode trim is a per-record cost.
        let trimmed = match (text.as_bytes().first(), text.as_bytes().last()) {
            (Some(a), Some(b)) if a.is_ascii_graphic() && b.is_ascii_graphic() => text,
            _ => text.trim(),
        };
        if let Some((last, t)) = &self.epoch {
            if last.is(trimmed.as_bytes()) {
                return Ok(*t);
            }
        }
        let t = match self.format {
            TimeFormat::EpochSeconds => parse_seconds(trimmed)?,
            TimeFormat::EpochMillis => parse_uint(trimmed.as_bytes()).ok_or_else(|| {
                TimeError::new("epoch milliseconds (a non-negative integer)", text)
            })?,
            TimeFormat::Rfc3339 => rfc3339(trimmed, &mut self.minute)?,
        };
        if t > MAX_TIME {
            return Err(TimeError::new(
                "a time no later than 9999-12-31T23:59:59.999Z",
                text,
            ));
        }
        if self.format != TimeFormat::Rfc3339 {
            // Only a time read without error is remembered.
            self.epoch = EpochText::of(trimmed.as_bytes()).map(|e| (e, t));
        }
        Ok(t)
    }
}

/// A non-negative decimal integer, without overflow.
#[inline]
fn parse_uint(b: &[u8]) -> Option<u64> {
    if b.is_empty() || b.len() > 20 {
        return None;
    }
    let mut v: u64 = 0;
    for &c in b {
        let d = c.wrapping_sub(b'0');
        if d > 9 {
            return None;
        }
        v = v.checked_mul(10)?.checked_add(d as u64)?;
    }
    Some(v)
}

/// Epoch seconds with an optional fraction, to milliseconds (the fraction truncated to ms).
#[inline]
fn parse_seconds(text: &str) -> Result<u64, TimeError> {
    let err = || TimeError::new("epoch seconds (a non-negative number)", text);
    let b = text.as_bytes();
    let (int, frac) = match b.iter().position(|&c| c == b'.') {
        Some(i) => (&b[..i], &b[i + 1..]),
        None => (b, &b[..0]),
    };
    let secs = parse_uint(int).ok_or_else(err)?;
    let mut ms = 0u64;
    for (i, &c) in frac.iter().enumerate() {
        let d = c.wrapping_sub(b'0');
        if d > 9 {
            return Err(err());
        }
        if i < 3 {
            ms += d as u64 * [100, 10, 1][i];
        }
    }
    secs.checked_mul(1000)
        .and_then(|s| s.checked_add(ms))
        .ok_or_else(err)
}

/// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's `days_from_civil`).
fn days_from_civil(y: i64, m: u32, d: u32) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m as i64 + 9) % 12; // March = 0
    let doy = (153 * mp + 2) / 5 + d as i64 - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

fn days_in_month(y: i64, m: u32) -> u32 {
    match m {
        1 | 3 | 5 | 7 | 8 | 10 | 12 => 31,
        4 | 6 | 9 | 11 => 30,
        _ if (y % 4 == 0 && y % 100 != 0) || y % 400 == 0 => 29,
        _ => 28,
    }
}

/// An RFC 3339 timestamp (`YYYY-MM-DDTHH:MM:SS[.frac](Z|±HH:MM)`; `t` or a space may stand
/// for `T`, `z` for `Z`) to epoch milliseconds. A leap second (`:60`) counts as the next
/// second's start.
pub fn parse_rfc3339(text: &str) -> Result<u64, TimeError> {
    rfc3339(text, &mut None)
}

/// [`parse_rfc3339`], with the minute of the last time read (see [`TimeReader`]).
fn rfc3339(text: &str, memo: &mut Option<([u8; MINUTE_BYTES], i64)>) -> Result<u64, TimeError> {
    const EXPECTED: &str = "an RFC 3339 timestamp (2023-11-14T22:13:20Z)";
    let err = || TimeError::new(EXPECTED, text);
    let b = text.as_bytes();
    if b.len() < 20 {
        return Err(err());
    }
    let num = |range: core::ops::Range<usize>| -> Result<u32, TimeError> {
        let mut v = 0u32;
        for &c in &b[range] {
            let d = c.wrapping_sub(b'0');
            if d > 9 {
                return Err(err());
            }
            v = v * 10 + d as u32;
        }
        Ok(v)
    };
    let minute_secs = match memo {
        Some((prefix, secs)) if b[..MINUTE_BYTES] == prefix[..] => *secs,
        _ => {
            if b[4] != b'-'
                || b[7] != b'-'
                || !matches!(b[10], b'T' | b't' | b' ')
                || b[13] != b':'
                || b[16] != b':'
            {
                return Err(err());
            }
            let (year, month, day) = (num(0..4)? as i64, num(5..7)?, num(8..10)?);
            let (hour, minute) = (num(11..13)?, num(14..16)?);
            if !(1..=12).contains(&month)
                || day == 0
                || day > days_in_month(year, month)
                || hour > 23
                || minute > 59
            {
                return Err(err());
            }
            let secs =
                days_from_civil(year, month, day) * 86_400 + (hour * 3600 + minute * 60) as i64;
            let mut prefix = [0; MINUTE_BYTES];
            prefix.copy_from_slice(&b[..MINUTE_BYTES]);
            *memo = Some((prefix, secs));
            secs
        }
    };
    let second = num(17..19)?;
    if second > 60 {
        return Err(err());
    }
    let mut i = 19;
    let mut ms = 0u64;
    if b[i] == b'.' {
        i += 1;
        let start = i;
        while i < b.len() && b[i].is_ascii_digit() {
            if i - start < 3 {
                ms += (b[i] - b'0') as u64 * [100, 10, 1][i - start];
            }
            i += 1;
        }
        if i == start {
            return Err(err());
        }
    }
    let offset_secs: i64 = match b.get(i) {
        Some(b'Z' | b'z') if i + 1 == b.len() => 0,
        Some(&sign @ (b'+' | b'-')) if i + 6 == b.len() && b[i + 3] == b':' => {
            let (oh, om) = (num(i + 1..i + 3)?, num(i + 4..i + 6)?);
            if oh > 23 || om > 59 {
                return Err(err());
            }
            let s = (oh * 3600 + om * 60) as i64;
            if sign == b'+' {
                s
            } else {
                -s
            }
        }
        _ => return Err(err()),
    };
    let secs = minute_secs + second as i64 - offset_secs;
    if secs < 0 {
        return Err(TimeError::new(
            "a time at or after 1970-01-01T00:00:00Z",
            text,
        ));
    }
    Ok(secs as u64 * 1000 + ms)
}

/// A duration in the config: an integer with a unit, `ms`, `s`, `m`, `h` or `d` (`250ms`,
/// `30s`, `5m`, `1h`, `7d`), to milliseconds. `None` for anything else, and for more than
/// [`MAX_DURATION`].
pub fn parse_duration(text: &str) -> Option<u64> {
    let t = text.trim();
    let split = t.find(|c: char| !c.is_ascii_digit())?;
    let (num, unit) = t.split_at(split);
    let n = parse_uint(num.as_bytes())?;
    let scale = match unit {
        "ms" => 1,
        "s" => 1_000,
        "m" => 60_000,
        "h" => 3_600_000,
        "d" => 86_400_000,
        _ => return None,
    };
    n.checked_mul(scale).filter(|&ms| ms <= MAX_DURATION)
}

/// Epoch milliseconds as RFC 3339 (UTC, millisecond precision when needed).
pub fn format_rfc3339(ms: u64) -> String {
    let secs = ms / 1000;
    let (days, rem) = (secs / 86_400, secs % 86_400);
    // Civil from days (Howard Hinnant's algorithm).
    let z = days as i64 + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    let frac = ms % 1000;
    let base = format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    );
    if frac == 0 {
        format!("{base}Z")
    } else {
        format!("{base}.{frac:03}Z")
    }
}

/// Milliseconds written back as the shortest exact duration (`300000` → `5m`).
pub fn format_duration(ms: u64) -> String {
    for (unit, scale) in [
        ("d", 86_400_000),
        ("h", 3_600_000),
        ("m", 60_000),
        ("s", 1_000),
    ] {
        if ms != 0 && ms % scale == 0 {
            return format!("{}{unit}", ms / scale);
        }
    }
    format!("{ms}ms")
}

/// Milliseconds as a person reads a span: the largest unit that fits, to three significant
/// digits (`567993599364` → `18.0 years`, `90061000` → `1.04 days`, `1500` → `1.5 s`).
pub fn format_span(ms: u64) -> String {
    const UNITS: [(&str, f64); 6] = [
        ("years", 365.25 * 86_400_000.0),
        ("days", 86_400_000.0),
        ("h", 3_600_000.0),
        ("min", 60_000.0),
        ("s", 1_000.0),
        ("ms", 1.0),
    ];
    let x = ms as f64;
    let (unit, scale) = UNITS
        .iter()
        .copied()
        .find(|(_, scale)| x >= *scale)
        .unwrap_or(("ms", 1.0));
    if scale == 1.0 {
        return format!("{ms} ms");
    }
    let v = x / scale;
    let digits = if v >= 100.0 {
        0
    } else if v >= 10.0 {
        1
    } else {
        2
    };
    let text = format!("{v:.digits$}");
    // 1.50 → 1.5, 2.00 → 2: the digits that say something.
    let text = if text.contains('.') {
        text.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        text
    };
    format!("{text} {unit}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spans_read_as_a_person_reads_them() {
        assert_eq!(format_span(567_993_599_364), "18 years");
        assert_eq!(format_span(90_061_000), "1.04 days");
        assert_eq!(format_span(1_500), "1.5 s");
        assert_eq!(format_span(999), "999 ms");
        assert_eq!(format_span(0), "0 ms");
        assert_eq!(format_span(3_600_000), "1 h");
        assert_eq!(format_span(u64::MAX), "584542046 years");
    }

    #[test]
    fn civil_days_match_known_dates() {
        assert_eq!(days_from_civil(1970, 1, 1), 0);
        assert_eq!(days_from_civil(2000, 3, 1), 11_017);
        // 2023-11-14T22:13:20Z is epoch 1_700_000_000.
        assert_eq!(
            parse_rfc3339("2023-11-14T22:13:20Z").unwrap(),
            1_700_000_000_000
        );
        assert_eq!(
            parse_rfc3339("2024-02-29T00:00:00Z").unwrap(),
            1_709_164_800_000
        );
    }

    #[test]
    fn rfc3339_offsets_and_fractions() {
        let base = 1_700_000_000_000;
        assert_eq!(parse_rfc3339("2023-11-14T23:13:20+01:00").unwrap(), base);
        assert_eq!(parse_rfc3339("2023-11-14T17:13:20-05:00").unwrap(), base);
        assert_eq!(
            parse_rfc3339("2023-11-14 22:13:20.123456z").unwrap(),
            base + 123
        );
        assert_eq!(parse_rfc3339("2023-11-14T22:13:20.5Z").unwrap(), base + 500);
    }

    #[test]
    fn rfc3339_rejects_malformed_text() {
        for bad in [
            "",
            "2023-11-14",
            "2023-11-14T22:13:20",
            "2023-13-14T22:13:20Z",
            "2023-02-29T22:13:20Z",
            "2023-11-14T24:13:20Z",
            "2023-11-14T22:13:20.Z",
            "2023-11-14T22:13:20+1:00",
            "1969-12-31T23:59:59Z",
            "2023-11-14X22:13:20Z",
            "２023-11-14T22:13:20Z",
        ] {
            assert!(parse_rfc3339(bad).is_err(), "{bad:?} accepted");
        }
    }

    #[test]
    fn epoch_fields() {
        assert_eq!(TimeFormat::EpochSeconds.parse("12.3456").unwrap(), 12_345);
        assert_eq!(TimeFormat::EpochSeconds.parse(" 7 ").unwrap(), 7_000);
        assert!(TimeFormat::EpochSeconds.parse("-1").is_err());
        assert!(TimeFormat::EpochSeconds.parse("1e3").is_err());
        assert!(TimeFormat::EpochSeconds
            .parse("99999999999999999999")
            .is_err());
        assert!(TimeFormat::EpochMillis.parse("12.5").is_err());
        assert!(TimeFormat::EpochMillis.parse("").is_err());
    }

    #[test]
    fn fields_are_read_as_their_trimmed_text() {
        let spaces = ["", " ", "\t", "\u{2003}", "\u{a0}", " \u{3000}"];
        for (format, text) in [
            (TimeFormat::EpochSeconds, "1700000000.5"),
            (TimeFormat::EpochMillis, "1700000000500"),
            (TimeFormat::Rfc3339, "2023-11-14T22:13:20.5Z"),
        ] {
            for (a, b) in spaces
                .iter()
                .flat_map(|a| spaces.iter().map(move |b| (a, b)))
            {
                let padded = format!("{a}{text}{b}");
                assert_eq!(
                    format.parse(&padded).ok(),
                    Some(1_700_000_000_500),
                    "{padded:?}"
                );
            }
            // A non-space character at either end is part of the field, not trimmed away.
            assert!(format.parse(&format!("{text}\u{e9}")).is_err());
            assert!(format.parse(&format!("x{text}")).is_err());
        }
    }

    #[test]
    fn times_past_year_9999_are_refused_in_every_format() {
        assert_eq!(
            TimeFormat::EpochMillis.parse("253402300799999"),
            Ok(MAX_TIME)
        );
        assert!(TimeFormat::EpochMillis.parse("253402300800000").is_err());
        assert!(TimeFormat::EpochMillis
            .parse("18446744073709551615")
            .is_err());
        assert_eq!(
            TimeFormat::EpochSeconds.parse("253402300799.999"),
            Ok(MAX_TIME)
        );
        // A far-future time once reported: 9,223,372,036,854,720 s.
        let e = TimeFormat::EpochSeconds
            .parse("9223372036854720")
            .unwrap_err();
        assert!(e.to_string().contains("9999-12-31"), "{e}");
        assert_eq!(
            TimeFormat::Rfc3339.parse("9999-12-31T23:59:59.999Z"),
            Ok(MAX_TIME)
        );
    }

    #[test]
    fn durations_are_bounded_by_a_century() {
        assert_eq!(parse_duration("36525d"), Some(MAX_DURATION));
        assert_eq!(parse_duration("36526d"), None);
        assert_eq!(parse_duration("18446744073709551615ms"), None);
        assert!(MAX_TIME.checked_add(3 * MAX_DURATION).is_some());
    }

    #[test]
    fn durations() {
        assert_eq!(parse_duration("250ms"), Some(250));
        assert_eq!(parse_duration("1h"), Some(3_600_000));
        assert_eq!(parse_duration("7d"), Some(604_800_000));
        assert_eq!(parse_duration("5"), None);
        assert_eq!(parse_duration("m"), None);
        assert_eq!(parse_duration("5 m"), None);
        assert_eq!(parse_duration("5w"), None);
        assert_eq!(format_duration(300_000), "5m");
        assert_eq!(format_duration(1_500), "1500ms");
    }

    proptest::proptest! {
        #[test]
        fn rfc3339_never_panics(s in "\\PC{0,40}") {
            let _ = parse_rfc3339(&s);
            let _ = TimeFormat::EpochSeconds.parse(&s);
        }
        /// A reader remembering the last minute answers every field as a fresh parse does,
        /// and a time written by `format_rfc3339` reads back as itself: over a stream of
        /// times mostly a few seconds apart (so minutes repeat), some far apart, written
        /// with an offset or another separator, and texts that share the remembered minute
        /// but are damaged after it.
        #[test]
        fn remembered_minutes_change_no_answer(
            start in 0u64..MAX_TIME / 2,
            steps in proptest::collection::vec((0u64..200_000, 0u8..8, "\\PC{0,6}"), 1..60),
        ) {
            let mut reader = TimeReader::new(TimeFormat::Rfc3339);
            let mut t = start;
            let mut last = format_rfc3339(t);
            for (delta, variant, tail) in steps {
                t = if variant == 7 { (t * 7 + delta * 1_000_003) % MAX_TIME } else { t + delta };
                let written = format_rfc3339(t);
                let (text, exact) = match variant {
                    1 => (written.replace('Z', "+00:00"), true),
                    2 => (written.replacen('T', "t", 1), true),
                    3 => (format!("{}61Z", &written[..17]), false),
                    4 => (format!("{}{tail}", &last[..17]), false),
                    5 => (format!("{written}x"), false),
                    _ => (written, true),
                };
                let got = reader.read(&text);
                proptest::prop_assert_eq!(&got, &TimeFormat::Rfc3339.parse(&text), "{}", text);
                if exact {
                    proptest::prop_assert_eq!(got, Ok(t), "{}", text);
                }
                last = text;
            }
        }

        /// A reader remembering the last epoch time answers every field as a fresh parse
        /// does: over texts that repeat, change by a digit or a length, carry a fraction,
        /// spaces, a sign or garbage, or run past what is remembered.
        #[test]
        fn remembered_epoch_times_change_no_answer(
            millis in proptest::bool::ANY,
            texts in proptest::collection::vec(
                proptest::sample::select(vec![
                    "1700000000", "1700000000", "1700000001", "170000000", "17000000000",
                    "1700000000.5", "1700000000.123456", " 1700000000", "1700000000 ", "-1",
                    "1700000000x", "", ".", "1.", "18446744073709551615", "253402300799",
                    "253402300800", "99999999999999999999", "0", "00", "1700000000000",
                    "1700000000000.000000000", "1700000000.12345678901234567", "1700000000.1234567890123456",
                    "1700000000.123456789012345",
                ]),
                1..40,
            ),
        ) {
            let format = if millis { TimeFormat::EpochMillis } else { TimeFormat::EpochSeconds };
            let mut reader = TimeReader::new(format);
            for text in texts {
                proptest::prop_assert_eq!(reader.read(text), format.parse(text), "{}", text);
            }
        }
    }
}
