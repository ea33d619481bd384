//! Checks that run against any server (memcached or slipstream-cache, TCP or fabric). Keys carry
//! a prefix so tests can share a server.
use std::task::Poll;

use cache_client::{Client, Error};

use super::value;

fn k(prefix: &str, name: &str) -> Vec<u8> {
    format!("{prefix}:{name}").into_bytes()
}

/// Every blocking operation, with its success and its typed failure.
pub fn every_operation(client: &Client, prefix: &str) {
    let key = k(prefix, "a");
    // set / get (value, flags, cas)
    client.set(&key, b"one", 7, 0).unwrap();
    let item = client.get(&key).unwrap().expect("hit after set");
    assert_eq!((item.value.as_slice(), item.flags), (&b"one"[..], 7));
    assert_ne!(item.cas, 0);
    let mut buf = b"stale".to_vec();
    let meta = client.get_into(&key, &mut buf).unwrap().unwrap();
    assert_eq!((buf.as_slice(), meta.flags, meta.cas), (&b"one"[..], 7, item.cas));
    assert_eq!(client.get(&k(prefix, "missing")).unwrap(), None);
    assert_eq!(client.get_into(&k(prefix, "missing"), &mut buf).unwrap(), None);
    assert_eq!(buf, b"one", "a miss leaves the buffer alone");

    // add: only when missing
    assert!(matches!(client.add(&key, b"x", 0, 0), Err(Error::Exists)), "add on an existing key");
    client.add(&k(prefix, "b"), b"bee", 0, 0).unwrap();
    assert_eq!(client.get(&k(prefix, "b")).unwrap().unwrap().value, b"bee");

    // replace: only when present
    client.replace(&key, b"two", 8, 0).unwrap();
    assert_eq!(client.get(&key).unwrap().unwrap().flags, 8);
    assert!(matches!(client.replace(&k(prefix, "missing"), b"x", 0, 0), Err(Error::NotFound)));

    // append / prepend
    client.append(&key, b"-tail").unwrap();
    client.prepend(&key, b"head-").unwrap();
    let item = client.get(&key).unwrap().unwrap();
    assert_eq!(item.value, b"head-two-tail");
    assert_eq!(item.flags, 8, "append keeps the flags");
    assert!(matches!(client.append(&k(prefix, "missing"), b"x"), Err(Error::NotStored)));
    assert!(matches!(client.prepend(&k(prefix, "missing"), b"x"), Err(Error::NotStored)));

    // cas
    let cas = client.get(&key).unwrap().unwrap().cas;
    client.cas(&key, b"three", 0, 0, cas).unwrap();
    assert!(matches!(client.cas(&key, b"four", 0, 0, cas), Err(Error::Exists)), "stale cas");
    assert_eq!(client.get(&key).unwrap().unwrap().value, b"three");
    assert!(matches!(client.cas(&k(prefix, "missing"), b"x", 0, 0, 12345), Err(Error::NotFound)));

    // delete (and delete with cas)
    client.delete(&key).unwrap();
    assert_eq!(client.get(&key).unwrap(), None);
    assert!(matches!(client.delete(&key), Err(Error::NotFound)));
    client.set(&key, b"v", 0, 0).unwrap();
    let cas = client.get(&key).unwrap().unwrap().cas;
    assert!(matches!(client.delete_cas(&key, cas + 1000), Err(Error::Exists)));
    client.delete_cas(&key, cas).unwrap();

    // incr / decr
    let counter = k(prefix, "counter");
    assert!(matches!(client.increment(&counter, 1), Err(Error::NotFound)));
    assert_eq!(client.increment_with_initial(&counter, 5, 100, 0).unwrap(), 100, "created with the initial value");
    assert_eq!(client.increment(&counter, 5).unwrap(), 105);
    assert_eq!(client.decrement(&counter, 10).unwrap(), 95);
    assert_eq!(client.decrement(&counter, 1000).unwrap(), 0, "decrement stops at 0");
    assert_eq!(client.decrement_with_initial(&k(prefix, "counter2"), 1, 7, 0).unwrap(), 7);
    // memcached rewrites a shrinking counter in place, padded with spaces ("0  ").
    assert_eq!(client.get(&counter).unwrap().unwrap().value.trim_ascii_end(), b"0");
    client.set(&key, b"not a number", 0, 0).unwrap();
    assert!(matches!(client.increment(&key, 1), Err(Error::NonNumeric)));

    // touch
    client.touch(&key, 3600).unwrap();
    assert!(matches!(client.touch(&k(prefix, "missing"), 10), Err(Error::NotFound)));

    // keys are checked before anything is sent
    assert!(matches!(client.set(&[b'k'; 251], b"v", 0, 0), Err(Error::InvalidKey { len: 251 })));
    assert!(matches!(client.get(b""), Err(Error::InvalidKey { len: 0 })));

    // version and stats, per server
    for (server, version) in client.version() {
        let version = version.unwrap_or_else(|e| panic!("version of {server}: {e}"));
        assert!(!version.is_empty() && version.chars().next().unwrap().is_ascii_digit(), "version {version:?}");
    }
    for (server, stats) in client.stats(None) {
        let stats = stats.unwrap_or_else(|e| panic!("stats of {server}: {e}"));
        assert!(stats.iter().any(|(name, _)| name == "pid" || name == "uptime"), "stats of {server}: {stats:?}");
    }

    // The connection is still in step after all the errors.
    client.set(&key, b"last", 0, 0).unwrap();
    assert_eq!(client.get(&key).unwrap().unwrap().value, b"last");
}

/// 1 B, 4 KB and 512 KB values, set and read back (blocking and non-blocking).
pub fn sizes(client: &Client, prefix: &str) {
    for (i, len) in [1usize, 4 << 10, 512 << 10].into_iter().enumerate() {
        let key = k(prefix, &format!("size{len}"));
        let v = value(len, i as u8);
        client.set(&key, &v, 3, 0).unwrap();
        let mut buf = Vec::new();
        let meta = client.get_into(&key, &mut buf).unwrap().expect("hit");
        assert_eq!(meta.flags, 3);
        assert!(buf == v, "blocking get of {len} bytes differs");
        let mut dest = Vec::new();
        let v2 = value(len, i as u8 + 100);
        {
            let mut set = client.iset(&key, &v2, 4, 0).unwrap();
            set.wait().unwrap();
        }
        {
            let mut get = client.iget(&key, &mut dest).unwrap();
            assert_eq!(get.wait().unwrap().flags, 4);
        }
        assert!(dest == v2, "non-blocking get of {len} bytes differs");
    }
}

/// iset/iget/bset/bget completed with wait and with test, in a pipeline deeper than the
/// in-flight bound, interleaved with blocking calls, and abandoned requests.
pub fn nonblocking(client: &Client, prefix: &str) {
    let count = 100;
    let keys: Vec<Vec<u8>> = (0..count).map(|i| k(prefix, &format!("nb{i}"))).collect();
    let values: Vec<Vec<u8>> = (0..count).map(|i| value(10 + i * 37, i as u8)).collect();

    // iset everything (more than max_in_flight at once), completed by wait.
    let mut sets = Vec::new();
    for i in 0..count {
        sets.push(client.iset(&keys[i], &values[i], i as u32, 0).unwrap());
    }
    assert!(client.requests_in_flight() <= client.config().max_in_flight);
    for set in &mut sets {
        assert_ne!(client.wait(set).unwrap().cas, 0);
    }
    drop(sets);
    assert_eq!(client.requests_in_flight(), 0);

    // iget everything, completed by test (polling).
    let mut dests: Vec<Vec<u8>> = vec![Vec::new(); count];
    {
        let mut gets: Vec<_> = dests.iter_mut().enumerate().map(|(i, d)| client.iget(&keys[i], d).unwrap()).collect();
        let mut done = vec![false; count];
        let mut rounds = 0u64;
        while done.iter().any(|d| !d) {
            for (i, get) in gets.iter_mut().enumerate() {
                if done[i] {
                    continue;
                }
                if let Poll::Ready(result) = client.test(get) {
                    assert_eq!(result.unwrap().flags, i as u32);
                    done[i] = true;
                }
            }
            rounds += 1;
            assert!(rounds < 50_000_000, "test() never completed the gets");
        }
        // test and wait after completion repeat the outcome.
        assert!(gets[0].test().is_ready() && gets[0].wait().is_ok() && gets[0].is_complete());
    }
    for i in 0..count {
        assert!(dests[i] == values[i], "iget {i}");
    }

    // bset / bget: the key and value buffers may be reused as soon as the call returns.
    let mut key = k(prefix, "b-key").to_vec();
    let mut val = b"b-value-1".to_vec();
    let mut set = client.bset(&key, &val, 1, 0).unwrap();
    key.push(b'!'); // reusing the buffers compiles: bset copied them
    val.clear();
    set.wait().unwrap();
    drop(set);
    let mut dest = Vec::new();
    let mut get = client.bget(&key[..key.len() - 1], &mut dest).unwrap();
    key.clear();
    assert_eq!(get.wait().unwrap().flags, 1);
    drop(get);
    assert_eq!(dest, b"b-value-1");

    // A miss.
    let missing = k(prefix, "nb-missing");
    let mut get = client.iget(&missing, &mut dest).unwrap();
    assert!(matches!(get.wait(), Err(Error::NotFound)));
    drop(get);
    assert_eq!(dest, b"b-value-1", "a miss leaves the destination alone");

    // Blocking calls while requests are in flight on the same connection.
    let mut set = client.iset(&keys[0], b"first", 0, 0).unwrap();
    let mut d1 = Vec::new();
    let mut get = client.iget(&keys[0], &mut d1).unwrap();
    client.set(&keys[1], b"blocking", 0, 0).unwrap();
    assert_eq!(client.get(&keys[1]).unwrap().unwrap().value, b"blocking");
    set.wait().unwrap();
    get.wait().unwrap();
    drop((set, get));
    assert_eq!(d1, b"first");

    // Abandoned requests: their replies are discarded, the client stays usable.
    for i in 0..10 {
        let mut d = Vec::new();
        let _ = client.iget(&keys[i], &mut d).unwrap();
        let _ = client.iset(&keys[i], &values[i], 0, 0).unwrap();
    }
    assert_eq!(client.get(&keys[2]).unwrap().unwrap().value, values[2]);
    let mut d = Vec::new();
    let mut get = client.iget(&keys[3], &mut d).unwrap();
    get.wait().unwrap();
    drop(get);
    assert_eq!(d, values[3]);
}

/// get_multi over the client's servers: hits in key order, misses as None.
pub fn get_multi(client: &Client, prefix: &str, count: usize) {
    let keys: Vec<Vec<u8>> = (0..count).map(|i| k(prefix, &format!("m{i}"))).collect();
    for (i, key) in keys.iter().enumerate() {
        if i % 5 != 4 {
            client.set(key, &value(i + 1, i as u8), i as u32, 0).unwrap();
        } else {
            let _ = client.delete(key);
        }
    }
    let items = client.get_multi(&keys).unwrap();
    assert_eq!(items.len(), count);
    for (i, item) in items.iter().enumerate() {
        if i % 5 == 4 {
            assert!(item.is_none(), "key {i} should miss");
        } else {
            let item = item.as_ref().unwrap_or_else(|| panic!("key {i} missed"));
            assert_eq!((item.value.clone(), item.flags), (value(i + 1, i as u8), i as u32));
        }
    }
    assert!(client.get_multi::<Vec<u8>>(&[]).unwrap().is_empty());
}
