//! A row's key in the store file, as bytes: a table's rows are contiguous and ordered by
//! `(start, key)` when keys compare as bytes.
//!
//! ```text
//! u8 n  the table's name length     name  n bytes     u64 BE  start     key  the rest
//! ```
//!
//! Why bytes and not redb's tuple `(&str, u64, &[u8])`: a tuple compares field by field,
//! decoding each field's length at every step of every B-tree search, and the comparisons were
//! a tenth of a pipeline run's instructions; bytes compare with one `memcmp`. The start is
//! big-endian so that byte order is numeric order.

use super::StoreError;

/// The key of `(table, start, key)`.
pub fn row_key(table: &str, start: u64, key: &[u8]) -> Result<Vec<u8>, StoreError> {
    let n = u8::try_from(table.len()).map_err(|_| StoreError::TableName {
        name: table.chars().take(40).collect(),
        len: table.len(),
    })?;
    let mut k = Vec::with_capacity(1 + table.len() + 8 + key.len());
    k.push(n);
    k.extend_from_slice(table.as_bytes());
    k.extend_from_slice(&start.to_be_bytes());
    k.extend_from_slice(key);
    Ok(k)
}

/// The start and key of a row of `table` read back from a range over that table.
pub fn split_row_key<'k>(table: &str, k: &'k [u8]) -> Result<(u64, &'k [u8]), StoreError> {
    let at = 1 + table.len();
    match (k.first(), k.get(1..at), k.get(at..at + 8)) {
        (Some(&n), Some(name), Some(start))
            if usize::from(n) == table.len() && name == table.as_bytes() =>
        {
            let start = u64::from_be_bytes(start.try_into().unwrap_or_default());
            Ok((start, &k[at + 8..]))
        }
        _ => Err(StoreError::damaged(format!(
            "a row of table {table:?} has the key {:x?}, not one of that table",
            &k[..k.len().min(48)]
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use proptest::collection::vec;
    use proptest::prelude::any;
    use proptest::test_runner::TestCaseError;

    /// A store error as a proptest failure, so that tests use `?`.
    fn failed(e: StoreError) -> TestCaseError {
        TestCaseError::fail(e.to_string())
    }

    proptest::proptest! {
        /// Byte order of keys is `(table, start, key)` order within a table, and a key
        /// splits back into its start and key.
        #[test]
        fn byte_order_is_start_then_key_order(
            table in "[a-z~#/@]{0,12}",
            a in (any::<u64>(), vec(any::<u8>(), 0..6)),
            b in (any::<u64>(), vec(any::<u8>(), 0..6)),
        ) {
            let ka = row_key(&table, a.0, &a.1).map_err(failed)?;
            let kb = row_key(&table, b.0, &b.1).map_err(failed)?;
            proptest::prop_assert_eq!(ka.cmp(&kb), (a.0, &a.1).cmp(&(b.0, &b.1)));
            let (start, key) = split_row_key(&table, &ka).map_err(failed)?;
            proptest::prop_assert_eq!((start, key), (a.0, &a.1[..]));
        }

        /// Two tables' rows never interleave: every row of one sorts before every row of
        /// the other, or after.
        #[test]
        fn tables_do_not_interleave(
            t in "[a-z]{0,6}",
            u in "[a-z]{0,6}",
            rows in vec((any::<bool>(), any::<u64>(), vec(any::<u8>(), 0..4)), 0..20),
        ) {
            proptest::prop_assume!(t != u);
            let mut keys: Vec<(Vec<u8>, bool)> = rows
                .iter()
                .map(|(first, s, k)| {
                    let table = if *first { &t } else { &u };
                    Ok((row_key(table, *s, k)?, *first))
                })
                .collect::<Result<_, StoreError>>()
                .map_err(failed)?;
            keys.sort();
            let changes = keys.windows(2).filter(|w| w[0].1 != w[1].1).count();
            proptest::prop_assert!(changes <= 1);
        }
    }

    #[test]
    fn a_key_of_another_table_or_cut_short_is_damage() -> Result<(), StoreError> {
        let k = row_key("hits", 7, b"u1")?;
        assert!(split_row_key("hitz", &k).is_err());
        assert!(split_row_key("hit", &k).is_err());
        assert!(split_row_key("hits", &k[..9]).is_err());
        assert_eq!(split_row_key("hits", &k[..13])?, (7, &b""[..]));
        assert!(row_key(&"x".repeat(256), 0, b"").is_err());
        Ok(())
    }
}
