//! Whatever a line holds — a time anywhere in `u64`, any bytes in any field, lines cut short —
//! a run over it ends with its bad lines counted, and the store it leaves resumes and answers
//! every query. (Before the boundary checks, one time near `u64::MAX` wrote a snapshot that
//! its own reader refused, and every later `run` and `query` on that store failed.)

use proptest::prelude::*;
use tidemark_stream::pipeline::{self, RunOptions};
use tidemark_stream::query;
use tidemark_stream::store::{MemStore, Store};

/// Shared with the `pipeline_lines` fuzz target.
const CONFIG: &str = include_str!("../../../testdata/pipeline/arbitrary-records.toml");

/// A time field: mostly plausible, sometimes anywhere in `u64`, sometimes not a number.
fn time() -> impl Strategy<Value = String> {
    prop_oneof![
        6 => (0u64..3_600_000).prop_map(|t| (1_700_000_000_000 + t).to_string()),
        1 => any::<u64>().prop_map(|t| t.to_string()),
        1 => prop_oneof![
            Just("253402300799999".to_string()),
            Just("253402300800000".to_string()),
            Just("18446744073709551615".to_string()),
            Just("0".to_string()),
            Just("-1".to_string()),
            Just("".to_string()),
        ],
    ]
}

/// A field: short text, or bytes that break CSV and UTF-8.
fn field() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        4 => "[a-c]{1,2}".prop_map(String::into_bytes),
        1 => proptest::collection::vec(any::<u8>(), 0..40),
    ]
}

fn line() -> impl Strategy<Value = Vec<u8>> {
    (time(), field(), field(), 0u8..10).prop_map(|(t, k, i, shape)| {
        let mut l = t.into_bytes();
        l.push(b',');
        l.extend(k);
        if shape > 0 {
            l.push(b',');
            l.extend(i);
        }
        if shape == 9 {
            l.extend(std::iter::repeat_n(b'x', 300)); // past max_line_bytes
        }
        l.push(b'\n');
        l
    })
}

fn run_file(store: &mut MemStore, path: &std::path::Path) -> pipeline::RunReport {
    pipeline::run(
        &tidemark_stream::config::Config::from_toml(CONFIG).unwrap(),
        store,
        RunOptions {
            inputs: vec![path.to_path_buf()],
            skip_bad: true,
            keep_open: true,
            ..RunOptions::default()
        },
        &mut |_| {},
    )
    .expect("a run with skip_bad never fails on its input")
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(96))]
    #[test]
    fn any_records_leave_a_store_that_resumes_and_answers(
        first in proptest::collection::vec(line(), 0..40),
        // The first run may end inside a line (a writer mid-line), short or past the limit.
        tail in proptest::option::of(line()),
        second in proptest::collection::vec(line(), 0..40),
        case in any::<u64>(),
    ) {
        let dir = std::env::temp_dir().join(format!(
            "tidemark-arbitrary-{}-{case:x}",
            std::process::id()
        ));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("in.csv");
        let mut bytes = b"ts,k,i\n".to_vec();
        bytes.extend(first.concat());
        if let Some(mut t) = tail {
            t.pop(); // its newline: the line is unfinished when the first run reads it
            bytes.extend(t);
        }
        std::fs::write(&path, &bytes).unwrap();
        let mut store = MemStore::default();
        let r1 = run_file(&mut store, &path);
        // Appended lines: the same file resumes where it stopped.
        bytes.extend(second.concat());
        std::fs::write(&path, &bytes).unwrap();
        let r2 = run_file(&mut store, &path);
        // A last line still without its newline waits for the run that finds it whole.
        let body = &bytes[b"ts,k,i\n".len()..];
        let whole = body.iter().rposition(|&b| b == b'\n').map_or(0, |i| i + 1);
        prop_assert_eq!(
            r2.records + r2.bad_lines,
            non_empty_lines(&body[..whole]),
            "every non-empty whole line is a record or a bad line, once"
        );
        prop_assert!(r2.records >= r1.records);
        for (metric, window) in [("c", 180_000), ("c@10m", 600_000), ("d", 180_000), ("f", 120_000)] {
            query::window(&store, metric, window, None, None, Some(5))
                .map_err(|e| TestCaseError::fail(format!("query {metric}: {e}")))?;
        }
        prop_assert!(store.meta().unwrap().is_some());
        std::fs::remove_dir_all(&dir).unwrap();
    }
}

/// Lines that hold more than spaces and tabs once their `\n` and one `\r` are off (a
/// field's bytes may hold a newline: a generated line can be two).
fn non_empty_lines(bytes: &[u8]) -> u64 {
    bytes
        .split(|&b| b == b'\n')
        .map(|l| l.strip_suffix(b"\r").unwrap_or(l))
        .filter(|l| !l.iter().all(|&b| b == b' ' || b == b'\t'))
        .count() as u64
}

/// A run that keeps its file open stops before an unfinished last line, however long: found
/// by the `pipeline_lines` fuzz target, where a too-long unfinished line was counted bad and
/// the next run, finding the file grown past it, refused to resume.
#[test]
fn an_unfinished_long_last_line_waits_for_its_newline() {
    let dir = std::env::temp_dir().join(format!("tidemark-unfinished-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("in.csv");
    let mut bytes = b"ts,k,i\n60000,a,b\n60001,a,".to_vec();
    bytes.extend(std::iter::repeat_n(b'x', 300)); // past max_line_bytes, no newline yet
    std::fs::write(&path, &bytes).unwrap();
    let mut store = MemStore::default();
    let r1 = run_file(&mut store, &path);
    assert_eq!(
        (r1.records, r1.bad_lines),
        (1, 0),
        "the unfinished line is not read yet"
    );
    bytes.extend_from_slice(b"\n60002,a,c\n");
    std::fs::write(&path, &bytes).unwrap();
    let r2 = run_file(&mut store, &path);
    assert_eq!(
        (r2.records, r2.bad_lines),
        (2, 1),
        "the long line, whole now, is one bad line; the records around it count once"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}
