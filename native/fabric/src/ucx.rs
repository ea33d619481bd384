//! Thin owners of UCX handles: the context (transport choice happens here) and memory mappings.
//! Everything else about UCX (worker, endpoints, active messages) lives in `node/`, which owns the worker.
use std::ffi::CString;
use std::ptr;

use ucx_sys as u;

use crate::config::{Config, Transport};
use crate::error::{check, Error, Result};

/// The largest chunk sent on a connection that carries everything eagerly over TCP
/// (`Transport::Tcp`, or a TCP-only peer on another host): `Config::chunk_size_bytes` if smaller.
/// Chosen by measurement (docs/fabric.md, "The TCP path"): 256 KiB chunks cost more per byte at
/// 1 MiB, 1 MiB chunks (2 MiB receive buffers) more at 4 MiB.
pub(crate) const TCP_CHUNK_BYTES: usize = 512 << 10;

/// UCX's TCP receive segment (`TCP_RX_SEG_SIZE`, 64 KiB in UCX 1.13): one eager chunk with its
/// headers (the fabric's 40 bytes, UCP's and UCT's a few dozen) fits in one segment, so UCP
/// delivers it as one fragment. With 64 KiB every larger message was cut into 64 KiB fragments,
/// which UCP copied once more into a reassembly buffer of its own before the fabric's callback.
/// UCX trusts its peers here: a receiver whose segment is smaller than the sender's largest
/// fragment overruns its buffer, so every process of a cluster must run the same value (the same
/// fabric, or the same explicit `UCX_TCP_RX_SEG_SIZE` everywhere).
pub(crate) const TCP_RX_SEG_BYTES: usize = TCP_CHUNK_BYTES + (64 << 10);
// A chunk, the fabric's header and UCP's and UCT's headers (a few dozen bytes) fit in one segment.
const _: () = assert!(TCP_CHUNK_BYTES + crate::wire::HEADER_LEN + 1024 <= TCP_RX_SEG_BYTES);

/// A UCX context. Shared (Arc) by the node and its buffer pool, so mappings outlive the worker
/// while buffers are still held (e.g. by Java).
pub(crate) struct Context {
    pub(crate) handle: u::ucp_context_h,
}

// SAFETY: a ucp_context_h may be used from any thread (the fabric creates it with
// `mt_workers_shared`); it is cleaned up once, in Drop.
unsafe impl Send for Context {}
// SAFETY: the context's own operations (map, unmap, worker creation) are thread-safe in UCX with
// `mt_workers_shared`; `handle` is never written after creation.
unsafe impl Sync for Context {}

impl Context {
    pub(crate) fn new(config: &Config) -> Result<Context> {
        // A restarted server must be able to listen on its port again at once, even with
        // connections of its previous life in TIME_WAIT. UCX 1.13 reads this connection-manager
        // setting only from the environment (ucp_config_modify ignores it), so it is set there,
        // once, before the first context, unless the user set it; without glibc's `setenv`, which
        // is unsafe while other threads (a JVM's) may read the environment (see `environ.rs`).
        static REUSEADDR: std::sync::Once = std::sync::Once::new();
        REUSEADDR.call_once(|| {
            if !crate::environ::set_var(c"UCX_TCP_CM_REUSEADDR", c"y", false) {
                crate::log::log_warn!("could not set UCX_TCP_CM_REUSEADDR (out of memory): a restarted server may not get its port back at once");
            }
        });
        // SAFETY: `ucp_config` is read, modified with NUL-terminated strings and released exactly once on
        // every path; `params` is zeroed and filled for its `field_mask`.
        unsafe {
            let mut ucp_config: *mut u::ucp_config_t = ptr::null_mut();
            check("ucp_config_read", u::ucp_config_read(ptr::null(), ptr::null(), &mut ucp_config))?;
            let modify = |key: &str, value: &str| -> Result<()> {
                let key = CString::new(key).unwrap();
                let value = CString::new(value).unwrap();
                check("ucp_config_modify", u::ucp_config_modify(ucp_config, key.as_ptr(), value.as_ptr()))
            };
            let settings = context_settings(config, |name| std::env::var_os(name).map(|value| value.to_string_lossy().into_owned()), &rdma_devices());
            let result = settings.iter().try_for_each(|(key, value)| match (*key, modify(key, value)) {
                // UCX 1.13 takes TCP's receive segment only by its name inside the transport's
                // table (the prefixed name is kept unused); UCX 1.22 refuses that name ("Invalid
                // parameter") and takes the prefixed one. Without either, UCX's default segment
                // stays: larger eager chunks then travel as several fragments (slower, not wrong).
                ("RX_SEG_SIZE", Err(_)) => {
                    if let Err(e) = modify("TCP_RX_SEG_SIZE", value) {
                        crate::log::log_warn!("UCX takes no TCP receive segment setting ({e}): large messages over TCP cost a copy more");
                    }
                    Ok(())
                }
                (_, result) => result,
            });
            if let Err(e) = result {
                u::ucp_config_release(ucp_config);
                return Err(e);
            }
            let mut params: u::ucp_params_t = std::mem::zeroed();
            params.field_mask = (u::UCP_PARAM_FIELD_FEATURES | u::UCP_PARAM_FIELD_MT_WORKERS_SHARED) as u64;
            params.features = (u::UCP_FEATURE_AM | u::UCP_FEATURE_WAKEUP) as u64;
            params.mt_workers_shared = 1;
            let mut handle: u::ucp_context_h = ptr::null_mut();
            let status = u::ucp_init(&params, ucp_config, &mut handle);
            u::ucp_config_release(ucp_config);
            check("ucp_init", status)?;
            Ok(Context { handle })
        }
    }

    /// Registers `len` bytes at `address` with every memory domain UCX uses, for zero-copy.
    pub(crate) fn map(&self, address: *mut u8, len: usize) -> Result<u::ucp_mem_h> {
        // SAFETY: `address` points to `len` bytes owned by the pool and stays mapped until `unmap` of the
        // returned handle (the pool unmaps before it frees the memory).
        unsafe {
            let mut params: u::ucp_mem_map_params_t = std::mem::zeroed();
            params.field_mask = (u::UCP_MEM_MAP_PARAM_FIELD_ADDRESS | u::UCP_MEM_MAP_PARAM_FIELD_LENGTH) as u64;
            params.address = address as *mut _;
            params.length = len;
            let mut memh: u::ucp_mem_h = ptr::null_mut();
            check("ucp_mem_map", u::ucp_mem_map(self.handle, &params, &mut memh))?;
            Ok(memh)
        }
    }

    pub(crate) fn unmap(&self, memh: u::ucp_mem_h) {
        // SAFETY: `memh` came from `map` on this context and is unmapped once (the pool drops its Raw).
        let status = unsafe { u::ucp_mem_unmap(self.handle, memh) };
        debug_assert_eq!(status, u::UCS_OK);
    }
}

impl Drop for Context {
    fn drop(&mut self) {
        // SAFETY: last owner of the context (workers and mappings hold an Arc of it and are gone first).
        unsafe { u::ucp_cleanup(self.handle) };
    }
}

/// Parses a `SocketAddr` into the sockaddr storage UCX wants.
pub(crate) fn sockaddr(addr: &std::net::SocketAddr) -> (libc::sockaddr_storage, libc::socklen_t) {
    // SAFETY: sockaddr_storage is large and aligned enough for sockaddr_in and sockaddr_in6, and
    // all-zero is a valid value of each.
    unsafe {
        let mut storage: libc::sockaddr_storage = std::mem::zeroed();
        let len = match addr {
            std::net::SocketAddr::V4(v4) => {
                let sin = &mut *(&mut storage as *mut _ as *mut libc::sockaddr_in);
                sin.sin_family = libc::AF_INET as libc::sa_family_t;
                sin.sin_port = v4.port().to_be();
                sin.sin_addr.s_addr = u32::from_ne_bytes(v4.ip().octets());
                std::mem::size_of::<libc::sockaddr_in>()
            }
            std::net::SocketAddr::V6(v6) => {
                let sin6 = &mut *(&mut storage as *mut _ as *mut libc::sockaddr_in6);
                sin6.sin6_family = libc::AF_INET6 as libc::sa_family_t;
                sin6.sin6_port = v6.port().to_be();
                sin6.sin6_addr.s6_addr = v6.ip().octets();
                sin6.sin6_scope_id = v6.scope_id();
                std::mem::size_of::<libc::sockaddr_in6>()
            }
        };
        (storage, len as libc::socklen_t)
    }
}

/// What the fabric sets on its UCX context for `config`, in order, as `ucp_config_modify` keys.
/// A setting whose `UCX_` variable the user set (`env`) is left to the user. Pure, so that the
/// rules (and the key names UCX expects) are tested without a context.
fn context_settings(config: &Config, env: impl Fn(&str) -> Option<String>, rdma_devices: &[String]) -> Vec<(&'static str, String)> {
    let mut settings = Vec::new();
    if config.transport == Transport::Tcp {
        settings.push(("TLS", "tcp".to_string()));
    }
    // Peer error handling would otherwise disable shared memory between processes
    // (UCX falls back to TCP, 10x the latency).
    if config.transport == Transport::Auto && config.shm_with_peer_errors && env("UCX_MM_ERROR_HANDLING").is_none() {
        settings.push(("MM_ERROR_HANDLING", "y".to_string()));
    }
    // Connections over TCP send everything eagerly (`connections.rs`); with UCX's 64 KiB receive
    // segment each larger message cost one copy more than sockets (issue 11's profile: UCP's
    // reassembly copy, 10 % of the receiver at 64 KiB). Also in Auto, for TCP-only peers on other
    // hosts; shared memory does not read it. UCX applies a transport's setting given here by its
    // name inside the transport's table, without the `TCP_` prefix (`TCP_RX_SEG_SIZE` is silently
    // kept unused); in UCX 1.13 only TCP has a field of this name. UCX 1.22 refuses that name and
    // takes `TCP_RX_SEG_SIZE` instead (`Context::new` tries it next).
    if env("UCX_TCP_RX_SEG_SIZE").is_none() {
        settings.push(("RX_SEG_SIZE", TCP_RX_SEG_BYTES.to_string()));
    }
    if env("UCX_NET_DEVICES").is_none() {
        settings.push(("NET_DEVICES", config.net_devices.clone()));
    }
    // With peer error handling UCX offers shared memory no bulk (`rma_bw`) lane, so without
    // RDMA every same-host endpoint got a TCP lane for rendezvous alone, and a TCP lane keeps
    // UCX's TCP interface polled, one `epoll_wait` per `ucp_worker_progress`, even between
    // two same-host peers (issue 11's profile: about 30 % of the samples at 16 KiB). The
    // lane carries nothing the fabric needs: peers on other hosts reached over TCP are sent
    // eagerly (`connections.rs`), and large same-host messages take the pull path. So
    // without an RDMA device in reach, rendezvous gets no lanes (UCX then runs it over
    // active messages); with one, verbs keep zero-copy rendezvous.
    if config.transport == Transport::Auto && env("UCX_MAX_RNDV_LANES").is_none() {
        let net_devices = env("UCX_NET_DEVICES").unwrap_or_else(|| config.net_devices.clone());
        if !rdma_in_reach(rdma_devices, &net_devices) {
            settings.push(("MAX_RNDV_LANES", "0".to_string()));
        }
    }
    settings
}

/// This host's RDMA devices (verbs: InfiniBand, RoCE, iWARP), as the kernel lists them.
fn rdma_devices() -> Vec<String> {
    std::fs::read_dir("/sys/class/infiniband")
        .map(|entries| entries.filter_map(|entry| entry.ok()?.file_name().into_string().ok()).collect())
        .unwrap_or_default()
}

/// Whether UCX may use one of `devices` under `net_devices` (UCX_NET_DEVICES's syntax: `all`, or
/// a comma-separated list of names such as `mlx5_0:1`, `eth0`, `lo`).
fn rdma_in_reach(devices: &[String], net_devices: &str) -> bool {
    net_devices.split(',').map(str::trim).any(|wanted| {
        wanted == "all" || devices.iter().any(|device| wanted == device || wanted.strip_prefix(device.as_str()).is_some_and(|port| port.starts_with(':')))
    }) && !devices.is_empty()
}

/// The inverse of `sockaddr`.
pub(crate) fn socket_addr(storage: &libc::sockaddr_storage) -> Result<std::net::SocketAddr> {
    // SAFETY: `ss_family` says which of sockaddr_in/sockaddr_in6 the storage holds; both fit in it.
    unsafe {
        match storage.ss_family as i32 {
            libc::AF_INET => {
                let sin = &*(storage as *const _ as *const libc::sockaddr_in);
                let ip = std::net::Ipv4Addr::from(u32::from_be(sin.sin_addr.s_addr));
                Ok(std::net::SocketAddr::from((ip, u16::from_be(sin.sin_port))))
            }
            libc::AF_INET6 => {
                let sin6 = &*(storage as *const _ as *const libc::sockaddr_in6);
                let ip = std::net::Ipv6Addr::from(sin6.sin6_addr.s6_addr);
                Ok(std::net::SocketAddr::from((ip, u16::from_be(sin6.sin6_port))))
            }
            family => Err(Error::Config(format!("unsupported address family {family}"))),
        }
    }
}

/// Whether `ip` belongs to this host: loopback, or an address of one of its interfaces.
pub(crate) fn is_local_address(ip: std::net::IpAddr) -> bool {
    if ip.is_loopback() {
        return true;
    }
    // SAFETY: the list from `getifaddrs` is walked only via its own `ifa_next` links, each address is
    // copied with the length of its family (checked), and the list is freed once, after the walk.
    unsafe {
        let mut list: *mut libc::ifaddrs = ptr::null_mut();
        if libc::getifaddrs(&mut list) != 0 {
            return false;
        }
        let mut found = false;
        let mut entry = list;
        while !entry.is_null() && !found {
            let address = (*entry).ifa_addr;
            if !address.is_null() {
                let family = (*address).sa_family as i32;
                if family == libc::AF_INET || family == libc::AF_INET6 {
                    let mut storage: libc::sockaddr_storage = std::mem::zeroed();
                    let len = if family == libc::AF_INET { std::mem::size_of::<libc::sockaddr_in>() } else { std::mem::size_of::<libc::sockaddr_in6>() };
                    ptr::copy_nonoverlapping(address as *const u8, &mut storage as *mut _ as *mut u8, len);
                    found = socket_addr(&storage).is_ok_and(|a| a.ip() == ip);
                }
            }
            entry = (*entry).ifa_next;
        }
        libc::freeifaddrs(list);
        found
    }
}

#[cfg(test)]
mod tests {
    use super::{context_settings, rdma_in_reach, TCP_RX_SEG_BYTES};
    use crate::config::{Config, Transport};

    fn keys(settings: &[(&'static str, String)]) -> Vec<&'static str> {
        settings.iter().map(|(key, _)| *key).collect()
    }

    #[test]
    fn the_context_gets_the_tcp_receive_segment_on_both_transports_under_the_name_ucx_applies() {
        let no_env = |_: &str| None;
        let tcp = context_settings(&Config { transport: Transport::Tcp, ..Config::default() }, no_env, &[]);
        assert_eq!(keys(&tcp), ["TLS", "RX_SEG_SIZE", "NET_DEVICES"]);
        assert!(tcp.contains(&("RX_SEG_SIZE", TCP_RX_SEG_BYTES.to_string())), "{tcp:?}");
        let auto = context_settings(&Config::default(), no_env, &[]);
        assert_eq!(keys(&auto), ["MM_ERROR_HANDLING", "RX_SEG_SIZE", "NET_DEVICES", "MAX_RNDV_LANES"]);
        assert!(!keys(&auto).contains(&"TCP_RX_SEG_SIZE"), "UCX keeps a prefixed transport key unused");
    }

    #[test]
    fn a_ucx_variable_the_user_set_is_never_overridden() {
        let user = |name: &str| matches!(name, "UCX_TCP_RX_SEG_SIZE" | "UCX_NET_DEVICES" | "UCX_MM_ERROR_HANDLING" | "UCX_MAX_RNDV_LANES").then(|| "set".to_string());
        assert!(context_settings(&Config::default(), user, &[]).is_empty());
        assert_eq!(keys(&context_settings(&Config { transport: Transport::Tcp, ..Config::default() }, user, &[])), ["TLS"]);
        let segment_only = |name: &str| (name == "UCX_TCP_RX_SEG_SIZE").then(|| "64K".to_string());
        assert!(!keys(&context_settings(&Config::default(), segment_only, &[])).contains(&"RX_SEG_SIZE"));
    }

    #[test]
    fn rendezvous_keeps_its_lanes_when_the_users_devices_include_rdma() {
        let mlx = vec!["mlx5_0".to_string()];
        let no_env = |_: &str| None;
        assert!(!keys(&context_settings(&Config { net_devices: "mlx5_0:1".into(), ..Config::default() }, no_env, &mlx)).contains(&"MAX_RNDV_LANES"));
        let user_devices = |name: &str| (name == "UCX_NET_DEVICES").then(|| "all".to_string());
        assert!(!keys(&context_settings(&Config::default(), user_devices, &mlx)).contains(&"MAX_RNDV_LANES"));
        assert!(keys(&context_settings(&Config::default(), no_env, &mlx)).contains(&"MAX_RNDV_LANES"), "the default devices are loopback");
    }

    #[test]
    fn rdma_is_in_reach_only_when_a_device_exists_and_the_device_list_takes_it() {
        let mlx = vec!["mlx5_0".to_string(), "mlx5_1".to_string()];
        assert!(!rdma_in_reach(&[], "all"), "no device");
        assert!(!rdma_in_reach(&mlx, "lo"), "the fabric's default device list is loopback only");
        assert!(rdma_in_reach(&mlx, "all"));
        assert!(rdma_in_reach(&mlx, "lo,mlx5_1:1"));
        assert!(rdma_in_reach(&mlx, "mlx5_0"));
        assert!(!rdma_in_reach(&mlx, "mlx5_10:1"), "another device whose name starts the same");
        assert!(!rdma_in_reach(&mlx, "eth0, lo"));
    }
}
