//! `tidemark config`: the reference is itself a config `--check` accepts, every example
//! passes, and a wrong key is named.

mod common;
use common::tidemark;

#[test]
fn the_reference_and_the_examples_check_and_a_wrong_key_is_named() {
    let dir = std::env::temp_dir().join(format!("tidemark-config-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let out = tidemark(&["config"], "");
    assert!(out.status.success());
    let reference = String::from_utf8(out.stdout).unwrap();
    assert!(reference.contains("max_memory") && reference.contains("allowed_lateness"));
    let file = dir.join("reference.toml");
    std::fs::write(&file, &reference).unwrap();
    let mut files = vec![file];
    let examples = concat!(env!("CARGO_MANIFEST_DIR"), "/../../examples");
    for e in std::fs::read_dir(examples).unwrap() {
        let p = e.unwrap().path();
        if p.extension().is_some_and(|x| x == "toml") {
            files.push(p);
        }
    }
    assert!(
        files.len() >= 4,
        "the reference and the examples: {files:?}"
    );
    for f in &files {
        let out = tidemark(&["config", "--check", f.to_str().unwrap()], "");
        let said = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success() && said.contains("a valid config"),
            "{f:?}: {said}"
        );
    }
    let bad = dir.join("bad.toml");
    std::fs::write(
        &bad,
        reference.replace("window = \"5m\"", "window = \"90s\""),
    )
    .unwrap();
    let out = tidemark(&["config", "--check", bad.to_str().unwrap()], "");
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("metric[0].window") && err.contains("bad.toml"),
        "{err}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}
