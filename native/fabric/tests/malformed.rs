//! A raw UCX client (no fabric code on its side) sends frames that break the wire format. The
//! fabric node must close that connection, log it, count it, and keep serving everyone else.
use std::ffi::c_void;
use std::ptr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use fabric::wire::{self, Header, Kind};
use fabric::{Config, Node, Request};
use ucx_sys as u;

static FAILED: AtomicBool = AtomicBool::new(false);

unsafe extern "C" fn on_error(_arg: *mut c_void, _ep: u::ucp_ep_h, _status: u::ucs_status_t) {
    FAILED.store(true, Ordering::SeqCst);
}

/// Connects to `addr` with plain UCX and sends one active message with the given header and data.
/// Returns whether the server closed the connection within `wait`.
fn send_raw(addr: std::net::SocketAddr, header: &[u8], data: &[u8], wait: Duration) -> bool {
    FAILED.store(false, Ordering::SeqCst);
    unsafe {
        let mut config: *mut u::ucp_config_t = ptr::null_mut();
        assert_eq!(u::ucp_config_read(ptr::null(), ptr::null(), &mut config), u::UCS_OK);
        let mut params: u::ucp_params_t = std::mem::zeroed();
        params.field_mask = u::UCP_PARAM_FIELD_FEATURES as u64;
        params.features = u::UCP_FEATURE_AM as u64;
        let mut context: u::ucp_context_h = ptr::null_mut();
        assert_eq!(u::ucp_init(&params, config, &mut context), u::UCS_OK);
        u::ucp_config_release(config);
        let mut wparams: u::ucp_worker_params_t = std::mem::zeroed();
        let mut worker: u::ucp_worker_h = ptr::null_mut();
        assert_eq!(u::ucp_worker_create(context, &mut wparams, &mut worker), u::UCS_OK);
        let std::net::SocketAddr::V4(v4) = addr else { panic!("IPv4 only") };
        let mut sin: libc::sockaddr_in = std::mem::zeroed();
        sin.sin_family = libc::AF_INET as u16;
        sin.sin_port = v4.port().to_be();
        sin.sin_addr.s_addr = u32::from_ne_bytes(v4.ip().octets());
        let mut eparams: u::ucp_ep_params_t = std::mem::zeroed();
        eparams.field_mask = (u::UCP_EP_PARAM_FIELD_FLAGS
            | u::UCP_EP_PARAM_FIELD_SOCK_ADDR
            | u::UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE
            | u::UCP_EP_PARAM_FIELD_ERR_HANDLER) as u64;
        eparams.flags = u::UCP_EP_PARAMS_FLAGS_CLIENT_SERVER;
        eparams.sockaddr.addr = &sin as *const _ as *const u::sockaddr;
        eparams.sockaddr.addrlen = std::mem::size_of::<libc::sockaddr_in>() as u32;
        eparams.err_mode = u::UCP_ERR_HANDLING_MODE_PEER;
        eparams.err_handler.cb = Some(on_error);
        let mut ep: u::ucp_ep_h = ptr::null_mut();
        assert_eq!(u::ucp_ep_create(worker, &eparams, &mut ep), u::UCS_OK);
        let mut rparam: u::ucp_request_param_t = std::mem::zeroed();
        rparam.op_attr_mask = u::UCP_OP_ATTR_FIELD_FLAGS;
        rparam.flags = u::UCP_AM_SEND_FLAG_REPLY;
        let request = u::ucp_am_send_nbx(
            ep,
            wire::AM_ID,
            header.as_ptr() as *const c_void,
            header.len(),
            data.as_ptr() as *const c_void,
            data.len(),
            &rparam,
        );
        assert!(!u::ucs_ptr_is_err(request));
        let deadline = Instant::now() + wait;
        while !FAILED.load(Ordering::SeqCst) && Instant::now() < deadline {
            u::ucp_worker_progress(worker);
            std::thread::sleep(Duration::from_micros(100));
        }
        let closed = FAILED.load(Ordering::SeqCst);
        if u::ucs_ptr_is_ptr(request) {
            u::ucp_request_cancel(worker, request);
            u::ucp_worker_progress(worker);
            u::ucp_request_free(request);
        }
        let mut cparam: u::ucp_request_param_t = std::mem::zeroed();
        cparam.op_attr_mask = u::UCP_OP_ATTR_FIELD_FLAGS;
        cparam.flags = u::UCP_EP_CLOSE_FLAG_FORCE;
        let close = u::ucp_ep_close_nbx(ep, &cparam);
        if u::ucs_ptr_is_ptr(close) {
            while u::ucp_request_check_status(close) == u::UCS_INPROGRESS {
                u::ucp_worker_progress(worker);
            }
            u::ucp_request_free(close);
        }
        u::ucp_worker_destroy(worker);
        u::ucp_cleanup(context);
        closed
    }
}

#[test]
fn malformed_and_oversized_frames_close_only_that_connection() {
    let config = Config {
        listen: Some("127.0.0.1:0".parse().unwrap()),
        max_message_bytes: 1 << 20,
        pool_cap_bytes: 16 << 20,
        ..Config::default()
    };
    let server = Node::start(
        config,
        Some(Arc::new(|request: Request| {
            let echo = request.payload().to_vec();
            request.respond(&echo)
        })),
    )
    .unwrap();
    let addr = server.local_addr().unwrap();
    // A well-behaved client connected the whole time.
    let client = Node::start(Config::default(), None).unwrap();
    let endpoint = client.endpoint(addr).unwrap();
    assert_eq!(&endpoint.request(1, b"before").unwrap().wait().unwrap()[..], b"before");

    let good = Header { kind: Kind::Request, op: 1, status: 0, chunk_index: 0, chunk_count: 1, request_id: 1, total_len: 8, offset: 0 };
    let mut bad_magic = good.encode();
    bad_magic[0] ^= 0xff;
    let oversized = Header { total_len: (1 << 20) + 1, chunk_count: 2, ..good }.encode();
    let overrun = Header { total_len: 4, ..good }.encode();
    let cases: [(&str, Vec<u8>); 4] = [
        ("bad magic", bad_magic.to_vec()),
        ("short header", good.encode()[..10].to_vec()),
        ("oversized message", oversized.to_vec()),
        ("chunk overruns message", overrun.to_vec()),
    ];
    for (i, (name, header)) in cases.iter().enumerate() {
        let closed = send_raw(addr, header, &[0u8; 8], Duration::from_secs(5));
        assert_eq!(server.stats().protocol_errors, i as u64 + 1, "{name}: not counted as a protocol error");
        // The server forcibly closes: the raw client may or may not hear of it, depending on transport.
        let _ = closed;
        // Everyone else is still served.
        let reply = endpoint.request(1, name.as_bytes()).unwrap().wait().unwrap();
        assert_eq!(&reply[..], name.as_bytes(), "{name}: the good client was disturbed");
    }
    let deadline = Instant::now() + Duration::from_secs(5);
    while server.stats().connections_open != 1 {
        assert!(Instant::now() < deadline, "bad connections not closed: {:?}", server.stats());
        std::thread::sleep(Duration::from_millis(10));
    }
}
