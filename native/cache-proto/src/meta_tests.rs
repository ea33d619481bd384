//! Unit tests of `meta.rs`.

use crate::test_support::Harness;

#[test]
fn mg_flags_in_request_order() {
    let mut h = Harness::new();
    h.text("set a 3 0 1\r\nx\r\n");
    assert_eq!(h.text("mg a s v t f c k O123 h l\r\n"), "VA 1 s1 t-1 f3 c1 ka O123 h0 l0\r\nx\r\n");
    assert_eq!(h.text("mg a\r\nmg a h\r\n"), "HD\r\nHD h1\r\n");
    assert_eq!(h.text("mg a q\r\nmg a v q\r\n"), "HD\r\nVA 1\r\nx\r\n");
    assert_eq!(h.text("mg missing k O1\r\nmg missing q k\r\nmn\r\n"), "EN kmissing O1\r\nMN\r\n");
    h.clock.advance(7);
    assert_eq!(h.text("mg a l u\r\nmg a l\r\n"), "HD l7\r\nHD l7\r\n");
    assert_eq!(h.config.counters.get("cmd_meta"), Some(10));
    assert_eq!((h.config.counters.get("get_hits"), h.config.counters.get("get_misses")), (Some(7), Some(2)));
}

#[test]
fn mg_errors() {
    let mut h = Harness::new();
    assert_eq!(h.text("mg\r\n"), "ERROR\r\n");
    assert_eq!(h.text("mg a a\r\nmg a v v\r\nmg a S1\r\n"), "CLIENT_ERROR invalid flag\r\nCLIENT_ERROR duplicate flag\r\nCLIENT_ERROR invalid flag\r\n");
    assert_eq!(h.text("mg a T\r\nmg a N1x\r\nmg a Rx\r\n"), "CLIENT_ERROR bad token in command line format\r\n".repeat(3));
    assert_eq!(h.text("mg a MXX\r\nmg a Jx\r\nmg a Dx\r\nmg a Fx\r\n"), "CLIENT_ERROR incorrect length for M token\r\nCLIENT_ERROR invalid numeric initial value\r\nCLIENT_ERROR invalid numeric delta value\r\nCLIENT_ERROR bad command line format\r\n");
    // The last error's message wins, except that F sets none of its own.
    assert_eq!(h.text("mg a Tx Jx\r\nmg a Jx Fx\r\n"), "CLIENT_ERROR invalid numeric initial value\r\n".repeat(2));
    assert_eq!(h.text("mg a \u{80}\r\n"), "CLIENT_ERROR duplicate flag\r\n");
    let flags = "O0 s t c f l h k q u v N1 R1 T1 b P L Z";
    assert_eq!(h.text(&format!("mg a {flags}\r\n")), "CLIENT_ERROR options flags are too long\r\n");
    assert_eq!(h.text(&format!("mg {} v\r\n", "k".repeat(251))), "CLIENT_ERROR bad command line format\r\n");
    assert_eq!(h.text(&format!("mg a O{}\r\n", "x".repeat(32))), "CLIENT_ERROR opaque token too long\r\n");
    assert_eq!(h.text(&format!("mg a O{}\r\n", "x".repeat(31))), format!("EN O{}\r\n", "x".repeat(31)));
}

#[test]
fn mg_base64_keys() {
    let mut h = Harness::new();
    assert_eq!(h.text("mg Zm9v b k v\r\n"), "EN kZm9v b\r\n");
    assert_eq!(h.text("ms Zm9v 2 b k\r\nhi\r\n"), "HD kZm9v b\r\n");
    assert_eq!(h.text("mg Zm9v b k v\r\nmg foo v\r\n"), "VA 2 kZm9v b\r\nhi\r\nVA 2\r\nhi\r\n");
    assert_eq!(h.text("mg !!!! b v\r\n"), "CLIENT_ERROR error decoding key\r\n");
    // A binary key that is not printable.
    assert_eq!(h.text("ms AAEC/w== 1 b\r\nx\r\nmg AAEC/w== b k s\r\n"), "HD\r\nHD kAAEC/w== b s1\r\n");
}

#[test]
fn mg_touch_vivify_recache_stale() {
    let mut h = Harness::new();
    h.text("set a 0 100 1\r\nx\r\n");
    assert_eq!(h.text("mg a T30 t v\r\nmg a t\r\n"), "VA 1 t30\r\nx\r\nHD t30\r\n");
    assert_eq!(h.config.counters.get("touch_hits"), Some(1));
    // N: the first miss creates an empty item and wins; the next reader sees Z.
    assert_eq!(h.text("mg b N30 v t\r\nmg b N30 v\r\n"), "VA 0 t30 W\r\n\r\nVA 0 Z\r\n\r\n");
    // R: a TTL below the threshold wins once.
    assert_eq!(h.text("mg a R10 v\r\nmg a R31 v\r\nmg a R31 v\r\n"), "VA 1\r\nx\r\nVA 1 W\r\nx\r\nVA 1 Z\r\nx\r\n");
    // md I: stale, new CAS, first reader wins.
    assert_eq!(h.text("set c 0 0 1\r\nx\r\nmd c I T30\r\nmg c v c t\r\nmg c v\r\n"), "STORED\r\nHD\r\nVA 1 c4 t30 X W\r\nx\r\nVA 1 Z X\r\nx\r\n");
    // I without T keeps the expiry.
    assert_eq!(h.text("set d 0 50 1\r\nx\r\nmd d I q\r\nmg d t\r\n"), "STORED\r\nHD t50 X W\r\n");
}

#[test]
fn mg_compare_cas_skips_an_unchanged_value() {
    let mut h = Harness::new();
    h.text("set a 0 0 3\r\nabc\r\n");
    assert_eq!(h.text("mg a v C1 c\r\nmg a v C2 c\r\n"), "HD c1\r\nVA 3 c1\r\nabc\r\n");
}

#[test]
fn ms_modes_and_flags() {
    let mut h = Harness::new();
    assert_eq!(h.text("ms b 3 T0 F5 c k O9\r\nabc\r\nms b 3 q\r\nabc\r\nmn\r\n"), "HD c1 kb O9\r\nMN\r\n");
    assert_eq!(h.text("mg b v f\r\n"), "VA 3 f0\r\nabc\r\n");
    assert_eq!(h.text("ms a 2 ME c\r\nhi\r\nms a 2 ME c\r\nho\r\n"), "HD c3\r\nNS c0\r\n");
    assert_eq!(h.text("ms a 2 MR\r\nho\r\nms z 2 MR\r\nho\r\n"), "HD\r\nNS\r\n");
    assert_eq!(h.text("ms a 2 MA\r\n!!\r\nms a 2 MP\r\n<<\r\nms z 2 MA\r\nho\r\nmg a v\r\n"), "HD\r\nHD\r\nNS\r\nVA 6\r\n<<ho!!\r\n");
    assert_eq!(h.text("ms a 2 MS T-1\r\nhi\r\nmg a v\r\n"), "HD\r\nEN\r\n");
    assert_eq!(h.config.counters.get("cmd_set"), Some(10));
}

#[test]
fn ms_cas() {
    let mut h = Harness::new();
    assert_eq!(h.text("ms a 2 c\r\nhi\r\nms a 2 C999 c\r\nho\r\nms zz 2 C5\r\nho\r\n"), "HD c1\r\nEX c0\r\nNF\r\n");
    assert_eq!(h.text("ms a 2 C1 c MR\r\nho\r\n"), "HD c2\r\n");
    assert_eq!(h.text("ms a 2 MA C999\r\n!!\r\nms zz 2 MA C999\r\n!!\r\nms a 2 MA C2\r\n!!\r\n"), "EX\r\nNS\r\nHD\r\n");
    // Add ignores the CAS, as memcached's add does.
    assert_eq!(h.text("ms n 1 ME C999\r\nx\r\n"), "HD\r\n");
    // I with an older CAS stores, but stale.
    assert_eq!(h.text("ms a 1 C1 I\r\nx\r\nmg a v\r\n"), "HD\r\nVA 1 X W\r\nx\r\n");
    assert_eq!((h.config.counters.get("cas_hits"), h.config.counters.get("cas_badval"), h.config.counters.get("cas_misses")), (Some(2), Some(1), Some(1)));
}

#[test]
fn a_command_completed_over_several_reads_counts_once() {
    let mut h = Harness::new();
    assert_eq!(h.text("ms a 5\r\nhe"), "");
    assert_eq!(h.text("ll"), "");
    assert_eq!(h.text("o\r\n"), "HD\r\n");
    assert_eq!((h.config.counters.get("cmd_meta"), h.config.counters.get("cmd_set")), (Some(1), Some(1)));
}

#[test]
fn ms_newer_flags() {
    let mut h = Harness::new();
    assert_eq!(h.text("ms a 1 E77 c\r\nx\r\nmg a c\r\n"), "HD c77\r\nHD c77\r\n");
    assert_eq!(h.text("ms v 2 MA N30\r\nhi\r\nmg v v t\r\n"), "HD\r\nVA 2 t30\r\nhi\r\n");
}

#[test]
fn ms_errors_skip_the_data_block() {
    let mut h = Harness::with_max_item_bytes(100);
    assert_eq!(h.text("ms a\r\nms a x\r\nms a -1\r\n"), "CLIENT_ERROR bad command line format\r\n".repeat(3));
    assert_eq!(h.text("ms a 2 T\r\nhi\r\nms a 2 MX\r\nhi\r\n"), "CLIENT_ERROR bad token in command line format\r\nCLIENT_ERROR invalid mode for ms M token\r\n");
    assert_eq!(h.text(&format!("ms a 2 O{}\r\nhi\r\n", "x".repeat(40))), "CLIENT_ERROR opaque token too long\r\n");
    assert_eq!(h.text(&format!("ms a 2 MX O{}\r\nhi\r\n", "x".repeat(40))), "CLIENT_ERROR invalid mode for ms M token\r\n");
    assert_eq!(h.text("ms a 2 q\r\nhiX\r\n"), "CLIENT_ERROR bad data chunk\r\nERROR\r\n");
    assert_eq!(h.text("ms a 1\r\nx\r\nms a 100 q\r\n"), "HD\r\nSERVER_ERROR object too large for cache\r\n");
    assert_eq!(h.text(&format!("{}\r\nmg a\r\n", "y".repeat(100))), "EN\r\n");
    assert_eq!(h.text("ms a 2 b\r\nhi\r\nmn\r\n"), "CLIENT_ERROR error decoding key\r\nMN\r\n");
    let flags = "O1 k c q T1 F1 C1 I P L b s t f h l u v";
    assert_eq!(h.text(&format!("ms a 2 {flags}\r\nhi\r\n")), "CLIENT_ERROR options flags too long\r\nERROR\r\n");
}

#[test]
fn md() {
    let mut h = Harness::new();
    assert_eq!(h.text("md b q\r\nmd b\r\nmd b k O5\r\n"), "NF\r\nNF\r\nNF kb O5\r\n");
    assert_eq!(h.text("md b zz\r\nmd b C1 C2\r\nmd\r\n"), "CLIENT_ERROR invalid or duplicate flag\r\nCLIENT_ERROR invalid or duplicate flag\r\nERROR\r\n");
    h.text("set a 0 0 1\r\nx\r\n");
    assert_eq!(h.text("md a C999 k\r\nmd a C1 q\r\nmd a\r\n"), "EX ka\r\nNF\r\n");
    h.text("set a 0 0 1\r\nx\r\n");
    assert_eq!(h.text("md a O1 k\r\n"), "HD O1 ka\r\n");
    assert_eq!(h.text(&format!("md a O{}\r\n", "x".repeat(40))), "CLIENT_ERROR opaque token too long\r\n");
    h.text("set e 0 0 1\r\nx\r\n");
    assert_eq!(h.text("md e I E500\r\nmg e c\r\n"), "HD\r\nHD c500 X W\r\n");
    assert_eq!((h.config.counters.get("delete_hits"), h.config.counters.get("delete_misses")), (Some(2), Some(5)));
}

#[test]
fn ma() {
    let mut h = Harness::new();
    assert_eq!(h.text("ma c\r\nma c N0 J10 v\r\nma c v t c\r\n"), "NF\r\nVA 2\r\n10\r\nVA 2 t-1 c2\r\n11\r\n");
    assert_eq!(h.text("ma c MD D100 v\r\nma c MX\r\nma c q\r\nma c q D1 v\r\nmn\r\n"), "VA 1\r\n0\r\nCLIENT_ERROR invalid mode for ma M token\r\nMN\r\n");
    assert_eq!(h.text("ma c M+ v\r\nma c M- D2 v k O7\r\nma c MI D10\r\nmg c v\r\n"), "VA 1\r\n3\r\nVA 1 kc O7\r\n1\r\nHD\r\nVA 2\r\n11\r\n");
    assert_eq!(h.text("ma c C1 v\r\nma c C8 v\r\nma c C0 v\r\n"), "EX\r\nVA 2\r\n12\r\nVA 2\r\n13\r\n");
    assert_eq!(h.text("ma c T30 t\r\nma nope O1 k\r\nma nope q\r\n"), "HD t30\r\nNF O1 knope\r\nNF\r\n");
    h.text("set s 0 0 1\r\nx\r\n");
    assert_eq!(h.text("ma s\r\nma s q\r\n"), "CLIENT_ERROR cannot increment or decrement non-numeric value\r\n".repeat(2));
    assert_eq!(h.text("ma s Dx\r\nma s M\r\n"), "CLIENT_ERROR invalid or duplicate flag\r\n".repeat(2));
    assert_eq!(h.text("ma e N30 J5 E99 c t\r\n"), "HD c99 t30\r\n");
    assert_eq!(h.text("ma Yw== b k v\r\n"), "VA 2 kYw== b\r\n15\r\n");
}

#[test]
fn me_and_mn() {
    let mut h = Harness::new();
    h.text("set s 0 0 1\r\nx\r\n");
    assert_eq!(h.text("me s\r\n"), "ME s exp=-1 la=0 cas=1 fetch=no cls=1 size=61\r\n");
    h.text("set t 7 100 3\r\nabc\r\nget t\r\n");
    h.clock.advance(4);
    assert_eq!(h.text("me t\r\nme t\r\n"), "ME t exp=96 la=4 cas=2 fetch=yes cls=1 size=67\r\n".repeat(2));
    assert_eq!(h.text("me nope\r\nme\r\nme Zm9v b\r\nme !!! b\r\n"), "EN\r\nCLIENT_ERROR bad command line format\r\nEN\r\nCLIENT_ERROR bad command line format\r\n");
    assert_eq!(h.text("ms Zm9v 1 b\r\nx\r\nme Zm9v b\r\n"), "HD\r\nME Zm9v exp=-1 la=0 cas=3 fetch=no cls=1 size=63\r\n");
    assert_eq!(h.text("mn\r\nmn extra\r\nmx a\r\nm\r\n"), "MN\r\nMN\r\nERROR\r\nERROR\r\n");
}
