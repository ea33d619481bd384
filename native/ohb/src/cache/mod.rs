//! `ohb mem lat|thr|nb|hybrid`: the cache benchmarks (after OHB's `ohb_memlat`, `ohb_memlat_nb` and a
//! throughput test). Each run starts, side by side: memcached 1.6 from Debian over TCP, slipstream-
//! cache over TCP and slipstream-cache over the fabric, all through the same client library
//! (`cache-client`, binary protocol), and measures them one after the other at every point.
//!
//! Architecture invariant: servers are separate processes bound to 127.0.0.1, killed with ohb;
//! the measuring clients run in ohb, as an application would use them.


pub mod cli;
pub mod hybrid;
pub mod latency;
pub mod nonblocking;
pub mod servers;
pub mod throughput;
pub mod workload;

/// The three things measured side by side.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CacheVariant {
    /// memcached 1.6 (Debian) over TCP: the reference.
    Memcached,
    /// slipstream-cache over TCP.
    CacheTcp,
    /// slipstream-cache over the fabric.
    CacheFabric,
}

impl CacheVariant {
    pub const ALL: [CacheVariant; 3] = [CacheVariant::Memcached, CacheVariant::CacheTcp, CacheVariant::CacheFabric];

    pub fn name(self) -> &'static str {
        match self {
            CacheVariant::Memcached => "memcached",
            CacheVariant::CacheTcp => "cache-tcp",
            CacheVariant::CacheFabric => "cache-fabric",
        }
    }

    pub fn parse(text: &str) -> Option<CacheVariant> {
        CacheVariant::ALL.into_iter().find(|v| v.name() == text)
    }
}

#[cfg(test)]
mod tests {
    use crate::cache::workload::Workload;
    use super::*;

    #[test]
    fn names_round_trip() {
        for v in CacheVariant::ALL {
            assert_eq!(CacheVariant::parse(v.name()), Some(v));
        }
        for w in Workload::ALL {
            assert_eq!(Workload::parse(&w.name().to_lowercase()), Some(w));
        }
    }
}
