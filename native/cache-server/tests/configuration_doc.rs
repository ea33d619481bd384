//! `docs/configuration.md`'s section on the server's flags is generated from the one place they
//! are declared, `USAGE` in `src/flags.rs` (printed by `slipstream-cache --help`, and checked
//! against the parser by a unit test): this test fails when the document and the code disagree.
//!
//! To regenerate after changing a flag: `SLIPSTREAM_BLESS=1 cargo test -p cache-server --test configuration_doc`.

use std::path::Path;
use std::process::Command;

const BEGIN: &str = "<!-- generated from `slipstream-cache --help`: do not edit by hand -->";
const END: &str = "<!-- end of generated section -->";
/// Column where `--help` starts a flag's meaning (flag text is padded to it).
const MEANING_COLUMN: usize = 30;

/// One table per section of `--help` ("memcached flags:", ...), one row per flag.
fn tables_of(help: &str) -> Result<String, String> {
    let mut out = String::new();
    let mut rows: Vec<(String, String)> = Vec::new();
    let flush = |out: &mut String, rows: &mut Vec<(String, String)>| {
        if !rows.is_empty() {
            out.push_str("| flag | meaning and default |\n|---|---|\n");
            for (flag, meaning) in rows.drain(..) {
                let meaning = meaning.replace('|', "\\|").replace('<', "&lt;").replace('>', "&gt;");
                out.push_str(&format!("| `{flag}` | {meaning} |\n"));
            }
            out.push('\n');
        }
    };
    let mut in_flags = false;
    for line in help.lines() {
        if line.trim().is_empty() {
            continue;
        }
        if !line.starts_with(' ') {
            // A heading ("memcached flags:") opens a table; any other text closes it.
            flush(&mut out, &mut rows);
            in_flags = line.trim_end().ends_with(':');
            if in_flags {
                out.push_str(&format!("### {}\n\n", line.trim_end().trim_end_matches(':')));
            }
            continue;
        }
        if !in_flags {
            continue;
        }
        let (head, meaning) = if line.len() > MEANING_COLUMN { line.split_at(MEANING_COLUMN) } else { (line, "") };
        if head.trim().is_empty() {
            let last = rows.last_mut().ok_or_else(|| format!("continuation before any flag: {line}"))?;
            last.1.push(' ');
            last.1.push_str(meaning.trim());
        } else if head.trim_start().starts_with('-') {
            rows.push((head.trim().to_string(), meaning.trim().to_string()));
        } else {
            return Err(format!("not a flag line: {line}"));
        }
    }
    flush(&mut out, &mut rows);
    Ok(out)
}

#[test]
fn the_configuration_document_shows_every_flag_as_declared() {
    let out = Command::new(env!("CARGO_BIN_EXE_slipstream-cache")).arg("--help").output().unwrap();
    assert!(out.status.success());
    let help = String::from_utf8(out.stdout).unwrap();
    let generated = tables_of(&help).unwrap();
    for flag in ["--port", "--memory-limit", "--fabric-spin-us", "--ssd-io-threads"] {
        assert!(generated.contains(flag), "{flag} missing from:\n{generated}");
    }
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/configuration.md");
    let doc = std::fs::read_to_string(&path).unwrap();
    let start = doc.find(BEGIN).map(|i| i + BEGIN.len()).expect("docs/configuration.md has no generated section");
    let end = doc[start..].find(END).map(|i| start + i).expect("the generated section has no end marker");
    let current = doc[start..end].trim();
    if std::env::var_os("SLIPSTREAM_BLESS").is_some() {
        std::fs::write(&path, format!("{}\n\n{}\n\n{}", &doc[..start], generated.trim(), &doc[end..])).unwrap();
        return;
    }
    assert!(
        current == generated.trim(),
        "docs/configuration.md disagrees with slipstream-cache --help; regenerate with SLIPSTREAM_BLESS=1:\n{generated}"
    );
}

#[test]
fn continuation_lines_join_their_flag() {
    let help = "usage: x\n\nsome flags:\n  -p, --port <num>            TCP port (default 1;\n                              0 = any)\n      --no-x                  off\n\nExit status: 0.\n";
    assert_eq!(
        tables_of(help).unwrap(),
        "### some flags\n\n| flag | meaning and default |\n|---|---|\n| `-p, --port <num>` | TCP port (default 1; 0 = any) |\n| `--no-x` | off |\n\n"
    );
}
