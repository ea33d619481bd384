//! The harness of the unit tests: a session over a `ReferenceStore` with a manual clock, fed the
//! way a server feeds it (unconsumed bytes kept and resent with the next input).

use std::sync::Arc;

use crate::binary::{Header, HEADER_BYTES, MAGIC_REQUEST, MAGIC_RESPONSE};
use crate::clock::Clock;
use crate::reference::ReferenceStore;
use crate::session::{Credentials, Session, SessionConfig};

/// The manual clock's start: a recent, round time.
pub(crate) const START_UNIX_S: u64 = 1_700_000_000;

pub(crate) struct Harness {
    pub(crate) clock: Clock,
    pub(crate) store: Arc<ReferenceStore>,
    pub(crate) config: Arc<SessionConfig>,
    pub(crate) session: Session,
    pending: Vec<u8>,
    pub(crate) closed: bool,
}

impl Harness {
    pub(crate) fn new() -> Harness {
        Harness::with(|_| {})
    }

    pub(crate) fn with_max_item_bytes(max_item_bytes: usize) -> Harness {
        Harness::build(|_| {}, |clock| ReferenceStore::with_limits(clock, max_item_bytes, usize::MAX))
    }

    /// A harness whose clients must log in as "user" with password "secret".
    pub(crate) fn with_credentials() -> Harness {
        Harness::with(|config| {
            config.credentials = Some(Arc::new(Credentials::from_authfile("user:secret\nother:pass:word\n")));
        })
    }

    pub(crate) fn with(configure: impl FnOnce(&mut SessionConfig)) -> Harness {
        Harness::build(configure, ReferenceStore::new)
    }

    pub(crate) fn build(configure: impl FnOnce(&mut SessionConfig), store: impl FnOnce(Clock) -> ReferenceStore) -> Harness {
        let clock = Clock::manual(START_UNIX_S);
        let store = Arc::new(store(clock.clone()));
        let mut config = SessionConfig::new("1.6.18");
        config.clock = clock.clone();
        configure(&mut config);
        let config = Arc::new(config);
        let session = Session::new(store.clone(), config.clone());
        Harness { clock, store, config, session, pending: Vec::new(), closed: false }
    }

    /// A second connection to the same store.
    pub(crate) fn connection(&self) -> Session {
        Session::new(self.store.clone(), self.config.clone())
    }

    /// Sends `input` and returns the replies it completes.
    pub(crate) fn send(&mut self, input: &[u8]) -> Vec<u8> {
        assert!(!self.closed, "the session was closed");
        self.pending.extend_from_slice(input);
        let mut out = Vec::new();
        loop {
            let processed = self.session.process(&self.pending, &mut out);
            assert!(processed.consumed <= self.pending.len());
            self.pending.drain(..processed.consumed);
            self.closed = processed.close;
            if !processed.output_full {
                return out;
            }
        }
    }

    /// Like `send`, as text, for readable assertions.
    pub(crate) fn text(&mut self, input: &str) -> String {
        String::from_utf8(self.send(input.as_bytes())).expect("text replies are UTF-8 here")
    }

    /// Bytes received but not consumed yet.
    pub(crate) fn pending(&self) -> usize {
        self.pending.len()
    }
}

/// A binary request packet.
pub(crate) fn request(opcode: u8, key: &[u8], extras: &[u8], value: &[u8], opaque: u32, cas: u64) -> Vec<u8> {
    let header = Header {
        magic: MAGIC_REQUEST,
        opcode,
        key_len: key.len() as u16,
        extras_len: extras.len() as u8,
        data_type: 0,
        vbucket_or_status: 0,
        body_len: (extras.len() + key.len() + value.len()) as u32,
        opaque,
        cas,
    };
    let mut packet = vec![0u8; HEADER_BYTES];
    header.encode(&mut packet);
    packet.extend_from_slice(extras);
    packet.extend_from_slice(key);
    packet.extend_from_slice(value);
    packet
}

/// One decoded binary response.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Response {
    pub(crate) opcode: u8,
    pub(crate) status: u16,
    pub(crate) opaque: u32,
    pub(crate) cas: u64,
    pub(crate) extras: Vec<u8>,
    pub(crate) key: Vec<u8>,
    pub(crate) value: Vec<u8>,
}

/// Splits `bytes` into responses; panics on anything but well-formed response packets.
pub(crate) fn responses(mut bytes: &[u8]) -> Vec<Response> {
    let mut responses = Vec::new();
    while !bytes.is_empty() {
        let header = Header::decode(bytes).expect("a whole header");
        assert_eq!(header.magic, MAGIC_RESPONSE);
        assert_eq!(header.data_type, 0);
        let extras_end = HEADER_BYTES + header.extras_len as usize;
        let key_end = extras_end + header.key_len as usize;
        let end = HEADER_BYTES + header.body_len as usize;
        assert!(key_end <= end && end <= bytes.len(), "a whole, consistent body");
        responses.push(Response {
            opcode: header.opcode,
            status: header.vbucket_or_status,
            opaque: header.opaque,
            cas: header.cas,
            extras: bytes[HEADER_BYTES..extras_end].to_vec(),
            key: bytes[extras_end..key_end].to_vec(),
            value: bytes[key_end..end].to_vec(),
        });
        bytes = &bytes[end..];
    }
    responses
}
