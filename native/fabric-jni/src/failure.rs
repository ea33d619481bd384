//! Failures to Java exceptions: every JNI function runs inside [`guard`], which turns panics,
//! `fabric::Error`s and JNI failures into a pending Java exception (`FabricException`).

use std::panic::{catch_unwind, AssertUnwindSafe};
use jni::objects::{JObject, JThrowable, JValue};
use jni::JNIEnv;


pub(crate) const EXCEPTION_CLASS: &str = "io/slipstream/fabric/FabricException";

/// `FabricException.Kind` ordinals.
pub(crate) mod kind {
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

pub(crate) fn error_kind(error: &fabric::Error) -> i32 {
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
pub(crate) enum Failure {
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

pub(crate) type Outcome<T> = Result<T, Failure>;

/// Runs `body`, turning a panic or a failure into a pending Java exception and `fallback`.
pub(crate) fn guard<'local, T>(env: &mut JNIEnv<'local>, fallback: T, body: impl FnOnce(&mut JNIEnv<'local>) -> Outcome<T>) -> T {
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

pub(crate) fn throw(env: &mut JNIEnv, failure: Failure) {
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

pub(crate) fn throw_fabric(env: &mut JNIEnv, kind: i32, message: &str) {
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
pub(crate) fn fabric_exception<'local>(
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
