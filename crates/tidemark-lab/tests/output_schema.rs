//! Every JSON line every plate prints, against the one schema of docs/output.md that the
//! `tidemark` binary's lines follow: each field is defined there, with the type it has; no
//! field is null; an estimating row carries its whole bracket.

mod common;

use std::collections::BTreeMap;

use common::{lab, ok, repo};
use serde_json::Value;

/// The schema: field → type, from every table of docs/output.md (`| \`name\` | type | …`).
fn schema() -> BTreeMap<String, String> {
    let doc = std::fs::read_to_string(repo().join("docs/output.md")).unwrap();
    let mut fields = BTreeMap::new();
    for line in doc.lines() {
        let cells: Vec<&str> = line.split('|').map(str::trim).collect();
        let [_, name, ty, ..] = cells[..] else {
            continue;
        };
        let Some(name) = name.strip_prefix('`').and_then(|n| n.strip_suffix('`')) else {
            continue;
        };
        let old = fields.insert(name.to_string(), ty.to_string());
        assert!(
            old.is_none_or(|o| o == ty),
            "docs/output.md gives {name} two types"
        );
    }
    assert!(fields.len() > 100, "{} fields read", fields.len());
    fields
}

/// Checks one JSON object against the schema.
fn check(obj: &Value, schema: &BTreeMap<String, String>) {
    let Value::Object(map) = obj else {
        panic!("a line that is not an object: {obj}")
    };
    for (k, v) in map {
        let ty = schema
            .get(k)
            .unwrap_or_else(|| panic!("field {k:?} is not in docs/output.md: {obj}"));
        let fits = match ty.as_str() {
            "string" | "time" => v.is_string(),
            "integer" => v.is_u64() || v.is_i64(),
            "number" => v.is_number(),
            "boolean" => v.is_boolean(),
            "array" => v.is_array(),
            other => panic!("docs/output.md: unknown type {other:?} of {k}"),
        };
        assert!(fits, "{k} is {v}, not a {ty}: {obj}");
        if let Value::Array(items) = v {
            for item in items.iter().filter(|i| i.is_object()) {
                check(item, schema);
            }
        }
    }
    let has = |k: &str| map.contains_key(k);
    if has("estimate") || has("rank") {
        for k in ["low", "high", "confidence", "method"] {
            assert!(has(k), "an estimating row without {k}: {obj}");
        }
    }
    if has("low") || has("high") {
        assert!(
            has("estimate") || has("rank"),
            "a bracket of nothing: {obj}"
        );
    }
}

#[test]
fn every_json_line_of_every_plate_fits_the_one_schema() {
    let schema = schema();
    // The accuracy sweeps at a few trials: their fields, not their figures, are what is
    // checked here.
    let out = lab(&[
        "reproduce",
        "all",
        "--json",
        "--trials",
        "4",
        "--max-n",
        "100000",
    ]);
    ok(&out);
    let text = String::from_utf8(out.stdout).unwrap();
    let mut printed = 0;
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        let v: Value =
            serde_json::from_str(line).unwrap_or_else(|e| panic!("not a JSON line ({e}): {line}"));
        check(&v, &schema);
        printed += 1;
    }
    assert!(printed > 200, "{printed} lines checked");
}
