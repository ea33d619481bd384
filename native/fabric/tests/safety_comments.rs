//! Every `unsafe` block, `unsafe impl` and `unsafe fn` of the fabric and its JNI crates says why it
//! is sound: a `// SAFETY:` comment on its line or in the comment block right above it (for an
//! `unsafe fn`, a `# Safety` doc section does too). Comments and strings are not code: a line whose
//! code part has no `unsafe` is skipped.
use std::path::{Path, PathBuf};

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let entries = std::fs::read_dir(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
    for entry in entries {
        let path = entry.unwrap().path();
        if path.is_dir() {
            if path.file_name().is_some_and(|name| name == "target") {
                continue;
            }
            rust_files(&path, out);
        } else if path.extension().is_some_and(|ext| ext == "rs") {
            out.push(path);
        }
    }
}

/// The code part of a line: without a trailing `//` comment and without string literals.
fn code_of(line: &str) -> String {
    let mut code = String::new();
    let mut in_string = false;
    let mut chars = line.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '"' if !in_string => in_string = true,
            '"' if in_string => in_string = false,
            '\\' if in_string => {
                chars.next();
            }
            '/' if !in_string && chars.peek() == Some(&'/') => break,
            _ if !in_string => code.push(c),
            _ => {}
        }
    }
    code
}

fn is_unsafe_site(code: &str) -> bool {
    let words: Vec<&str> = code.split(|c: char| !(c.is_alphanumeric() || c == '_')).filter(|w| !w.is_empty()).collect();
    words.iter().any(|&w| w == "unsafe")
}

/// Lines (1-based) of unsafe sites in `text` without a SAFETY comment.
fn unexplained(text: &str) -> Vec<usize> {
    let lines: Vec<&str> = text.lines().collect();
    let mut missing = Vec::new();
    for (index, line) in lines.iter().enumerate() {
        let trimmed = line.trim_start();
        if trimmed.starts_with("//") {
            continue;
        }
        let code = code_of(line);
        if !is_unsafe_site(&code) {
            continue;
        }
        if line.contains("SAFETY:") {
            continue;
        }
        // The comment and attribute block right above (a multi-line statement's first lines count
        // as part of it when they end with an opening bracket or `=`).
        let mut explained = false;
        let mut above = index;
        while above > 0 {
            above -= 1;
            let previous = lines[above].trim_start();
            if previous.starts_with("//") || previous.starts_with("#[") {
                if previous.contains("SAFETY:") || previous.contains("# Safety") {
                    explained = true;
                    break;
                }
                continue;
            }
            break;
        }
        if !explained {
            missing.push(index + 1);
        }
    }
    missing
}

#[test]
fn every_unsafe_site_says_why_it_is_sound() {
    let native = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut files = Vec::new();
    rust_files(&native.join("fabric"), &mut files);
    rust_files(&native.join("fabric-jni"), &mut files);
    files.sort();
    assert!(files.len() > 10, "found the sources: {files:?}");
    let mut report = Vec::new();
    let mut sites = 0;
    for file in &files {
        let text = std::fs::read_to_string(file).unwrap();
        sites += text.lines().filter(|l| !l.trim_start().starts_with("//") && is_unsafe_site(&code_of(l))).count();
        for line in unexplained(&text) {
            report.push(format!("{}:{line}", file.strip_prefix(&native).unwrap_or(file).display()));
        }
    }
    assert!(sites > 50, "the scan sees the unsafe code ({sites} sites)");
    assert!(report.is_empty(), "unsafe without a `// SAFETY:` comment:\n{}", report.join("\n"));
}

#[test]
fn the_scan_catches_an_unexplained_block() {
    let text = "fn f() {\n    // Reads a byte.\n    let x = unsafe { *p };\n}\n";
    assert_eq!(unexplained(text), vec![3]);
    let explained = "fn f() {\n    // SAFETY: p is valid.\n    let x = unsafe { *p };\n}\n";
    assert!(unexplained(explained).is_empty());
    let same_line = "let x = unsafe { *p }; // SAFETY: p is valid.\n";
    assert!(unexplained(same_line).is_empty());
    let in_text = "// unsafe in a comment\nlet s = \"unsafe\";\n";
    assert!(unexplained(in_text).is_empty(), "comments and strings are not code");
    let impl_site = "#[doc = \"x\"]\nunsafe impl Send for X {}\n";
    assert_eq!(unexplained(impl_site), vec![2]);
}
