//! Replies, straight through Redis's reply API (no intermediate values): doubles are RESP3
//! doubles, or in RESP2 bulk strings in Rust's shortest round-trip form (as `ZSCORE`
//! answers, without printf's cost); integers and halves, every counter's answer, by hand.

use redis_module::{raw, Context};

use crate::reply::Reply;

/// Writes a reply straight through Redis's reply API (no intermediate values): doubles are
/// RESP3 doubles, or in RESP2 bulk strings in Rust's shortest round-trip form (as ZSCORE
/// answers, without printf's cost).
pub fn reply(ctx: &Context, r: &Reply, resp3: bool) {
    let c = ctx.ctx;
    // SAFETY: the reply functions are set by `RedisModule_Init`; `c` is this call's context;
    // every buffer passed lives across its call.
    unsafe {
        match r {
            Reply::Ok => {
                if let Some(f) = raw::RedisModule_ReplyWithSimpleString {
                    f(c, c"OK".as_ptr());
                }
            }
            Reply::Integer(i) => {
                if let Some(f) = raw::RedisModule_ReplyWithLongLong {
                    f(c, *i);
                }
            }
            Reply::Double(d) if resp3 => {
                if let Some(f) = raw::RedisModule_ReplyWithDouble {
                    f(c, *d);
                }
            }
            Reply::Double(d) => {
                let mut buf = [0u8; 40];
                let n = format_double(*d, &mut buf);
                if let Some(f) = raw::RedisModule_ReplyWithStringBuffer {
                    f(c, buf.as_ptr().cast(), n);
                }
            }
            Reply::Estimate(e) => {
                if let Some(f) = raw::RedisModule_ReplyWithArray {
                    f(c, 3);
                }
                e.iter().for_each(|x| reply(ctx, &Reply::Double(*x), resp3));
            }
            Reply::Bulk(b) => {
                if let Some(f) = raw::RedisModule_ReplyWithStringBuffer {
                    f(c, b.as_ptr().cast(), b.len());
                }
            }
            Reply::Null => {
                if let Some(f) = raw::RedisModule_ReplyWithNull {
                    f(c);
                }
            }
            Reply::Array(a) => {
                if let Some(f) = raw::RedisModule_ReplyWithArray {
                    f(c, a.len() as std::os::raw::c_long);
                }
                a.iter().for_each(|x| reply(ctx, x, resp3));
            }
            Reply::Map(m) => {
                // A RESP3 map, or in RESP2 a flat array of field, value, … (Redis's rule).
                match raw::RedisModule_ReplyWithMap {
                    Some(f) => {
                        f(c, m.len() as std::os::raw::c_long);
                    }
                    None => {
                        if let Some(f) = raw::RedisModule_ReplyWithArray {
                            f(c, 2 * m.len() as std::os::raw::c_long);
                        }
                    }
                }
                for (k, v) in m {
                    if let Some(f) = raw::RedisModule_ReplyWithStringBuffer {
                        f(c, k.as_ptr().cast(), k.len());
                    }
                    reply(ctx, v, resp3);
                }
            }
        }
    }
}

/// Writes `d` with the fewest digits that read back as `d` bit for bit (plain between 1e-5
/// and 1e17, in exponent form beyond); integers and halves (every counter answer) without the
/// float formatter. Returns the length.
fn format_double(d: f64, buf: &mut [u8; 40]) -> usize {
    // Twice the value, when it is an integer below 2^51 in size: `d` is an integer or a
    // half, written by hand (the float formatter is the slow path). The conversion truncates,
    // so the comparison holds only when nothing was cut.
    let twice = d * 2.0;
    let t = twice as i64;
    if d.abs() < 1e15 && t as f64 == twice {
        let mut at = 0;
        if d.is_sign_negative() {
            buf[0] = b'-';
            at = 1;
        }
        let n = t.unsigned_abs();
        at += write_decimal(n / 2, &mut buf[at..]);
        if n % 2 == 1 {
            buf[at] = b'.';
            buf[at + 1] = b'5';
            at += 2;
        }
        return at;
    }
    use std::io::Write;
    let mut w = &mut buf[..];
    // Rust's plain form writes every digit of 1e300 or 1e-300 (hundreds of bytes): far from
    // 1 the shortest round-trip digits go in exponent form, which every RESP client parses.
    let _ = if d != 0.0 && !(1e-5..1e17).contains(&d.abs()) {
        write!(w, "{d:e}")
    } else {
        write!(w, "{d}")
    };
    40 - w.len()
}

/// Whether a reply holds a double, which RESP3 and RESP2 write differently.
pub fn has_doubles(r: &Reply) -> bool {
    match r {
        Reply::Double(_) | Reply::Estimate(_) => true,
        Reply::Array(a) => a.iter().any(has_doubles),
        Reply::Map(m) => m.iter().any(|(_, v)| has_doubles(v)),
        Reply::Ok | Reply::Integer(_) | Reply::Bulk(_) | Reply::Null => false,
    }
}

pub fn is_resp3(ctx: &Context) -> bool {
    // SAFETY: `GetContextFlags` is set by `RedisModule_Init`; `ctx.ctx` is this call's context.
    let flags = unsafe { raw::RedisModule_GetContextFlags.map_or(0, |f| f(ctx.ctx)) };
    flags as u32 & raw::REDISMODULE_CTX_FLAGS_RESP3 != 0
}

/// The decimal digits of 0..=99, two bytes each.
const DIGIT_PAIRS: [u8; 200] = {
    let mut t = [0u8; 200];
    let mut i = 0;
    while i < 100 {
        t[2 * i] = b'0' + (i / 10) as u8;
        t[2 * i + 1] = b'0' + (i % 10) as u8;
        i += 1;
    }
    t
};

/// Writes `v` in decimal at the start of `buf` (at least 20 bytes), returning the length.
/// Two digits a division, from the end of a scratch buffer: a reply's three numbers are
/// written on every `TMCOUNT.ADD`.
pub fn write_decimal(mut v: u64, buf: &mut [u8]) -> usize {
    let mut digits = [0u8; 20];
    let mut at = digits.len();
    while v >= 100 {
        let pair = (v % 100) as usize * 2;
        v /= 100;
        at -= 2;
        digits[at..at + 2].copy_from_slice(&DIGIT_PAIRS[pair..pair + 2]);
    }
    if v >= 10 {
        let pair = v as usize * 2;
        at -= 2;
        digits[at..at + 2].copy_from_slice(&DIGIT_PAIRS[pair..pair + 2]);
    } else {
        at -= 1;
        digits[at] = b'0' + v as u8;
    }
    let len = digits.len() - at;
    buf[..len].copy_from_slice(&digits[at..]);
    len
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decimals_are_as_std_writes_them() {
        use rand::{Rng, SeedableRng};
        let mut rng = rand_pcg::Pcg64::seed_from_u64(7);
        let edges = (0..20).flat_map(|k| {
            let p = 10u64.pow(k);
            [p - 1, p, p + 1]
        });
        let random = (0..10_000).map(|_| rng.random::<u64>() >> rng.random_range(0..64));
        for v in edges.chain([u64::MAX, 99, 100]).chain(random) {
            let mut buf = [0u8; 20];
            let n = write_decimal(v, &mut buf);
            assert_eq!(&buf[..n], v.to_string().as_bytes(), "{v}");
        }
    }

    #[test]
    fn doubles_read_back_exactly() {
        let cases = [
            0.0,
            -0.0,
            0.5,
            -0.5,
            1.0,
            -1.0,
            2.5,
            995_904.5,
            1e15 - 0.5,
            1e15,
            -1e15,
            1e300,
            0.1,
            -3.25,
            1.0 / 3.0,
            f64::MIN_POSITIVE,
            123_456_789.75,
            4_503_599_627_370_496.0,
        ];
        let edges = [
            1e-5,
            9.999_999_999_999_999e-6,
            1e17,
            99_999_999_999_999_980.0,
            4_503_599_627_370_495.5,
            f64::INFINITY,
            f64::NEG_INFINITY,
            f64::MAX,
            -f64::MIN_POSITIVE,
            5e-324,
        ];
        for d in cases.into_iter().chain(edges) {
            let mut buf = [0u8; 40];
            let n = format_double(d, &mut buf);
            let text = std::str::from_utf8(&buf[..n])
                .expect("format_double writes ASCII only: digits, '-', '.', 'e', inf, NaN");
            let back: f64 = text
                .parse()
                .expect("every form format_double writes is one Rust's f64 parser reads");
            // Bit for bit: -0.0 keeps its sign.
            assert_eq!(back.to_bits(), d.to_bits(), "{d} written as {text}");
            // The shortest form: Rust's own `{}` is the shortest that reads back.
            assert!(text.len() <= format!("{d}").len(), "{d} written as {text}");
        }
        let mut buf = [0u8; 40];
        let n = format_double(f64::NAN, &mut buf);
        assert_eq!(&buf[..n], b"NaN");
        let n = format_double(-0.0, &mut buf);
        assert_eq!(&buf[..n], b"-0");
        let n = format_double(-0.5, &mut buf);
        assert_eq!(&buf[..n], b"-0.5");
        let n = format_double(7.0, &mut buf);
        assert_eq!(&buf[..n], b"7");
    }

    #[test]
    fn decimals_are_written_in_full() {
        let mut buf = [0u8; 20];
        for v in [0, 9, 10, 99, 1_796_168_172_020, u64::MAX] {
            let n = write_decimal(v, &mut buf);
            assert_eq!(&buf[..n], v.to_string().as_bytes());
        }
    }
}
