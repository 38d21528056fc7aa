//! What a new user needs from the README before any example: how to get `tidemark` on the
//! PATH, and how long the test command takes; and that the Python tests say why they skip.

use std::path::Path;

fn repo_file(name: &str) -> String {
    let p = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .join(name);
    std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

#[test]
fn the_readme_says_how_to_install_the_command_and_how_long_the_tests_take() {
    let readme = repo_file("README.md");
    // The install line names this crate's real path.
    let install = "cargo install --locked --path crates/tidemark-cli";
    assert!(readme.contains(install), "README lacks `{install}`");
    assert!(Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("Cargo.toml")
        .exists());
    // Before the first example that calls `tidemark`.
    let first_example = readme.find("\ntidemark ").expect("an example");
    assert!(readme.find(install).is_some_and(|i| i < first_example));
    // The test command's duration, stated beside it.
    let head = &readme[..readme.find("## ").unwrap_or(readme.len())];
    assert!(
        head.contains("minutes on 2 cores"),
        "the README's opening does not say how long the tests take"
    );
}

#[test]
fn the_python_tests_say_why_they_skip() {
    let script = repo_file("scripts/test-python");
    let runs: Vec<&str> = script.lines().filter(|l| l.contains("-m pytest")).collect();
    assert!(!runs.is_empty());
    for r in runs {
        assert!(
            r.contains(" -rs"),
            "pytest without -rs hides skip reasons: {r}"
        );
    }
}
