//! Plates whose figures are exact (or bounded by a stated tolerance), checked as printed.

mod common;

use common::{json_lines, lab, ok};

#[test]
fn histogram_twenty_matches_the_worked_example() {
    let out = lab(&["reproduce", "histogram-twenty", "--json"]);
    ok(&out);
    let rows = json_lines(&out);
    assert_eq!(rows.len(), 20);
    assert_eq!(rows[19]["total_merges"].as_u64(), Some(12));
    assert_eq!(rows[19]["sizes"].as_str(), Some("4 4 4 2 2 2 1 1"));
}

#[test]
fn filters_generations_shows_where_the_rate_lives() {
    let out = lab(&["reproduce", "filters-generations", "--json"]);
    ok(&out);
    let rows = json_lines(&out);
    assert_eq!(rows.len(), 12);
    // Doublings before keys 3,072 · 2^g (load ¾ of 4,096 · 2^g slots): the generations hold
    // 3,071, then 3,072 · 2^(g−1), and the last 64,000 − 49,151.
    let keys: Vec<u64> = rows[..6]
        .iter()
        .map(|r| r["keys"].as_u64().unwrap())
        .collect();
    assert_eq!(keys, [3_071, 3_072, 6_144, 12_288, 24_576, 14_849]);
    for (step, first_share) in [(1, &rows[0]), (2, &rows[6])] {
        assert_eq!(first_share["step"], step);
        let bits: Vec<u64> = rows[(step as usize - 1) * 6..step as usize * 6]
            .iter()
            .map(|r| r["fingerprint_bits"].as_u64().unwrap())
            .collect();
        let want: Vec<u64> = (0..6).map(|g| 18 + step * g).collect();
        assert_eq!(bits, want);
    }
    // The first generation's share of the rate, from the formula: f_0 / (1 − Π_g (1 − f_g))
    // with f_g = 1 − (1 − 2^−p_g)^n_g over the generations above gives 32.1% at one bit a
    // doubling and 68.0% at two (the design's target figures: 32%, 68%). Over 10^6 queries the
    // share is a proportion of ~36,000 (step 1) or ~17,000 (step 2) hits: σ ≈ 0.25 and 0.36
    // points; allow 2 points (over 5σ).
    let share = |r: &serde_json::Value| r["rate_share_pct"].as_f64().unwrap();
    assert!((share(&rows[0]) - 32.1).abs() < 2.0, "{}", share(&rows[0]));
    assert!((share(&rows[6]) - 68.0).abs() < 2.0, "{}", share(&rows[6]));
}

#[test]
fn a_table_reader_that_stops_early_is_no_failure() {
    // `tidemark-lab reproduce all | head`: the first plate's title meets a closed pipe and
    // the command ends there, quietly, without a panic (or the other plates' minute of work).
    use std::process::{Command, Stdio};
    let mut child = Command::new(env!("CARGO_BIN_EXE_tidemark-lab"))
        .args(["reproduce", "all"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    drop(child.stdout.take());
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(0));
    assert!(
        out.stderr.is_empty(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}
