//! `top` keeps exactly the first rows of the full listing (estimate descending, then key),
//! ties included, while holding only a page of buckets per start and `top` rows.

mod common;

use tidemark_stream::query;

const CONFIG: &str = r#"
[input]
time_field = "ts"
[[metric]]
name = "n"
kind = "count"
key = ["k"]
bucket = "1m"
window = "5m"
[[metric]]
name = "d"
kind = "distinct"
key = ["k"]
item = ["i"]
bucket = "1m"
window = "5m"
precision = 8
"#;

#[test]
fn top_is_the_head_of_the_full_listing() {
    // 700 keys (more than a page of 256 per start); key j gets (j % 23) events a minute over
    // 6 minutes, so many keys tie.
    let mut text = String::from("ts,k,i\n");
    for minute in 0..6u64 {
        for sec in 0..60u64 {
            for j in 0..700u64 {
                if (j * 7 + sec) % 60 < j % 23 {
                    text.push_str(&format!("{},key{j:04},{}\n", minute * 60 + sec, sec % 17));
                }
            }
        }
    }
    let store = common::run_text(CONFIG, &text, "top");
    for metric in ["n", "d"] {
        let all = query::window(&store, metric, 300_000, None, None, None).unwrap();
        assert!(all.rows.len() > 600, "{}", all.rows.len());
        for w in all.rows.windows(2) {
            let ordered = w[0].estimate.value > w[1].estimate.value
                || (w[0].estimate.value == w[1].estimate.value && w[0].key < w[1].key);
            assert!(ordered, "{} then {}", w[0].key, w[1].key);
        }
        for n in [1, 2, 22, 300, all.rows.len(), all.rows.len() + 5] {
            let top = query::window(&store, metric, 300_000, None, None, Some(n)).unwrap();
            assert_eq!(
                top.rows,
                all.rows[..n.min(all.rows.len())],
                "{metric} top {n}"
            );
        }
    }
}
