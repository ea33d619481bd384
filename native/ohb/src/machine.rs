//! The machine a result was measured on: results are committed with it.

use serde_json::{json, Value};
use std::process::Command;

#[derive(Debug, Clone, Default, PartialEq)]
pub struct Machine {
    pub cpus: usize,
    pub model: String,
    pub kernel: String,
    pub ucx: String,
}

impl Machine {
    pub fn detect() -> Machine {
        let cpus = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(0);
        let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
        let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default();
        let ucx = Command::new("ucx_info")
            .arg("-v")
            .output()
            .ok()
            .and_then(|o| parse_ucx_version(&String::from_utf8_lossy(&o.stdout)))
            .unwrap_or_else(|| "unknown".to_string());
        Machine {
            cpus,
            model: parse_cpu_model(&cpuinfo).unwrap_or_else(|| "unknown".into()),
            kernel: kernel.trim().into(),
            ucx,
        }
    }

    pub fn to_json(&self) -> Value {
        json!({"cpus": self.cpus, "model": self.model, "kernel": self.kernel, "ucx": self.ucx})
    }

    pub fn from_json(v: &Value) -> Machine {
        let text = |k: &str| v.get(k).and_then(Value::as_str).unwrap_or("").to_string();
        Machine {
            cpus: v.get("cpus").and_then(Value::as_u64).unwrap_or(0) as usize,
            model: text("model"),
            kernel: text("kernel"),
            ucx: text("ucx"),
        }
    }

    pub fn describe(&self) -> String {
        format!("{} x {}, Linux {}, UCX {}", self.cpus, self.model, self.kernel, self.ucx)
    }
}

/// First "model name" of /proc/cpuinfo.
pub fn parse_cpu_model(cpuinfo: &str) -> Option<String> {
    cpuinfo
        .lines()
        .find(|l| l.starts_with("model name"))
        .and_then(|l| l.split_once(':'))
        .map(|(_, v)| v.trim().to_string())
}

/// `ucx_info -v` prints "# Version 1.13.1" (newer releases "# Library version: 1.18.1").
pub fn parse_ucx_version(text: &str) -> Option<String> {
    text.lines().find_map(|l| {
        let l = l.trim_start_matches('#').trim();
        let rest = l.strip_prefix("Library version:").or_else(|| l.strip_prefix("Version"))?;
        Some(rest.trim().to_string()).filter(|v| !v.is_empty())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_ucx_info_and_cpuinfo() {
        assert_eq!(parse_ucx_version("# Version 1.13.1\n# Git branch '<unknown>'\n").as_deref(), Some("1.13.1"));
        assert_eq!(parse_ucx_version("# Library version: 1.18.1\n").as_deref(), Some("1.18.1"));
        assert_eq!(parse_ucx_version("nothing"), None);
        let cpuinfo = "processor\t: 0\nmodel name\t: AMD EPYC 7B13\nflags\t: x\n";
        assert_eq!(parse_cpu_model(cpuinfo).as_deref(), Some("AMD EPYC 7B13"));
    }
}
