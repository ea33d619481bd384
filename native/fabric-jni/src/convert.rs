//! Conversions between Java and the fabric: handles (Rust boxes behind `long`s), arguments,
//! direct views of registered memory, payloads copied in.

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;
use fabric::{Buffer, Endpoint, Node};
use jni::objects::{JByteArray, JByteBuffer, JLongArray, JObject, JObjectArray, JString};
use jni::sys::{jint, jlong, jobject};
use jni::JNIEnv;

use crate::completions::Completions;
use crate::failure::*;

// Handles.

/// What a node handle points to.
pub(crate) struct NodeCtx {
    pub(crate) node: Node,
    pub(crate) completions: Arc<Completions>,
}

/// What an endpoint handle points to.
pub(crate) struct EndpointCtx {
    pub(crate) endpoint: Endpoint,
    pub(crate) completions: Arc<Completions>,
}

pub(crate) fn into_handle<T>(value: T) -> jlong {
    Box::into_raw(Box::new(value)) as jlong
}

/// Borrows a live handle. Java guarantees validity (see `NodeHandle`); null is checked.
pub(crate) fn borrow<'a, T>(handle: jlong, what: &str) -> Outcome<&'a T> {
    if handle == 0 {
        return Err(Failure::Internal(format!("null {what} handle")));
    }
    // SAFETY: a non-null handle is a `Box<T>` made by `into_handle` and not yet taken; Java uses it only
    // while valid (NodeHandle, FabricBuffer, FabricRequest hold it until freed once).
    Ok(unsafe { &*(handle as *const T) })
}

/// Takes ownership of a handle (the Java side has already forgotten it).
pub(crate) fn take<T>(handle: jlong, what: &str) -> Outcome<T> {
    if handle == 0 {
        return Err(Failure::Internal(format!("null {what} handle")));
    }
    // SAFETY: as in `borrow`; Java forgets the handle before this call, so the box is taken once.
    Ok(*unsafe { Box::from_raw(handle as *mut T) })
}

/// Element `index` of a `String[]`, refusing null; its local reference is freed at once (settings
/// arrive in loops, and a native frame holds few local references).
pub(crate) fn string_element(env: &mut JNIEnv, array: &JObjectArray, index: jint) -> Outcome<String> {
    let element = JString::from(env.get_object_array_element(array, index)?);
    if element.as_raw().is_null() {
        return Err(Failure::Argument(format!("settings[{index}] is null")));
    }
    let text: String = env.get_string(&element)?.into();
    env.delete_local_ref(element)?;
    Ok(text)
}

pub(crate) fn to_op(op: jint) -> Outcome<u16> {
    u16::try_from(op).map_err(|_| Failure::Argument(format!("op must be in 0..65535: {op}")))
}

pub(crate) fn millis(value: jlong) -> Duration {
    Duration::from_millis(value.max(0) as u64)
}

pub(crate) fn socket_addr(env: &mut JNIEnv, ip: &JString, port: jint) -> Outcome<SocketAddr> {
    let text: String = env.get_string(ip)?.into();
    let ip: IpAddr = text
        .parse()
        .map_err(|_| Failure::Argument(format!("not an IP address: {text}")))?;
    let port = u16::try_from(port).map_err(|_| Failure::Argument(format!("port out of range: {port}")))?;
    Ok(SocketAddr::new(ip, port))
}

/// A direct view of a buffer's memory, capacity = the buffer's capacity. The memory outlives the
/// view: see the crate's invariants.
///
/// A small buffer is kept here (`Buffer::keep_for_views`; `Handed::new` then finds it kept), and its
/// memory's view is made once and reused: kept memory lives as long as the process at the same
/// address and capacity, so its first view, held by a JNI global reference attached to the memory
/// (`Buffer::set_kept_view_slot`), stands for it for every later buffer of that memory, in every
/// later pool. That spares small messages `NewDirectByteBuffer`, an up-call into the JVM's
/// constructor (about 8 % of the Java client's samples at 8 B: docs/fabric.md). Java never changes
/// a root view's position or limit (`FabricBuffer` hands out duplicates), so one may be shared.
pub(crate) fn view_of<'local>(env: &mut JNIEnv<'local>, buffer: &mut Buffer) -> Outcome<JByteBuffer<'local>> {
    let capacity = buffer.capacity();
    if capacity > i32::MAX as usize {
        return Err(Failure::Internal(format!(
            "buffer of {capacity} bytes does not fit a ByteBuffer"
        )));
    }
    let kept = buffer.keep_for_views();
    // `kept_view_slot` is `None` for a buffer that is not kept.
    if let Some(slot) = buffer.kept_view_slot().filter(|&slot| slot != 0) {
        // SAFETY: a non-zero slot is only ever set below, to a global reference that is never
        // deleted (leaked on purpose), so it is a live reference to this memory's root view.
        let root = unsafe { JObject::from_raw(slot as jobject) };
        return Ok(JByteBuffer::from(env.new_local_ref(&root)?));
    }
    // SAFETY: `capacity` bytes at this address stay mapped while the view is reachable: every caller
    // pins the buffer (`Handed::new`) in this same call, before the view can reach Java, or it was kept
    // for good just above; Java unpins only when the root view is garbage; the pool never unmaps
    // pinned memory nor goes away before the node handle is freed, and kept memory is never freed.
    // A view that never reaches Java needs neither.
    let view = unsafe { env.new_direct_byte_buffer(buffer.as_mut_ptr(), capacity)? };
    if kept {
        let global = env.new_global_ref(&view)?;
        buffer.set_kept_view_slot(global.as_obj().as_raw() as usize);
        // Never deleted: the memory it views is never freed, and later buffers of it reuse it.
        std::mem::forget(global);
    }
    Ok(view)
}

/// A buffer on its way to Java: its handle and the pin of its views, two boxes that Java owns once
/// their handles are stored in an `out` array. Pinning here, in the call that makes the view,
/// spares Java a second crossing (`bufferPin`) per buffer. A small buffer is kept for views instead
/// (`Buffer::keep_for_views`: its memory is never freed), and its pin handle is 0: Java then needs
/// no `viewUnpin` and may let go of the buffer's Cleaner at release, so that nothing of it waits for
/// the garbage collector's reference processing (docs/fabric.md, "Where the JVM bridge's time goes").
pub(crate) struct Handed {
    pub(crate) handle: jlong,
    /// 0: kept, no pin.
    pub(crate) pin: jlong,
}

impl Handed {
    pub(crate) fn new(mut buffer: Buffer) -> Handed {
        let pin = if buffer.keep_for_views() { 0 } else { into_handle(buffer.pin_view()) };
        Handed { handle: into_handle(buffer), pin }
    }

    /// Takes the buffer back when its handle never reached Java, leaving the pin in place: a view of
    /// it may have reached Java (a completion's view stored before its longs), so its memory stays
    /// mapped for good (a leak on a path that needs a JNI failure, never a fault).
    pub(crate) fn revert_keeping_pin(self) -> Buffer {
        // SAFETY: `handle` was made by `into_handle` in `new` and never reached Java; taken once, here.
        *unsafe { Box::from_raw(self.handle as *mut Buffer) }
    }

    /// Takes both boxes back when neither handle nor view reached Java (storing them failed).
    pub(crate) fn revert(self) -> Buffer {
        if self.pin != 0 {
            // SAFETY: a non-zero `pin` was made by `into_handle` in `new` and never reached Java;
            // taken once, here.
            drop(unsafe { Box::from_raw(self.pin as *mut fabric::ViewPin) });
        }
        // SAFETY: as above, for the buffer's box.
        *unsafe { Box::from_raw(self.handle as *mut Buffer) }
    }
}

/// Hands a buffer to Java: returns its direct view and writes `out[at..at + 3]`: its handle, its
/// length, and the handle of the pin that keeps its memory mapped for the view (`viewUnpin`; 0 for
/// a kept buffer, which needs none).
pub(crate) fn emit_buffer(env: &mut JNIEnv, mut buffer: Buffer, out: &JLongArray, at: i32) -> Outcome<jobject> {
    let view = view_of(env, &mut buffer)?;
    let length = buffer.len() as jlong;
    let handed = Handed::new(buffer);
    if let Err(error) = env.set_long_array_region(out, at, &[handed.handle, length, handed.pin]) {
        drop(handed.revert());
        return Err(error.into());
    }
    Ok(view.into_raw())
}

/// Copies a payload from Java (a direct buffer's `[offset, offset + length)`, a `byte[]` region, or
/// nothing) into a registered buffer from `alloc`.
pub(crate) fn copy_payload(
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

pub(crate) fn set_len(buffer: &mut Buffer, length: jint) -> Outcome<()> {
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
