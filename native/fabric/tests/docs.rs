//! Documentation kept true by tests: docs/configuration.md's fabric table is generated from
//! `Config`'s declarations, and every crate and JVM module is in ARCHITECTURE.md's code map.
use std::path::Path;

fn repo_file(relative: &str) -> String {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    std::fs::read_to_string(root.join(relative)).unwrap_or_else(|e| panic!("{relative}: {e}"))
}

const BEGIN: &str = "<!-- generated from fabric::Config::SETTINGS: do not edit by hand -->";
const END: &str = "<!-- end of generated section -->";

/// Java's name of a setting: `FabricConfig.Builder`'s method (camelCase).
fn java_name(name: &str) -> String {
    let mut out = String::new();
    let mut upper = false;
    for c in name.chars() {
        if c == '_' {
            upper = true;
        } else {
            out.push(if upper { c.to_ascii_uppercase() } else { c });
            upper = false;
        }
    }
    out
}

/// A default as the table shows it: sizes also in KiB/MiB/GiB, empty text as "(none)".
fn shown(name: &str, text: &str) -> String {
    if text.is_empty() {
        return "(none)".into();
    }
    if let (true, Ok(bytes)) = (name.contains("_bytes"), text.parse::<u64>()) {
        for (unit, shift) in [("GiB", 30), ("MiB", 20), ("KiB", 10)] {
            if bytes >= 1 << shift && bytes % (1 << shift) == 0 {
                return format!("`{text}` ({} {unit})", bytes >> shift);
            }
        }
    }
    format!("`{text}`")
}

/// The table docs/configuration.md shows for the fabric, from `Config::SETTINGS`.
fn fabric_table() -> String {
    let defaults = fabric::Config::default();
    let mut out = String::from("| setting (Rust) | Java `FabricConfig.Builder` | default | meaning |\n|---|---|---|---|\n");
    for setting in fabric::Config::SETTINGS {
        let java = match setting.name {
            "handler_mode" => "(always `pull`)".to_string(),
            name => format!("`{}`", java_name(name)),
        };
        let default = shown(setting.name, &defaults.value_text(setting.name).unwrap());
        let meaning = setting.meaning().replace('|', "\\|");
        out.push_str(&format!("| `{}` | {java} | {default} | {meaning} |\n", setting.name));
    }
    out
}

/// docs/configuration.md's fabric section is generated from `Config`'s declarations (doc comment
/// and default of each field). To regenerate after changing a setting:
/// `SLIPSTREAM_BLESS=1 cargo test -p fabric --test docs`.
#[test]
fn the_configuration_document_shows_every_setting_as_declared() {
    let generated = fabric_table();
    assert!(fabric::Config::SETTINGS.len() >= 20, "{generated}");
    for name in ["pool_cap_bytes", "reassembly_timeout", "net_devices"] {
        assert!(generated.contains(&format!("| `{name}` |")), "{name} missing from:\n{generated}");
    }
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/configuration.md");
    let doc = std::fs::read_to_string(&path).unwrap();
    let start = doc.find(BEGIN).map(|i| i + BEGIN.len()).expect("docs/configuration.md has no generated fabric section");
    let end = doc[start..].find(END).map(|i| start + i).expect("the generated section has no end marker");
    if std::env::var_os("SLIPSTREAM_BLESS").is_some() {
        std::fs::write(&path, format!("{}\n\n{}\n\n{}", &doc[..start], generated.trim_end(), &doc[end..])).unwrap();
        return;
    }
    assert!(
        doc[start..end].trim() == generated.trim(),
        "docs/configuration.md disagrees with fabric::Config's declarations; regenerate with SLIPSTREAM_BLESS=1:\n{generated}"
    );
}

#[test]
fn the_readme_points_to_the_generated_configuration() {
    let readme = repo_file("README.md");
    assert!(readme.contains("docs/configuration.md"), "README.md does not link the configuration document");
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
