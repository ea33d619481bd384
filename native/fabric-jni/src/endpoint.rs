//! JNI entry points of an endpoint: synchronous and asynchronous requests.

use fabric::Buffer;
use jni::objects::{JByteArray, JByteBuffer, JClass, JLongArray};
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
