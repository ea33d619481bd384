//! A minimal memcached binary-protocol server on the fabric (gets, stores with CAS, append,
//! prepend, incr/decr, touch, delete, NOOP, VERSION, STAT, FLUSH; no expiry, no SASL), for
//! testing the client's fabric transport without slipstream-cache and for measuring the client's
//! own cost over a raw fabric request.
use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use cache_proto::binary::{opcode, status, Header, HEADER_BYTES, MAGIC_RESPONSE};

type Store = Arc<Mutex<HashMap<Vec<u8>, (Vec<u8>, u32, u64)>>>;

pub struct MockFabricServer {
    pub node: fabric::Node,
    pub addr: SocketAddr,
}

#[allow(clippy::too_many_arguments)]
fn reply(out: &mut Vec<u8>, op: u8, st: u16, opaque: u32, cas: u64, extras: &[u8], key: &[u8], value: &[u8]) {
    let h = Header {
        magic: MAGIC_RESPONSE,
        opcode: op,
        key_len: key.len() as u16,
        extras_len: extras.len() as u8,
        data_type: 0,
        vbucket_or_status: st,
        body_len: (extras.len() + key.len() + value.len()) as u32,
        opaque,
        cas,
    };
    let at = out.len();
    out.resize(at + HEADER_BYTES, 0);
    h.encode(&mut out[at..]);
    out.extend_from_slice(extras);
    out.extend_from_slice(key);
    out.extend_from_slice(value);
}

fn next(counter: &Mutex<u64>) -> u64 {
    let mut c = counter.lock().unwrap();
    *c += 1;
    *c
}

fn handle(store: &Store, next_cas: &Mutex<u64>, mut payload: &[u8], out: &mut Vec<u8>) {
    while payload.len() >= HEADER_BYTES {
        let h = Header::decode(payload).unwrap();
        let total = HEADER_BYTES + h.body_len as usize;
        let body = &payload[HEADER_BYTES..total];
        let extras = &body[..h.extras_len as usize];
        let key = &body[h.extras_len as usize..h.extras_len as usize + h.key_len as usize];
        let value = &body[h.extras_len as usize + h.key_len as usize..];
        payload = &payload[total..];
        let (op, opaque) = (h.opcode, h.opaque);
        match op {
            opcode::GET | opcode::GETK | opcode::GETQ | opcode::GETKQ => {
                let with_key = matches!(op, opcode::GETK | opcode::GETKQ);
                let quiet = matches!(op, opcode::GETQ | opcode::GETKQ);
                let key_out: &[u8] = if with_key { key } else { b"" };
                match store.lock().unwrap().get(key) {
                    Some((v, flags, cas)) => reply(out, op, 0, opaque, *cas, &flags.to_be_bytes(), key_out, v),
                    None if quiet => {}
                    None => reply(out, op, status::KEY_NOT_FOUND, opaque, 0, b"", key_out, b"Not found"),
                }
            }
            opcode::SET | opcode::ADD | opcode::REPLACE | opcode::APPEND | opcode::PREPEND => {
                let mut map = store.lock().unwrap();
                let current = map.get(key).cloned();
                let refused = match (op, &current) {
                    (opcode::ADD, Some(_)) => Some(status::KEY_EXISTS),
                    (opcode::REPLACE, None) => Some(status::KEY_NOT_FOUND),
                    (opcode::APPEND | opcode::PREPEND, None) => Some(status::ITEM_NOT_STORED),
                    (_, None) if h.cas != 0 => Some(status::KEY_NOT_FOUND),
                    (_, Some((_, _, cas))) if h.cas != 0 && h.cas != *cas => Some(status::KEY_EXISTS),
                    _ => None,
                };
                if let Some(st) = refused {
                    reply(out, op, st, opaque, 0, b"", b"", b"");
                    continue;
                }
                let cas = next(next_cas);
                let item = match (op, current) {
                    (opcode::APPEND, Some((v, flags, _))) => ([v.as_slice(), value].concat(), flags),
                    (opcode::PREPEND, Some((v, flags, _))) => ([value, v.as_slice()].concat(), flags),
                    _ => (value.to_vec(), u32::from_be_bytes(extras[..4].try_into().unwrap())),
                };
                map.insert(key.to_vec(), (item.0, item.1, cas));
                reply(out, op, 0, opaque, cas, b"", b"", b"");
            }
            opcode::INCREMENT | opcode::DECREMENT => {
                let delta = u64::from_be_bytes(extras[0..8].try_into().unwrap());
                let initial = u64::from_be_bytes(extras[8..16].try_into().unwrap());
                let exptime = u32::from_be_bytes(extras[16..20].try_into().unwrap());
                let mut map = store.lock().unwrap();
                let result = match map.get(key) {
                    None if exptime == 0xffff_ffff => Err(status::KEY_NOT_FOUND),
                    None => Ok((initial, 0)),
                    Some((v, flags, _)) => match std::str::from_utf8(v).ok().and_then(|t| t.trim().parse::<u64>().ok())
                    {
                        None => Err(status::NON_NUMERIC),
                        Some(n) if op == opcode::INCREMENT => Ok((n.wrapping_add(delta), *flags)),
                        Some(n) => Ok((n.saturating_sub(delta), *flags)),
                    },
                };
                match result {
                    Ok((n, flags)) => {
                        let cas = next(next_cas);
                        map.insert(key.to_vec(), (n.to_string().into_bytes(), flags, cas));
                        reply(out, op, 0, opaque, cas, b"", b"", &n.to_be_bytes());
                    }
                    Err(st) => reply(out, op, st, opaque, 0, b"", b"", b""),
                }
            }
            opcode::TOUCH => {
                let st = if store.lock().unwrap().contains_key(key) { 0 } else { status::KEY_NOT_FOUND };
                reply(out, op, st, opaque, 0, b"", b"", b"");
            }
            opcode::DELETE => {
                let mut map = store.lock().unwrap();
                let st = match map.get(key) {
                    None => status::KEY_NOT_FOUND,
                    Some((_, _, cas)) if h.cas != 0 && h.cas != *cas => status::KEY_EXISTS,
                    Some(_) => {
                        map.remove(key);
                        0
                    }
                };
                reply(out, op, st, opaque, 0, b"", b"", b"");
            }
            opcode::FLUSH => {
                store.lock().unwrap().clear();
                reply(out, op, 0, opaque, 0, b"", b"", b"");
            }
            opcode::NOOP => reply(out, op, 0, opaque, 0, b"", b"", b""),
            opcode::VERSION => reply(out, op, 0, opaque, 0, b"", b"", b"1.6.18-mock"),
            opcode::STAT => {
                reply(out, op, 0, opaque, 0, b"", b"pid", std::process::id().to_string().as_bytes());
                reply(out, op, 0, opaque, 0, b"", b"", b"");
            }
            _ => reply(out, op, status::UNKNOWN_COMMAND, opaque, 0, b"", b"", b"Unknown command"),
        }
    }
}

impl MockFabricServer {
    pub fn start() -> MockFabricServer {
        let store: Store = Arc::default();
        let next_cas = Arc::new(Mutex::new(0u64));
        let config = fabric::Config {
            listen: Some("127.0.0.1:0".parse().unwrap()),
            handler_mode: fabric::HandlerMode::Inline,
            ..fabric::Config::default()
        };
        let node = fabric::Node::start(
            config,
            Some(Arc::new(move |request: fabric::Request| {
                assert_eq!(request.op(), cache_proto::FABRIC_OP_BINARY);
                let mut out = Vec::new();
                handle(&store, &next_cas, request.payload(), &mut out);
                request.respond(&out);
            })),
        )
        .expect("fabric server node");
        let addr = node.local_addr().unwrap();
        MockFabricServer { node, addr }
    }
}
