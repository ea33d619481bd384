//! Plain Rust sockets, the baseline the forced-TCP fabric must match: blocking std::net
//! streams with TCP_NODELAY and length-prefixed frames.
//!
//! Frame (both directions): `[u32 LE payload length][u16 LE op][u16 zero][payload]`.
//! `OP_ECHO` is answered with the same payload, `OP_ACK` with an empty frame. The server runs one
//! thread per connection (at most `CONNECTIONS_MAX`), each answering in order, one write per answer.
//! The client pipelines up to `window` frames and reads acks in between: acks are 8 bytes, so
//! they never fill the socket buffers and pipelining cannot deadlock.

use std::io::{Read, Write};
use std::net::{Ipv4Addr, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use crate::args::SIZE_BYTES_MAX;
use crate::fabric::measure::{check_pattern, fill_pattern, Party};

pub const FRAME_HEADER_BYTES: usize = 8;
pub const OP_ECHO: u16 = 1;
pub const OP_ACK: u16 = 2;
/// Concurrent connections a socket server accepts; more are closed at once.
pub const CONNECTIONS_MAX: usize = 64;
/// A blocked read or write fails after this (no hang on a stuck peer).
pub const IO_TIMEOUT: Duration = Duration::from_secs(10);

pub fn encode_header(payload_len: usize, op: u16) -> [u8; FRAME_HEADER_BYTES] {
    assert!(payload_len <= SIZE_BYTES_MAX);
    let mut h = [0u8; FRAME_HEADER_BYTES];
    h[0..4].copy_from_slice(&(payload_len as u32).to_le_bytes());
    h[4..6].copy_from_slice(&op.to_le_bytes());
    h
}

/// Returns (payload length, op); rejects lengths above `SIZE_BYTES_MAX` and non-zero padding.
pub fn decode_header(h: &[u8; FRAME_HEADER_BYTES]) -> Result<(usize, u16), String> {
    let len = u32::from_le_bytes(h[0..4].try_into().unwrap()) as usize;
    let op = u16::from_le_bytes(h[4..6].try_into().unwrap());
    if len > SIZE_BYTES_MAX {
        return Err(format!("frame of {len} bytes exceeds {SIZE_BYTES_MAX}"));
    }
    if h[6] != 0 || h[7] != 0 {
        return Err("frame header padding is not zero".into());
    }
    Ok((len, op))
}

/// Binds `ip`:`port` (0 = any free port).
pub fn bind(ip: Ipv4Addr, port: u16) -> Result<TcpListener, String> {
    TcpListener::bind((ip, port)).map_err(|e| format!("bind {ip}:{port}: {e}"))
}

/// Accepts connections forever (the process ends when its parent leaves).
pub fn serve(listener: TcpListener) -> ! {
    let open = Arc::new(AtomicUsize::new(0));
    loop {
        let stream = match listener.accept() {
            Ok((s, _)) => s,
            Err(e) => {
                eprintln!("socket server: accept: {e}");
                std::thread::sleep(Duration::from_millis(10));
                continue;
            }
        };
        if open.fetch_add(1, Ordering::SeqCst) >= CONNECTIONS_MAX {
            open.fetch_sub(1, Ordering::SeqCst);
            drop(stream);
            continue;
        }
        let open = open.clone();
        std::thread::Builder::new()
            .name("ohb-socket-conn".into())
            .spawn(move || {
                if let Err(e) = serve_connection(stream) {
                    eprintln!("socket server: {e}");
                }
                open.fetch_sub(1, Ordering::SeqCst);
            })
            .expect("spawn connection thread");
    }
}

/// Answers frames until the peer closes. The buffer keeps room for the header in front of the
/// payload, so an echo is one write.
fn serve_connection(mut stream: TcpStream) -> Result<(), String> {
    stream.set_nodelay(true).map_err(|e| e.to_string())?;
    let mut buf = vec![0u8; FRAME_HEADER_BYTES + 4096];
    loop {
        let mut header = [0u8; FRAME_HEADER_BYTES];
        match stream.read_exact(&mut header) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => return Ok(()),
            Err(e) => return Err(format!("read header: {e}")),
        }
        let (len, op) = decode_header(&header)?;
        if buf.len() < FRAME_HEADER_BYTES + len {
            buf.resize(FRAME_HEADER_BYTES + len, 0);
        }
        stream
            .read_exact(&mut buf[FRAME_HEADER_BYTES..FRAME_HEADER_BYTES + len])
            .map_err(|e| format!("read payload: {e}"))?;
        match op {
            OP_ECHO => {
                buf[..FRAME_HEADER_BYTES].copy_from_slice(&encode_header(len, OP_ECHO));
                stream.write_all(&buf[..FRAME_HEADER_BYTES + len])
            }
            OP_ACK => stream.write_all(&encode_header(0, OP_ACK)),
            _ => return Err(format!("unknown op {op}")),
        }
        .map_err(|e| format!("write: {e}"))?;
    }
}

/// The client side of one connection.
pub struct SocketParty {
    stream: TcpStream,
    /// Header + payload for echo requests, and the same for ack requests.
    echo_frame: Vec<u8>,
    ack_frame: Vec<u8>,
    reply: Vec<u8>,
}

impl SocketParty {
    pub fn connect(addr: SocketAddr) -> Result<SocketParty, String> {
        let stream = TcpStream::connect_timeout(&addr, IO_TIMEOUT).map_err(|e| format!("connect {addr}: {e}"))?;
        stream.set_nodelay(true).map_err(|e| e.to_string())?;
        stream.set_read_timeout(Some(IO_TIMEOUT)).map_err(|e| e.to_string())?;
        stream.set_write_timeout(Some(IO_TIMEOUT)).map_err(|e| e.to_string())?;
        Ok(SocketParty { stream, echo_frame: Vec::new(), ack_frame: Vec::new(), reply: Vec::new() })
    }

    fn read_reply(&mut self, op_expected: u16, len_expected: usize) -> Result<(), String> {
        let mut header = [0u8; FRAME_HEADER_BYTES];
        self.stream.read_exact(&mut header).map_err(|e| format!("read reply header: {e}"))?;
        let (len, op) = decode_header(&header)?;
        if op != op_expected || len != len_expected {
            return Err(format!("reply op {op} len {len}, expected op {op_expected} len {len_expected}"));
        }
        self.stream.read_exact(&mut self.reply[..len]).map_err(|e| format!("read reply payload: {e}"))
    }
}

impl Party for SocketParty {
    fn prepare(&mut self, size_bytes: usize) -> Result<(), String> {
        assert!(size_bytes > 0 && size_bytes <= SIZE_BYTES_MAX);
        for (frame, op) in [(&mut self.echo_frame, OP_ECHO), (&mut self.ack_frame, OP_ACK)] {
            frame.clear();
            frame.extend_from_slice(&encode_header(size_bytes, op));
            frame.resize(FRAME_HEADER_BYTES + size_bytes, 0);
            fill_pattern(&mut frame[FRAME_HEADER_BYTES..]);
        }
        self.reply.resize(size_bytes, 0);
        Ok(())
    }

    fn echo(&mut self, verify: bool) -> Result<(), String> {
        let len = self.echo_frame.len() - FRAME_HEADER_BYTES;
        self.stream.write_all(&self.echo_frame).map_err(|e| format!("write: {e}"))?;
        self.read_reply(OP_ECHO, len)?;
        if verify {
            check_pattern(&self.reply[..len])?;
        }
        Ok(())
    }

    fn stream(&mut self, window: usize, count: u64) -> Result<(), String> {
        assert!(window > 0);
        let mut sent = 0u64;
        let mut acked = 0u64;
        while acked < count {
            while sent < count && sent - acked < window as u64 {
                self.stream.write_all(&self.ack_frame).map_err(|e| format!("write: {e}"))?;
                sent += 1;
            }
            self.read_reply(OP_ACK, 0)?;
            acked += 1;
        }
        assert_eq!(sent, acked);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fabric::measure::{measure, Plan};
    use crate::fabric::result::Mode;

    #[test]
    fn header_round_trip() {
        let h = encode_header(4096, OP_ECHO);
        assert_eq!(decode_header(&h).unwrap(), (4096, OP_ECHO));
        let mut bad = encode_header(1, OP_ACK);
        bad[7] = 1;
        assert!(decode_header(&bad).is_err());
        let mut huge = [0u8; FRAME_HEADER_BYTES];
        huge[0..4].copy_from_slice(&u32::MAX.to_le_bytes());
        assert!(decode_header(&huge).is_err());
    }

    /// In-process server thread (the CLI runs it in its own process; the loop is the same).
    #[test]
    fn echo_and_stream_over_loopback() {
        let listener = bind(Ipv4Addr::LOCALHOST, 0).unwrap();
        let addr = listener.local_addr().unwrap();
        std::thread::spawn(move || serve(listener));
        let mut party = SocketParty::connect(addr).unwrap();
        let plan =
            Plan { budget: Duration::from_millis(10), iterations: Some(50), warmup: Some(5), window: None, trials: 2 };
        for size in [1usize, 8, 100_000] {
            let p = measure(&mut party, Mode::Lat, size, &plan);
            assert_eq!(p.error, None);
            assert!(p.lat_us_p50.unwrap() > 0.0);
            let p = measure(&mut party, Mode::Bw, size, &plan);
            assert_eq!(p.error, None);
            assert!(p.bw_mb_s.unwrap() > 0.0);
        }
    }
}
