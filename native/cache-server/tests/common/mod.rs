//! Shared by the black-box tests: a real `slipstream-cache` process on ephemeral loopback ports
//! (killed on drop), a line-oriented text client, binary packet helpers, stats and RSS readers.
#![allow(dead_code)]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

#[allow(unused_imports)]
pub use cache_proto::binary::{opcode, status, Header, HEADER_BYTES, MAGIC_REQUEST, MAGIC_RESPONSE};

pub const BIN: &str = env!("CARGO_BIN_EXE_slipstream-cache");

pub struct Server {
    pub child: Child,
    pub tcp: SocketAddr,
    pub fabric: Option<SocketAddr>,
}

impl Server {
    /// Starts the server with `args` plus ephemeral ports (`-p 0`, and `--fabric-port 0` unless
    /// `--no-fabric` is among `args`), and waits for its listening line.
    pub fn start(args: &[&str]) -> Server {
        let mut all: Vec<String> = vec!["-p".into(), "0".into()];
        if !args.contains(&"--no-fabric") && !args.contains(&"--fabric-port") {
            all.extend(["--fabric-port".into(), "0".into()]);
        }
        all.extend(args.iter().map(|s| s.to_string()));
        let mut child = Command::new(BIN)
            .args(&all)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("starting slipstream-cache");
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap()).read_line(&mut line).unwrap();
        let field = |name: &str| -> Option<String> {
            line.split_whitespace().find_map(|w| w.strip_prefix(name)).map(|s| s.to_string())
        };
        let tcp = field("tcp=").unwrap_or_else(|| panic!("server said {line:?} (args {all:?})")).parse().unwrap();
        let fabric = field("fabric=").filter(|f| f != "off").map(|f| f.parse().unwrap());
        Server { child, tcp, fabric }
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    pub fn connect(&self) -> Text {
        Text::connect(self.tcp)
    }

    /// The server's `stats` as name/value pairs.
    pub fn stats(&self) -> Vec<(String, String)> {
        self.connect().stats()
    }

    pub fn stat(&self, name: &str) -> Option<String> {
        self.stats().into_iter().find(|(k, _)| k == name).map(|(_, v)| v)
    }

    pub fn rss_bytes(&self) -> u64 {
        rss_bytes(self.pid())
    }

    pub fn is_running(&mut self) -> bool {
        self.child.try_wait().unwrap().is_none()
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// VmRSS of a process, in bytes.
pub fn rss_bytes(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let line = status.lines().find(|l| l.starts_with("VmRSS:")).unwrap();
    let kb: u64 = line.split_whitespace().nth(1).unwrap().parse().unwrap();
    kb * 1024
}

/// A text-protocol client over a raw TcpStream.
pub struct Text {
    pub reader: BufReader<TcpStream>,
    pub stream: TcpStream,
}

impl Text {
    pub fn connect(addr: SocketAddr) -> Text {
        let stream = TcpStream::connect(addr).unwrap();
        stream.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
        stream.set_nodelay(true).unwrap();
        Text { reader: BufReader::new(stream.try_clone().unwrap()), stream }
    }

    pub fn send(&mut self, bytes: &[u8]) {
        self.stream.write_all(bytes).unwrap();
    }

    /// One reply line, without "\r\n".
    pub fn line(&mut self) -> String {
        let mut line = Vec::new();
        self.reader.read_until(b'\n', &mut line).unwrap();
        assert!(line.ends_with(b"\r\n"), "reply line {:?} does not end with CRLF", String::from_utf8_lossy(&line));
        line.truncate(line.len() - 2);
        String::from_utf8(line).unwrap()
    }

    pub fn bytes(&mut self, n: usize) -> Vec<u8> {
        let mut data = vec![0u8; n];
        self.reader.read_exact(&mut data).unwrap();
        data
    }

    /// Sends one command line and returns the first reply line.
    pub fn command(&mut self, line: &str) -> String {
        self.send(format!("{line}\r\n").as_bytes());
        self.line()
    }

    pub fn set(&mut self, key: &str, value: &[u8]) -> String {
        let mut request = format!("set {key} 0 0 {}\r\n", value.len()).into_bytes();
        request.extend_from_slice(value);
        request.extend_from_slice(b"\r\n");
        self.send(&request);
        self.line()
    }

    /// The value of `key`, `None` on a miss.
    pub fn get(&mut self, key: &str) -> Option<Vec<u8>> {
        self.send(format!("get {key}\r\n").as_bytes());
        let header = self.line();
        if header == "END" {
            return None;
        }
        let parts: Vec<&str> = header.split(' ').collect();
        assert_eq!(parts[0], "VALUE", "get {key}: {header}");
        assert_eq!(parts[1], key);
        let len: usize = parts[3].parse().unwrap();
        let value = self.bytes(len);
        assert_eq!(self.bytes(2), b"\r\n");
        assert_eq!(self.line(), "END");
        Some(value)
    }

    pub fn stats(&mut self) -> Vec<(String, String)> {
        self.send(b"stats\r\n");
        let mut out = Vec::new();
        loop {
            let line = self.line();
            if line == "END" {
                return out;
            }
            let mut parts = line.splitn(3, ' ');
            assert_eq!(parts.next(), Some("STAT"), "stats line {line:?}");
            out.push((parts.next().unwrap().to_string(), parts.next().unwrap_or("").to_string()));
        }
    }

    /// True once the server closed the connection (reads EOF or a reset within `timeout`).
    pub fn closed_within(&mut self, timeout: Duration) -> bool {
        self.stream.set_read_timeout(Some(timeout)).unwrap();
        let mut rest = Vec::new();
        match self.reader.read_to_end(&mut rest) {
            Ok(_) => true,
            Err(e) => e.kind() == std::io::ErrorKind::ConnectionReset,
        }
    }
}

/// A binary-protocol request packet.
pub fn packet(op: u8, key: &[u8], extras: &[u8], value: &[u8], opaque: u32, cas: u64) -> Vec<u8> {
    let header = Header {
        magic: MAGIC_REQUEST,
        opcode: op,
        key_len: key.len() as u16,
        extras_len: extras.len() as u8,
        data_type: 0,
        vbucket_or_status: 0,
        body_len: (extras.len() + key.len() + value.len()) as u32,
        opaque,
        cas,
    };
    let mut out = vec![0u8; HEADER_BYTES];
    header.encode(&mut out);
    out.extend_from_slice(extras);
    out.extend_from_slice(key);
    out.extend_from_slice(value);
    out
}

pub fn set_packet(key: &[u8], value: &[u8], flags: u32, opaque: u32) -> Vec<u8> {
    let mut extras = flags.to_be_bytes().to_vec();
    extras.extend_from_slice(&0u32.to_be_bytes());
    packet(opcode::SET, key, &extras, value, opaque, 0)
}

pub fn get_packet(key: &[u8], opaque: u32) -> Vec<u8> {
    packet(opcode::GET, key, &[], &[], opaque, 0)
}

pub fn sasl_plain_packet(user: &str, password: &str) -> Vec<u8> {
    let value = format!("\0{user}\0{password}");
    packet(opcode::SASL_AUTH, b"PLAIN", &[], value.as_bytes(), 0, 0)
}

/// A decoded response packet.
#[derive(Debug, Clone)]
pub struct BinReply {
    pub header: Header,
    pub extras: Vec<u8>,
    pub key: Vec<u8>,
    pub value: Vec<u8>,
}

impl BinReply {
    pub fn status(&self) -> u16 {
        self.header.vbucket_or_status
    }
}

/// Splits `bytes` into response packets; panics on anything malformed.
pub fn parse_replies(mut bytes: &[u8]) -> Vec<BinReply> {
    let mut out = Vec::new();
    while !bytes.is_empty() {
        let header = Header::decode(bytes).expect("a complete response header");
        assert_eq!(header.magic, MAGIC_RESPONSE, "response magic");
        let body = &bytes[HEADER_BYTES..HEADER_BYTES + header.body_len as usize];
        let (extras, rest) = body.split_at(header.extras_len as usize);
        let (key, value) = rest.split_at(header.key_len as usize);
        out.push(BinReply { header, extras: extras.to_vec(), key: key.to_vec(), value: value.to_vec() });
        bytes = &bytes[HEADER_BYTES + header.body_len as usize..];
    }
    out
}

/// Reads exactly one binary response packet from a stream.
pub fn read_reply(stream: &mut impl Read) -> BinReply {
    let mut head = [0u8; HEADER_BYTES];
    stream.read_exact(&mut head).unwrap();
    let header = Header::decode(&head).unwrap();
    let mut body = vec![0u8; header.body_len as usize];
    stream.read_exact(&mut body).unwrap();
    let mut all = head.to_vec();
    all.extend_from_slice(&body);
    parse_replies(&all).remove(0)
}

/// A value whose bytes depend on `seed` and position, so a mixed-up value is detected.
pub fn pattern(len: usize, seed: u8) -> Vec<u8> {
    (0..len).map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed)).collect()
}

/// Polls `f` until it holds or `timeout` passes.
pub fn eventually(timeout: Duration, mut f: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + timeout;
    loop {
        if f() {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}
