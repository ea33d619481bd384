//! JNI entry points of an endpoint: synchronous and asynchronous requests.

use fabric::Buffer;
use jni::objects::{JIntArray, JByteArray, JByteBuffer, JClass, JLongArray};
use jni::sys::{jint, jlong, jobject};
use jni::JNIEnv;

use crate::convert::*;
use crate::failure::*;



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

/// Most requests one `endpointRequestBufferAsyncBatch` call sends (`FabricNative.BATCH_MAX`).
const BATCH_MAX: usize = 1024;

/// Sends `count` registered buffers as asynchronous requests in one crossing: request `i` carries
/// `lengths[i]` bytes of `buffers[i]` and completes with tag `first_tag + i`. Consumes every buffer.
/// A request that cannot be sent (closed node, failed peer, ...) completes with its error through
/// the completion queue like any other, so Java learns every outcome the same way; only a bad
/// argument or a JNI failure throws (before any buffer is taken, which Java rules out by checking
/// first).
#[no_mangle]
#[allow(clippy::too_many_arguments)]
pub extern "system" fn Java_io_slipstream_fabric_FabricNative_endpointRequestBufferAsyncBatch<'local>(
    mut env: JNIEnv<'local>,
    _class: JClass<'local>,
    endpoint: jlong,
    first_tag: jlong,
    op: jint,
    buffers: JLongArray<'local>,
    lengths: JIntArray<'local>,
    count: jint,
) {
    guard(&mut env, (), |env| {
        let ctx: &EndpointCtx = borrow(endpoint, "endpoint")?;
        let op = to_op(op)?;
        let count = usize::try_from(count)
            .ok()
            .filter(|&count| count <= BATCH_MAX)
            .ok_or_else(|| Failure::Argument(format!("batch of {count} requests: at most {BATCH_MAX}")))?;
        if (env.get_array_length(&buffers)? as usize) < count || (env.get_array_length(&lengths)? as usize) < count {
            return Err(Failure::Argument(format!("arrays shorter than the batch of {count}")));
        }
        let mut handles = vec![0 as jlong; count];
        let mut sizes = vec![0 as jint; count];
        env.get_long_array_region(&buffers, 0, &mut handles)?;
        env.get_int_array_region(&lengths, 0, &mut sizes)?;
        // Every handle is taken before the first send: from here on the buffers are consumed.
        let mut payloads = Vec::with_capacity(count);
        for handle in handles {
            payloads.push(take::<Buffer>(handle, "buffer"));
        }
        for (i, (payload, length)) in payloads.into_iter().zip(sizes).enumerate() {
            let tag = first_tag.wrapping_add(i as jlong);
            let sent = payload.and_then(|mut payload| {
                set_len(&mut payload, length)?;
                send_async(ctx, tag, op, payload)
            });
            if let Err(failure) = sent {
                let error = match failure {
                    Failure::Fabric(error) => error,
                    Failure::Jni(error) => fabric::Error::Config(format!("JNI call failed: {error}")),
                    Failure::Argument(text) | Failure::Internal(text) => fabric::Error::Config(text),
                };
                ctx.completions.push(tag, Err(error));
            }
        }
        Ok(())
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
