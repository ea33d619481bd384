//! What every suite leaves behind: the JSON files under `results/` and, when points failed, the
//! error that makes `ohb` exit non-zero.

use std::path::Path;

use serde_json::Value;

/// Writes pretty JSON, creating the directory.
pub fn write_json(path: &Path, value: &Value) -> Result<(), String> {
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).map_err(|e| format!("create {}: {e}", dir.display()))?;
    }
    let text = serde_json::to_string_pretty(value).expect("JSON values serialize");
    std::fs::write(path, text + "\n").map_err(|e| format!("write {}: {e}", path.display()))
}

/// Failed points listed in the error at most (the rest are counted): a run where every point failed
/// stays readable, and the table and the JSON have all of them.
pub const FAILURES_LISTED_MAX: usize = 20;

/// What a suite returns after printing its tables and writing its JSON: `Err` (so `ohb` exits
/// non-zero and prints it on stderr) when any point failed, naming each failed point and why.
pub fn fail_if_points_failed(run_name: &str, failures: &[String]) -> Result<(), String> {
    if failures.is_empty() {
        return Ok(());
    }
    let mut text = format!("{run_name}: {} point(s) failed:", failures.len());
    for failure in failures.iter().take(FAILURES_LISTED_MAX) {
        text += "\n  ";
        text += failure;
    }
    if failures.len() > FAILURES_LISTED_MAX {
        text += &format!("\n  ... and {} more (see the table and the JSON)", failures.len() - FAILURES_LISTED_MAX);
    }
    Err(text)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn failures_are_listed_up_to_the_limit() {
        assert_eq!(fail_if_points_failed("ohb x", &[]), Ok(()));
        let one = fail_if_points_failed("ohb x", &["fabric 8 B: refused".into()]).unwrap_err();
        assert_eq!(one, "ohb x: 1 point(s) failed:\n  fabric 8 B: refused");
        let many: Vec<String> = (0..FAILURES_LISTED_MAX + 3).map(|i| format!("p{i}: e")).collect();
        let text = fail_if_points_failed("ohb x", &many).unwrap_err();
        assert_eq!(text.lines().count(), 1 + FAILURES_LISTED_MAX + 1, "{text}");
        assert!(text.ends_with("... and 3 more (see the table and the JSON)"), "{text}");
        assert!(text.contains(&format!("p{}: e", FAILURES_LISTED_MAX - 1)) && !text.contains(&format!("p{}: e", FAILURES_LISTED_MAX)));
    }
}
