//! Differential test against a real memcached (1.6.18 on Debian 12): the same inputs go to memcached
//! over TCP and through a `Session` over the `ReferenceStore`; the replies must match byte for byte,
//! CAS values aside (each is replaced by its rank among the case's CAS values, since memcached's
//! counter is global). Our side is fed in uneven pieces, to exercise partial input too.
//!
//! Starts Debian's memcached 1.6 on a free loopback port (`make deps` installs it) and compares
//! with it; `MEMCACHED_ADDR=host:port` names another one instead (it is flushed).
//!
//! The corpus avoids what differs by design (see the crate's docs): `stats` contents, newer meta
//! flags, lines longer than 2048 bytes, binary VERBOSITY and unknown opcodes with bodies.

use std::io::{Read, Write};
use std::net::{Shutdown, TcpStream};
use std::sync::Arc;
use std::time::Duration;

use cache_proto::binary::{opcode, Header, HEADER_BYTES, MAGIC_REQUEST};
use cache_proto::clock::Clock;
use cache_proto::reference::ReferenceStore;
use cache_proto::{Session, SessionConfig};

/// A memcached of this test's own, killed when the test ends.
struct StartedMemcached {
    child: std::process::Child,
    address: String,
}

impl StartedMemcached {
    fn start() -> StartedMemcached {
        let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let mut command = std::process::Command::new("memcached");
        command.args(["-l", "127.0.0.1", "-U", "0", "-t", "1", "-p", &port.to_string()]);
        // memcached refuses to run as root without -u.
        if runs_as_root() {
            command.args(["-u", "nobody"]);
        }
        let child = command.spawn().expect("memcached 1.6 (Debian package memcached; `make deps` installs it)");
        let address = format!("127.0.0.1:{port}");
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while TcpStream::connect(&address).is_err() {
            assert!(std::time::Instant::now() < deadline, "memcached did not listen on {address}");
            std::thread::sleep(Duration::from_millis(20));
        }
        StartedMemcached { child, address }
    }
}

impl Drop for StartedMemcached {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Whether this process runs as root (memcached then needs `-u`).
fn runs_as_root() -> bool {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| s.lines().find(|l| l.starts_with("Uid:")).map(|l| l.split_whitespace().nth(1) == Some("0")))
        .unwrap_or(false)
}

fn memcached_reply(address: &str, input: &[u8]) -> Vec<u8> {
    let mut stream = TcpStream::connect(address).expect("connect to memcached");
    stream.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    stream.write_all(input).unwrap();
    // memcached answers everything it has read before it notices the end of the stream.
    stream.shutdown(Shutdown::Write).unwrap();
    let mut reply = Vec::new();
    let _ = stream.read_to_end(&mut reply);
    reply
}

fn flush(address: &str) {
    assert_eq!(memcached_reply(address, b"flush_all\r\n"), b"OK\r\n");
}

fn our_reply(input: &[u8], seed: u64) -> Vec<u8> {
    let store = Arc::new(ReferenceStore::new(Clock::system()));
    let mut config = SessionConfig::new("1.6.18");
    config.clock = Clock::system();
    let mut session = Session::new(store, Arc::new(config));
    let mut out = Vec::new();
    let mut pending: Vec<u8> = Vec::new();
    let mut random = seed | 1;
    let mut offset = 0;
    while offset < input.len() {
        random ^= random << 13;
        random ^= random >> 7;
        random ^= random << 17;
        let piece = 1 + (random % 64) as usize;
        let end = (offset + piece).min(input.len());
        pending.extend_from_slice(&input[offset..end]);
        offset = end;
        let mut processed = session.process(&pending, &mut out);
        pending.drain(..processed.consumed);
        while processed.output_full {
            processed = session.process(&pending, &mut out);
            pending.drain(..processed.consumed);
        }
        if processed.close {
            break;
        }
    }
    out
}

/// Replaces every CAS in a text reply by its rank among the reply's distinct non-zero CAS values.
fn normalize_text(reply: &[u8]) -> String {
    let text = String::from_utf8_lossy(reply).into_owned();
    let is_cas_token = |line: &str, index: usize, token: &str| -> Option<u64> {
        if line.starts_with("VALUE ") && index == 4 {
            return token.parse().ok();
        }
        let meta = ["VA ", "HD", "EN", "NF", "NS", "EX"].iter().any(|code| line.starts_with(code));
        if meta && index > 0 && token.starts_with('c') {
            return token[1..].parse().ok();
        }
        if line.starts_with("ME ") && token.starts_with("cas=") {
            return token[4..].parse().ok();
        }
        None
    };
    let mut values: Vec<u64> = Vec::new();
    for line in text.split("\r\n") {
        for (index, token) in line.split(' ').enumerate() {
            if let Some(cas) = is_cas_token(line, index, token) {
                values.push(cas);
            }
        }
    }
    values.retain(|&cas| cas != 0);
    values.sort_unstable();
    values.dedup();
    let rank = |cas: u64| if cas == 0 { 0 } else { values.binary_search(&cas).unwrap() + 1 };
    let lines: Vec<String> = text
        .split("\r\n")
        .map(|line| {
            let tokens: Vec<String> = line
                .split(' ')
                .enumerate()
                .map(|(index, token)| match is_cas_token(line, index, token) {
                    Some(cas) if line.starts_with("VALUE ") => format!("<cas{}>", rank(cas)),
                    Some(cas) if token.starts_with("cas=") => format!("cas=<{}>", rank(cas)),
                    Some(cas) => format!("c<{}>", rank(cas)),
                    None => token.to_string(),
                })
                .collect();
            tokens.join(" ")
        })
        .collect();
    lines.join("\r\n")
}

/// Replaces every CAS in binary responses by its rank.
fn normalize_binary(reply: &[u8]) -> Vec<u8> {
    let mut packets = Vec::new();
    let mut rest = reply;
    while let Some(header) = Header::decode(rest) {
        let end = (HEADER_BYTES + header.body_len as usize).min(rest.len());
        packets.push((header, rest[HEADER_BYTES..end].to_vec()));
        rest = &rest[end..];
    }
    let mut values: Vec<u64> = packets.iter().map(|(header, _)| header.cas).filter(|&cas| cas != 0).collect();
    values.sort_unstable();
    values.dedup();
    let mut normalized = Vec::new();
    for (mut header, body) in packets {
        if header.cas != 0 {
            header.cas = values.binary_search(&header.cas).unwrap() as u64 + 1;
        }
        let mut bytes = [0u8; HEADER_BYTES];
        header.encode(&mut bytes);
        normalized.extend_from_slice(&bytes);
        normalized.extend_from_slice(&body);
    }
    normalized.extend_from_slice(rest);
    normalized
}

fn text_cases() -> Vec<Vec<u8>> {
    let long_key = "k".repeat(251);
    let key_250 = "k".repeat(250);
    let big = "x".repeat(2_000_000);
    let cases: Vec<String> = vec![
        // Classic storage and retrieval.
        "set a 5 0 3\r\nabc\r\nget a\r\ngets a\r\nget a b a\r\n".into(),
        "add a 0 0 1\r\n1\r\nadd a 0 0 1\r\n2\r\nreplace a 3 0 1\r\n3\r\nreplace zz 0 0 1\r\n3\r\nget a\r\n".into(),
        "set a 7 0 2\r\n23\r\nappend a 9 0 2\r\n45\r\nprepend a 9 0 2\r\n01\r\nappend zz 0 0 1\r\n1\r\nget a\r\n".into(),
        "cas a 0 0 1 1\r\nx\r\nset a 0 0 1\r\nx\r\ngets a\r\ncas a 0 0 1 99\r\ny\r\n".into(),
        "set a 0 0 1\r\nab\r\nset a 0 0 1 noreply\r\nab\r\n".into(),
        format!("set {long_key} 0 0 5\r\nhello\r\nset {key_250} 0 0 1\r\nx\r\nget {key_250}\r\n"),
        "set a 0 0 5 noreply\r\nhello\r\nget a\r\nset a x 0 5 noreply\r\nhello\r\n".into(),
        "set a 0 0 -1\r\nset a -1 0 1\r\nset a 0 0\r\nset a 0 0 1 noreply extra\r\nset a 4294967297 0 1\r\nx\r\nget a\r\n".into(),
        format!("set a 0 0 1\r\nx\r\nset a 0 0 {}\r\n{big}\r\nget a\r\n", big.len()),
        format!("set a 0 0 1\r\nx\r\nappend a 0 0 {}\r\n{big}\r\nget a\r\n", big.len()),
        "get\r\nget \r\ngets\r\ngat\r\ngat 10\r\ngat x a\r\nbget a\r\n".into(),
        // (memcached 1.6.18 also drops replies queued before this error in the same read: not copied.)
        format!("get a {long_key}\r\n"),
        "set k0 0 0 1\r\n0\r\nget k0 k1 k2 k3 k4 k5 k6 k7 k8 k9 k10 k11 k12 k13 k14 k15 k16 k17 k18 k19 k20 k21 k22 k0 k0\r\n".into(),
        "\r\n\n\rx\r\nnosuchcommand a b\r\nGET a\r\n".into(),
        "set a 0 0 1\nx\r\nget a\n".into(),
        // delete, incr/decr, touch, flush_all.
        "set a 0 0 1\r\nx\r\ndelete a\r\ndelete a\r\nset a 0 0 1\r\nx\r\ndelete a 0\r\ndelete a 1\r\ndelete a noreply\r\ndelete\r\ndelete a 0 noreply x\r\n".into(),
        "incr n 1\r\nset n 0 0 2\r\n10\r\ndecr n 5\r\nget n\r\nincr n 100\r\nget n\r\ndecr n 1000\r\nincr n 18446744073709551615\r\nincr n 1\r\n".into(),
        "set n 0 0 2\r\n10\r\nincr n -1\r\nincr n x\r\nincr n\r\nincr n 1 noreply\r\nget n\r\nset s 0 0 1\r\nx\r\nincr s 1\r\nset e 0 0 0\r\n\r\nincr e 1\r\n".into(),
        "set n 0 0 3\r\n 12\r\nincr n 1\r\nset n 0 0 3\r\n12a\r\nincr n 1\r\n".into(),
        "set a 0 100 1\r\nx\r\ntouch a 10\r\ntouch nope 10\r\ntouch a\r\ntouch a x\r\ntouch a -1\r\nget a\r\n".into(),
        "set a 0 0 1\r\nx\r\ngats 100 a nope\r\ngat -1 a\r\nget a\r\n".into(),
        "set a 0 -1 1\r\nx\r\nset b 0 2592001 1\r\nx\r\nget a b\r\n".into(),
        "set a 0 0 1\r\nx\r\nflush_all\r\nget a\r\nflush_all -1\r\nflush_all x\r\nflush_all 1 2 3\r\nflush_all 0 noreply\r\n".into(),
        "version\r\nverbosity\r\nverbosity 1\r\nverbosity x\r\nverbosity 1 noreply\r\nshutdown\r\n".into(),
        "mn\r\nquit\r\nget a\r\n".into(),
        "GET / HTTP/1.1\r\nget a\r\n".into(),
        "stats reset\r\nstats foo\r\nstats detail\r\nstats detail on\r\nstats detail off\r\n".into(),
        // Meta get.
        "set a 3 0 1\r\nx\r\nmg a s v f k O123 h\r\nmg a\r\nmg a v q\r\nmg missing k O1\r\nmg missing q k\r\nmn\r\n".into(),
        "set a 0 0 1\r\nx\r\nmg a c\r\nmg a h l t\r\nmg a a\r\nmg a v v\r\nmg a Sx\r\n".into(),
        "mg a O0 s t c f l h k q u v N1 R1 T1 b P L Z\r\nmg a T\r\nmg a Tx\r\nmg a N\r\nmg a R\r\nmg a M\r\nmg a MXX\r\nmg a J1 D1 Fx\r\n".into(),
        format!("mg {long_key} v\r\nmg a O{}\r\nmg\r\nmg a \u{80}\r\n", "x".repeat(40)),
        "mg Zm9v b k v\r\nms Zm9v 2 b k\r\nhi\r\nmg Zm9v b k v\r\nmg foo v\r\nmg !!!! b v\r\nmd Zm9v b k\r\n".into(),
        "set a 0 100 1\r\nx\r\nmg a T30 t v\r\nmg a t\r\nmg nope T30 v\r\n".into(),
        "mg a N30 v c t\r\nmg a v c t\r\nmg a N30 v\r\n".into(),
        "set a 0 100 1\r\nx\r\nmg a R30 v\r\nmg a R300 v\r\nmg a R300 v\r\n".into(),
        "set a 0 0 1\r\nx\r\nmd a I T30\r\nmg a v c t\r\nmg a v\r\nmd a I\r\nmg a\r\n".into(),
        // Meta set.
        "ms b 3 T0 F5 c k O9\r\nabc\r\nms b 3 q\r\nabc\r\nms b 3 MX\r\nabc\r\nms b S3\r\nabc\r\nmn\r\nmg b v f\r\n".into(),
        "ms a\r\nms a x\r\nms a -1\r\nms a 2 T\r\nhi\r\nms a 2 c\r\nhi\r\nms a 2\r\nhiX\r\n".into(),
        "ms a 2 ME c\r\nhi\r\nms a 2 ME c\r\nho\r\nms a 2 MR\r\nho\r\nms z 2 MR\r\nho\r\nms a 2 MA\r\n!!\r\nms a 2 MP\r\n<<\r\nms z 2 MA\r\nho\r\nmg a v\r\n".into(),
        "ms a 2 c\r\nhi\r\nmg a c\r\nms a 2 C999 c\r\nho\r\nms zz 2 C5\r\nho\r\nms a 2 MA C999\r\n!!\r\nms zz 2 MA C999\r\n!!\r\n".into(),
        "ms a 2 T-1\r\nhi\r\nmg a v\r\nms a 2 I\r\nhi\r\nmg a v\r\n".into(),
        format!("ms a 2 O{}\r\nhi\r\nms {long_key} 2\r\nhi\r\nms a 2 b\r\nhi\r\nms a 2 k O1 q\r\nhi\r\nmn\r\n", "x".repeat(40)),
        format!("ms a 1\r\nx\r\nms a {} T0\r\n{big}\r\nmg a v\r\n", big.len()),
        "ms a 2 F4294967297\r\nhi\r\nmg a f v\r\nms a 2 Fx\r\nhi\r\nms a 2 Cx\r\nhi\r\n".into(),
        // Meta delete.
        "md b q\r\nmd b\r\nmd b k O5\r\nmd b zz\r\nmd b C1 C2\r\nmn\r\n".into(),
        "set a 0 0 1\r\nx\r\nmd a C999 k\r\nmd a q\r\nmd a\r\nset a 0 0 1\r\nx\r\nmd a O1 k\r\n".into(),
        format!("md\r\nmd {long_key}\r\nmd a O{}\r\n", "x".repeat(40)),
        // Meta arithmetic.
        "ma c\r\nma c N0 J10 v\r\nma c v t c\r\nma c MD D100 v\r\nma c MX\r\nma c q\r\nma c q D1 v\r\nmn\r\n".into(),
        "set s 0 0 1\r\nx\r\nma s\r\nma s q\r\nma s Dx\r\nma s Jx\r\nma s M\r\nma nope O1 k\r\nma nope q\r\n".into(),
        "set n 0 0 1\r\n5\r\nma n M+ v\r\nma n M- D2 v k O7\r\nma n MI D10\r\nma n C1 v\r\nmg n v\r\n".into(),
        // Meta debug and no-op.
        "set s 0 0 1\r\nx\r\nme s\r\nme nope\r\nme\r\nme Zm9v b\r\nms Zm9v 1 b\r\nx\r\nme Zm9v b\r\n".into(),
        "mn\r\nmn extra\r\nmx a\r\nm\r\n".into(),
        // More noreply, CAS ranks, edge values.
        "set a 0 0 1 noreply\r\nx\r\nincr a 1 noreply\r\ntouch a x noreply\r\ndelete a 0 noreply\r\nget a\r\n".into(),
        "set a 0 0 1\r\nx\r\nset b 0 0 1\r\ny\r\nset c 0 0 1\r\nz\r\ngets c a b nope\r\n".into(),
        "mg a k b\r\nms a 0\r\n\r\nmg a v s\r\nma n N0 J18446744073709551615 v\r\nma n v\r\n".into(),
        "set a 0 0 1\r\nx\r\nmg a k O1 q\r\nmg a c f s t v k\r\nmd a q\r\nmg a v\r\nmn\r\n".into(),
        "ms a 3 I C1\r\nabc\r\nms a 3 MS\r\nabc\r\nms a 3 MS\r\nabc\r\nms a 3 MR C1 I\r\nxyz\r\nmg a v\r\n".into(),
        "ms a 2 k b\r\nhi\r\nma Zm9v b\r\nmd Zm9v b q\r\nmd Zm9v b\r\n".into(),
        "set a 0 0 1\r\nx\r\nflush_all 100\r\nget a\r\nflush_all 0\r\nget a\r\n".into(),
        "verbosity noreply\r\nflush_all noreply 5\r\nversion extra tokens\r\n".into(),
    ];
    cases.into_iter().map(String::into_bytes).collect()
}

fn packet(op: u8, key: &[u8], extras: &[u8], value: &[u8], opaque: u32, cas: u64) -> Vec<u8> {
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
    let mut bytes = vec![0u8; HEADER_BYTES];
    header.encode(&mut bytes);
    [bytes, extras.to_vec(), key.to_vec(), value.to_vec()].concat()
}

fn set_extras(flags: u32, exptime: u32) -> Vec<u8> {
    [flags.to_be_bytes(), exptime.to_be_bytes()].concat()
}

fn arithmetic_extras(delta: u64, initial: u64, expiration: u32) -> Vec<u8> {
    [&delta.to_be_bytes()[..], &initial.to_be_bytes()[..], &expiration.to_be_bytes()[..]].concat()
}

fn binary_cases() -> Vec<Vec<u8>> {
    let set = |key: &[u8], value: &[u8], opaque: u32| packet(opcode::SET, key, &set_extras(7, 0), value, opaque, 0);
    let big = vec![b'x'; 2_000_000];
    let cases: Vec<Vec<Vec<u8>>> = vec![
        vec![set(b"a", b"hello", 1), packet(opcode::GET, b"a", &[], &[], 2, 0), packet(opcode::GETK, b"a", &[], &[], 3, 0)],
        vec![
            packet(opcode::GET, b"nope", &[], &[], 1, 0),
            packet(opcode::GETK, b"nope", &[], &[], 2, 0),
            packet(opcode::GETQ, b"nope", &[], &[], 3, 0),
            packet(opcode::GETKQ, b"nope", &[], &[], 4, 0),
            packet(opcode::NOOP, &[], &[], &[], 5, 0),
        ],
        vec![set(b"a", b"v", 1), packet(opcode::GETQ, b"a", &[], &[], 2, 0), packet(opcode::GETKQ, b"a", &[], &[], 3, 0)],
        vec![
            packet(opcode::ADD, b"a", &set_extras(1, 0), b"1", 1, 0),
            packet(opcode::ADD, b"a", &set_extras(1, 0), b"2", 2, 0),
            packet(opcode::REPLACE, b"a", &set_extras(2, 0), b"3", 3, 0),
            packet(opcode::REPLACE, b"zz", &set_extras(2, 0), b"3", 4, 0),
            packet(opcode::APPEND, b"a", &[], b"45", 5, 0),
            packet(opcode::PREPEND, b"a", &[], b"01", 6, 0),
            packet(opcode::APPEND, b"zz", &[], b"45", 7, 0),
            packet(opcode::GET, b"a", &[], &[], 8, 0),
        ],
        vec![
            packet(opcode::SETQ, b"a", &set_extras(0, 0), b"q", 1, 0),
            packet(opcode::ADDQ, b"a", &set_extras(0, 0), b"q", 2, 0),
            packet(opcode::REPLACEQ, b"zz", &set_extras(0, 0), b"q", 3, 0),
            packet(opcode::APPENDQ, b"a", &[], b"q", 4, 0),
            packet(opcode::DELETEQ, b"a", &[], &[], 5, 0),
            packet(opcode::DELETEQ, b"a", &[], &[], 6, 0),
            packet(opcode::NOOP, &[], &[], &[], 7, 0),
        ],
        vec![
            set(b"a", b"v", 1),
            packet(opcode::SET, b"a", &set_extras(0, 0), b"w", 2, 12345),
            packet(opcode::ADD, b"zz", &set_extras(0, 0), b"w", 3, 12345),
            packet(opcode::DELETE, b"a", &[], &[], 4, 12345),
            packet(opcode::DELETE, b"a", &[], &[], 5, 0),
            packet(opcode::DELETE, b"a", &[], &[], 6, 0),
        ],
        vec![
            packet(opcode::INCREMENT, b"n", &arithmetic_extras(1, 10, 0xffff_ffff), &[], 1, 0),
            packet(opcode::INCREMENT, b"n", &arithmetic_extras(1, 10, 0), &[], 2, 0),
            packet(opcode::INCREMENT, b"n", &arithmetic_extras(5, 10, 0), &[], 3, 0),
            packet(opcode::DECREMENT, b"n", &arithmetic_extras(100, 10, 0), &[], 4, 0),
            packet(opcode::INCREMENTQ, b"n", &arithmetic_extras(1, 0, 0), &[], 5, 0),
            packet(opcode::DECREMENTQ, b"m", &arithmetic_extras(1, 3, 0), &[], 6, 0),
            packet(opcode::GET, b"n", &[], &[], 7, 0),
            packet(opcode::GET, b"m", &[], &[], 8, 0),
            set(b"s", b"x", 9),
            packet(opcode::INCREMENT, b"s", &arithmetic_extras(1, 0, 0), &[], 10, 0),
            packet(opcode::INCREMENT, b"n", &arithmetic_extras(1, 0, 0), &[], 11, 99999),
        ],
        vec![
            set(b"a", b"v", 1),
            packet(opcode::TOUCH, b"a", &10u32.to_be_bytes(), &[], 2, 0),
            packet(opcode::GAT, b"a", &10u32.to_be_bytes(), &[], 3, 0),
            packet(opcode::GATK, b"a", &10u32.to_be_bytes(), &[], 4, 0),
            packet(opcode::GATQ, b"a", &10u32.to_be_bytes(), &[], 5, 0),
            packet(opcode::GATKQ, b"nope", &10u32.to_be_bytes(), &[], 6, 0),
            packet(opcode::GATK, b"nope", &10u32.to_be_bytes(), &[], 7, 0),
            packet(opcode::TOUCH, b"nope", &10u32.to_be_bytes(), &[], 8, 0),
            packet(opcode::GAT, b"a", &0xffff_fffeu32.to_be_bytes(), &[], 9, 0),
        ],
        vec![
            set(b"a", b"v", 1),
            packet(opcode::FLUSH, &[], &[], &[], 2, 0),
            packet(opcode::GET, b"a", &[], &[], 3, 0),
            packet(opcode::FLUSHQ, &[], &0u32.to_be_bytes(), &[], 4, 0),
            packet(opcode::VERSION, &[], &[], &[], 5, 0),
            packet(opcode::NOOP, &[], &[], &[], 6, 0),
        ],
        vec![packet(opcode::STAT, b"nosuch", &[], &[], 1, 0), packet(opcode::STAT, b"reset", &[], &[], 2, 0)],
        vec![packet(opcode::STAT, b"detail on", &[], &[], 1, 0), packet(opcode::STAT, b"detail x", &[], &[], 2, 0)],
        vec![
            set(b"a", b"v", 1),
            packet(opcode::GATQ, b"nope", &10u32.to_be_bytes(), &[], 2, 0),
            packet(opcode::GATKQ, b"a", &10u32.to_be_bytes(), &[], 3, 0),
            packet(opcode::ADDQ, b"b", &set_extras(0, 0), b"q", 4, 0),
            packet(opcode::APPENDQ, b"zz", &[], b"q", 5, 0),
            packet(opcode::PREPENDQ, b"b", &[], b"<", 6, 0),
            packet(opcode::REPLACEQ, b"b", &set_extras(9, 0), b"r", 7, 0),
            packet(opcode::INCREMENTQ, b"zz", &arithmetic_extras(1, 0, 0xffff_ffff), &[], 8, 0),
            packet(opcode::GETK, b"b", &[], &[], 9, 0),
            packet(opcode::FLUSH, &[], &100u32.to_be_bytes(), &[], 10, 0),
            packet(opcode::GET, b"a", &[], &[], 11, 0),
        ],
        vec![packet(opcode::SASL_AUTH, b"PLAIN", &[], b"\0user\0secret", 1, 0), packet(opcode::NOOP, &[], &[], &[], 2, 0)],
        vec![packet(opcode::SASL_STEP, b"PLAIN", &[], b"x", 1, 0), packet(opcode::SASL_LIST_MECHS, b"", &[], &[], 2, 0)],
        vec![packet(opcode::VERSION, b"k", &[], &[], 1, 0)],
        vec![packet(opcode::DELETE, b"a", &[], b"v", 1, 0)],
        vec![packet(opcode::TOUCH, b"a", &[0; 8], &[], 1, 0)],
        vec![packet(opcode::SASL_LIST_MECHS, &[], &[], &[], 1, 0), packet(opcode::NOOP, &[], &[], &[], 2, 0)],
        vec![packet(0x50, &[], &[], &[], 1, 0), packet(opcode::NOOP, &[], &[], &[], 2, 0)],
        vec![set(b"a", b"v", 1), packet(opcode::QUIT, &[], &[], &[], 2, 0), packet(opcode::NOOP, &[], &[], &[], 3, 0)],
        vec![packet(opcode::QUITQ, &[], &[], &[], 1, 0), packet(opcode::NOOP, &[], &[], &[], 2, 0)],
        vec![set(b"a", b"v", 1), packet(opcode::SET, b"a", &set_extras(0, 0), &big, 2, 0), packet(opcode::GET, b"a", &[], &[], 3, 0)],
        vec![packet(opcode::APPEND, b"a", &[], &big, 1, 0), packet(opcode::NOOP, &[], &[], &[], 2, 0)],
        // Malformed packets close the connection.
        vec![packet(opcode::GET, b"a", &[1, 2, 3, 4], &[], 1, 0), packet(opcode::NOOP, &[], &[], &[], 2, 0)],
        vec![packet(opcode::SET, b"a", &[], b"v", 1, 0), packet(opcode::NOOP, &[], &[], &[], 2, 0)],
        vec![packet(opcode::NOOP, b"a", &[], &[], 1, 0)],
        vec![packet(opcode::VERSION, &[], &[1, 2, 3, 4], &[], 1, 0)],
        vec![packet(opcode::INCREMENT, b"n", &[0; 8], &[], 1, 0)],
        vec![packet(opcode::GET, &vec![b'k'; 251], &[], &[], 1, 0)],
        vec![packet(opcode::FLUSH, b"x", &[], &[], 1, 0)],
        vec![{
            let mut bad = packet(opcode::GET, b"abc", &[], &[], 1, 0);
            bad[8..12].copy_from_slice(&2u32.to_be_bytes());
            bad
        }],
        vec![{
            let mut bad = packet(opcode::NOOP, &[], &[], &[], 1, 0);
            bad[0] = 0x81;
            bad
        }],
    ];
    cases.into_iter().map(|packets| packets.concat()).collect()
}

#[test]
fn replies_match_memcached() {
    let started;
    let address = match std::env::var("MEMCACHED_ADDR") {
        Ok(address) => address,
        Err(_) => {
            started = StartedMemcached::start();
            started.address.clone()
        }
    };
    let mut failures = Vec::new();
    for (index, case) in text_cases().iter().enumerate() {
        flush(&address);
        let expected = normalize_text(&memcached_reply(&address, case));
        for seed in [1u64, 7, 1234] {
            let actual = normalize_text(&our_reply(case, seed));
            if actual != expected {
                failures.push(format!(
                    "text case {index}: {:?}\n  memcached: {expected:?}\n  ours:      {actual:?}",
                    String::from_utf8_lossy(&case[..case.len().min(200)])
                ));
                break;
            }
        }
    }
    for (index, case) in binary_cases().iter().enumerate() {
        flush(&address);
        let expected = normalize_binary(&memcached_reply(&address, case));
        let actual = normalize_binary(&our_reply(case, 3));
        if actual != expected {
            failures.push(format!("binary case {index}:\n  memcached: {expected:?}\n  ours:      {actual:?}"));
        }
    }
    eprintln!("compared {} text and {} binary cases", text_cases().len(), binary_cases().len());
    assert!(failures.is_empty(), "{} differences:\n{}", failures.len(), failures.join("\n"));
}
