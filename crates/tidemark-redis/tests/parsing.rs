//! The fast readers of the command layer against the standard library's: a number as
//! `str::parse::<u64>` reads it (digits only, no sign), a command name as
//! `eq_ignore_ascii_case` matches it.

use proptest::prelude::*;
use tidemark_redis::args::parse_u64;
use tidemark_redis::command::{command_index, is_name, COMMANDS};

/// What `parse_u64` must answer: ASCII digits only (no `+`), at most 20 of them, in range.
fn model(a: &[u8]) -> Option<u64> {
    if a.is_empty() || a.len() > 20 || !a.iter().all(u8::is_ascii_digit) {
        return None;
    }
    std::str::from_utf8(a).ok()?.parse().ok()
}

/// Names, their case mixed, with a byte changed or not, and bytes that differ from a name's
/// only in bit 5 (the case bit), where a careless fold would match.
fn near_name() -> impl Strategy<Value = Vec<u8>> {
    (
        prop::sample::select(
            COMMANDS
                .iter()
                .flat_map(|c| [Some(c.name), c.legacy])
                .flatten()
                .collect::<Vec<_>>(),
        ),
        prop::collection::vec(any::<bool>(), 20),
        prop::option::of((any::<prop::sample::Index>(), any::<u8>())),
        any::<bool>(),
    )
        .prop_map(|(n, lower, change, flip_bit5)| {
            let mut b: Vec<u8> = n
                .bytes()
                .zip(lower.iter().cycle())
                .map(|(c, l)| if *l { c.to_ascii_lowercase() } else { c })
                .collect();
            if let Some((i, v)) = change {
                let i = i.index(b.len());
                b[i] = if flip_bit5 { b[i] ^ 0x20 } else { v };
            }
            b
        })
}

proptest! {
    #[test]
    fn numbers_read_as_str_parse_reads_them(
        a in prop_oneof![
            prop::collection::vec(b'0'..=b'9', 0..23),
            prop::collection::vec(any::<u8>(), 0..23),
            // Digits with one byte changed, anywhere in an eight-byte block or after it.
            (prop::collection::vec(b'0'..=b'9', 1..21), any::<prop::sample::Index>(), any::<u8>())
                .prop_map(|(mut v, i, b)| { let i = i.index(v.len()); v[i] = b; v }),
            // Digits with a byte just outside '0'..='9' ('/' and ':'), and with a high bit set.
            (prop::collection::vec(b'0'..=b'9', 1..21), any::<prop::sample::Index>(),
             prop::sample::select(vec![b'/', b':', 0xB0, 0xB9, 0x00, 0xFF]))
                .prop_map(|(mut v, i, b)| { let i = i.index(v.len()); v[i] = b; v }),
            // Around 2^64 - 1 = 18446744073709551615, the one place a twentieth digit overflows.
            (0u64..2000).prop_map(|d| ((u64::MAX as u128) - 1000 + d as u128).to_string().into_bytes()),
        ]
    ) {
        prop_assert_eq!(parse_u64(&a), model(&a), "{:?}", String::from_utf8_lossy(&a));
    }

    #[test]
    fn names_match_as_eq_ignore_ascii_case_matches_them(b in near_name()) {
        for name in COMMANDS.iter().flat_map(|c| [Some(c.name), c.legacy]).flatten() {
            prop_assert_eq!(is_name(&b, name), b.eq_ignore_ascii_case(name.as_bytes()), "{:?} {}", String::from_utf8_lossy(&b), name);
        }
        // A command answers to its name and, for AOF files of earlier builds, its legacy one.
        let model = COMMANDS.iter().position(|c| {
            b.eq_ignore_ascii_case(c.name.as_bytes())
                || c.legacy.is_some_and(|l| b.eq_ignore_ascii_case(l.as_bytes()))
        });
        prop_assert_eq!(command_index(&b), model);
    }
}

#[test]
fn the_edges_of_u64() {
    assert_eq!(parse_u64(b"18446744073709551615"), Some(u64::MAX));
    assert_eq!(parse_u64(b"18446744073709551616"), None);
    assert_eq!(parse_u64(b"99999999999999999999"), None);
    assert_eq!(
        parse_u64(b"9999999999999999999"),
        Some(9_999_999_999_999_999_999)
    );
    assert_eq!(parse_u64(b"00000000000000000001"), Some(1));
    assert_eq!(parse_u64(b"000000000000000000001"), None, "21 digits");
    assert_eq!(
        parse_u64(b"1844674407370955161/"),
        None,
        "a non-digit in twentieth place"
    );
    assert_eq!(parse_u64(b"+1"), None);
    assert_eq!(parse_u64(b""), None);
}
