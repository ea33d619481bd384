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
//!   handed to Java is pinned (a `fabric::ViewPin` behind another handle, made in the call that
//!   hands the buffer out, before its view can reach Java: `convert::Handed`) until its
//!   root view is garbage (`viewUnpin`, from Java's cleaner): the pool may reuse a released
//!   buffer but never unmaps pinned memory. The pool lives as long as the node handle, which Java
//!   frees only once no view is reachable. A small buffer is kept instead of pinned
//!   (`fabric::Buffer::keep_for_views`: memory never freed, moved to a process-wide store for later
//!   pools when its pool goes), so its view needs neither pin nor pool; its root view is made once,
//!   held by a JNI global reference that is never deleted (in the memory's view slot,
//!   `convert::view_of`), and handed out again with every later buffer of that memory; Java never
//!   changes a root view and guards a kept buffer against leaks on the buffer itself. So a stale
//!   view reads or writes stale bytes of the pool (or of the store), it never faults and never
//!   touches the native heap's bookkeeping.
//!
//! Files: `failure.rs` (errors and panics to Java exceptions, [`failure::guard`]), `convert.rs`
//! (handles, arguments, direct views, payloads copied in), `node.rs`, `endpoint.rs` and
//! `answer.rs` (the entry points of nodes, endpoints, and buffers and received requests),
//! `completions.rs` (the queue between the progress thread and the Java threads completing
//! asynchronous requests); this file: the library's version and probes.
use fabric::{Config, HandlerMode, Node};
use jni::objects::{JClass, JObject};
use jni::sys::{jint, jobjectArray, JNI_VERSION_1_8};
use jni::{JNIEnv, JavaVM};

mod answer;
mod completions;
mod convert;
mod endpoint;
mod failure;
mod node;

use failure::*;

/// `FabricNative.ABI_VERSION`: bump both together.
pub(crate) const ABI_VERSION: jint = 9;
/// `FabricNative.STATS_FIELDS`.
pub(crate) const STATS_FIELDS: usize = 19;

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

