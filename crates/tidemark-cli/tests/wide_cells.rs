//! Tables with cells of 65,536 characters and more (past the widest width Rust's formatter
//! pads to): an item of a line that long, a key as long as `max_key_bytes` allows. Every
//! command prints them whole, its columns still aligned, exit 0.

mod common;
use common::{dir, ok, s, tidemark};

/// 65,536: the first width the formatter refuses.
const WIDE: usize = 1 << 16;

/// The cell of column `name` in `line` (no cell of these tables holds a space).
fn cell<'a>(header: &str, line: &'a str, name: &str) -> &'a str {
    let i = header
        .split_whitespace()
        .position(|n| n == name)
        .unwrap_or_else(|| panic!("no column {name}"));
    line.split_whitespace().nth(i).unwrap_or("")
}

/// Where column `name` starts in the header, for a left-aligned (text) column.
fn start(header: &str, name: &str) -> usize {
    header
        .find(&format!("  {name}"))
        .map(|i| i + 2)
        .unwrap_or_else(|| panic!("no column {name}"))
}

/// Runs `args` with `stdin`; returns the table's lines, asserting exit 0.
fn table(args: &[&str], stdin: &str) -> Vec<String> {
    let out = tidemark(args, stdin);
    ok(&out);
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(str::to_string)
        .collect()
}

#[test]
fn freq_prints_an_item_of_65536_characters_in_every_kind_of_row() {
    let d = dir("wide-freq");
    let long = "x".repeat(WIDE);
    let file = d.join("l.txt");
    std::fs::write(&file, format!("{long}\n")).unwrap();
    let f = s(&file);
    let asked = format!("{long}y");
    for (args, kind) in [
        (vec!["freq", "--top", "1", f], "top"),
        (vec!["freq", "--heavy", "0.5", f], "heavy"),
        (vec!["freq", "--query", long.as_str(), f], "point"),
        (vec!["freq", "--query", asked.as_str(), f], "point"),
    ] {
        let t = table(&args, "");
        assert_eq!(t.len(), 3, "{kind}: a header, total, one {kind} row");
        let (header, total, row) = (&t[0], &t[1], &t[2]);
        assert_eq!(cell(header, total, "kind"), "total");
        assert_eq!(cell(header, total, "estimate"), "1");
        assert_eq!(cell(header, row, "kind"), kind);
        let item = if args[2] == asked { &asked } else { &long };
        assert_eq!(cell(header, row, "item"), item, "{kind}: the item whole");
        // The wide column starts where the header says.
        assert_eq!(
            row.find(item.as_str()),
            Some(start(header, "item")),
            "{kind}"
        );
        let estimate = if item == &asked { "0" } else { "1" };
        assert_eq!(cell(header, row, "estimate"), estimate, "{kind}");
        assert_eq!(cell(header, row, "method"), "count-min", "{kind}");
    }
}

#[test]
fn query_prints_a_key_of_65536_bytes_whole() {
    let d = dir("wide-query");
    let config = d.join("wide.toml");
    std::fs::write(
        &config,
        "[input]\nformat = \"csv\"\ntime_field = \"ts\"\nmax_key_bytes = 65536\n\n\
         [[metric]]\nname = \"n\"\nkind = \"count\"\nkey = [\"k\"]\nbucket = \"1m\"\n\
         window = \"5m\"\n",
    )
    .unwrap();
    let long = "k".repeat(WIDE);
    let log = d.join("wide.csv");
    std::fs::write(
        &log,
        format!("ts,k\n1700000000,{long}\n1700000001,{long}\n1700000002,a\n"),
    )
    .unwrap();
    let db = d.join("wide.db");
    ok(&tidemark(
        &[
            "run",
            "--quiet",
            "--config",
            s(&config),
            "--db",
            s(&db),
            s(&log),
        ],
        "",
    ));
    let every = ["query", "--db", s(&db), "--metric", "n", "--window", "5m"];
    let t = table(&every, "");
    assert_eq!(t.len(), 3, "a header and two keys");
    // Largest first: the long key's two events, then `a`'s one.
    assert_eq!(cell(&t[0], &t[1], "key"), long);
    assert_eq!(cell(&t[0], &t[1], "estimate"), "2");
    assert_eq!(cell(&t[0], &t[2], "key"), "a");
    assert_eq!(cell(&t[0], &t[2], "estimate"), "1");
    // The column after the wide one starts where the header says, in every row.
    let from = start(&t[0], "from");
    assert_eq!(from, 2 + "metric".len() + 2 + WIDE);
    for row in &t[1..] {
        assert_eq!(&row[from..from + 4], "2023", "{}", &row[..8]);
    }
    // One key, and the top one: the same row.
    for extra in [["--key", long.as_str()], ["--top", "1"]] {
        let mut args = every.to_vec();
        args.extend(extra);
        let t = table(&args, "");
        assert_eq!(t.len(), 2, "{}", extra[0]);
        assert_eq!(cell(&t[0], &t[1], "key"), long);
        assert_eq!(cell(&t[0], &t[1], "estimate"), "2");
        assert_eq!(cell(&t[0], &t[1], "method"), "exact");
    }
}
