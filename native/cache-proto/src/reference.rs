//! `ReferenceStore`: a deliberately simple `Storage` (a `HashMap` under one `Mutex`) with
//! memcached's semantics, the oracle of this crate's tests and fuzz targets. Not for production: no
//! eviction, one lock, allocation per item.
//!
//! Behaviour copied from memcached 1.6.18 where the trait leaves room: incr/decr rewrite a shorter
//! number in place padded with spaces ("10" decr 5 reads back "5 "), add ignores a CAS, an expired
//! or flushed item is absent to every command.

use std::collections::HashMap;
use std::sync::Mutex;
use std::task::Waker;

use crate::clock::Clock;
use crate::number::parse_u64;
use crate::storage::{
    ArithmeticOutcome, ArithmeticRequest, DeleteOptions, DeleteOutcome, GetOptions, GetOutcome, ItemView, Storage,
    StoreMode, StoreOutcome, StoreRequest, EXPTIME_KEEP,
};

/// memcached's default item limit (`-I 1m`).
pub const MAX_ITEM_BYTES_DEFAULT: usize = 1024 * 1024;

#[derive(Debug, Clone)]
struct Item {
    value: Vec<u8>,
    flags: u32,
    cas: u64,
    exptime_unix_s: u64,
    stored_unix_s: u64,
    last_access_unix_s: u64,
    fetched: bool,
    stale: bool,
    win_token_sent: bool,
}

#[derive(Debug, Default)]
struct State {
    items: HashMap<Vec<u8>, Item>,
    cas_last: u64,
    /// A delayed `flush_all`: items stored at or before this time die once it comes.
    flush_at_unix_s: Option<u64>,
    total_items: u64,
}

impl State {
    fn next_cas(&mut self, requested: Option<u64>) -> u64 {
        match requested {
            Some(cas) => cas,
            None => {
                self.cas_last += 1;
                self.cas_last
            }
        }
    }

    /// Applies a due delayed flush and drops `key` if expired; then the live item, if any.
    fn live(&mut self, key: &[u8], now_unix_s: u64) -> Option<&mut Item> {
        if let Some(at) = self.flush_at_unix_s {
            if now_unix_s >= at {
                self.items.retain(|_, item| item.stored_unix_s > at);
                self.flush_at_unix_s = None;
            }
        }
        let expired = match self.items.get(key) {
            Some(item) => item.exptime_unix_s != 0 && item.exptime_unix_s <= now_unix_s,
            None => return None,
        };
        if expired {
            self.items.remove(key);
            return None;
        }
        self.items.get_mut(key)
    }

    fn bytes(&self) -> usize {
        self.items.iter().map(|(key, item)| key.len() + item.value.len()).sum()
    }

    fn link(&mut self, key: &[u8], item: Item) {
        self.total_items += 1;
        self.items.insert(key.to_vec(), item);
    }
}

pub struct ReferenceStore {
    state: Mutex<State>,
    clock: Clock,
    max_item_bytes: usize,
    /// Total key and value bytes beyond which stores fail with `OutOfMemory` (no eviction).
    memory_limit_bytes: usize,
}

impl ReferenceStore {
    pub fn new(clock: Clock) -> ReferenceStore {
        ReferenceStore::with_limits(clock, MAX_ITEM_BYTES_DEFAULT, usize::MAX)
    }

    pub fn with_limits(clock: Clock, max_item_bytes: usize, memory_limit_bytes: usize) -> ReferenceStore {
        assert!(max_item_bytes > 0);
        ReferenceStore { state: Mutex::new(State::default()), clock, max_item_bytes, memory_limit_bytes }
    }

    /// Live items (expired ones not yet noticed included).
    pub fn len(&self) -> usize {
        self.state.lock().unwrap().items.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn new_item(&self, state: &mut State, value: Vec<u8>, flags: u32, exptime_unix_s: u64, cas: Option<u64>) -> Item {
        let now_unix_s = self.clock.now_unix_s();
        Item {
            value,
            flags,
            cas: state.next_cas(cas),
            exptime_unix_s,
            stored_unix_s: now_unix_s,
            last_access_unix_s: now_unix_s,
            fetched: false,
            stale: false,
            win_token_sent: false,
        }
    }
}

impl Storage for ReferenceStore {
    fn max_item_bytes(&self) -> usize {
        self.max_item_bytes
    }

    fn get(&self, key: &[u8], options: GetOptions, _waker: &Waker, visit: &mut dyn FnMut(&ItemView<'_>)) -> GetOutcome {
        let now_unix_s = self.clock.now_unix_s();
        let mut state = self.state.lock().unwrap();
        if state.live(key, now_unix_s).is_none() {
            let Some(vivify_exptime_unix_s) = options.vivify_exptime_unix_s else {
                return GetOutcome::Miss;
            };
            // Meta N: an empty placeholder, and the win token for this caller.
            let exptime_unix_s = options.touch_exptime_unix_s.unwrap_or(vivify_exptime_unix_s);
            let mut item = self.new_item(&mut state, Vec::new(), 0, exptime_unix_s, None);
            item.win_token_sent = true;
            visit(&ItemView {
                key,
                value: &item.value,
                flags: item.flags,
                cas: item.cas,
                exptime_unix_s: item.exptime_unix_s,
                last_access_unix_s: now_unix_s,
                fetched_before: false,
                stale: false,
                win: true,
                win_token_sent: false,
            });
            state.link(key, item);
            return GetOutcome::Hit;
        }
        let item = state.live(key, now_unix_s).expect("checked above");
        let win_token_sent_before = item.win_token_sent;
        if let Some(exptime_unix_s) = options.touch_exptime_unix_s {
            item.exptime_unix_s = exptime_unix_s;
        }
        let mut win = false;
        if let Some(below_ttl_s) = options.recache_below_ttl_s {
            let ttl_low = item.exptime_unix_s != 0 && item.exptime_unix_s < now_unix_s.saturating_add(below_ttl_s);
            win |= !win_token_sent_before && ttl_low;
        }
        // A stale item hands the win token to its first reader.
        win |= item.stale && !win_token_sent_before;
        if win {
            item.win_token_sent = true;
        }
        visit(&ItemView {
            key,
            value: &item.value,
            flags: item.flags,
            cas: item.cas,
            exptime_unix_s: item.exptime_unix_s,
            last_access_unix_s: item.last_access_unix_s,
            fetched_before: item.fetched,
            stale: item.stale,
            win,
            win_token_sent: win_token_sent_before,
        });
        if !options.no_bump {
            item.fetched = true;
            item.last_access_unix_s = now_unix_s;
        }
        GetOutcome::Hit
    }

    fn store(&self, request: &StoreRequest<'_>, _waker: &Waker) -> StoreOutcome {
        if request.key.len() + request.value.len() > self.max_item_bytes {
            return StoreOutcome::TooLarge;
        }
        let now_unix_s = self.clock.now_unix_s();
        let mut state = self.state.lock().unwrap();
        let existing = state.live(request.key, now_unix_s).map(|item| item.clone());
        let appending = matches!(request.mode, StoreMode::Append | StoreMode::Prepend);
        // memcached's add ignores a CAS; every other mode checks it against the present item.
        let compare_cas = if request.mode == StoreMode::Add { None } else { request.compare_cas };
        let mut stale = false;
        if let (Some(compare_cas), Some(existing)) = (compare_cas, &existing) {
            if compare_cas != existing.cas {
                if request.invalidate && compare_cas < existing.cas && request.mode == StoreMode::Set {
                    stale = true;
                } else {
                    return StoreOutcome::Exists;
                }
            }
        }
        let new_item = match (&existing, request.mode) {
            (None, _) if compare_cas.is_some() && !(appending && request.vivify_exptime_unix_s.is_some()) => {
                return StoreOutcome::NotFound;
            }
            (Some(_), StoreMode::Add) => {
                if let Some(item) = state.items.get_mut(request.key) {
                    item.last_access_unix_s = now_unix_s;
                }
                return StoreOutcome::NotStored;
            }
            (None, StoreMode::Replace) => return StoreOutcome::NotStored,
            (None, StoreMode::Append | StoreMode::Prepend) => match request.vivify_exptime_unix_s {
                Some(exptime_unix_s) => {
                    self.new_item(&mut state, request.value.to_vec(), request.flags, exptime_unix_s, request.new_cas)
                }
                None => return StoreOutcome::NotStored,
            },
            (Some(existing), StoreMode::Append | StoreMode::Prepend) => {
                let combined_bytes = request.key.len() + existing.value.len() + request.value.len();
                if combined_bytes > self.max_item_bytes {
                    return StoreOutcome::NotStored;
                }
                let value = if request.mode == StoreMode::Append {
                    [&existing.value[..], request.value].concat()
                } else {
                    [request.value, &existing.value[..]].concat()
                };
                let mut item = self.new_item(&mut state, value, existing.flags, existing.exptime_unix_s, request.new_cas);
                item.stale = existing.stale;
                item.win_token_sent = existing.win_token_sent;
                item
            }
            (_, StoreMode::Set | StoreMode::Add | StoreMode::Replace) => {
                let mut item = self.new_item(
                    &mut state,
                    request.value.to_vec(),
                    request.flags,
                    request.exptime_unix_s,
                    request.new_cas,
                );
                if stale {
                    // memcached keeps the old expiry and token state, and marks the value stale.
                    let existing = existing.as_ref().expect("stale needs a present item");
                    item.exptime_unix_s = existing.exptime_unix_s;
                    item.win_token_sent = existing.win_token_sent;
                    item.stale = true;
                }
                item
            }
        };
        let old_bytes = existing.as_ref().map_or(0, |item| request.key.len() + item.value.len());
        let new_bytes = request.key.len() + new_item.value.len();
        if state.bytes() - old_bytes + new_bytes > self.memory_limit_bytes {
            return StoreOutcome::OutOfMemory;
        }
        let cas = new_item.cas;
        state.link(request.key, new_item);
        StoreOutcome::Stored { cas }
    }

    fn delete(&self, key: &[u8], options: DeleteOptions) -> DeleteOutcome {
        let now_unix_s = self.clock.now_unix_s();
        let mut state = self.state.lock().unwrap();
        let Some(item) = state.live(key, now_unix_s) else {
            return DeleteOutcome::NotFound;
        };
        if options.compare_cas.is_some_and(|cas| cas != item.cas) {
            return DeleteOutcome::Exists;
        }
        match options.invalidate_exptime_unix_s {
            Some(exptime_unix_s) => {
                item.stale = true;
                item.win_token_sent = false;
                if exptime_unix_s != EXPTIME_KEEP {
                    item.exptime_unix_s = exptime_unix_s;
                }
                let cas = state.next_cas(options.new_cas);
                state.items.get_mut(key).expect("present").cas = cas;
            }
            None => {
                state.items.remove(key);
            }
        }
        DeleteOutcome::Deleted
    }

    fn arithmetic(&self, request: &ArithmeticRequest<'_>, _waker: &Waker) -> ArithmeticOutcome {
        let now_unix_s = self.clock.now_unix_s();
        let mut state = self.state.lock().unwrap();
        let Some(item) = state.live(request.key, now_unix_s) else {
            let Some((initial, exptime_unix_s)) = request.initial else {
                return ArithmeticOutcome::NotFound;
            };
            let item = self.new_item(&mut state, initial.to_string().into_bytes(), 0, exptime_unix_s, request.new_cas);
            let outcome = ArithmeticOutcome::Value { value: initial, cas: item.cas, exptime_unix_s };
            state.link(request.key, item);
            return outcome;
        };
        if request.compare_cas.is_some_and(|cas| cas != item.cas) {
            return ArithmeticOutcome::Exists;
        }
        // memcached parses the value as strtoull would, followed by its "\r\n".
        let with_terminator = [&item.value[..], b"\r\n"].concat();
        let Some(current) = parse_u64(&with_terminator).filter(|_| !item.value.is_empty()) else {
            return ArithmeticOutcome::NonNumeric;
        };
        let value = if request.increment {
            current.wrapping_add(request.delta)
        } else {
            current.saturating_sub(request.delta)
        };
        let mut digits = value.to_string().into_bytes();
        if digits.len() <= item.value.len() {
            // memcached rewrites in place, padding with spaces.
            digits.resize(item.value.len(), b' ');
        }
        item.value = digits;
        if let Some(exptime_unix_s) = request.touch_exptime_unix_s {
            item.exptime_unix_s = exptime_unix_s;
        }
        item.last_access_unix_s = now_unix_s;
        item.stored_unix_s = now_unix_s;
        let exptime_unix_s = item.exptime_unix_s;
        let cas = state.next_cas(request.new_cas);
        state.items.get_mut(request.key).expect("present").cas = cas;
        ArithmeticOutcome::Value { value, cas, exptime_unix_s }
    }

    fn flush_all(&self, at_unix_s: u64) {
        let now_unix_s = self.clock.now_unix_s();
        let mut state = self.state.lock().unwrap();
        if at_unix_s == 0 || at_unix_s <= now_unix_s {
            state.items.clear();
            state.flush_at_unix_s = None;
        } else {
            state.flush_at_unix_s = Some(at_unix_s);
        }
    }

    fn stats(&self) -> Vec<(String, String)> {
        let state = self.state.lock().unwrap();
        let limit = if self.memory_limit_bytes == usize::MAX { 0 } else { self.memory_limit_bytes };
        vec![
            ("limit_maxbytes".to_string(), limit.to_string()),
            ("bytes".to_string(), state.bytes().to_string()),
            ("curr_items".to_string(), state.items.len().to_string()),
            ("total_items".to_string(), state.total_items.to_string()),
            ("evictions".to_string(), "0".to_string()),
        ]
    }
}
