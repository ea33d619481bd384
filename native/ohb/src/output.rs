//! What every suite leaves behind: the JSON files under `results/` and, when points failed, the
//! error that makes `ohb` exit non-zero.

use std::path::Path;
use std::process::Command;
use std::time::{SystemTime, UNIX_EPOCH};

use serde_json::{json, Value};

use crate::child::find_repo_root;

/// Writes pretty JSON, creating the directory. An object gets a `run` stamp (commit, time,
/// command, load average) and the `machine` unless it has them, so `ohb report` can tell runs
/// apart and say where each ran.
pub fn write_json(path: &Path, value: &Value) -> Result<(), String> {
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).map_err(|e| format!("create {}: {e}", dir.display()))?;
    }
    let mut value = value.clone();
    if let Some(object) = value.as_object_mut() {
        object.entry("run").or_insert_with(run_stamp);
        object.entry("machine").or_insert_with(|| crate::machine::Machine::detect().to_json());
    }
    let text = serde_json::to_string_pretty(&value).expect("JSON values serialize");
    std::fs::write(path, text + "\n").map_err(|e| format!("write {}: {e}", path.display()))
}

/// `{"commit": "1a2b3c4d5e6f", "written_utc": "2026-11-24T22:05:00Z", "command": "ohb fabric lat"}`;
/// the commit gets `+dirty` when tracked files differ from it, `unknown` without git.
pub fn run_stamp() -> Value {
    let git = |args: &[&str]| -> Option<String> {
        let root = find_repo_root()?;
        let out = Command::new("git").arg("-C").arg(root).args(args).output().ok()?;
        out.status.success().then(|| String::from_utf8_lossy(&out.stdout).trim().to_string())
    };
    let commit = match (git(&["rev-parse", "--short=12", "HEAD"]), git(&["status", "--porcelain", "--untracked-files=no"])) {
        (Some(commit), Some(status)) if !status.is_empty() => format!("{commit}+dirty"),
        (Some(commit), _) => commit,
        (None, _) => "unknown".into(),
    };
    let seconds = SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0);
    let args: Vec<String> = std::env::args().skip(1).collect();
    // The load when the results were written: on a shared machine it says how noisy they are.
    let load_average = std::fs::read_to_string("/proc/loadavg").map(|text| load_average_of(&text)).unwrap_or_default();
    json!({"commit": commit, "written_utc": utc_text(seconds), "command": format!("ohb {}", args.join(" ")), "load_average": load_average})
}

/// `"0.52 1.29 2.43"` (1, 5 and 15 minutes) of `/proc/loadavg`'s text.
fn load_average_of(text: &str) -> String {
    text.split_whitespace().take(3).collect::<Vec<_>>().join(" ")
}

/// `YYYY-MM-DDTHH:MM:SSZ` of seconds since the epoch (civil calendar from days, H. Hinnant's algorithm).
pub fn utc_text(seconds: u64) -> String {
    let days = (seconds / 86400) as i64;
    let rest = seconds % 86400;
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!("{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}Z", rest / 3600, rest / 60 % 60, rest % 60)
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
    fn the_load_average_is_the_first_three_fields_of_proc_loadavg() {
        assert_eq!(load_average_of("0.52 1.29 2.43 3/512 12345\n"), "0.52 1.29 2.43");
        assert_eq!(load_average_of(""), "");
    }

    #[test]
    fn written_results_carry_the_run_stamp_and_the_machine() {
        let path = std::env::temp_dir().join(format!("ohb-output-test-{}.json", std::process::id()));
        write_json(&path, &json!({"bench": "x"})).unwrap();
        let written: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        std::fs::remove_file(&path).unwrap();
        assert!(written.pointer("/run/load_average").and_then(Value::as_str).is_some_and(|l| l.split(' ').count() == 3), "{written}");
        assert!(written.pointer("/machine/cpus").and_then(Value::as_u64).is_some_and(|n| n > 0), "{written}");
    }

    #[test]
    fn utc_dates() {
        assert_eq!(utc_text(0), "1970-01-01T00:00:00Z");
        assert_eq!(utc_text(951_782_400), "2000-02-29T00:00:00Z");
        assert_eq!(utc_text(1_795_993_445), "2026-11-29T23:04:05Z");
    }

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
