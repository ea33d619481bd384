//! The JSON files every suite writes under `results/`.

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
