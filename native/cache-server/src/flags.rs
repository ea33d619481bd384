//! Command-line flags, memcached-compatible where memcached has the flag. Every flag is listed in
//! `USAGE` (printed by `--help`); a test checks that list against the parser.
use std::net::IpAddr;
use std::path::PathBuf;

/// `--help` text. Keep one flag per line, in the parser's order.
pub const USAGE: &str = "\
usage: slipstream-cache [flags]

A memcached-compatible cache (text, meta and binary protocols over TCP) that also serves binary
protocol requests over the fabric (UCX: shared memory, RDMA verbs or TCP).

memcached flags:
  -p, --port <num>            TCP port (default 11211; 0 = any free port, printed at start)
  -l, --listen <addr>         IP address for TCP and the fabric (default 127.0.0.1)
  -m, --memory-limit <mb>     item memory in megabytes (default 64; 2..1048576)
  -t, --threads <num>         worker threads serving TCP connections (default 4; 1..64)
  -c, --conn-limit <num>      simultaneous connections, TCP and fabric each (default 1024; 1..1000000)
  -I, --max-item-size <size>  largest item (key + value), k/m suffix allowed (default 1m;
                              1k..128m and at most half of -m)
  -U, --udp-port <num>        0 only: UDP is not supported
  -Y, --auth-file <file>      'user:password' lines; every client must authenticate first (text
                              protocol: 'set <any key> 0 0 <n>' with 'user password' as the
                              value; binary and fabric: SASL PLAIN)
  -S, --enable-sasl           accepted for memcached compatibility; requires -Y
  -P, --pidfile <file>        write the process id to <file> (removed at exit)
  -v, --verbose               log more to stderr (-vv: connection events)
  -h, --help                  print this text and exit
  -V, --version               print the version and exit

slipstream flags:
      --max-line-bytes <num>  longest text command line (default 65536; 1024..1048576)
      --conn-buffers-mb <mb>  memory for connection buffers beyond 16 KiB each (large values
                              arriving and replies leaving), all connections together
                              (default 128, at least 4 x -I); a connection needing more is closed
      --fabric-port <num>     fabric port on the -l address (default 11212; 0 = any free port)
      --no-fabric             do not start the fabric listener
      --fabric-threads <num>  0 = run fabric requests on the fabric's progress thread (default),
                              N = on N handler threads (1..64)
      --fabric-transport <t>  auto (UCX chooses; UCX_TLS is respected, default) or tcp
      --fabric-devices <list> network devices UCX may use, UCX_NET_DEVICES syntax (default lo;
                              name your devices, e.g. mlx5_0:1, when -l is not loopback)
      --fabric-pool-mb <mb>   cap on registered memory for fabric messages (default 64; raised
                              to hold two of the largest message, 2 * -I + 1 MiB, at least 8 MiB)
      --fabric-spin-us <us>   how long the fabric's progress thread polls after the last message
                              before it sleeps (default 1000; 0..100000). Longer than a client's
                              wake-up time, so a request-response stream never falls into
                              sleeping on both sides (about 200 us per request on 2 cores)

hybrid (SSD) mode, off by default:
      --ssd-path <dir>        directory for the SSD tier's log (created if missing): when -m is
                              full, cold values move to the log instead of being evicted
      --ssd-size <size>       size of the log, required with --ssd-path: megabytes as a plain
                              number (like -m), or with a k/m/g suffix (1m..16384g)
      --ssd-io-threads <num>  threads reading and writing the log (default 2; 1..64)

Exit status: 0 after SIGTERM/SIGINT, 64 for a usage error, 1 when the server cannot start.
";

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Flags {
    pub port: u16,
    pub listen: IpAddr,
    pub memory_limit_mb: u64,
    pub threads: usize,
    pub conn_limit: usize,
    pub max_item_bytes: usize,
    pub auth_file: Option<PathBuf>,
    pub sasl: bool,
    pub pidfile: Option<PathBuf>,
    pub verbosity: u32,
    pub max_line_bytes: usize,
    /// `None`: the default, max(128 MiB, 4 x max item).
    pub conn_buffers_mb: Option<u64>,
    /// `None` = no fabric listener.
    pub fabric_port: Option<u16>,
    /// 0 = Inline (progress thread).
    pub fabric_threads: usize,
    pub fabric_tcp_only: bool,
    pub fabric_devices: String,
    pub fabric_pool_mb: u64,
    pub fabric_spin_us: u64,
    /// `None` = memory only (no `--ssd-path`).
    pub ssd: Option<SsdFlags>,
}

/// The SSD tier (`--ssd-path`, `--ssd-size`, `--ssd-io-threads`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SsdFlags {
    pub dir: PathBuf,
    pub size_bytes: u64,
    pub io_threads: usize,
}

impl Default for Flags {
    fn default() -> Self {
        Flags {
            port: 11211,
            listen: IpAddr::from([127, 0, 0, 1]),
            memory_limit_mb: 64,
            threads: 4,
            conn_limit: 1024,
            max_item_bytes: 1 << 20,
            auth_file: None,
            sasl: false,
            pidfile: None,
            verbosity: 0,
            max_line_bytes: 64 << 10,
            conn_buffers_mb: None,
            fabric_port: Some(11212),
            fabric_threads: 0,
            fabric_tcp_only: false,
            fabric_devices: "lo".to_string(),
            fabric_pool_mb: 64,
            fabric_spin_us: 1000,
            ssd: None,
        }
    }
}

/// What the command line asks for.
#[derive(Debug, PartialEq, Eq)]
pub enum Command {
    /// Boxed: `Flags` is large and the other variants are empty.
    Serve(Box<Flags>),
    Help,
    Version,
}

pub const MAX_ITEM_BYTES_MIN: usize = 1 << 10;
pub const MAX_ITEM_BYTES_MAX: usize = 128 << 20;
pub const MEMORY_LIMIT_MB_MIN: u64 = 2;
pub const MEMORY_LIMIT_MB_MAX: u64 = 1 << 20;
pub const THREADS_MAX: usize = 64;
pub const CONN_LIMIT_MAX: usize = 1_000_000;
pub const MAX_LINE_BYTES_MIN: usize = 1 << 10;
pub const MAX_LINE_BYTES_MAX: usize = 1 << 20;
pub const SSD_SIZE_BYTES_MIN: u64 = 1 << 20;
/// 16 TiB: far beyond a cache log, small enough that no size computation overflows.
pub const SSD_SIZE_BYTES_MAX: u64 = 1 << 44;
pub const SSD_IO_THREADS_DEFAULT: usize = 2;
pub const SSD_IO_THREADS_MAX: usize = 64;

impl Flags {
    pub fn memory_limit_bytes(&self) -> usize {
        (self.memory_limit_mb as usize) << 20
    }

    pub fn conn_buffers_bytes(&self) -> usize {
        match self.conn_buffers_mb {
            Some(mb) => (mb as usize) << 20,
            None => (128usize << 20).max(4 * self.max_item_bytes),
        }
    }
}

/// Parses `args` (without the program name). `Err` is a message for a usage error.
pub fn parse<I: IntoIterator<Item = String>>(args: I) -> Result<Command, String> {
    let mut flags = Flags::default();
    let mut udp_port: Option<String> = None;
    let mut ssd_dir: Option<PathBuf> = None;
    let mut ssd_size_bytes: Option<u64> = None;
    let mut ssd_io_threads: Option<usize> = None;
    let mut args = args.into_iter();
    while let Some(arg) = args.next() {
        // Split "--name=value" and "-xVALUE"; "-vv" counts as verbosity 2.
        let (name, mut inline): (String, Option<String>) = if let Some(long) = arg.strip_prefix("--") {
            match long.split_once('=') {
                Some((n, v)) => (format!("--{n}"), Some(v.to_string())),
                None => (arg.clone(), None),
            }
        } else if arg.starts_with('-') && arg.len() > 2 && arg.is_char_boundary(2) {
            if arg[1..].bytes().all(|b| b == b'v') {
                flags.verbosity += (arg.len() - 1) as u32;
                continue;
            }
            (arg[..2].to_string(), Some(arg[2..].to_string()))
        } else {
            (arg.clone(), None)
        };
        let mut value = |what: &str| -> Result<String, String> {
            match inline.take() {
                Some(v) => Ok(v),
                None => args.next().ok_or_else(|| format!("{name} needs a value ({what})")),
            }
        };
        match name.as_str() {
            "-p" | "--port" => flags.port = number(&name, &value("port")?, 0, 65535)? as u16,
            "-l" | "--listen" => {
                let v = value("IP address")?;
                flags.listen = v.parse().map_err(|_| format!("{name}: '{v}' is not an IP address"))?;
            }
            "-m" | "--memory-limit" => {
                flags.memory_limit_mb = number(&name, &value("megabytes")?, MEMORY_LIMIT_MB_MIN, MEMORY_LIMIT_MB_MAX)?
            }
            "-t" | "--threads" => flags.threads = number(&name, &value("count")?, 1, THREADS_MAX as u64)? as usize,
            "-c" | "--conn-limit" => flags.conn_limit = number(&name, &value("count")?, 1, CONN_LIMIT_MAX as u64)? as usize,
            "-I" | "--max-item-size" => flags.max_item_bytes = size(&name, &value("size")?)?,
            "-U" | "--udp-port" => udp_port = Some(value("port")?),
            "-Y" | "--auth-file" => flags.auth_file = Some(PathBuf::from(value("file")?)),
            "-S" | "--enable-sasl" => flags.sasl = true,
            "-P" | "--pidfile" => flags.pidfile = Some(PathBuf::from(value("file")?)),
            "-v" | "--verbose" => flags.verbosity += 1,
            "-h" | "--help" => return Ok(Command::Help),
            "-V" | "--version" => return Ok(Command::Version),
            "--max-line-bytes" => {
                flags.max_line_bytes =
                    number(&name, &value("bytes")?, MAX_LINE_BYTES_MIN as u64, MAX_LINE_BYTES_MAX as u64)? as usize
            }
            "--conn-buffers-mb" => flags.conn_buffers_mb = Some(number(&name, &value("megabytes")?, 1, 1 << 20)?),
            "--fabric-port" => flags.fabric_port = Some(number(&name, &value("port")?, 0, 65535)? as u16),
            "--no-fabric" => flags.fabric_port = None,
            "--fabric-threads" => flags.fabric_threads = number(&name, &value("count")?, 0, THREADS_MAX as u64)? as usize,
            "--fabric-transport" => {
                flags.fabric_tcp_only = match value("auto|tcp")?.as_str() {
                    "auto" => false,
                    "tcp" => true,
                    other => return Err(format!("--fabric-transport: '{other}' is neither auto nor tcp")),
                }
            }
            "--fabric-devices" => {
                let v = value("device list")?;
                if v.is_empty() {
                    return Err("--fabric-devices: empty list".to_string());
                }
                flags.fabric_devices = v;
            }
            "--fabric-pool-mb" => flags.fabric_pool_mb = number(&name, &value("megabytes")?, 1, 1 << 20)?,
            "--fabric-spin-us" => flags.fabric_spin_us = number(&name, &value("microseconds")?, 0, 100_000)?,
            "--ssd-path" => {
                let v = value("directory")?;
                if v.is_empty() {
                    return Err("--ssd-path: empty path".to_string());
                }
                ssd_dir = Some(PathBuf::from(v));
            }
            "--ssd-size" => ssd_size_bytes = Some(ssd_size(&name, &value("size")?)?),
            "--ssd-io-threads" => {
                ssd_io_threads = Some(number(&name, &value("count")?, 1, SSD_IO_THREADS_MAX as u64)? as usize)
            }
            _ => return Err(format!("unknown flag '{arg}'")),
        }
        if let Some(extra) = inline {
            return Err(format!("{name} takes no value (got '{extra}')"));
        }
    }
    if let Some(udp) = udp_port {
        if udp.trim() != "0" {
            return Err(format!("-U {udp}: UDP is not supported (only -U 0)"));
        }
    }
    flags.ssd = match (ssd_dir, ssd_size_bytes) {
        (Some(dir), Some(size_bytes)) => {
            Some(SsdFlags { dir, size_bytes, io_threads: ssd_io_threads.unwrap_or(SSD_IO_THREADS_DEFAULT) })
        }
        (Some(_), None) => return Err("--ssd-path needs --ssd-size <size> (e.g. --ssd-size 4g)".to_string()),
        (None, Some(_)) => return Err("--ssd-size needs --ssd-path <dir>".to_string()),
        (None, None) if ssd_io_threads.is_some() => return Err("--ssd-io-threads needs --ssd-path <dir>".to_string()),
        (None, None) => None,
    };
    if flags.sasl && flags.auth_file.is_none() {
        return Err("-S needs -Y <auth file>: slipstream checks SASL PLAIN against that file".to_string());
    }
    if flags.max_item_bytes > flags.memory_limit_bytes() / 2 {
        return Err(format!(
            "-I {} is more than half of -m {} MB; raise -m or lower -I",
            flags.max_item_bytes, flags.memory_limit_mb
        ));
    }
    if flags.conn_buffers_bytes() < 2 * flags.max_item_bytes {
        return Err(format!(
            "--conn-buffers-mb {} cannot hold two items of -I {} bytes",
            flags.conn_buffers_bytes() >> 20,
            flags.max_item_bytes
        ));
    }
    Ok(Command::Serve(Box::new(flags)))
}

fn number(name: &str, text: &str, min: u64, max: u64) -> Result<u64, String> {
    let n: u64 = text.trim().parse().map_err(|_| format!("{name}: '{text}' is not a number"))?;
    if n < min || n > max {
        return Err(format!("{name}: {n} is outside {min}..={max}"));
    }
    Ok(n)
}

/// A size with an optional k/m suffix (memcached's `-I`), in bytes, within the `-I` bounds.
fn size(name: &str, text: &str) -> Result<usize, String> {
    let t = text.trim();
    let (digits, unit) = match t.as_bytes().last() {
        Some(b'k' | b'K') => (&t[..t.len() - 1], 1usize << 10),
        Some(b'm' | b'M') => (&t[..t.len() - 1], 1usize << 20),
        _ => (t, 1usize),
    };
    let n: usize = digits.parse().map_err(|_| format!("{name}: '{text}' is not a size (e.g. 512k, 1m)"))?;
    let bytes = n.checked_mul(unit).ok_or_else(|| format!("{name}: '{text}' is too large"))?;
    if !(MAX_ITEM_BYTES_MIN..=MAX_ITEM_BYTES_MAX).contains(&bytes) {
        return Err(format!("{name}: {text} is outside 1k..128m"));
    }
    Ok(bytes)
}

/// The SSD log's size: megabytes as a plain number (like `-m`), or a number with a k/m/g suffix;
/// in bytes, within `SSD_SIZE_BYTES_MIN..=SSD_SIZE_BYTES_MAX`.
fn ssd_size(name: &str, text: &str) -> Result<u64, String> {
    let t = text.trim();
    let (digits, unit) = match t.as_bytes().last() {
        Some(b'k' | b'K') => (&t[..t.len() - 1], 1u64 << 10),
        Some(b'm' | b'M') => (&t[..t.len() - 1], 1u64 << 20),
        Some(b'g' | b'G') => (&t[..t.len() - 1], 1u64 << 30),
        _ => (t, 1u64 << 20),
    };
    let n: u64 = digits.parse().map_err(|_| format!("{name}: '{text}' is not a size (megabytes, or e.g. 512m, 4g)"))?;
    let bytes = n.checked_mul(unit).filter(|&b| b <= SSD_SIZE_BYTES_MAX);
    match bytes {
        Some(b) if b >= SSD_SIZE_BYTES_MIN => Ok(b),
        _ => Err(format!("{name}: {text} is outside 1m..16384g")),
    }
}

/// Reads an auth file: one `user:password` per line; empty lines and lines starting with '#'
/// are skipped. The password is everything after the first ':' (it may contain ':').
pub fn parse_auth_file(text: &str) -> Result<Vec<(String, String)>, String> {
    let mut users = Vec::new();
    for (index, raw) in text.lines().enumerate() {
        let line = raw.trim_end_matches('\r');
        if line.trim().is_empty() || line.starts_with('#') {
            continue;
        }
        match line.split_once(':') {
            Some((user, password)) if !user.is_empty() => users.push((user.to_string(), password.to_string())),
            _ => return Err(format!("line {}: expected user:password", index + 1)),
        }
    }
    if users.is_empty() {
        return Err("no user:password line".to_string());
    }
    Ok(users)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn serve(args: &[&str]) -> Result<Flags, String> {
        match parse(args.iter().map(|s| s.to_string()))? {
            Command::Serve(f) => Ok(*f),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn defaults_match_memcached() {
        let f = serve(&[]).unwrap();
        assert_eq!((f.port, f.memory_limit_mb, f.threads, f.conn_limit, f.max_item_bytes), (11211, 64, 4, 1024, 1 << 20));
        assert_eq!(f.listen.to_string(), "127.0.0.1");
        assert_eq!(f.fabric_port, Some(11212));
    }

    #[test]
    fn short_long_attached_and_equals_forms() {
        let f = serve(&["-p0", "--memory-limit=128", "-t", "2", "-c", "5", "-I", "2m", "-vv", "--fabric-port", "0"]).unwrap();
        assert_eq!((f.port, f.memory_limit_mb, f.threads, f.conn_limit), (0, 128, 2, 5));
        assert_eq!((f.max_item_bytes, f.verbosity), (2 << 20, 2));
        assert_eq!(f.fabric_port, Some(0));
        assert_eq!(serve(&["--no-fabric"]).unwrap().fabric_port, None);
        assert_eq!(serve(&["-I", "512k"]).unwrap().max_item_bytes, 512 << 10);
        assert_eq!(serve(&["-I", "4096"]).unwrap().max_item_bytes, 4096);
    }

    #[test]
    fn bounds_and_errors() {
        assert!(serve(&["-U", "11211"]).unwrap_err().contains("UDP is not supported"));
        assert!(serve(&["-U", "0"]).is_ok());
        assert!(serve(&["-I", "512"]).is_err());
        assert!(serve(&["-I", "129m"]).is_err());
        assert!(serve(&["-I", "64m"]).unwrap_err().contains("half"));
        assert!(serve(&["-m", "256", "-I", "64m"]).is_ok());
        assert!(serve(&["-t", "0"]).is_err());
        assert!(serve(&["-c", "0"]).is_err());
        assert!(serve(&["-p", "70000"]).is_err());
        assert!(serve(&["-S"]).unwrap_err().contains("-Y"));
        assert!(serve(&["--bogus"]).unwrap_err().contains("unknown flag"));
        assert!(serve(&["-p"]).unwrap_err().contains("needs a value"));
        assert!(serve(&["--no-fabric=1"]).is_err());
        assert!(serve(&["--fabric-transport", "ib"]).is_err());
        assert!(serve(&["-l", "localhost"]).is_err());
    }

    #[test]
    fn help_lists_every_flag_the_parser_knows() {
        for flag in [
            "--port", "--listen", "--memory-limit", "--threads", "--conn-limit", "--max-item-size", "--udp-port",
            "--auth-file", "--enable-sasl", "--pidfile", "--verbose", "--help", "--version", "--max-line-bytes",
            "--conn-buffers-mb",
            "--fabric-port", "--no-fabric", "--fabric-threads", "--fabric-transport", "--fabric-devices",
            "--fabric-pool-mb", "--fabric-spin-us", "--ssd-path", "--ssd-size", "--ssd-io-threads",
        ] {
            assert!(USAGE.contains(flag), "{flag} missing from --help");
            let known = !matches!(parse([flag.to_string(), "1".to_string()]), Err(e) if e == format!("unknown flag '{flag}'"));
            assert!(known, "{flag} in --help but unknown to the parser");
        }
        assert_eq!(parse(["-h".to_string()]), Ok(Command::Help));
    }

    #[test]
    fn ssd_flags() {
        assert_eq!(serve(&[]).unwrap().ssd, None, "memory only by default");
        let f = serve(&["--ssd-path", "/tmp/ssd", "--ssd-size", "64"]).unwrap();
        assert_eq!(f.ssd, Some(SsdFlags { dir: "/tmp/ssd".into(), size_bytes: 64 << 20, io_threads: 2 }));
        let f = serve(&["--ssd-size=4g", "--ssd-io-threads", "8", "--ssd-path=/mnt/nvme/cache"]).unwrap();
        assert_eq!(f.ssd, Some(SsdFlags { dir: "/mnt/nvme/cache".into(), size_bytes: 4 << 30, io_threads: 8 }));
        for (text, bytes) in [("1024k", 1u64 << 20), ("512M", 512 << 20), ("2G", 2 << 30), ("16384g", 1 << 44), ("1", 1 << 20)] {
            let f = serve(&["--ssd-path", "d", "--ssd-size", text]).unwrap();
            assert_eq!(f.ssd.unwrap().size_bytes, bytes, "--ssd-size {text}");
        }
    }

    #[test]
    fn ssd_flag_errors() {
        assert!(serve(&["--ssd-path", "/tmp/ssd"]).unwrap_err().contains("needs --ssd-size"));
        assert!(serve(&["--ssd-size", "64"]).unwrap_err().contains("needs --ssd-path"));
        assert!(serve(&["--ssd-io-threads", "4"]).unwrap_err().contains("needs --ssd-path"));
        assert!(serve(&["--ssd-path", ""]).unwrap_err().contains("empty"));
        assert!(serve(&["--ssd-path"]).unwrap_err().contains("needs a value"));
        let with_size = |size: &str| serve(&["--ssd-path", "d", "--ssd-size", size]);
        for bad in ["0", "512k", "16385g", "99999999999999999999", "-1", "4t", "g", "", "1.5g"] {
            assert!(with_size(bad).is_err(), "--ssd-size {bad:?} accepted");
        }
        assert!(with_size("0").unwrap_err().contains("outside"));
        assert!(with_size("lots").unwrap_err().contains("not a size"));
        let with_threads = |n: &str| serve(&["--ssd-path", "d", "--ssd-size", "64", "--ssd-io-threads", n]);
        assert!(with_threads("0").unwrap_err().contains("outside"));
        assert!(with_threads("65").is_err());
        assert_eq!(with_threads("64").unwrap().ssd.unwrap().io_threads, 64);
    }

    #[test]
    fn auth_file_lines() {
        let users = parse_auth_file("# comment\nalice:secret\n\nbob:pa:ss\r\n").unwrap();
        assert_eq!(users, vec![("alice".into(), "secret".into()), ("bob".into(), "pa:ss".into())]);
        assert!(parse_auth_file("nocolon\n").is_err());
        assert!(parse_auth_file("\n").is_err());
    }
}
