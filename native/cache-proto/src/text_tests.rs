//! Unit tests of `text.rs`.

use crate::test_support::Harness;

fn stat(harness: &Harness, name: &str) -> u64 {
    harness.config.counters.get(name).unwrap()
}

#[test]
fn set_then_get_gets() {
    let mut h = Harness::new();
    assert_eq!(h.text("set a 5 0 3\r\nabc\r\n"), "STORED\r\n");
    assert_eq!(h.text("get a\r\n"), "VALUE a 5 3\r\nabc\r\nEND\r\n");
    assert_eq!(h.text("gets a\r\n"), "VALUE a 5 3 1\r\nabc\r\nEND\r\n");
    assert_eq!(h.text("get missing\r\n"), "END\r\n");
    assert_eq!(h.text("set b 0 0 0\r\n\r\nget a b c\r\n"), "STORED\r\nVALUE a 5 3\r\nabc\r\nVALUE b 0 0\r\n\r\nEND\r\n");
    assert_eq!(stat(&h, "cmd_get"), 6);
    assert_eq!(stat(&h, "get_hits"), 4);
    assert_eq!(stat(&h, "get_misses"), 1 + 1);
    assert_eq!(stat(&h, "cmd_set"), 2);
}

#[test]
fn bare_newlines_and_nul_bytes_are_accepted_like_memcached() {
    let mut h = Harness::new();
    assert_eq!(h.text("set a 0 0 1\nx\r\nget a\n"), "STORED\r\nVALUE a 0 1\r\nx\r\nEND\r\n");
    // C string handling stops the command at a NUL.
    assert_eq!(h.send(b"get a\0junk\r\n"), b"VALUE a 0 1\r\nx\r\nEND\r\n");
    assert_eq!(h.text("\r\n"), "ERROR\r\n");
    assert_eq!(h.text("\n"), "ERROR\r\n");
    assert_eq!(h.text("x\r\n"), "ERROR\r\n");
    assert_eq!(h.text("nosuchcommand a b\r\n"), "ERROR\r\n");
}

#[test]
fn storage_modes() {
    let mut h = Harness::new();
    assert_eq!(h.text("add a 0 0 1\r\n1\r\n"), "STORED\r\n");
    assert_eq!(h.text("add a 0 0 1\r\n2\r\n"), "NOT_STORED\r\n");
    assert_eq!(h.text("replace a 3 0 1\r\n3\r\n"), "STORED\r\n");
    assert_eq!(h.text("replace zz 0 0 1\r\n3\r\n"), "NOT_STORED\r\n");
    assert_eq!(h.text("append a 9 0 2\r\n45\r\n"), "STORED\r\n");
    assert_eq!(h.text("prepend a 9 0 2\r\n01\r\n"), "STORED\r\n");
    assert_eq!(h.text("append zz 0 0 1\r\n1\r\n"), "NOT_STORED\r\n");
    assert_eq!(h.text("prepend zz 0 0 1\r\n1\r\n"), "NOT_STORED\r\n");
    // Append and prepend keep the flags of the present item.
    assert_eq!(h.text("get a\r\n"), "VALUE a 3 5\r\n01345\r\nEND\r\n");
}

#[test]
fn cas_command() {
    let mut h = Harness::new();
    assert_eq!(h.text("cas a 0 0 1 1\r\nx\r\n"), "NOT_FOUND\r\n");
    assert_eq!(h.text("set a 0 0 1\r\nx\r\n"), "STORED\r\n");
    assert_eq!(h.text("cas a 0 0 1 99\r\ny\r\n"), "EXISTS\r\n");
    assert_eq!(h.text("cas a 0 0 1 1\r\ny\r\n"), "STORED\r\n");
    assert_eq!(h.text("gets a\r\n"), "VALUE a 0 1 2\r\ny\r\nEND\r\n");
    assert_eq!(h.text("cas a 0 0 1 2 noreply\r\nz\r\ncas a 0 0 1 x\r\nz\r\n"), "CLIENT_ERROR bad command line format\r\nERROR\r\n");
    assert_eq!(h.text("cas a 0 0 1\r\n"), "ERROR\r\n");
    assert_eq!((stat(&h, "cas_misses"), stat(&h, "cas_badval"), stat(&h, "cas_hits")), (1, 1, 2));
}

#[test]
fn noreply_silences_replies_and_errors() {
    let mut h = Harness::new();
    assert_eq!(h.text("set a 0 0 5 noreply\r\nhello\r\nget a\r\n"), "VALUE a 0 5\r\nhello\r\nEND\r\n");
    // memcached reads noreply before validating: the format error is silent, the block is a command.
    assert_eq!(h.text("set a x 0 5 noreply\r\nhello\r\n"), "ERROR\r\n");
    assert_eq!(h.text("add a 0 0 1 noreply\r\nx\r\ndelete a noreply\r\nincr a 1 noreply\r\ntouch a 1 noreply\r\n"), "");
    assert_eq!(h.text("flush_all noreply\r\nflush_all 0 noreply\r\nverbosity 1 noreply\r\n"), "");
    assert_eq!(h.text("set a 0 0 1 noreply\r\nab\r\n"), "ERROR\r\n");
}

#[test]
fn storage_command_errors() {
    let mut h = Harness::new();
    let long_key = "k".repeat(251);
    // The block is not skipped after a format error: memcached parses it as a command.
    assert_eq!(h.text(&format!("set {long_key} 0 0 5\r\nhello\r\n")), "CLIENT_ERROR bad command line format\r\nERROR\r\n");
    assert_eq!(h.text(&format!("set {} 0 0 1\r\nx\r\n", "k".repeat(250))), "STORED\r\n");
    assert_eq!(h.text("set a 0 0 1\r\nab\r\n"), "CLIENT_ERROR bad data chunk\r\nERROR\r\n");
    assert_eq!(h.text("set a 0 0 -1\r\n"), "CLIENT_ERROR bad command line format\r\n");
    assert_eq!(h.text("set a -1 0 1\r\n"), "CLIENT_ERROR bad command line format\r\n");
    assert_eq!(h.text("set a 0 0\r\n"), "ERROR\r\n");
    assert_eq!(h.text("set a 0 0 1 noreply extra\r\n"), "ERROR\r\n");
    assert_eq!(h.text("set a 0 0 2147483646\r\n"), "CLIENT_ERROR bad command line format\r\n");
    // 32-bit truncation of memcached's 64-bit strtoul/strtol.
    assert_eq!(h.text("set a 4294967297 0 4294967297\r\nx\r\nget a\r\n"), "STORED\r\nVALUE a 1 1\r\nx\r\nEND\r\n");
}

#[test]
fn too_large_values_are_refused_skipped_and_drop_the_old_value() {
    let mut h = Harness::with_max_item_bytes(100);
    assert_eq!(h.text("set a 0 0 1\r\nx\r\n"), "STORED\r\n");
    assert_eq!(h.text("set a 0 0 100\r\n"), "SERVER_ERROR object too large for cache\r\n");
    // The refused block is skipped as it arrives, never buffered.
    assert_eq!(h.send(&[b'x'; 60]), b"");
    assert_eq!(h.pending(), 0);
    assert_eq!(h.text(&format!("{}\r\nget a\r\n", "x".repeat(40))), "END\r\n");
    assert_eq!(h.text("set b 0 0 200 noreply\r\n"), "");
    assert_eq!(h.text(&format!("{}\r\nget b\r\n", "y".repeat(200))), "END\r\n");
    // Key plus value at the limit is accepted.
    assert_eq!(h.text("set b 0 0 99\r\n"), "");
    assert_eq!(h.text(&format!("{}\r\n", "y".repeat(99))), "STORED\r\n");
    assert_eq!(stat(&h, "store_too_large"), 2);
}

#[test]
fn values_arrive_in_pieces() {
    let mut h = Harness::new();
    assert_eq!(h.text("set a 0 0 10\r\n01234"), "");
    assert_eq!(h.session.bytes_needed(), Some(14 + 12));
    assert_eq!(h.text("56789\r"), "");
    assert_eq!(h.text("\nget"), "STORED\r\n");
    assert_eq!(h.text(" a\r\n"), "VALUE a 0 10\r\n0123456789\r\nEND\r\n");
}

#[test]
fn retrieval_errors() {
    let mut h = Harness::new();
    assert_eq!(h.text("set a 0 0 1\r\nx\r\n"), "STORED\r\n");
    assert_eq!(h.text("get\r\nget \r\ngets\r\n"), "ERROR\r\nERROR\r\nERROR\r\n");
    let long_key = "k".repeat(251);
    // Values found before the bad key are not sent: the error replaces the whole reply.
    assert_eq!(h.text(&format!("get a {long_key}\r\n")), "CLIENT_ERROR bad command line format\r\n");
    assert_eq!(h.text("gat x a\r\n"), "CLIENT_ERROR invalid exptime argument\r\n");
    assert_eq!(h.text("gat 10\r\n"), "END\r\n");
    assert_eq!(h.text("bget a\r\n"), "VALUE a 0 1\r\nx\r\nEND\r\n");
}

#[test]
fn many_keys_beyond_the_token_limit() {
    let mut h = Harness::new();
    for i in 0..40 {
        h.text(&format!("set k{i} {i} 0 1\r\n{}\r\n", i % 10));
    }
    let keys: Vec<String> = (0..40).map(|i| format!("k{i}")).collect();
    let reply = h.text(&format!("get {}\r\n", keys.join(" ")));
    let expected: String = (0..40).map(|i| format!("VALUE k{i} {i} 1\r\n{}\r\n", i % 10)).collect();
    assert_eq!(reply, expected + "END\r\n");
}

#[test]
fn a_retrieval_reply_is_bounded() {
    let mut h = Harness::new();
    let value = "v".repeat((1 << 20) - 100);
    h.text(&format!("set big 0 0 {}\r\n{value}\r\n", value.len()));
    let names = super::RETRIEVAL_REPLY_BYTES_MAX / value.len() + 1;
    let reply = h.send(format!("get {}\r\n", "big ".repeat(names)).as_bytes());
    let value_reply_bytes = format!("VALUE big 0 {}\r\n\r\n", value.len()).len() + value.len();
    let error = "SERVER_ERROR out of memory writing get response\r\n";
    assert_eq!(reply.len(), (names - 1) * value_reply_bytes + error.len());
    assert!(reply.ends_with(format!("\r\n{error}").as_bytes()));
    assert_eq!(h.text("mn\r\n"), "MN\r\n");
}

#[test]
fn long_lines() {
    let mut h = Harness::new();
    // A multi-get may exceed the line limit.
    let line = format!("get {}", "x ".repeat(1500));
    assert_eq!(h.text(&line), "");
    assert_eq!(h.text("\r\n"), "END\r\n");
    // Anything else that long closes the connection.
    assert_eq!(h.send(&[b'x'; 3000]), b"CLIENT_ERROR line too long\r\n");
    assert!(h.closed);
    let mut out = Vec::new();
    assert!(h.session.process(b"get a\r\n", &mut out).close);
    assert!(out.is_empty());
}

#[test]
fn delete() {
    let mut h = Harness::new();
    h.text("set a 0 0 1\r\nx\r\n");
    assert_eq!(h.text("delete a\r\ndelete a\r\n"), "DELETED\r\nNOT_FOUND\r\n");
    h.text("set a 0 0 1\r\nx\r\n");
    assert_eq!(h.text("delete a 0\r\n"), "DELETED\r\n");
    assert_eq!(h.text("delete a 1\r\n"), "CLIENT_ERROR bad command line format.  Usage: delete <key> [noreply]\r\n");
    assert_eq!(h.text("delete a 1 noreply\r\ndelete a 0 noreply\r\n"), "");
    assert_eq!(h.text("delete\r\ndelete a 0 noreply x\r\n"), "ERROR\r\nERROR\r\n");
    assert_eq!((stat(&h, "delete_hits"), stat(&h, "delete_misses")), (2, 2));
}

#[test]
fn incr_decr() {
    let mut h = Harness::new();
    assert_eq!(h.text("incr n 1\r\n"), "NOT_FOUND\r\n");
    h.text("set n 0 0 2\r\n10\r\n");
    assert_eq!(h.text("decr n 5\r\nget n\r\n"), "5\r\nVALUE n 0 2\r\n5 \r\nEND\r\n");
    assert_eq!(h.text("incr n 100\r\nget n\r\n"), "105\r\nVALUE n 0 3\r\n105\r\nEND\r\n");
    assert_eq!(h.text("decr n 1000\r\n"), "0\r\n");
    assert_eq!(h.text("incr n 18446744073709551615\r\nincr n 1\r\n"), "18446744073709551615\r\n0\r\n");
    assert_eq!(h.text("incr n -1\r\nincr n x\r\n"), "CLIENT_ERROR invalid numeric delta argument\r\n".repeat(2));
    h.text("set s 0 0 1\r\nx\r\n");
    assert_eq!(h.text("incr s 1\r\n"), "CLIENT_ERROR cannot increment or decrement non-numeric value\r\n");
    assert_eq!(h.text("incr n\r\nincr n 1 noreply x\r\n"), "ERROR\r\nERROR\r\n");
    assert_eq!((stat(&h, "incr_hits"), stat(&h, "incr_misses"), stat(&h, "decr_hits")), (3, 1, 2));
}

#[test]
fn touch_and_gat_move_expiry() {
    let mut h = Harness::new();
    h.text("set a 0 10 1\r\nx\r\n");
    assert_eq!(h.text("touch a 100\r\ntouch nope 100\r\n"), "TOUCHED\r\nNOT_FOUND\r\n");
    h.clock.advance(50);
    assert_eq!(h.text("gats 200 a nope\r\n"), "VALUE a 0 1 1\r\nx\r\nEND\r\n");
    h.clock.advance(150);
    assert_eq!(h.text("gat 0 a\r\n"), "VALUE a 0 1\r\nx\r\nEND\r\n");
    h.clock.advance(1_000_000);
    assert_eq!(h.text("get a\r\n"), "VALUE a 0 1\r\nx\r\nEND\r\n");
    assert_eq!(h.text("touch a -1\r\nget a\r\n"), "TOUCHED\r\nEND\r\n");
    assert_eq!(h.text("touch a\r\ntouch a x\r\n"), "ERROR\r\nCLIENT_ERROR invalid exptime argument\r\n");
    assert_eq!((stat(&h, "cmd_touch"), stat(&h, "touch_hits"), stat(&h, "touch_misses")), (6, 4, 2));
}

#[test]
fn expiry_rules() {
    let mut h = Harness::new();
    h.text("set rel 0 10 1\r\nx\r\nset neg 0 -1 1\r\nx\r\n");
    let absolute = crate::test_support::START_UNIX_S + 20;
    h.text(&format!("set abs 0 {absolute} 1\r\nx\r\nset past 0 2592001 1\r\nx\r\n"));
    assert_eq!(h.text("get neg past\r\n"), "END\r\n");
    h.clock.advance(10);
    assert_eq!(h.text("get rel abs\r\n"), "VALUE abs 0 1\r\nx\r\nEND\r\n");
    h.clock.advance(10);
    assert_eq!(h.text("get abs\r\n"), "END\r\n");
}

#[test]
fn flush_all() {
    let mut h = Harness::new();
    h.text("set a 0 0 1\r\nx\r\n");
    assert_eq!(h.text("flush_all\r\nget a\r\n"), "OK\r\nEND\r\n");
    h.text("set a 0 0 1\r\nx\r\n");
    assert_eq!(h.text("flush_all 10\r\nget a\r\n"), "OK\r\nVALUE a 0 1\r\nx\r\nEND\r\n");
    h.clock.advance(10);
    assert_eq!(h.text("get a\r\n"), "END\r\n");
    assert_eq!(h.text("flush_all -1\r\nflush_all x\r\nflush_all 1 2 3\r\n"), "OK\r\nCLIENT_ERROR invalid exptime argument\r\nERROR\r\n");
    assert_eq!(stat(&h, "cmd_flush"), 4);
}

#[test]
fn version_verbosity_quit_shutdown() {
    let mut h = Harness::new();
    assert_eq!(h.text("version\r\n"), "VERSION 1.6.18\r\n");
    assert_eq!(h.text("verbosity\r\nverbosity 1\r\nverbosity x\r\n"), "ERROR\r\nOK\r\nCLIENT_ERROR bad command line format\r\n");
    assert_eq!(h.text("shutdown\r\n"), "ERROR: shutdown not enabled\r\n");
    assert_eq!(h.text("mn\r\nquit\r\nget a\r\n"), "MN\r\n");
    assert!(h.closed);
    // HTTP requests get no answer but a closed connection.
    let mut h = Harness::new();
    assert_eq!(h.text("POST / HTTP/1.1\r\n"), "");
    assert!(h.closed);
}

#[test]
fn stats() {
    let mut h = Harness::new();
    h.text("set a 0 0 1\r\nx\r\nget a\r\n");
    let stats = h.text("stats\r\n");
    assert!(stats.starts_with("STAT pid "), "{stats}");
    assert!(stats.contains("STAT version 1.6.18\r\n"));
    assert!(stats.contains("STAT cmd_get 1\r\nSTAT cmd_set 1\r\n"));
    assert!(stats.contains("STAT curr_items 1\r\n"));
    assert!(stats.ends_with("END\r\n"));
    assert_eq!(h.text("stats reset\r\n"), "RESET\r\n");
    assert!(h.text("stats\r\n").contains("STAT cmd_get 0\r\n"));
    assert!(h.text("stats settings\r\n").contains("STAT item_size_max 1048576\r\n"));
    assert_eq!(h.text("stats items\r\nstats slabs\r\nstats foo\r\n"), "END\r\nEND\r\nERROR\r\n");
    assert_eq!(h.text("stats detail\r\nstats detail on\r\n"), "CLIENT_ERROR usage: stats detail on|off|dump\r\nOK\r\n");
}

#[test]
fn server_stats_come_first() {
    let mut h = Harness::with(|config| {
        config.server_stats = Some(std::sync::Arc::new(|| {
            vec![("pid".to_string(), "42".to_string()), ("threads".to_string(), "4".to_string())]
        }));
    });
    let stats = h.text("stats\r\n");
    assert!(stats.starts_with("STAT pid 42\r\nSTAT threads 4\r\nSTAT version 1.6.18\r\nSTAT cmd_get 0\r\n"), "{stats}");
}

#[test]
fn authentication() {
    let mut h = Harness::with_credentials();
    assert_eq!(h.text("get a\r\n"), "CLIENT_ERROR unauthenticated\r\n");
    assert_eq!(h.text("mn\r\n"), "CLIENT_ERROR unauthenticated\r\n");
    assert_eq!(h.text("set a 0 0 x\r\n"), "CLIENT_ERROR unauthenticated\r\n");
    assert_eq!(h.text("set a 0 0 10\r\nuser wrong\r\n"), "CLIENT_ERROR authentication failure\r\n");
    assert_eq!(h.text("set a 0 0 10\r\nuserxwrong\r\n"), "CLIENT_ERROR bad authentication token format\r\n");
    assert_eq!(h.text("set a 0 0 10\r\nuser wrongXX"), "CLIENT_ERROR bad command line termination\r\n");
    assert_eq!(h.text("set a 0 0 99999\r\n"), "CLIENT_ERROR auth token too long\r\n");
    assert!(!h.session.is_authenticated());
    // The block may arrive in pieces.
    assert_eq!(h.text("set a 0 0 11\r\nuser se"), "");
    assert_eq!(h.text("cret\r\nget a\r\n"), "STORED\r\nEND\r\n");
    assert!(h.session.is_authenticated());
    let mut h = Harness::with_credentials();
    // Passwords may contain spaces and colons: everything after the first space.
    assert_eq!(h.text("set x 1 2 15\r\nother pass:word\r\n"), "STORED\r\n");
    assert_eq!((h.config.counters.get("auth_cmds"), h.config.counters.get("auth_errors")), (Some(1), Some(0)));
}

#[test]
fn finds_bytes_at_every_offset() {
    for len in 0..40 {
        for position in 0..len {
            let mut haystack = vec![b'a'; len];
            haystack[position] = b'\n';
            assert_eq!(super::find_byte(&haystack, b'\n'), Some(position));
            haystack[position] = 0x8a;
            assert_eq!(super::find_byte(&haystack, b'\n'), None);
        }
    }
}
