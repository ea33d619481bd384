//! A client of plain UCX (no fabric code on its side), for tests that speak the wire format
//! themselves: frames that break it (`malformed.rs`), or a peer from before a wire feature
//! (`bundles.rs`). It keeps what the server sends it (`received`).
#![allow(dead_code)] // each test binary uses its own part
use std::ffi::c_void;
use std::ptr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use fabric::wire;
use ucx_sys as u;

/// One active message the server sent: its header and, if it came eagerly, its data.
pub struct Received {
    pub header: Vec<u8>,
    pub data: Vec<u8>,
}

/// A connection from plain UCX (no fabric code): sends whatever frames a test makes.
pub struct RawClient {
    context: u::ucp_context_h,
    worker: u::ucp_worker_h,
    ep: u::ucp_ep_h,
    /// Set by UCX's error callback: the server closed (or reset) the connection.
    failed: Box<AtomicBool>,
    /// What the server sent, in order (`keep_message`); the box outlives the worker.
    received: Box<Mutex<Vec<Received>>>,
}

// SAFETY: UCX calls this only as registered: `arg` is the address of the client's boxed flag, which outlives
// the endpoint (closed in Drop before the box goes).
unsafe extern "C" fn on_error(arg: *mut c_void, _ep: u::ucp_ep_h, _status: u::ucs_status_t) {
    // SAFETY: `arg` is the address of the client's boxed flag, which outlives its endpoint.
    unsafe { (*(arg as *const AtomicBool)).store(true, Ordering::SeqCst) };
}

// SAFETY: UCX calls this only as registered: `arg` is the address of the client's boxed list,
// which outlives the worker (destroyed in Drop before the box goes); `header` holds
// `header_length` bytes, and `data` holds `length` bytes unless `param` says it is a rendezvous
// descriptor (then returning UCS_OK drops it).
unsafe extern "C" fn keep_message(
    arg: *mut c_void,
    header: *const c_void,
    header_length: usize,
    data: *mut c_void,
    length: usize,
    param: *const u::ucp_am_recv_param_t,
) -> u::ucs_status_t {
    // SAFETY: as above: pointers and lengths as UCX hands them over for this call.
    unsafe {
        let rndv = (*param).recv_attr & u::UCP_AM_RECV_ATTR_FLAG_RNDV as u64 != 0;
        let bytes = |p: *const c_void, len: usize| if len == 0 { Vec::new() } else { std::slice::from_raw_parts(p as *const u8, len).to_vec() };
        let message = Received { header: bytes(header, header_length), data: if rndv { Vec::new() } else { bytes(data, length) } };
        (*(arg as *const Mutex<Vec<Received>>)).lock().unwrap().push(message);
    }
    u::UCS_OK
}

impl RawClient {
    pub fn connect(addr: std::net::SocketAddr) -> RawClient {
        // SAFETY: plain UCX setup; every out-pointer is a local, every status is checked, and the
        // sockaddr and params live across the calls that read them.
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
            // The server says hello to peers on this host: UCX 1.13 dereferences a null handler
            // table for an active message no handler was ever set for, so take them (and keep them).
            let received: Box<Mutex<Vec<Received>>> = Box::default();
            let mut am: u::ucp_am_handler_param_t = std::mem::zeroed();
            am.field_mask = (u::UCP_AM_HANDLER_PARAM_FIELD_ID | u::UCP_AM_HANDLER_PARAM_FIELD_CB | u::UCP_AM_HANDLER_PARAM_FIELD_ARG) as u64;
            am.id = wire::AM_ID;
            am.cb = Some(keep_message);
            am.arg = &*received as *const Mutex<Vec<Received>> as *mut c_void;
            assert_eq!(u::ucp_worker_set_am_recv_handler(worker, &am), u::UCS_OK);
            let std::net::SocketAddr::V4(v4) = addr else { panic!("IPv4 only") };
            let mut sin: libc::sockaddr_in = std::mem::zeroed();
            sin.sin_family = libc::AF_INET as u16;
            sin.sin_port = v4.port().to_be();
            sin.sin_addr.s_addr = u32::from_ne_bytes(v4.ip().octets());
            let failed = Box::new(AtomicBool::new(false));
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
            eparams.err_handler.arg = &*failed as *const AtomicBool as *mut c_void;
            let mut ep: u::ucp_ep_h = ptr::null_mut();
            assert_eq!(u::ucp_ep_create(worker, &eparams, &mut ep), u::UCS_OK);
            RawClient { context, worker, ep, failed, received }
        }
    }

    /// Sends one active message and drives progress until it has left (or `wait` passed).
    pub fn send(&self, header: &[u8], data: &[u8], wait: Duration) {
        // SAFETY: `header` and `data` outlive the send: it is completed or cancelled before return.
        unsafe {
            let mut rparam: u::ucp_request_param_t = std::mem::zeroed();
            rparam.op_attr_mask = u::UCP_OP_ATTR_FIELD_FLAGS;
            rparam.flags = u::UCP_AM_SEND_FLAG_REPLY;
            let request = u::ucp_am_send_nbx(
                self.ep,
                wire::AM_ID,
                header.as_ptr() as *const c_void,
                header.len(),
                data.as_ptr() as *const c_void,
                data.len(),
                &rparam,
            );
            assert!(!u::ucs_ptr_is_err(request));
            if u::ucs_ptr_is_ptr(request) {
                let deadline = Instant::now() + wait;
                while u::ucp_request_check_status(request) == u::UCS_INPROGRESS && Instant::now() < deadline {
                    u::ucp_worker_progress(self.worker);
                    std::thread::sleep(Duration::from_micros(100));
                }
                if u::ucp_request_check_status(request) == u::UCS_INPROGRESS {
                    u::ucp_request_cancel(self.worker, request);
                    u::ucp_worker_progress(self.worker);
                }
                u::ucp_request_free(request);
            }
        }
    }

    /// Drives progress for up to `wait`; true once the server has closed the connection.
    pub fn closed_within(&self, wait: Duration) -> bool {
        let deadline = Instant::now() + wait;
        while !self.failed.load(Ordering::SeqCst) && Instant::now() < deadline {
            // SAFETY: the worker is alive until drop.
            unsafe { u::ucp_worker_progress(self.worker) };
            std::thread::sleep(Duration::from_micros(100));
        }
        self.failed.load(Ordering::SeqCst)
    }

    /// Drives progress until `done` holds of what the server sent so far, or `wait` passed;
    /// returns whether it held.
    pub fn progress_until(&self, wait: Duration, mut done: impl FnMut(&[Received]) -> bool) -> bool {
        let deadline = Instant::now() + wait;
        loop {
            if done(&self.received.lock().unwrap()) {
                return true;
            }
            if Instant::now() >= deadline {
                return false;
            }
            // SAFETY: the worker is alive until drop.
            unsafe { u::ucp_worker_progress(self.worker) };
        }
    }

    /// Takes what the server sent so far.
    pub fn take_received(&self) -> Vec<Received> {
        std::mem::take(&mut self.received.lock().unwrap())
    }
}

impl Drop for RawClient {
    fn drop(&mut self) {
        // SAFETY: the endpoint is closed (and the close request freed) before the worker and the
        // context it belongs to are destroyed; nothing uses them afterwards.
        unsafe {
            let mut cparam: u::ucp_request_param_t = std::mem::zeroed();
            cparam.op_attr_mask = u::UCP_OP_ATTR_FIELD_FLAGS;
            cparam.flags = u::UCP_EP_CLOSE_FLAG_FORCE;
            let close = u::ucp_ep_close_nbx(self.ep, &cparam);
            if u::ucs_ptr_is_ptr(close) {
                while u::ucp_request_check_status(close) == u::UCS_INPROGRESS {
                    u::ucp_worker_progress(self.worker);
                }
                u::ucp_request_free(close);
            }
            u::ucp_worker_destroy(self.worker);
            u::ucp_cleanup(self.context);
        }
    }
}

