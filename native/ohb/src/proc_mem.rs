//! Memory of processes ohb did not start itself (Spark's executors), from /proc: which processes
//! exist, their command lines, and their peak resident set (`VmHWM`, which the kernel keeps, so a
//! sampler sees a peak that fell between two of its samples).

use std::io::Read;

/// The ids of the processes in /proc now (numeric entries; a process may be gone when read).
pub fn pids() -> Vec<u32> {
    let Ok(entries) = std::fs::read_dir("/proc") else { return Vec::new() };
    entries.flatten().filter_map(|e| e.file_name().to_str()?.parse().ok()).collect()
}

/// Reads /proc/PID/cmdline (the arguments, each ended by a NUL) into `buf`, reused between calls so
/// a scan of every process allocates nothing. False when the process is gone; empty for kernel
/// threads and zombies.
pub fn read_cmdline(pid: u32, buf: &mut Vec<u8>) -> bool {
    buf.clear();
    let Ok(mut file) = std::fs::File::open(format!("/proc/{pid}/cmdline")) else { return false };
    file.read_to_end(buf).is_ok()
}

/// The arguments of a raw /proc cmdline.
pub fn cmdline_args(cmdline: &[u8]) -> impl Iterator<Item = &[u8]> {
    cmdline.split(|&b| b == 0).filter(|a| !a.is_empty())
}

/// A process's peak resident set size in KiB (`VmHWM`), or None when it is gone.
pub fn peak_rss_kib(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status_field_kib(&status, "VmHWM")
}

/// A `kB` field of /proc/PID/status text, e.g. `VmHWM:\t  123456 kB`, in KiB.
pub fn status_field_kib(status: &str, field: &str) -> Option<u64> {
    let line = status.lines().find(|l| l.strip_prefix(field).is_some_and(|rest| rest.starts_with(':')))?;
    let mut words = line[field.len() + 1..].split_whitespace();
    let value = words.next()?.parse().ok()?;
    (words.next() == Some("kB") && words.next().is_none()).then_some(value)
}

#[cfg(test)]
mod tests {
    use super::*;

    const STATUS: &str = "Name:\tjava\nUmask:\t0022\nState:\tS (sleeping)\nPid:\t14528\n\
                          VmPeak:\t 5031940 kB\nVmSize:\t 4968452 kB\nVmLck:\t       0 kB\n\
                          VmHWM:\t  412340 kB\nVmRSS:\t  398116 kB\nRssAnon:\t  350000 kB\nThreads:\t58\n";

    #[test]
    fn status_fields_in_kib() {
        assert_eq!(status_field_kib(STATUS, "VmHWM"), Some(412_340));
        assert_eq!(status_field_kib(STATUS, "VmRSS"), Some(398_116));
        assert_eq!(status_field_kib(STATUS, "VmLck"), Some(0));
        assert_eq!(status_field_kib(STATUS, "Vm"), None, "a prefix of a field's name is not the field");
        assert_eq!(status_field_kib(STATUS, "Threads"), None, "not in kB");
        assert_eq!(status_field_kib("Name:\tkthreadd\nState:\tS (sleeping)\n", "VmHWM"), None, "kernel threads have none");
        assert_eq!(status_field_kib("VmHWM:\t  12x kB\n", "VmHWM"), None);
        assert_eq!(status_field_kib("VmHWM:\t  12 MB\n", "VmHWM"), None);
        assert_eq!(status_field_kib("", "VmHWM"), None);
    }

    #[test]
    fn cmdline_arguments() {
        let args: Vec<&[u8]> = cmdline_args(b"java\0-cp\0/a b/c:/d\0Main\0").collect();
        assert_eq!(args, vec![&b"java"[..], b"-cp", b"/a b/c:/d", b"Main"]);
        assert_eq!(cmdline_args(b"").count(), 0);
    }

    #[test]
    fn this_process_is_readable() {
        let me = std::process::id();
        assert!(pids().contains(&me));
        let mut buf = Vec::new();
        assert!(read_cmdline(me, &mut buf));
        assert!(cmdline_args(&buf).next().is_some());
        assert!(peak_rss_kib(me).is_some_and(|kib| kib > 0));
        assert!(!read_cmdline(u32::MAX, &mut buf) && buf.is_empty());
        assert_eq!(peak_rss_kib(u32::MAX), None);
    }
}
