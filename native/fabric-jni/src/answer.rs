//! JNI entry points of buffers (free, pin, unpin) and of received requests (respond, fail, drop).

use fabric::{Buffer, Request};
use jni::objects::{JByteArray, JByteBuffer, JClass, JString};
use jni::sys::{jint, jlong};
use jni::JNIEnv;

use crate::convert::*;
use crate::failure::*;



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

#[no_mangle]
pub extern "system" fn Java_io_slipstream_fabric_FabricNative_viewUnpin(mut env: JNIEnv, _class: JClass, pin: jlong) {
    guard(&mut env, (), |_| {
        drop(take::<fabric::ViewPin>(pin, "view pin")?);
        Ok(())
    })
}

// ---------------------------------------------------------------------------------------------
// Requests received. Answering also frees the request's payload buffer (`payload`, 0 if Java
// released or sent it already) in the same call: one crossing per request fewer.

/// The payload handle an answer consumes, if Java still held it.
fn take_payload(payload: jlong) -> Option<Buffer> {
    (payload != 0).then(|| take::<Buffer>(payload, "payload").ok()).flatten()
}

#[no_mangle]
pub extern "system" fn Java_io_slipstream_fabric_FabricNative_requestRespond<'local>(
    mut env: JNIEnv<'local>,
    _class: JClass<'local>,
    request: jlong,
    payload: jlong,
    direct: JByteBuffer<'local>,
    heap: JByteArray<'local>,
    offset: jint,
    length: jint,
) {
    respond_request(&mut env, request, payload, &direct, &heap, offset, length, false);
}

#[no_mangle]
pub extern "system" fn Java_io_slipstream_fabric_FabricNative_requestRespondAndClose<'local>(
    mut env: JNIEnv<'local>,
    _class: JClass<'local>,
    request: jlong,
    payload: jlong,
    heap: JByteArray<'local>,
    offset: jint,
    length: jint,
) {
    respond_request(&mut env, request, payload, &JByteBuffer::default(), &heap, offset, length, true);
}

/// Answers `request` with a copy of `direct` or `heap[offset..offset + length]`, freeing its
/// payload; with `close`, its connection closes once the answer is sent.
#[allow(clippy::too_many_arguments)]
fn respond_request(
    env: &mut JNIEnv,
    request: jlong,
    payload: jlong,
    direct: &JByteBuffer,
    heap: &JByteArray,
    offset: jint,
    length: jint,
    close: bool,
) {
    guard(env, (), |env| {
        // Dropped at the end, after the copy: `direct` may be a view of it.
        let _payload = take_payload(payload);
        let mut request: Request = take(request, "request")?;
        if close {
            request.close_connection_after_answer();
        }
        let mut refused = None;
        let data = copy_payload(env, direct, heap, offset, length, |len| {
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
    payload: jlong,
    buffer: jlong,
    length: jint,
) {
    guard(&mut env, (), |_| {
        drop(take_payload(payload));
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
    payload: jlong,
    message: JString<'local>,
) {
    fail_request(&mut env, request, payload, &message, false);
}

#[no_mangle]
pub extern "system" fn Java_io_slipstream_fabric_FabricNative_requestFailAndClose<'local>(
    mut env: JNIEnv<'local>,
    _class: JClass<'local>,
    request: jlong,
    payload: jlong,
    message: JString<'local>,
) {
    fail_request(&mut env, request, payload, &message, true);
}

/// Fails `request` with `message` (null: empty), freeing its payload; with `close`, its connection
/// closes once the answer is sent (`Request::fail_and_close`).
fn fail_request(env: &mut JNIEnv, request: jlong, payload: jlong, message: &JString, close: bool) {
    guard(env, (), |env| {
        drop(take_payload(payload));
        let request: Request = take(request, "request")?;
        let text: String = if message.as_raw().is_null() {
            String::new()
        } else {
            env.get_string(message)?.into()
        };
        if close {
            request.fail_and_close(&text);
        } else {
            request.fail(&text);
        }
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

