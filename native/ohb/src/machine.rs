//! The machine a result was measured on: results are committed with it.

use serde_json::{json, Value};
use std::process::Command;

#[derive(Debug, Clone, Default, PartialEq)]
pub struct Machine {
    pub cpus: usize,
    pub model: String,
    pub kernel: String,
    pub ucx: String,
    /// The kernel's TCP congestion control (`net.ipv4.tcp_congestion_control`): every TCP figure, sockets
    /// and the fabric's TCP transport alike, depends on it. With `bbr` (it paces) both dip on loopback at
    /// 64 KiB-128 KiB messages; with `cubic` they do not (docs/fabric.md). Empty in results older than it.
    pub tcp_congestion: String,
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
        let tcp_congestion = std::fs::read_to_string("/proc/sys/net/ipv4/tcp_congestion_control").unwrap_or_default();
        Machine {
            cpus,
            model: parse_cpu_model(&cpuinfo).unwrap_or_else(|| "unknown".into()),
            kernel: kernel.trim().into(),
            ucx,
            tcp_congestion: tcp_congestion.trim().into(),
        }
    }

    pub fn to_json(&self) -> Value {
        json!({"cpus": self.cpus, "model": self.model, "kernel": self.kernel, "ucx": self.ucx,
               "tcp_congestion": self.tcp_congestion})
    }

    pub fn from_json(v: &Value) -> Machine {
        let text = |k: &str| v.get(k).and_then(Value::as_str).unwrap_or("").to_string();
        Machine {
            cpus: v.get("cpus").and_then(Value::as_u64).unwrap_or(0) as usize,
            model: text("model"),
            kernel: text("kernel"),
            ucx: text("ucx"),
            tcp_congestion: text("tcp_congestion"),
        }
    }

    /// "2 x <model>, Linux <release>, UCX <version>, TCP <congestion control>" (the last only when known).
    pub fn describe(&self) -> String {
        let tcp = if self.tcp_congestion.is_empty() { String::new() } else { format!(", TCP {}", self.tcp_congestion) };
        format!("{} x {}, Linux {}, UCX {}{tcp}", self.cpus, self.model, self.kernel, self.ucx)
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

    #[test]
    fn the_congestion_control_is_described_when_known_and_results_without_it_still_read() {
        let old = Machine::from_json(&json!({"cpus": 2, "model": "cpu", "kernel": "6.1", "ucx": "1.13.1"}));
        assert_eq!(old.describe(), "2 x cpu, Linux 6.1, UCX 1.13.1");
        let new = Machine { tcp_congestion: "bbr".into(), ..old };
        assert_eq!(new.describe(), "2 x cpu, Linux 6.1, UCX 1.13.1, TCP bbr");
        assert_eq!(Machine::from_json(&new.to_json()), new);
    }
}
