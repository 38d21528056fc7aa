//! Every reader of a saved summary (`filter query`/`info`, `distinct --merge`, `freq --join`)
//! against files that are not summaries: devices that never end, FIFOs that block, folders,
//! a gigabyte of zeros, text, cut and padded sketches, headers that lie about their length.
//! Each must end at once with exit code 2 and a message that names the file; none may read
//! the body before the header has been checked against the file's size.

mod common;
use common::{lines, ok, temp, tidemark};

use std::path::Path;
use std::process::Output;

/// The commands that load a saved file, each with the file as its argument.
fn loaders(file: &str) -> Vec<(Vec<&str>, &'static str)> {
    vec![
        (vec!["filter", "info", file], ""),
        (vec!["filter", "query", file], "user-1\n"),
        (vec!["distinct", "--merge", file], ""),
        (vec!["freq", "--join", file], "a\n"),
    ]
}

/// Asserts exit code 2, nothing on stdout, and each needle in stderr.
fn refused(out: &Output, needles: &[&str], what: &str) {
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{what}: {err}");
    assert!(
        out.stdout.is_empty(),
        "{what}: printed before refusing: {}",
        String::from_utf8_lossy(&out.stdout)
    );
    for n in needles {
        assert!(err.contains(n), "{what}: expected {n:?} in {err}");
    }
    assert!(!err.contains("panicked"), "{what}: {err}");
}

/// A hand-made envelope header: family, declared parameter and payload lengths, and then
/// `body` bytes (the checksum is not computed: the loader must refuse before it looks).
fn envelope(version: u8, family: u8, params: u32, payload: u64, body: usize) -> Vec<u8> {
    let mut b = b"TDMK".to_vec();
    b.extend_from_slice(&[version, family, 0, 1]);
    b.extend_from_slice(&0u64.to_le_bytes());
    b.extend_from_slice(&params.to_le_bytes());
    b.extend_from_slice(&payload.to_le_bytes());
    b.resize(b.len() + body, 0);
    b
}

#[test]
fn dev_zero_is_refused_before_it_is_read() {
    for (args, stdin) in loaders("/dev/zero") {
        let out = tidemark(&args, stdin);
        refused(&out, &["/dev/zero", "character device"], &args.join(" "));
    }
}

#[test]
fn a_fifo_is_refused_without_blocking_on_open() {
    let fifo = temp("pipe.tdmk");
    let _ = std::fs::remove_file(&fifo);
    let made = std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .expect("mkfifo runs");
    assert!(made.success());
    // Nobody ever writes to the FIFO: an open() without O_NONBLOCK would wait forever.
    for (args, stdin) in loaders(fifo.to_str().unwrap()) {
        let out = tidemark(&args, stdin);
        refused(&out, &["pipe.tdmk", "FIFO"], &args.join(" "));
    }
    std::fs::remove_file(&fifo).unwrap();
}

#[test]
fn a_directory_is_refused() {
    let dir = temp("a-folder.tdmk");
    std::fs::create_dir_all(&dir).unwrap();
    for (args, stdin) in loaders(dir.to_str().unwrap()) {
        let out = tidemark(&args, stdin);
        refused(&out, &["a-folder.tdmk", "directory"], &args.join(" "));
    }
}

#[test]
fn a_gigabyte_of_zeros_is_refused_from_its_first_bytes() {
    let zeros = temp("zeros.bin");
    // Sparse: a gibibyte of length costs no disk, and reading it all would cost a second or
    // more and a gibibyte of memory. The magic alone decides.
    std::fs::File::create(&zeros)
        .unwrap()
        .set_len(1 << 30)
        .unwrap();
    for (args, stdin) in loaders(zeros.to_str().unwrap()) {
        let out = tidemark(&args, stdin);
        refused(
            &out,
            &["zeros.bin is not a tidemark sketch", "TDMK"],
            &args.join(" "),
        );
    }
    std::fs::remove_file(&zeros).unwrap();
}

#[test]
fn text_gets_a_sentence_not_the_decoders_field_dump() {
    let text = temp("x.txt");
    std::fs::write(&text, "u023 hello\n").unwrap();
    let out = tidemark(&["filter", "info", text.to_str().unwrap()], "");
    refused(
        &out,
        &["x.txt is not a tidemark sketch (it does not start with TDMK)"],
        "filter info",
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!err.contains("[117"), "{err}");
    // distinct --merge also reads Redis values, and says so.
    let out = tidemark(&["distinct", "--merge", text.to_str().unwrap()], "");
    refused(&out, &["x.txt", "TDMK", "HYLL"], "distinct --merge");
    // Empty and cut-short files say what they are.
    let empty = temp("empty.tdmk");
    std::fs::write(&empty, b"").unwrap();
    for (args, stdin) in loaders(empty.to_str().unwrap()) {
        refused(&tidemark(&args, stdin), &["empty.tdmk is empty"], "empty");
    }
    let cut = temp("cut.tdmk");
    std::fs::write(&cut, b"TDM").unwrap();
    for (args, stdin) in loaders(cut.to_str().unwrap()) {
        refused(&tidemark(&args, stdin), &["cut.tdmk is truncated"], "cut");
    }
}

#[test]
fn a_header_that_lies_about_its_length_is_refused_before_the_body_is_read() {
    let f = temp("liar.tdmk");
    // Family 48 (quotient filter), 16 bytes on disk after the header, 2^40 declared.
    std::fs::write(&f, envelope(1, 48, 3, 1 << 40, 16)).unwrap();
    let out = tidemark(&["filter", "info", f.to_str().unwrap()], "");
    refused(
        &out,
        &[
            "liar.tdmk is truncated",
            "declares 1099511627815 bytes",
            "has 44",
        ],
        "declared > size",
    );
    // A length that overflows the envelope is a damaged header, not an allocation.
    std::fs::write(&f, envelope(1, 48, 3, u64::MAX - 8, 16)).unwrap();
    let out = tidemark(&["filter", "info", f.to_str().unwrap()], "");
    refused(&out, &["liar.tdmk has a damaged header"], "overflow");
    // Bytes after the declared end.
    std::fs::write(&f, envelope(1, 48, 0, 0, 8 + 5)).unwrap();
    let out = tidemark(&["filter", "info", f.to_str().unwrap()], "");
    refused(&out, &["liar.tdmk has 5 bytes after the 36"], "trailing");
    // A newer format version, and a family byte no version wrote.
    std::fs::write(&f, envelope(2, 48, 0, 0, 8)).unwrap();
    let out = tidemark(&["filter", "info", f.to_str().unwrap()], "");
    refused(
        &out,
        &["liar.tdmk was written in format version 2"],
        "version",
    );
    std::fs::write(&f, envelope(1, 200, 0, 0, 8)).unwrap();
    let out = tidemark(&["filter", "info", f.to_str().unwrap()], "");
    refused(&out, &["liar.tdmk", "byte 5 is 200"], "family");
}

#[test]
fn a_summary_of_another_family_is_named_with_its_article() {
    let f = temp("hist.tdmk");
    // Family 1, the exponential histogram: refused by its family before its checksum.
    std::fs::write(&f, envelope(1, 1, 0, 0, 8)).unwrap();
    let out = tidemark(&["filter", "info", f.to_str().unwrap()], "");
    refused(
        &out,
        &["hist.tdmk holds an exponential histogram summary, not a filter"],
        "filter info",
    );
    let out = tidemark(&["freq", "--join", f.to_str().unwrap()], "a\n");
    refused(
        &out,
        &["holds an exponential histogram summary, not a Count-Min sketch"],
        "freq --join",
    );
    let out = tidemark(&["distinct", "--merge", f.to_str().unwrap()], "");
    refused(
        &out,
        &["holds an exponential histogram summary, not a HyperLogLog or ExaLogLog sketch"],
        "distinct --merge",
    );
    // And a real HyperLogLog given to the filter reader.
    let h = temp("h.tdmk");
    ok(&tidemark(
        &["distinct", "--save", h.to_str().unwrap()],
        &lines(0..10),
    ));
    let out = tidemark(&["filter", "info", h.to_str().unwrap()], "");
    refused(
        &out,
        &["h.tdmk holds a HyperLogLog summary, not a filter"],
        "hll",
    );
}

#[test]
fn an_oversized_redis_value_is_refused_by_its_size() {
    let f = temp("big.hyll");
    let mut b = b"HYLL".to_vec();
    b.resize(40_000, 0);
    std::fs::write(&f, &b).unwrap();
    let out = tidemark(&["distinct", "--merge", f.to_str().unwrap()], "");
    refused(&out, &["big.hyll", "40000 bytes", "at most 32784"], "hyll");
}

#[test]
fn a_missing_file_names_it() {
    let missing = Path::new("/nonexistent/dir/none.tdmk").to_str().unwrap();
    for (args, stdin) in loaders(missing) {
        refused(&tidemark(&args, stdin), &["none.tdmk"], &args.join(" "));
    }
}

#[test]
fn a_filter_at_the_documented_maximum_capacity_is_refused_with_its_size() {
    // 2^38 keys at 1%: 2^39 slots of 9 bits, 618,475,290,632 bytes. Refused with the size
    // (up front where the machine's memory is known, else by the allocator), never aborted.
    let f = temp("max.tdmk");
    let out = tidemark(
        &[
            "filter",
            "build",
            "--capacity",
            "274877906944",
            "--fpr",
            "0.01",
            "--save",
            f.to_str().unwrap(),
        ],
        "",
    );
    refused(
        &out,
        &[
            "--capacity",
            "cannot allocate 618475290632 bytes for a filter of capacity 274877906944",
        ],
        "filter build at the maximum",
    );
    assert!(!f.exists());
    // One past the maximum is a domain error, as before.
    let out = tidemark(
        &[
            "filter",
            "build",
            "--capacity",
            "274877906945",
            "--fpr",
            "0.01",
            "--save",
            f.to_str().unwrap(),
        ],
        "",
    );
    refused(&out, &["--capacity", "2^38"], "past the maximum");
}

#[test]
fn a_table_the_system_refuses_exits_2_with_its_size() {
    // Under a 1 GB address-space limit, 10^9 keys at 1% (2,415,919,112 bytes) passes the
    // check against the machine's memory but the allocator refuses it: exit 2, not an abort.
    let f = temp("limited.tdmk");
    let out = std::process::Command::new("sh")
        .arg("-c")
        .arg("ulimit -v 1000000 && exec \"$0\" \"$@\" </dev/null")
        .arg(env!("CARGO_BIN_EXE_tidemark"))
        .args([
            "filter",
            "build",
            "--capacity",
            "1000000000",
            "--fpr",
            "0.01",
            "--save",
            f.to_str().unwrap(),
        ])
        .output()
        .expect("sh runs");
    refused(
        &out,
        &[
            "--capacity",
            "cannot allocate 2415919112 bytes for a filter of capacity 1000000000",
            "refused",
        ],
        "filter build under ulimit -v",
    );
    assert!(!f.exists());
    // A stack says what helps a stack.
    let out = std::process::Command::new("sh")
        .arg("-c")
        .arg("ulimit -v 1000000 && exec \"$0\" \"$@\" </dev/null")
        .arg(env!("CARGO_BIN_EXE_tidemark"))
        .args([
            "filter",
            "build",
            "--capacity",
            "1000000000",
            "--fpr",
            "0.01",
            "--stacked",
            "--save",
            f.to_str().unwrap(),
        ])
        .output()
        .expect("sh runs");
    refused(&out, &["cannot allocate", "first layer"], "stacked");
}

#[test]
fn a_filter_that_fits_but_cannot_be_encoded_exits_2_and_saves_nothing() {
    // 2.5·10^8 keys at 1%: 2^29 slots of 9 bits, a 604 MB table. Under a 1 GB address-space
    // limit the table fits, its encoding (as large again) does not: exit 2, not an abort.
    let f = temp("unencodable.tdmk");
    let out = std::process::Command::new("sh")
        .arg("-c")
        .arg("ulimit -v 1000000 && exec \"$0\" \"$@\" </dev/null")
        .arg(env!("CARGO_BIN_EXE_tidemark"))
        .args([
            "filter",
            "build",
            "--capacity",
            "250000000",
            "--fpr",
            "0.01",
            "--save",
            f.to_str().unwrap(),
        ])
        .output()
        .expect("sh runs");
    refused(
        &out,
        &[
            "cannot allocate memory to encode the filter of capacity 250000000",
            "nothing was saved",
        ],
        "encode under ulimit -v",
    );
    assert!(!f.exists());
}
