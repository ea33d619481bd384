//! JNI entry points of a node: start, endpoints, allocation, pulling requests, completions,
//! stats, close and free.

use std::sync::Arc;
use fabric::{Buffer, Config, HandlerMode, Node, Request};
use jni::objects::{JClass, JLongArray, JObjectArray, JString};
use jni::sys::{jboolean, jint, jlong, jlongArray, jobject, jstring};
use jni::JNIEnv;

use crate::completions::{self, Completions};
use crate::convert::*;
use crate::failure::*;
use crate::STATS_FIELDS;



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

/// `Node::interrupt_pull`: one `nodeNextRequest`, under way or the next, returns.
#[no_mangle]
pub extern "system" fn Java_io_slipstream_fabric_FabricNative_nodeInterruptPull<'local>(
    mut env: JNIEnv<'local>,
    _class: JClass<'local>,
    node: jlong,
) {
    guard(&mut env, (), |_env| {
        let ctx: &NodeCtx = borrow(node, "node")?;
        ctx.node.interrupt_pull();
        Ok(())
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

/// `Node::await_progress`: drives progress on the calling Java thread for up to `spin_us`, then
/// sleeps on the worker's event fd until a completion is queued for Java or `max_us` (from the
/// start) passed; returns 1 when one is queued, 0 when not, or -1 when the spin found none and
/// another thread sleeps on the fd.
#[no_mangle]
pub extern "system" fn Java_io_slipstream_fabric_FabricNative_nodeAwaitProgress<'local>(
    mut env: JNIEnv<'local>,
    _class: JClass<'local>,
    node: jlong,
    spin_us: jlong,
    max_us: jlong,
) -> jint {
    guard(&mut env, 0, |_env| {
        let ctx: &NodeCtx = borrow(node, "node")?;
        let micros = |us: jlong| std::time::Duration::from_micros(us.max(0) as u64);
        let completions = &ctx.completions;
        Ok(match ctx.node.await_progress(micros(spin_us), micros(max_us), || completions.has_items()) {
            Some(queued) => queued as jint,
            None => -1,
        })
    })
}

#[no_mangle]
pub extern "system" fn Java_io_slipstream_fabric_FabricNative_nodeNextRequest<'local>(
    mut env: JNIEnv<'local>,
    _class: JClass<'local>,
    node: jlong,
    timeout_ms: jlong,
    spin: jboolean,
    out: JLongArray<'local>,
) -> jobject {
    guard(&mut env, std::ptr::null_mut(), |env| {
        let ctx: &NodeCtx = borrow(node, "node")?;
        let pulled = if spin != 0 { ctx.node.next_request(millis(timeout_ms)) } else { ctx.node.next_request_without_spin(millis(timeout_ms)) };
        let Some(mut request) = pulled else {
            return Ok(std::ptr::null_mut());
        };
        let mut payload = match request.take_payload() {
            Some(payload) => payload,
            None => request.alloc(0)?,
        };
        let view = view_of(env, &mut payload)?;
        let (length, op) = (payload.len() as jlong, request.op() as jlong);
        let payload = Handed::new(payload);
        let request = into_handle(request);
        if let Err(error) = env.set_long_array_region(&out, 0, &[request, payload.handle, length, op, payload.pin]) {
            drop(payload.revert());
            // SAFETY: `request` was made just above and never reached Java; taken once, here.
            drop(unsafe { Box::from_raw(request as *mut Request) });
            return Err(error.into());
        }
        Ok(view.into_raw())
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
        if slots == 0 || longs < COMPLETION_LONGS * slots {
            return Err(Failure::Argument(format!(
                "{slots} result slots need {} longs, got {longs}",
                COMPLETION_LONGS * slots
            )));
        }
        // Every completion's longs go to Java in one store at the end (one JNI call, not three per
        // completion); until then the handed-out boxes can still be taken back.
        let mut emitted: Vec<Emitted> = Vec::with_capacity(slots.min(64));
        while emitted.len() < slots {
            let item = if emitted.is_empty() {
                ctx.completions.pop_wait(millis(timeout_ms))
            } else {
                ctx.completions.try_pop()
            };
            let Some((tag, result)) = item else { break };
            match emit_completion(env, tag, result, &results, emitted.len()) {
                Ok(done) => emitted.push(done),
                Err((item, failure)) => {
                    // Not handed to Java: back to the queue, as the oldest, for the next poll.
                    ctx.completions.unpop(item);
                    if emitted.is_empty() {
                        return Err(failure);
                    }
                    // Those already emitted must reach Java: return them, without the exception.
                    let _ = env.exception_clear();
                    break;
                }
            }
        }
        let flat: Vec<jlong> = emitted.iter().flat_map(|e| e.longs).collect();
        if let Err(error) = env.set_long_array_region(&out, 0, &flat) {
            // Java sees none of them: every completion goes back to the queue, in its order.
            for done in emitted.into_iter().rev() {
                ctx.completions.unpop(done.revert());
            }
            return Err(error.into());
        }
        Ok(emitted.len() as jint)
    })
}

/// Longs per completion in `nodePollCompletions`' `out`: tag, buffer handle, length, pin handle.
const COMPLETION_LONGS: usize = 4;

/// A completion whose object is in `results` and whose longs are not stored yet.
struct Emitted {
    longs: [jlong; COMPLETION_LONGS],
    /// A failure's error, to queue it again if the longs cannot be stored.
    error: Option<fabric::Error>,
}

impl Emitted {
    fn revert(self) -> completions::Completion {
        let [tag, handle, _, pin] = self.longs;
        match self.error {
            Some(error) => (tag, Err(error)),
            None => (tag, Ok(Handed { handle, pin }.revert_keeping_pin())),
        }
    }
}

/// Stores completion `index`'s object in `results[index]` (the response's view, or a
/// `FabricException`) and returns its longs (tag, buffer handle, length, pin handle; zeros for a
/// failure). On failure nothing of it is handed out and the completion comes back, to be queued
/// again.
#[allow(clippy::result_large_err)] // the error hands the completion back, to be queued again
fn emit_completion<'local>(
    env: &mut JNIEnv<'local>,
    tag: i64,
    result: fabric::Result<Buffer>,
    results: &JObjectArray,
    index: usize,
) -> Result<Emitted, (completions::Completion, Failure)> {
    let at = index as i32;
    match result {
        Ok(mut buffer) => {
            let view = match view_of(env, &mut buffer) {
                Ok(view) => view,
                Err(failure) => return Err(((tag, Ok(buffer)), failure)),
            };
            // Pinned before the view can reach Java (through `results`).
            let length = buffer.len() as jlong;
            let handed = Handed::new(buffer);
            let stored = env.set_object_array_element(results, at, &view);
            let _ = env.delete_local_ref(view);
            if let Err(error) = stored {
                return Err(((tag, Ok(handed.revert())), error.into()));
            }
            Ok(Emitted { longs: [tag, handed.handle, length, handed.pin], error: None })
        }
        Err(error) => {
            let exception = match fabric_exception(env, error_kind(&error), &error.to_string()) {
                Ok(exception) => exception,
                Err(jni_error) => return Err(((tag, Err(error)), jni_error.into())),
            };
            let stored = env.set_object_array_element(results, at, &exception);
            let _ = env.delete_local_ref(exception);
            match stored {
                Ok(()) => Ok(Emitted { longs: [tag, 0, 0, 0], error: Some(error) }),
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
            s.same_host_bytes_pulled,
            s.same_host_pulls_failed,
            s.same_host_pull_refused,
            s.pool_bytes_mapped_peak,
            s.bundles_sent,
            s.answers_bundled,
            s.requests_bundled,
            s.corked,
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
