//! Documentation kept true by tests: every `Config` setting is in the README's configuration table,
//! and every crate and JVM module is in ARCHITECTURE.md's code map.
use std::path::Path;

fn repo_file(relative: &str) -> String {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    std::fs::read_to_string(root.join(relative)).unwrap_or_else(|e| panic!("{relative}: {e}"))
}

/// Field names of `Config`, read from its Debug output (`Config { listen: None, ... }`).
fn config_fields() -> Vec<String> {
    let debug = format!("{:?}", fabric::Config::default());
    let inner = debug.strip_prefix("Config {").and_then(|s| s.strip_suffix('}')).expect("Config's Debug form");
    let mut fields = Vec::new();
    let mut depth = 0i32;
    let mut current = String::new();
    for c in inner.chars() {
        match c {
            '{' | '(' | '[' => depth += 1,
            '}' | ')' | ']' => depth -= 1,
            ':' if depth == 0 && !current.trim().is_empty() && !current.contains(':') => {
                fields.push(current.trim().trim_start_matches(',').trim().to_string());
                current.clear();
                continue;
            }
            ',' if depth == 0 => {
                current.clear();
                continue;
            }
            _ => {}
        }
        current.push(c);
    }
    fields
}

#[test]
fn every_setting_is_documented_in_the_readme() {
    let readme = repo_file("README.md");
    let fields = config_fields();
    assert!(fields.len() >= 10, "parsed {fields:?}");
    for field in fields {
        assert!(readme.contains(&format!("| `{field}` |")), "README's configuration table lacks `{field}`");
    }
}

#[test]
fn every_crate_and_module_is_in_the_code_map() {
    let map = repo_file("ARCHITECTURE.md");
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    for tree in ["native", "jvm"] {
        for entry in std::fs::read_dir(root.join(tree)).unwrap() {
            let entry = entry.unwrap();
            let name = entry.file_name().to_string_lossy().into_owned();
            let is_part = entry.path().join("Cargo.toml").exists() || entry.path().join("pom.xml").exists();
            if entry.path().is_dir() && is_part && name != "target" {
                assert!(map.contains(&format!("### `{tree}/{name}`")), "ARCHITECTURE.md has no heading for {tree}/{name}");
            }
        }
    }
}

#[test]
fn every_file_of_the_fabric_node_is_in_the_code_map() {
    let map = repo_file("ARCHITECTURE.md");
    let node = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/node");
    let mut files = 0;
    for entry in std::fs::read_dir(node).unwrap() {
        let name = entry.unwrap().file_name().to_string_lossy().into_owned();
        assert!(map.contains(&format!("`node/{name}`")), "ARCHITECTURE.md's code map does not name node/{name}");
        files += 1;
    }
    assert!(files >= 8, "the node is split by responsibility ({files} files)");
}
