//! # fabric-jni: the JNI entry points of the fabric
//!
//! Every `Java_io_slipstream_fabric_FabricNative_*` function here is declared once, in
//! `jvm/fabric/src/main/java/io/slipstream/fabric/FabricNative.java`, which documents the calling
//! conventions; this crate holds no logic of its own beyond translating between the two worlds.
//!
//! Architecture invariants:
//! - No native thread calls into the JVM. Asynchronous completions go through a queue that a Java
//!   thread drains ([`completions`]); requests are pulled by Java threads (`HandlerMode::Pull`).
//! - No JNI function can crash the JVM: each runs inside [`guard`], which catches panics and turns
//!   them, `fabric::Error`s and JNI failures into Java exceptions (`FabricException`).
//! - Native objects travel to Java as `Box` pointers in `long` handles: a node (`NodeCtx`), an
//!   endpoint (`EndpointCtx`), a buffer (`fabric::Buffer`), a request (`fabric::Request`). Java
//!   guarantees a handle is used only while valid and freed once (`NodeHandle`, `FabricBuffer`,
//!   `FabricRequest`); functions that consume a handle take ownership first, so they consume it
//!   even when they fail.
//! - Registered memory reaches Java only as direct `ByteBuffer`s over pool buffers. Each buffer
//!   handed to Java is pinned (`bufferPin`, a `fabric::ViewPin` behind another handle) until its
//!   root view is garbage (`viewUnpin`, from Java's cleaner): the pool may reuse a released
//!   buffer but never unmaps pinned memory. The pool lives as long as the node handle, which Java
//!   frees only once no view is reachable. So a stale view reads or writes stale bytes of the
//!   pool, it never faults and never touches the native heap.
use std::net::{IpAddr, SocketAddr};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Arc;
use std::time::Duration;

use fabric::{Buffer, Config, Endpoint, HandlerMode, Node, Request};
use jni::objects::{JByteArray, JByteBuffer, JClass, JLongArray, JObject, JObjectArray, JString, JThrowable, JValue};
use jni::sys::{jboolean, jint, jlong, jlongArray, jobject, jobjectArray, jstring, JNI_VERSION_1_8};
use jni::{JNIEnv, JavaVM};

mod completions;

use completions::Completions;

/// `FabricNative.ABI_VERSION`: bump both together.
const ABI_VERSION: jint = 5;
/// `FabricNative.STATS_FIELDS`.
const STATS_FIELDS: usize = 11;

const EXCEPTION_CLASS: &str = "io/slipstream/fabric/FabricException";

/// `FabricException.Kind` ordinals.
mod kind {
    pub const UCX: i32 = 0;
    pub const PEER_FAILED: i32 = 1;
    pub const TIMEOUT: i32 = 2;
    pub const OVERLOADED: i32 = 3;
    pub const TOO_LARGE: i32 = 4;
    pub const POOL_EXHAUSTED: i32 = 5;
    pub const CLOSED: i32 = 6;
    pub const REMOTE: i32 = 7;
    pub const PROTOCOL: i32 = 8;
    pub const CONFIG: i32 = 9;
    pub const INTERNAL: i32 = 10;
}

fn error_kind(error: &fabric::Error) -> i32 {
    use fabric::Error as E;
    // Exhaustive on purpose: a new fabric error must get a Java kind.
    match error {
        E::Ucx { .. } => kind::UCX,
        E::PeerFailed { .. } => kind::PEER_FAILED,
        E::Timeout { .. } => kind::TIMEOUT,
        E::Overloaded => kind::OVERLOADED,
        E::TooLarge { .. } => kind::TOO_LARGE,
        E::PoolExhausted { .. } => kind::POOL_EXHAUSTED,
        E::Closed => kind::CLOSED,
        E::Remote(_) => kind::REMOTE,
        E::Protocol(_) => kind::PROTOCOL,
        E::Config(_) => kind::CONFIG,
    }
}

/// What a JNI function can fail with, before it becomes a Java exception.
enum Failure {
    Fabric(fabric::Error),
    /// A JNI call failed; if it left a Java exception pending, that one is thrown.
    Jni(jni::errors::Error),
    /// A bad argument from Java: `IllegalArgumentException` (the Java side checks first, so a bug).
    Argument(String),
    Internal(String),
}

impl From<fabric::Error> for Failure {
    fn from(error: fabric::Error) -> Failure {
        Failure::Fabric(error)
    }
}

impl From<jni::errors::Error> for Failure {
    fn from(error: jni::errors::Error) -> Failure {
        Failure::Jni(error)
    }
}

type Outcome<T> = Result<T, Failure>;

/// Runs `body`, turning a panic or a failure into a pending Java exception and `fallback`.
fn guard<'local, T>(env: &mut JNIEnv<'local>, fallback: T, body: impl FnOnce(&mut JNIEnv<'local>) -> Outcome<T>) -> T {
    match catch_unwind(AssertUnwindSafe(|| body(env))) {
        Ok(Ok(value)) => value,
        Ok(Err(failure)) => {
            throw(env, failure);
            fallback
        }
        Err(panic) => {
            let text = panic
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| panic.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "unknown panic".to_string());
            throw(
                env,
                Failure::Internal(format!("panic in the fabric's JNI library: {text}")),
            );
            fallback
        }
    }
}

fn throw(env: &mut JNIEnv, failure: Failure) {
    if env.exception_check().unwrap_or(true) {
        return; // a Java exception is pending already (e.g. from a failed JNI call): it wins
    }
    match failure {
        Failure::Fabric(error) => throw_fabric(env, error_kind(&error), &error.to_string()),
        Failure::Jni(error) => throw_fabric(env, kind::INTERNAL, &format!("JNI call failed: {error}")),
        Failure::Argument(message) => {
            let _ = env.throw_new("java/lang/IllegalArgumentException", message);
        }
        Failure::Internal(message) => throw_fabric(env, kind::INTERNAL, &message),
    }
}

fn throw_fabric(env: &mut JNIEnv, kind: i32, message: &str) {
    match fabric_exception(env, kind, message) {
        Ok(exception) => {
            let _ = env.throw(JThrowable::from(exception));
        }
        Err(_) => {
            if !env.exception_check().unwrap_or(true) {
                let _ = env.throw_new("java/lang/RuntimeException", message);
            }
        }
    }
}

/// A `FabricException` object (not thrown).
fn fabric_exception<'local>(
    env: &mut JNIEnv<'local>,
    kind: i32,
    message: &str,
) -> jni::errors::Result<JObject<'local>> {
    let message = env.new_string(message)?;
    env.new_object(
        EXCEPTION_CLASS,
        "(ILjava/lang/String;)V",
        &[JValue::Int(kind), JValue::Object(&message)],
    )
}

// ---------------------------------------------------------------------------------------------
// Handles.

/// What a node handle points to.
struct NodeCtx {
    node: Node,
    completions: Arc<Completions>,
}

/// What an endpoint handle points to.
struct EndpointCtx {
    endpoint: Endpoint,
    completions: Arc<Completions>,
}

fn into_handle<T>(value: T) -> jlong {
    Box::into_raw(Box::new(value)) as jlong
}

/// Borrows a live handle. Java guarantees validity (see `NodeHandle`); null is checked.
fn borrow<'a, T>(handle: jlong, what: &str) -> Outcome<&'a T> {
    if handle == 0 {
        return Err(Failure::Internal(format!("null {what} handle")));
    }
    // SAFETY: a non-null handle is a `Box<T>` made by `into_handle` and not yet taken; Java uses it only
    // while valid (NodeHandle, FabricBuffer, FabricRequest hold it until freed once).
    Ok(unsafe { &*(handle as *const T) })
}

/// Takes ownership of a handle (the Java side has already forgotten it).
fn take<T>(handle: jlong, what: &str) -> Outcome<T> {
    if handle == 0 {
        return Err(Failure::Internal(format!("null {what} handle")));
    }
    // SAFETY: as in `borrow`; Java forgets the handle before this call, so the box is taken once.
    Ok(*unsafe { Box::from_raw(handle as *mut T) })
}

fn to_op(op: jint) -> Outcome<u16> {
    u16::try_from(op).map_err(|_| Failure::Argument(format!("op must be in 0..65535: {op}")))
}

/// Element `index` of a `String[]`, refusing null; its local reference is freed at once (settings
/// arrive in loops, and a native frame holds few local references).
fn string_element(env: &mut JNIEnv, array: &JObjectArray, index: jint) -> Outcome<String> {
    let element = JString::from(env.get_object_array_element(array, index)?);
    if element.as_raw().is_null() {
        return Err(Failure::Argument(format!("settings[{index}] is null")));
    }
    let text: String = env.get_string(&element)?.into();
    env.delete_local_ref(element)?;
    Ok(text)
}

fn millis(value: jlong) -> Duration {
    Duration::from_millis(value.max(0) as u64)
}

fn socket_addr(env: &mut JNIEnv, ip: &JString, port: jint) -> Outcome<SocketAddr> {
    let text: String = env.get_string(ip)?.into();
    let ip: IpAddr = text
        .parse()
        .map_err(|_| Failure::Argument(format!("not an IP address: {text}")))?;
    let port = u16::try_from(port).map_err(|_| Failure::Argument(format!("port out of range: {port}")))?;
    Ok(SocketAddr::new(ip, port))
}

/// A direct view of a buffer's memory, capacity = the buffer's capacity. The memory outlives the
/// view: see the crate's invariants.
fn view_of<'local>(env: &mut JNIEnv<'local>, buffer: &mut Buffer) -> Outcome<JByteBuffer<'local>> {
    let capacity = buffer.capacity();
    if capacity > i32::MAX as usize {
        return Err(Failure::Internal(format!(
            "buffer of {capacity} bytes does not fit a ByteBuffer"
        )));
    }
    // SAFETY: `capacity` bytes at this address stay mapped while the view is reachable: Java pins the
    // buffer (`bufferPin`) before the handle can be released and unpins only when the root view is
    // garbage, and the pool never unmaps pinned memory nor goes away before the node handle is freed.
    Ok(unsafe { env.new_direct_byte_buffer(buffer.as_mut_ptr(), capacity)? })
}

/// Hands a buffer to Java: returns its direct view and writes its handle to `out[at]` and its
/// length to `out[at + 1]`.
fn emit_buffer(env: &mut JNIEnv, mut buffer: Buffer, out: &JLongArray, at: i32) -> Outcome<jobject> {
    let view = view_of(env, &mut buffer)?;
    let length = buffer.len() as jlong;
    let handle = into_handle(buffer);
    if let Err(error) = env.set_long_array_region(out, at, &[handle, length]) {
        // SAFETY: `handle` was made by `into_handle` just above and never reached Java.
        drop(unsafe { Box::from_raw(handle as *mut Buffer) });
        return Err(error.into());
    }
    Ok(view.into_raw())
}

/// Copies a payload from Java (a direct buffer's `[offset, offset + length)`, a `byte[]` region, or
/// nothing) into a registered buffer from `alloc`.
fn copy_payload(
    env: &mut JNIEnv,
    direct: &JByteBuffer,
    heap: &JByteArray,
    offset: jint,
    length: jint,
    alloc: impl FnOnce(usize) -> fabric::Result<Buffer>,
) -> Outcome<Buffer> {
    if offset < 0 || length < 0 {
        return Err(Failure::Argument(format!(
            "negative offset {offset} or length {length}"
        )));
    }
    let (start, len) = (offset as usize, length as usize);
    if !direct.as_raw().is_null() {
        let address = env.get_direct_buffer_address(direct)?;
        let capacity = env.get_direct_buffer_capacity(direct)?;
        if start.checked_add(len).is_none_or(|end| end > capacity) {
            return Err(Failure::Argument(format!(
                "payload {start}+{len} outside a buffer of {capacity} bytes"
            )));
        }
        let mut buffer = alloc(len)?;
        // SAFETY: JNI gave the direct buffer's address and capacity, `start + len <= capacity` is
        // checked above, and the `direct` reference keeps the buffer reachable for this call (a view of
        // fabric memory is pinned besides, so a released buffer's view is still mapped).
        let source = unsafe { std::slice::from_raw_parts(address.add(start), len) };
        buffer.as_mut_slice().copy_from_slice(source);
        Ok(buffer)
    } else if !heap.as_raw().is_null() {
        let array_len = env.get_array_length(heap)? as usize;
        if start.checked_add(len).is_none_or(|end| end > array_len) {
            return Err(Failure::Argument(format!(
                "payload {start}+{len} outside an array of {array_len} bytes"
            )));
        }
        let mut buffer = alloc(len)?;
        let target = buffer.as_mut_slice();
        // jbyte is i8: same size and alignment as u8.
        // SAFETY: the same bytes reborrowed as i8 (same size and alignment as u8), exclusively (`target`
        // is not used while this slice lives).
        let target = unsafe { std::slice::from_raw_parts_mut(target.as_mut_ptr() as *mut i8, target.len()) };
        env.get_byte_array_region(heap, offset, target)?;
        Ok(buffer)
    } else if len == 0 {
        Ok(alloc(0)?)
    } else {
        Err(Failure::Argument(format!("no payload given for length {len}")))
    }
}

fn set_len(buffer: &mut Buffer, length: jint) -> Outcome<()> {
    let len = usize::try_from(length).map_err(|_| Failure::Argument(format!("negative length {length}")))?;
    if len > buffer.capacity() {
        return Err(Failure::Argument(format!(
            "length {len} above the buffer's capacity {}",
            buffer.capacity()
        )));
    }
    buffer.set_len(len);
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// Library and probes.

#[no_mangle]
pub extern "system" fn JNI_OnLoad(_vm: JavaVM, _reserved: *mut std::ffi::c_void) -> jint {
    JNI_VERSION_1_8
}

#[no_mangle]
pub extern "system" fn Java_io_slipstream_fabric_FabricNative_abiVersion(_env: JNIEnv, _class: JClass) -> jint {
    ABI_VERSION
}

#[no_mangle]
pub extern "system" fn Java_io_slipstream_fabric_FabricNative_probe(mut env: JNIEnv, _class: JClass) {
    guard(&mut env, (), |_| {
        let config = Config {
            listen: None,
            handler_mode: HandlerMode::Pull,
            pool_cap_bytes: 1 << 20,
            max_message_bytes: 1 << 20,
            ..Config::default()
        };
        let node = Node::start(config, None)?;
        node.close();
        Ok(())
    })
}

/// Every setting of `fabric::Config` with its default as text, `[name, value, name, value, ...]`
/// in declaration order: `FabricConfig`'s test checks that Java reaches every one with the same
/// default, and `FabricNode.start` passes its settings back in the same form.
#[no_mangle]
pub extern "system" fn Java_io_slipstream_fabric_FabricNative_configSettings(
    mut env: JNIEnv,
    _class: JClass,
) -> jobjectArray {
    guard(&mut env, std::ptr::null_mut(), |env| {
        let defaults = Config::default();
        let settings = Config::SETTINGS;
        let array = env.new_object_array((settings.len() * 2) as i32, "java/lang/String", JObject::null())?;
        for (i, setting) in settings.iter().enumerate() {
            let value = defaults.value_text(setting.name).unwrap_or_default();
            let name = env.new_string(setting.name)?;
            env.set_object_array_element(&array, (2 * i) as i32, &name)?;
            env.delete_local_ref(name)?;
            let value = env.new_string(value)?;
            env.set_object_array_element(&array, (2 * i + 1) as i32, &value)?;
            env.delete_local_ref(value)?;
        }
        Ok(array.into_raw())
    })
}

// ---------------------------------------------------------------------------------------------
// Node.

/// `settings`: `[name, value, ...]` of `fabric::Config` settings as text (`Config::set`); any
/// setting not named keeps its default. The handler mode is always `Pull` (Java threads serve).
#[no_mangle]
pub extern "system" fn Java_io_slipstream_fabric_FabricNative_nodeStart<'local>(
    mut env: JNIEnv<'local>,
    _class: JClass<'local>,
    listen_ip: JString<'local>,
    listen_port: jint,
    settings: JObjectArray<'local>,
    completion_queue_depth: jint,
) -> jlong {
    guard(&mut env, 0, |env| {
        let mut config = Config::default();
        let count = env.get_array_length(&settings)?;
        if count % 2 != 0 {
            return Err(Failure::Argument(format!("settings come in name-value pairs: {count} strings")));
        }
        for i in (0..count).step_by(2) {
            let name = string_element(env, &settings, i)?;
            let value = string_element(env, &settings, i + 1)?;
            if name == "handler_mode" || name == "listen" {
                return Err(Failure::Argument(format!("{name} is not set through settings")));
            }
            config.set(&name, &value)?;
        }
        config.handler_mode = HandlerMode::Pull;
        config.listen = if listen_ip.as_raw().is_null() {
            None
        } else {
            Some(socket_addr(env, &listen_ip, listen_port)?)
        };
        let completion_depth = usize::try_from(completion_queue_depth)
            .ok()
            .filter(|&depth| depth > 0)
            .ok_or_else(|| {
                Failure::Argument(format!(
                    "completion queue depth must be positive: {completion_queue_depth}"
                ))
            })?;
        let node = Node::start(config, None)?;
        Ok(into_handle(NodeCtx {
            node,
            completions: Arc::new(Completions::new(completion_depth)),
        }))
    })
}

#[no_mangle]
pub extern "system" fn Java_io_slipstream_fabric_FabricNative_nodeLocalAddress(
    mut env: JNIEnv,
    _class: JClass,
    node: jlong,
) -> jstring {
    guard(&mut env, std::ptr::null_mut(), |env| {
        let ctx: &NodeCtx = borrow(node, "node")?;
        match ctx.node.local_addr() {
            None => Ok(std::ptr::null_mut()),
            Some(addr) => Ok(env.new_string(addr.to_string())?.into_raw()),
        }
    })
}

#[no_mangle]
pub extern "system" fn Java_io_slipstream_fabric_FabricNative_nodeEndpoint<'local>(
    mut env: JNIEnv<'local>,
    _class: JClass<'local>,
    node: jlong,
    peer_ip: JString<'local>,
    peer_port: jint,
) -> jlong {
    guard(&mut env, 0, |env| {
        let ctx: &NodeCtx = borrow(node, "node")?;
        let peer = socket_addr(env, &peer_ip, peer_port)?;
        let endpoint = ctx.node.endpoint(peer)?;
        Ok(into_handle(EndpointCtx {
            endpoint,
            completions: ctx.completions.clone(),
        }))
    })
}

#[no_mangle]
pub extern "system" fn Java_io_slipstream_fabric_FabricNative_nodeAlloc<'local>(
    mut env: JNIEnv<'local>,
    _class: JClass<'local>,
    node: jlong,
    length: jint,
    wait: jboolean,
    out: JLongArray<'local>,
) -> jobject {
    guard(&mut env, std::ptr::null_mut(), |env| {
        let ctx: &NodeCtx = borrow(node, "node")?;
        let len = usize::try_from(length).map_err(|_| Failure::Argument(format!("negative length {length}")))?;
        let buffer = if wait != 0 {
            ctx.node.alloc(len)?
        } else {
            ctx.node.try_alloc(len)?
        };
        emit_buffer(env, buffer, &out, 0)
    })
}

/// `Node::help_progress`: drives the node's progress on the calling Java thread for up to
/// `spin_us` or until something happens; returns how much happened.
#[no_mangle]
pub extern "system" fn Java_io_slipstream_fabric_FabricNative_nodeHelpProgress<'local>(
    mut env: JNIEnv<'local>,
    _class: JClass<'local>,
    node: jlong,
    spin_us: jlong,
) -> jint {
    guard(&mut env, 0, |_env| {
        let ctx: &NodeCtx = borrow(node, "node")?;
        let spin = std::time::Duration::from_micros(spin_us.max(0) as u64);
        Ok(ctx.node.help_progress(spin).min(jint::MAX as usize) as jint)
    })
}

#[no_mangle]
pub extern "system" fn Java_io_slipstream_fabric_FabricNative_nodeNextRequest<'local>(
    mut env: JNIEnv<'local>,
    _class: JClass<'local>,
    node: jlong,
    timeout_ms: jlong,
    out: JLongArray<'local>,
) -> jobject {
    guard(&mut env, std::ptr::null_mut(), |env| {
        let ctx: &NodeCtx = borrow(node, "node")?;
        let Some(mut request) = ctx.node.next_request(millis(timeout_ms)) else {
            return Ok(std::ptr::null_mut());
        };
        let mut payload = match request.take_payload() {
            Some(payload) => payload,
            None => request.alloc(0)?,
        };
        let view = view_of(env, &mut payload)?;
        let (length, op) = (payload.len() as jlong, request.op() as jlong);
        let (request, payload) = (into_handle(request), into_handle(payload));
        if let Err(error) = env.set_long_array_region(&out, 0, &[request, payload, length, op]) {
            // SAFETY: both handles were made just above and never reached Java; each is taken once.
            drop(unsafe { Box::from_raw(payload as *mut Buffer) });
            // SAFETY: as above.
            drop(unsafe { Box::from_raw(request as *mut Request) });
            return Err(error.into());
        }
        let view = view.into_raw();
        Ok(view)
    })
}

/// Largest batch `nodePollCompletions` hands out per call.
const COMPLETION_BATCH_MAX: usize = 1024;

#[no_mangle]
pub extern "system" fn Java_io_slipstream_fabric_FabricNative_nodePollCompletions<'local>(
    mut env: JNIEnv<'local>,
    _class: JClass<'local>,
    node: jlong,
    timeout_ms: jlong,
    out: JLongArray<'local>,
    results: JObjectArray<'local>,
) -> jint {
    guard(&mut env, 0, |env| {
        let ctx: &NodeCtx = borrow(node, "node")?;
        let slots = (env.get_array_length(&results)? as usize).min(COMPLETION_BATCH_MAX);
        let longs = env.get_array_length(&out)? as usize;
        if slots == 0 || longs < 3 * slots {
            return Err(Failure::Argument(format!(
                "{slots} result slots need {} longs, got {longs}",
                3 * slots
            )));
        }
        let mut count = 0usize;
        while count < slots {
            let item = if count == 0 {
                ctx.completions.pop_wait(millis(timeout_ms))
            } else {
                ctx.completions.try_pop()
            };
            let Some((tag, result)) = item else { break };
            match emit_completion(env, tag, result, &out, &results, count) {
                Ok(()) => count += 1,
                Err((item, failure)) => {
                    // Not handed to Java: back to the queue, as the oldest, for the next poll.
                    ctx.completions.unpop(item);
                    if count == 0 {
                        return Err(failure);
                    }
                    // Those already handed out must reach Java: return them, without the exception.
                    let _ = env.exception_clear();
                    break;
                }
            }
        }
        Ok(count as jint)
    })
}

/// Writes completion `index` to `results[index]` (the response's view, or a `FabricException`)
/// and `out[3 * index..]` (tag, buffer handle, length). On failure nothing of it is handed out and
/// the completion comes back, to be queued again.
#[allow(clippy::result_large_err)] // the error hands the completion back, to be queued again
fn emit_completion<'local>(
    env: &mut JNIEnv<'local>,
    tag: i64,
    result: fabric::Result<Buffer>,
    out: &JLongArray,
    results: &JObjectArray,
    index: usize,
) -> Result<(), (completions::Completion, Failure)> {
    let at = index as i32;
    match result {
        Ok(mut buffer) => {
            let view = match view_of(env, &mut buffer) {
                Ok(view) => view,
                Err(failure) => return Err(((tag, Ok(buffer)), failure)),
            };
            let length = buffer.len() as jlong;
            let stored = env
                .set_long_array_region(out, 3 * at, &[tag, 0, length])
                .and_then(|_| env.set_object_array_element(results, at, &view));
            let _ = env.delete_local_ref(view);
            if let Err(error) = stored {
                return Err(((tag, Ok(buffer)), error.into()));
            }
            let handle = into_handle(buffer);
            if let Err(error) = env.set_long_array_region(out, 3 * at + 1, &[handle]) {
                // SAFETY: `handle` was made just above and its store into `out` failed: Java never saw it.
                let buffer = *unsafe { Box::from_raw(handle as *mut Buffer) };
                return Err(((tag, Ok(buffer)), error.into()));
            }
            Ok(())
        }
        Err(error) => {
            let exception = match fabric_exception(env, error_kind(&error), &error.to_string()) {
                Ok(exception) => exception,
                Err(jni_error) => return Err(((tag, Err(error)), jni_error.into())),
            };
            let stored = env
                .set_long_array_region(out, 3 * at, &[tag, 0, 0])
                .and_then(|_| env.set_object_array_element(results, at, &exception));
            let _ = env.delete_local_ref(exception);
            match stored {
                Ok(()) => Ok(()),
                Err(jni_error) => Err(((tag, Err(error)), jni_error.into())),
            }
        }
    }
}

#[no_mangle]
pub extern "system" fn Java_io_slipstream_fabric_FabricNative_nodeHelpCompletions(
    mut env: JNIEnv,
    _class: JClass,
    node: jlong,
    enter: jboolean,
) {
    guard(&mut env, (), |_| {
        let ctx: &NodeCtx = borrow(node, "node")?;
        if enter != 0 {
            ctx.completions.enter_helper();
        } else {
            ctx.completions.leave_helper();
        }
        Ok(())
    })
}

#[no_mangle]
pub extern "system" fn Java_io_slipstream_fabric_FabricNative_nodeStats(
    mut env: JNIEnv,
    _class: JClass,
    node: jlong,
) -> jlongArray {
    guard(&mut env, std::ptr::null_mut(), |env| {
        let ctx: &NodeCtx = borrow(node, "node")?;
        let s = ctx.node.stats();
        let fields: [u64; STATS_FIELDS] = [
            s.requests_sent,
            s.responses_received,
            s.requests_served,
            s.requests_shed,
            s.requests_timed_out,
            s.connections_open,
            s.pool_bytes_mapped,
            s.pool_bytes_in_use,
            s.pool_cap_bytes,
            s.protocol_errors,
            s.peers_failed,
        ];
        let fields = fields.map(|v| v as jlong);
        let array = env.new_long_array(STATS_FIELDS as i32)?;
        env.set_long_array_region(&array, 0, &fields)?;
        Ok(array.into_raw())
    })
}

#[no_mangle]
pub extern "system" fn Java_io_slipstream_fabric_FabricNative_nodeClose(mut env: JNIEnv, _class: JClass, node: jlong) {
    guard(&mut env, (), |_| {
        let ctx: &NodeCtx = borrow(node, "node")?;
        // Fails requests in flight (their callbacks push Closed), then wakes the completer.
        ctx.node.close();
        ctx.completions.close();
        Ok(())
    })
}

#[no_mangle]
pub extern "system" fn Java_io_slipstream_fabric_FabricNative_nodeFree(mut env: JNIEnv, _class: JClass, node: jlong) {
    guard(&mut env, (), |_| {
        let ctx: NodeCtx = take(node, "node")?;
        ctx.node.close();
        drop(ctx);
        Ok(())
    })
}

// ---------------------------------------------------------------------------------------------
// Endpoint.

#[no_mangle]
#[allow(clippy::too_many_arguments)]
pub extern "system" fn Java_io_slipstream_fabric_FabricNative_endpointRequest<'local>(
    mut env: JNIEnv<'local>,
    _class: JClass<'local>,
    endpoint: jlong,
    op: jint,
    direct: JByteBuffer<'local>,
    heap: JByteArray<'local>,
    offset: jint,
    length: jint,
    out: JLongArray<'local>,
) -> jobject {
    guard(&mut env, std::ptr::null_mut(), |env| {
        let ctx: &EndpointCtx = borrow(endpoint, "endpoint")?;
        let op = to_op(op)?;
        let payload = copy_payload(env, &direct, &heap, offset, length, |len| {
            ctx.endpoint.node().alloc(len)
        })?;
        let response = ctx.endpoint.request_buffer(op, payload)?.wait()?;
        emit_buffer(env, response.into_buffer(), &out, 0)
    })
}

#[no_mangle]
pub extern "system" fn Java_io_slipstream_fabric_FabricNative_endpointRequestBuffer<'local>(
    mut env: JNIEnv<'local>,
    _class: JClass<'local>,
    endpoint: jlong,
    op: jint,
    buffer: jlong,
    length: jint,
    out: JLongArray<'local>,
) -> jobject {
    guard(&mut env, std::ptr::null_mut(), |env| {
        let mut payload: Buffer = take(buffer, "buffer")?;
        let ctx: &EndpointCtx = borrow(endpoint, "endpoint")?;
        let op = to_op(op)?;
        set_len(&mut payload, length)?;
        let response = ctx.endpoint.request_buffer(op, payload)?.wait()?;
        emit_buffer(env, response.into_buffer(), &out, 0)
    })
}

#[no_mangle]
#[allow(clippy::too_many_arguments)]
pub extern "system" fn Java_io_slipstream_fabric_FabricNative_endpointRequestAsync<'local>(
    mut env: JNIEnv<'local>,
    _class: JClass<'local>,
    endpoint: jlong,
    tag: jlong,
    op: jint,
    direct: JByteBuffer<'local>,
    heap: JByteArray<'local>,
    offset: jint,
    length: jint,
) {
    guard(&mut env, (), |env| {
        let ctx: &EndpointCtx = borrow(endpoint, "endpoint")?;
        let op = to_op(op)?;
        let payload = copy_payload(env, &direct, &heap, offset, length, |len| {
            ctx.endpoint.node().alloc(len)
        })?;
        send_async(ctx, tag, op, payload)
    })
}

#[no_mangle]
pub extern "system" fn Java_io_slipstream_fabric_FabricNative_endpointRequestBufferAsync(
    mut env: JNIEnv,
    _class: JClass,
    endpoint: jlong,
    tag: jlong,
    op: jint,
    buffer: jlong,
    length: jint,
) {
    guard(&mut env, (), |_| {
        let mut payload: Buffer = take(buffer, "buffer")?;
        let ctx: &EndpointCtx = borrow(endpoint, "endpoint")?;
        let op = to_op(op)?;
        set_len(&mut payload, length)?;
        send_async(ctx, tag, op, payload)
    })
}

fn send_async(ctx: &EndpointCtx, tag: jlong, op: u16, payload: Buffer) -> Outcome<()> {
    let completions = ctx.completions.clone();
    // Runs on the progress thread: only a push, no JNI.
    ctx.endpoint
        .request_buffer_with(op, payload, move |result| {
            completions.push(tag, result.map(fabric::Response::into_buffer))
        })?;
    Ok(())
}

#[no_mangle]
pub extern "system" fn Java_io_slipstream_fabric_FabricNative_endpointFree(
    mut env: JNIEnv,
    _class: JClass,
    endpoint: jlong,
) {
    guard(&mut env, (), |_| {
        drop(take::<EndpointCtx>(endpoint, "endpoint")?);
        Ok(())
    })
}

// ---------------------------------------------------------------------------------------------
// Buffer.

#[no_mangle]
pub extern "system" fn Java_io_slipstream_fabric_FabricNative_bufferFree(
    mut env: JNIEnv,
    _class: JClass,
    buffer: jlong,
) {
    guard(&mut env, (), |_| {
        drop(take::<Buffer>(buffer, "buffer")?);
        Ok(())
    })
}

/// Pins a live buffer's memory for its Java views (see the crate's invariants); returns the pin's
/// handle, which `viewUnpin` frees once the views are garbage.
#[no_mangle]
pub extern "system" fn Java_io_slipstream_fabric_FabricNative_bufferPin(
    mut env: JNIEnv,
    _class: JClass,
    buffer: jlong,
) -> jlong {
    guard(&mut env, 0, |_| {
        let buffer: &Buffer = borrow(buffer, "buffer")?;
        Ok(into_handle(buffer.pin_view()))
    })
}

#[no_mangle]
pub extern "system" fn Java_io_slipstream_fabric_FabricNative_viewUnpin(mut env: JNIEnv, _class: JClass, pin: jlong) {
    guard(&mut env, (), |_| {
        drop(take::<fabric::ViewPin>(pin, "view pin")?);
        Ok(())
    })
}

// ---------------------------------------------------------------------------------------------
// Request.

#[no_mangle]
pub extern "system" fn Java_io_slipstream_fabric_FabricNative_requestRespond<'local>(
    mut env: JNIEnv<'local>,
    _class: JClass<'local>,
    request: jlong,
    direct: JByteBuffer<'local>,
    heap: JByteArray<'local>,
    offset: jint,
    length: jint,
) {
    guard(&mut env, (), |env| {
        let request: Request = take(request, "request")?;
        let mut refused = None;
        let data = copy_payload(env, &direct, &heap, offset, length, |len| {
            request.alloc(len).inspect_err(|error| refused = Some(error.clone()))
        });
        match (data, refused) {
            (Ok(data), _) => request.respond_buffer(data),
            // No buffer for the response (too large, pool exhausted): the requester gets that error.
            (Err(_), Some(error)) => request.fail(&error.to_string()),
            // A JNI failure or a bad argument: the request is dropped (answered "handler dropped the
            // request") and the Java caller gets the exception.
            (Err(failure), None) => return Err(failure),
        }
        Ok(())
    })
}

#[no_mangle]
pub extern "system" fn Java_io_slipstream_fabric_FabricNative_requestRespondBuffer(
    mut env: JNIEnv,
    _class: JClass,
    request: jlong,
    buffer: jlong,
    length: jint,
) {
    guard(&mut env, (), |_| {
        let mut data: Buffer = take(buffer, "buffer")?;
        let request: Request = take(request, "request")?;
        set_len(&mut data, length)?;
        request.respond_buffer(data);
        Ok(())
    })
}

#[no_mangle]
pub extern "system" fn Java_io_slipstream_fabric_FabricNative_requestFail<'local>(
    mut env: JNIEnv<'local>,
    _class: JClass<'local>,
    request: jlong,
    message: JString<'local>,
) {
    guard(&mut env, (), |env| {
        let request: Request = take(request, "request")?;
        let text: String = if message.as_raw().is_null() {
            String::new()
        } else {
            env.get_string(&message)?.into()
        };
        request.fail(&text);
        Ok(())
    })
}

#[no_mangle]
pub extern "system" fn Java_io_slipstream_fabric_FabricNative_requestFree(
    mut env: JNIEnv,
    _class: JClass,
    request: jlong,
) {
    guard(&mut env, (), |_| {
        drop(take::<Request>(request, "request")?);
        Ok(())
    })
}
