//! Memory and CPU time of processes ohb did not start itself (Spark's executors), from /proc: which
//! processes exist, their command lines, their peak resident set (`VmHWM`, which the kernel keeps, so
//! a sampler sees a peak that fell between two of its samples) and the CPU time of their threads.

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

/// Clock ticks per second, the unit of CPU times in /proc/PID/task/TID/stat.
pub fn clock_ticks_per_s() -> u64 {
    // SAFETY: sysconf has no preconditions.
    let ticks = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if ticks > 0 { ticks as u64 } else { 100 }
}

/// Calls `f(tid, name, cpu_ticks)` for each thread of process `pid` that can still be read: its
/// name (`comm`, at most 15 bytes) and the CPU time it has used, user plus system, in clock ticks.
/// `buf` is reused between calls.
pub fn for_each_thread_cpu(pid: u32, buf: &mut String, mut f: impl FnMut(u32, &str, u64)) {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else { return };
    for task in tasks.flatten() {
        let Some(tid) = task.file_name().to_str().and_then(|t| t.parse::<u32>().ok()) else { continue };
        buf.clear();
        let Ok(mut file) = std::fs::File::open(format!("/proc/{pid}/task/{tid}/stat")) else { continue };
        if file.read_to_string(buf).is_err() {
            continue;
        }
        if let Some((name, ticks)) = parse_stat_cpu(buf) {
            f(tid, name, ticks);
        }
    }
}

/// The name and utime + stime (ticks) of a /proc `stat` line: `TID (NAME) STATE PPID ...`, where
/// utime and stime are the 12th and 13th fields after the name. The name may hold spaces and
/// parentheses, so it ends at the last ')'.
pub fn parse_stat_cpu(stat: &str) -> Option<(&str, u64)> {
    let open = stat.find('(')?;
    let close = stat.rfind(')')?;
    if close < open {
        return None;
    }
    let mut fields = stat[close + 1..].split_whitespace().skip(11);
    let utime: u64 = fields.next()?.parse().ok()?;
    let stime: u64 = fields.next()?.parse().ok()?;
    Some((&stat[open + 1..close], utime + stime))
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
    fn thread_cpu_from_stat_lines() {
        let stat = "4242 (C2 CompilerThre) S 1 4200 4200 0 -1 1077936192 9 0 0 0 1234 56 0 0 20 0 60 0";
        assert_eq!(parse_stat_cpu(stat), Some(("C2 CompilerThre", 1290)));
        let odd_name = "7 (a) b (c) R 1 7 7 0 -1 0 0 0 0 0 5 6 0 0";
        assert_eq!(parse_stat_cpu(odd_name), Some(("a) b (c", 11)), "the name ends at the last ')'");
        assert_eq!(parse_stat_cpu("7 (short) R 1 7"), None, "too few fields");
        assert_eq!(parse_stat_cpu("7 (x) R 1 7 7 0 -1 0 0 0 0 0 x 6"), None);
        assert_eq!(parse_stat_cpu(""), None);
        assert_eq!(parse_stat_cpu(") 7 ("), None);
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
        // Spin until this process has used at least one tick of CPU: by wall time alone (30 ms once)
        // a loaded machine (load 27 on 2 cores seen) may not have run this thread at all. Bounded.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
        let mut stat = String::new();
        let (mut threads, mut ticks) = (0, 0);
        while ticks == 0 && std::time::Instant::now() < deadline {
            let spin_until = std::time::Instant::now() + std::time::Duration::from_millis(30);
            while std::time::Instant::now() < spin_until {
                std::hint::spin_loop();
            }
            (threads, ticks) = (0, 0);
            for_each_thread_cpu(me, &mut stat, |_, _, t| {
                threads += 1;
                ticks += t;
            });
        }
        assert!(threads >= 1 && ticks >= 1, "{threads} threads, {ticks} ticks");
        assert!(clock_ticks_per_s() >= 1);
        for_each_thread_cpu(u32::MAX, &mut stat, |_, _, _| panic!("no such process"));
    }
}
