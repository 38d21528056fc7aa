//! `tidemark filter` end to end: build, query, info, the refusal of a full filter, and
//! errors that name the file or flag.

mod common;
use common::{dir, json_lines, lines, ok, s, temp, tidemark};

/// `filter build --capacity 1000 --fpr 0.01 --reserve 2 EXTRA… --save FILE --json` over
/// `input`: its row.
fn build_into(file: &std::path::Path, extra: &[&str], input: &str) -> serde_json::Value {
    let mut args = vec!["filter", "build", "--capacity", "1000", "--fpr", "0.01"];
    args.extend_from_slice(extra);
    args.extend_from_slice(&["--save", s(file), "--json"]);
    let out = tidemark(&args, input);
    ok(&out);
    json_lines(&out)[0].clone()
}

/// The names in a directory, sorted (a failed save must leave no temporary file).
fn names_in(d: &std::path::Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(d)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

#[test]
fn build_query_and_info_round_trip_through_a_file() {
    let f = temp("a.tdmk");
    let fs = f.to_str().unwrap();
    // Every line inserted (`--multiset`): the table's growth is exact to the key.
    let out = tidemark(
        &[
            "filter",
            "build",
            "--multiset",
            "--capacity",
            "1000",
            "--fpr",
            "0.01",
            "--reserve",
            "2",
            "--save",
            fs,
            "--json",
        ],
        &lines(0..5_000),
    );
    ok(&out);
    let built = &json_lines(&out)[0];
    assert_eq!(built["keys"], 5_000);
    // 1,000 at 1%: p = ⌈log2(10^5)⌉ + 2 = 19, q = ⌈log2(1333.3)⌉ = 11 at build; 5,000 keys
    // need 8,192 slots (6,144 = ¾·8,192 > 5,000 > ¾·4,096).
    assert_eq!(built["fingerprint_bits"], 19);
    assert_eq!(built["slots"], 8_192);
    assert_eq!(built["life"], 256);
    assert_eq!(built["doublings_left"], 19 - 13 - 1);
    assert_eq!(built["bits"], 8_192 * (19 - 13 + 3));

    let out = tidemark(&["filter", "info", fs, "--json"], "");
    ok(&out);
    // `info` describes the filter; `build` adds what it read.
    let mut described = built.clone();
    let fields = described.as_object_mut().unwrap();
    assert_eq!(fields.remove("lines"), Some(5_000.into()));
    assert_eq!(fields.remove("repeats"), Some(0.into()));
    assert_eq!(json_lines(&out)[0], described);

    // Every inserted line is present; the answer names its key.
    let out = tidemark(&["filter", "query", fs, "--json"], &lines(4_990..5_000));
    ok(&out);
    let rows = json_lines(&out);
    assert_eq!(rows.len(), 10);
    for (i, r) in rows.iter().enumerate() {
        assert_eq!(r["key"], format!("user-{}", 4_990 + i));
        assert_eq!(r["present"], true);
    }

    // --count over absent keys: the false positives stay near the stated rate. 20,000
    // queries at rate f ≈ 0.0095: σ = √(20000·f) ≈ 14; five σ around the mean.
    let fpr = built["fpr"].as_f64().unwrap();
    let out = tidemark(
        &["filter", "query", fs, "--count", "--json"],
        &lines(10_000..30_000),
    );
    ok(&out);
    let r = &json_lines(&out)[0];
    assert_eq!(r["queries"], 20_000);
    let fp = r["found"].as_f64().unwrap();
    let mean = 20_000.0 * fpr;
    assert!(
        (fp - mean).abs() <= 5.0 * mean.sqrt(),
        "{fp} false positives, expected {mean}"
    );
    assert_eq!(r["missing"].as_f64().unwrap() + fp, 20_000.0);
}

#[test]
fn a_full_filter_refuses_with_the_keys_it_took_and_advice() {
    let f = temp("full.tdmk");
    let fs = f.to_str().unwrap();
    // 100 at 1%: p = 14, q = 8; it refuses the key that needs q = 14, ¾·2^13 = 6,144.
    let out = tidemark(
        &[
            "filter",
            "build",
            "--multiset",
            "--capacity",
            "100",
            "--fpr",
            "0.01",
            "--save",
            fs,
        ],
        &lines(0..10_000),
    );
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("<stdin>:6144:"), "{err}");
    assert!(err.contains("took 6143 keys"), "{err}");
    assert!(err.contains("--reserve") && err.contains("--stacked") && err.contains("rebuild"));
    assert!(!f.exists(), "a refused build saves nothing");

    // The same keys fit in a stack, and in a table with enough reserve.
    let out = tidemark(
        &[
            "filter",
            "build",
            "--multiset",
            "--capacity",
            "100",
            "--fpr",
            "0.01",
            "--stacked",
            "--save",
            fs,
            "--json",
        ],
        &lines(0..10_000),
    );
    ok(&out);
    let r = &json_lines(&out)[0];
    assert_eq!(r["keys"], 10_000);
    assert!(r["layers"].as_u64().unwrap() >= 6);
    assert_eq!(r["life"], serde_json::Value::Null);
    let out = tidemark(
        &["filter", "query", fs, "--count", "--json"],
        &lines(0..10_000),
    );
    ok(&out);
    assert_eq!(json_lines(&out)[0]["found"], 10_000);
    let out = tidemark(
        &[
            "filter",
            "build",
            "--capacity",
            "100",
            "--fpr",
            "0.01",
            "--reserve",
            "1",
            "--save",
            fs,
            "--force",
        ],
        &lines(0..10_000),
    );
    ok(&out);
}

#[test]
fn bad_flags_and_files_exit_2_naming_them() {
    let f = temp("bad.tdmk");
    let fs = f.to_str().unwrap();
    let out = tidemark(
        &[
            "filter",
            "build",
            "--capacity",
            "100",
            "--fpr",
            "1.5",
            "--save",
            fs,
        ],
        "",
    );
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--fpr"));
    let out = tidemark(
        &[
            "filter",
            "build",
            "--capacity",
            "0",
            "--fpr",
            "0.1",
            "--save",
            fs,
        ],
        "",
    );
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--capacity"));

    let junk = temp("junk.tdmk");
    std::fs::write(&junk, b"not a filter at all").unwrap();
    let out = tidemark(&["filter", "info", junk.to_str().unwrap()], "");
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("junk.tdmk") && err.contains("TDMK"), "{err}");

    // A flipped byte in a saved filter is caught, not trusted.
    let out = tidemark(
        &[
            "filter",
            "build",
            "--capacity",
            "100",
            "--fpr",
            "0.01",
            "--save",
            fs,
        ],
        &lines(0..50),
    );
    ok(&out);
    let mut bytes = std::fs::read(&f).unwrap();
    let mid = bytes.len() / 2;
    bytes[mid] ^= 0x10;
    std::fs::write(&f, bytes).unwrap();
    let out = tidemark(&["filter", "query", fs], "user-1\n");
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("checksum"));
}

#[test]
fn a_reserve_past_the_hash_names_the_reserve_flag() {
    let f = temp("reserve.tdmk");
    let out = tidemark(
        &[
            "filter",
            "build",
            "--capacity",
            "1000",
            "--fpr",
            "0.01",
            "--reserve",
            "60",
            "--save",
            f.to_str().unwrap(),
        ],
        "",
    );
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("invalid --reserve"));
}

#[test]
fn the_full_filter_message_reads_as_one_sentence() {
    let f = temp("full-sentence.tdmk");
    let out = tidemark(
        &[
            "filter",
            "build",
            "--capacity",
            "100",
            "--fpr",
            "0.01",
            "--save",
            f.to_str().unwrap(),
        ],
        &lines(0..10_000),
    );
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    // 100 at 1%: p = 14, q = 8, a life of 2^6 = 64 times the forecast.
    assert!(
        err.contains("(forecast 100, reserve 0, life 2^(p−q) = 64 times the forecast) and cannot double again"),
        "{err}"
    );
    assert!(!err.contains(") the forecast)"), "{err}");
}

#[test]
fn build_inserts_each_distinct_key_once_unless_multiset() {
    // 20,000 lines of 2,000 distinct keys, each ten times.
    let text: String = (0..20_000)
        .map(|i| {
            let k = i % 2_000;
            format!(
                "10.0.{}.{}
",
                k / 256,
                k % 256
            )
        })
        .collect();
    let f = temp("set.tdmk");
    let fs = f.to_str().unwrap();
    let build = |extra: &[&str]| {
        let mut args = vec![
            "filter",
            "build",
            "--capacity",
            "20000",
            "--fpr",
            "0.01",
            "--save",
            fs,
            "--json",
        ];
        args.extend_from_slice(extra);
        let out = tidemark(&args, &text);
        ok(&out);
        json_lines(&out)[0].clone()
    };
    let set = build(&[]);
    let (keys, repeats) = (
        set["keys"].as_u64().unwrap(),
        set["repeats"].as_u64().unwrap(),
    );
    assert_eq!(set["lines"], 20_000);
    assert_eq!(
        keys + repeats,
        20_000,
        "a line is inserted or answered already"
    );
    // Each distinct key once, less those whose fingerprint one inserted already holds: their
    // number is a sum of 2,000 chances below the 1% target (mean at most 20); 5σ above it is 42.
    assert!(
        (2_000 - 42..=2_000).contains(&keys),
        "{keys} keys for 2,000 distinct"
    );
    // Every key is answered present.
    let out = tidemark(&["filter", "query", fs, "--count", "--json"], &text);
    ok(&out);
    assert_eq!(json_lines(&out)[0]["missing"], 0);
    // Over the set's file: replacing it takes --force.
    let multi = build(&["--multiset", "--force"]);
    assert_eq!(multi["keys"], 20_000);
    assert_eq!(multi["repeats"], 0);
}

#[test]
fn add_saves_the_filter_one_build_of_every_line_would_have_saved() {
    let d = dir("filter-add");
    let new_keys = d.join("new-keys.txt");
    std::fs::write(&new_keys, lines(1_000..3_000)).unwrap();
    for (design, extra) in [
        ("quotient", &["--reserve", "2"][..]),
        ("stacked", &["--stacked"]),
    ] {
        // The exact model: one build over every line.
        let whole = d.join(format!("{design}-whole.qf"));
        let all = build_into(&whole, extra, &lines(0..3_000));
        // A build of the first lines, then an add of the rest from a file.
        let part = d.join(format!("{design}-part.qf"));
        build_into(&part, extra, &lines(0..1_000));
        let out = tidemark(&["filter", "add", s(&part), s(&new_keys), "--json"], "");
        ok(&out);
        let added = &json_lines(&out)[0];
        assert_eq!(added["filter"], design);
        assert_eq!(added["lines"], 2_000);
        assert_eq!(added["keys"], all["keys"], "{design}");
        assert_eq!(
            std::fs::read(&part).unwrap(),
            std::fs::read(&whole).unwrap(),
            "{design}: the same filter, byte for byte"
        );
        // Old keys and new are found; the add leaves nothing else behind.
        let out = tidemark(
            &["filter", "query", s(&part), "--count", "--json"],
            &lines(0..3_000),
        );
        ok(&out);
        assert_eq!(json_lines(&out)[0]["found"], 3_000, "{design}");
        // A key already in is not inserted again; --multiset inserts it.
        let out = tidemark(&["filter", "add", s(&part), "--json"], "user-5\n");
        ok(&out);
        let again = &json_lines(&out)[0];
        assert_eq!(
            (again["repeats"].clone(), again["keys"].clone()),
            (1.into(), all["keys"].clone())
        );
        let out = tidemark(
            &["filter", "add", s(&part), "--multiset", "--json"],
            "user-5\n",
        );
        ok(&out);
        let keys = all["keys"].as_u64().unwrap();
        assert_eq!(json_lines(&out)[0]["keys"], keys + 1, "{design}");
    }
    let mut want: Vec<String> = ["new-keys.txt"].map(String::from).to_vec();
    for design in ["quotient", "stacked"] {
        want.push(format!("{design}-part.qf"));
        want.push(format!("{design}-whole.qf"));
    }
    want.sort();
    assert_eq!(names_in(&d), want, "no temporary file is left");
}

#[test]
fn add_to_a_damaged_missing_or_foreign_file_is_a_clean_error_that_changes_nothing() {
    let d = dir("filter-add-damaged");
    let f = d.join("seen.qf");
    build_into(&f, &[], &lines(0..100));
    let good = std::fs::read(&f).unwrap();
    let sketch = d.join("users.tdmk");
    ok(&tidemark(
        &["distinct", "--save", s(&sketch)],
        &lines(0..10),
    ));
    let mut flipped = good.clone();
    flipped[good.len() / 2] ^= 0x10;
    let cases: [(&str, Option<Vec<u8>>, &str); 4] = [
        ("flipped.qf", Some(flipped), "checksum"),
        ("cut.qf", Some(good[..good.len() - 3].to_vec()), "truncated"),
        ("users.tdmk", None, "not a filter"),
        ("missing.qf", None, "No such file"),
    ];
    for (name, bytes, words) in cases {
        let path = d.join(name);
        if let Some(b) = &bytes {
            std::fs::write(&path, b).unwrap();
        }
        let before = std::fs::read(&path).ok();
        let out = tidemark(&["filter", "add", s(&path)], &lines(100..200));
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{name}: {err}");
        assert!(
            err.contains(s(&path)) && err.contains(words),
            "{name}: {err}"
        );
        assert_eq!(std::fs::read(&path).ok(), before, "{name} is as it was");
    }
    let mut want = vec!["cut.qf", "flipped.qf", "seen.qf", "users.tdmk"];
    want.sort();
    assert_eq!(names_in(&d), want, "no temporary file, no file created");
}

#[test]
fn add_to_a_full_filter_refuses_and_leaves_the_file_as_it_was() {
    let d = dir("filter-add-full");
    let f = d.join("full.qf");
    // 100 at 1%: p = 14, q = 8; it takes 6,143 keys and refuses the next.
    let out = tidemark(
        &[
            "filter",
            "build",
            "--multiset",
            "--capacity",
            "100",
            "--fpr",
            "0.01",
            "--save",
            s(&f),
        ],
        &lines(0..6_000),
    );
    ok(&out);
    let before = std::fs::read(&f).unwrap();
    let out = tidemark(
        &["filter", "add", "--multiset", s(&f)],
        &lines(6_000..7_000),
    );
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("<stdin>:144:"), "{err}");
    assert!(
        err.contains("the filter is full: it holds 6143 keys"),
        "{err}"
    );
    assert!(
        err.contains("nothing was saved") && err.contains("--stacked"),
        "{err}"
    );
    assert_eq!(std::fs::read(&f).unwrap(), before);
    assert_eq!(names_in(&d), ["full.qf"]);
}
