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
// Requests received.

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

