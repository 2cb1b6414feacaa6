//! The boundary between C and Rust: the panic boundary, the thread-local last error, the
//! conversions of raw pointers (handles, strings, JSON strings, out-parameters), and the bodies
//! that the entry points share ([`with_handle`], [`write_out`], [`json_out`], [`text_in`],
//! [`restore`], [`construct`], [`Out::wrap`]), so that each export is a short call into them.
//!
//! Safety: each `unsafe fn` here has the contract of the exported functions that call it, the
//! header's conventions: every pointer is NULL or valid (a handle live, a string NUL-terminated
//! and unchanged during the call, an out-parameter writable); the helpers check NULL and UTF-8
//! themselves. Arguments are checked in parameter order (the handle, the inputs, then the
//! out-parameters), all of them before the operation runs.

use std::cell::RefCell;
use std::ffi::{CStr, CString, c_char};
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::ptr::{self, NonNull};

use agentbreaker_core::interop::{self, ArgKind, FromConfig};
use agentbreaker_core::{Error, SharedClock, SystemClock};
use serde::Serialize;
use serde_json::Value;

use crate::clock::ab_manual_clock;
use crate::status::ab_status;

/// Why an entry point failed.
#[derive(Debug)]
pub(crate) enum Failure {
    /// A core error (also used for the C-side `INVALID_ARGUMENT`s: bad UTF-8).
    Core(Error),
    /// A required pointer was NULL; names the parameter.
    Null(&'static str),
}

impl From<Error> for Failure {
    fn from(e: Error) -> Self {
        Failure::Core(e)
    }
}

pub(crate) type Result<T> = std::result::Result<T, Failure>;

/// An opaque handle of this library over a core object.
pub(crate) trait Handle: Sized {
    /// The name of the handle's parameter (`"breaker"`), for `NULL_ARG` messages.
    const NAME: &'static str;
    /// The core object it holds.
    type Core;
    /// A new handle over `core`.
    fn wrap(core: Self::Core) -> Self;
}

thread_local! {
    // `None` is "no error": clearing it on every successful call (the hot path) allocates nothing.
    static LAST_ERROR: RefCell<Option<CString>> = const { RefCell::new(None) };
}

fn replace_last_error(message: Option<CString>) {
    // `try_with`: during thread teardown the slot may be gone; then there is nobody to tell.
    let _ = LAST_ERROR.try_with(|slot| {
        if let Ok(mut slot) = slot.try_borrow_mut() {
            *slot = message;
        }
    });
}

pub(crate) fn last_error_message() -> *const c_char {
    // The pointer stays valid until the slot is next replaced (the next status-returning call on
    // this thread), as documented.
    let message = LAST_ERROR.try_with(|slot| slot.try_borrow().ok()?.as_ref().map(|m| m.as_ptr()));
    message.ok().flatten().unwrap_or(c"".as_ptr())
}

/// Runs an entry point's body: a panic becomes `AB_ERR_INTERNAL`, an error its status; the
/// thread-local last error is set (or cleared on success).
pub(crate) fn boundary(body: impl FnOnce() -> Result<()>) -> ab_status {
    let (status, message) = match interop::catch(|| Ok(body())) {
        Ok(Ok(())) => {
            replace_last_error(None);
            return ab_status::AB_OK;
        }
        Ok(Err(Failure::Core(e))) | Err(e) => (ab_status::of(&e), e.to_string()),
        Ok(Err(Failure::Null(name))) => (
            ab_status::AB_ERR_NULL_ARG,
            format!("NULL_ARG: {name} must not be NULL"),
        ),
    };
    let mut bytes = message.into_bytes();
    bytes.retain(|b| *b != 0);
    replace_last_error(CString::new(bytes).ok());
    status
}

/// A required UTF-8 string argument.
pub(crate) unsafe fn text<'a>(ptr: *const c_char, name: &'static str) -> Result<&'a str> {
    if ptr.is_null() {
        return Err(Failure::Null(name));
    }
    // SAFETY: non-NULL, and the caller guarantees a NUL-terminated string valid for 'a.
    let s = unsafe { CStr::from_ptr(ptr) };
    s.to_str().map_err(|e| {
        let offset = e.valid_up_to();
        let message = format_args!("{name} is not valid UTF-8 (invalid byte at offset {offset})");
        Failure::Core(ArgKind::Argument.error(message))
    })
}

/// An optional UTF-8 string argument (NULL = absent).
pub(crate) unsafe fn optional_text<'a>(
    ptr: *const c_char,
    name: &'static str,
) -> Result<Option<&'a str>> {
    // SAFETY: the caller's contract is the one `text` needs.
    (!ptr.is_null())
        .then(|| unsafe { text(ptr, name) })
        .transpose()
}

/// A required JSON string argument; text that is not JSON is an error of the argument's kind
/// (`INVALID_EVENT` for events, `INVALID_SNAPSHOT` for snapshots, ...).
pub(crate) unsafe fn json(ptr: *const c_char, name: &'static str, kind: ArgKind) -> Result<Value> {
    // SAFETY: the caller's contract is the one `text` needs.
    let s = unsafe { text(ptr, name) }?;
    serde_json::from_str(s)
        .map_err(|e| Failure::Core(kind.error(format_args!("{name} is not JSON: {e}"))))
}

/// A config argument: a JSON string, NULL = all defaults; anything but JSON is `INVALID_CONFIG`.
pub(crate) unsafe fn config(ptr: *const c_char) -> Result<Value> {
    if ptr.is_null() {
        return Ok(Value::Null);
    }
    // SAFETY: the caller's contract is the one `json` needs.
    unsafe { json(ptr, "config_json", ArgKind::Config) }
}

/// A handle argument.
pub(crate) unsafe fn handle<'a, H: Handle>(ptr: *const H) -> Result<&'a H> {
    // SAFETY: the caller guarantees NULL or a live H for 'a; `as_ref` maps NULL to None.
    unsafe { ptr.as_ref() }.ok_or(Failure::Null(H::NAME))
}

/// The clock a constructor was given: the manual clock's, or the system clock for NULL.
pub(crate) unsafe fn clock_arg(ptr: *const ab_manual_clock) -> SharedClock {
    // SAFETY: the caller guarantees NULL or a live clock handle.
    unsafe { ptr.as_ref() }.map_or_else(SystemClock::shared, |clock| clock.core.clone())
}

/// An out-parameter, checked for NULL before the operation runs and written only on success.
pub(crate) struct Out<T>(NonNull<T>);

impl<T> Out<T> {
    /// Safety: `ptr` is NULL or valid for writing a `T` until [`Out::write`] is called.
    pub(crate) unsafe fn new(ptr: *mut T, name: &'static str) -> Result<Self> {
        NonNull::new(ptr).map(Out).ok_or(Failure::Null(name))
    }

    pub(crate) fn write(self, value: T) {
        // SAFETY: non-NULL (checked in `new`) and valid for writes (`new`'s contract). `write`
        // does not drop the old value: C memory holds no Rust value to drop.
        unsafe { self.0.write(value) }
    }
}

impl<H: Handle> Out<*mut H> {
    /// Writes a new handle over `core` (released by [`free_handle`]).
    pub(crate) fn wrap(self, core: H::Core) {
        self.write(Box::into_raw(Box::new(H::wrap(core))));
    }
}

/// What an operation returns when it writes no out-parameter: nothing, or a result whose value
/// is dropped.
pub(crate) trait Done {
    fn done(self) -> Result<()>;
}

impl Done for () {
    fn done(self) -> Result<()> {
        Ok(())
    }
}

impl<T, E: Into<Failure>> Done for std::result::Result<T, E> {
    fn done(self) -> Result<()> {
        self.map(drop).map_err(Into::into)
    }
}

/// The body of an entry point that only acts on a handle.
pub(crate) unsafe fn with_handle<H: Handle, R: Done>(
    handle: *const H,
    f: impl FnOnce(&H) -> R,
) -> ab_status {
    // SAFETY: NULL or a live handle (the caller's contract).
    boundary(|| f(unsafe { self::handle(handle) }?).done())
}

/// The body of an entry point that writes `f`'s result on a handle (converted: a core `State`
/// into an `ab_state`) to the out-parameter `out`.
pub(crate) unsafe fn write_out<H: Handle, T, R: Into<T>>(
    handle: *const H,
    out: *mut T,
    out_name: &'static str,
    f: impl FnOnce(&H) -> Result<R>,
) -> ab_status {
    boundary(|| {
        // SAFETY: NULL or valid pointers (the caller's contract).
        let (h, out) = unsafe { (self::handle(handle)?, Out::new(out, out_name)?) };
        out.write(f(h)?.into());
        Ok(())
    })
}

/// The body of an entry point that writes `f`'s result on a handle as a JSON string to
/// `*out_json`.
pub(crate) unsafe fn json_out<H: Handle, T: Serialize>(
    handle: *const H,
    out_json: *mut *mut c_char,
    f: impl FnOnce(&H) -> T,
) -> ab_status {
    // SAFETY: the caller's contract is the one `write_out` needs.
    unsafe { write_out(handle, out_json, "out_json", |h| json_string(&f(h))) }
}

/// The body of an entry point that hands a UTF-8 string argument (`name`) to `f` on a handle.
pub(crate) unsafe fn text_in<H: Handle, R: Done>(
    handle: *const H,
    text: *const c_char,
    name: &'static str,
    f: impl FnOnce(&H, &str) -> R,
) -> ab_status {
    boundary(|| {
        // SAFETY: NULL or valid pointers (the caller's contract).
        let (h, text) = unsafe { (self::handle(handle)?, self::text(text, name)?) };
        f(h, text).done()
    })
}

/// The body of a constructor: reads the config (NULL = defaults) and the clock (NULL = the
/// system clock), makes the core object with `make` and writes its new handle to `*out`.
pub(crate) unsafe fn construct_with<H: Handle>(
    config_json: *const c_char,
    clock: *const ab_manual_clock,
    out: *mut *mut H,
    out_name: &'static str,
    make: impl FnOnce(&Value, SharedClock) -> agentbreaker_core::Result<H::Core>,
) -> ab_status {
    // SAFETY: NULL or valid pointers (the caller's contract).
    boundary(|| unsafe {
        let (config, clock) = (config(config_json)?, clock_arg(clock));
        Out::new(out, out_name)?.wrap(make(&config, clock)?);
        Ok(())
    })
}

/// [`construct_with`] the core's constructor from a config (`interop::FromConfig`).
pub(crate) unsafe fn construct<H: Handle<Core: FromConfig>>(
    config_json: *const c_char,
    clock: *const ab_manual_clock,
    out: *mut *mut H,
    out_name: &'static str,
) -> ab_status {
    // SAFETY: the caller's contract is the one `construct_with` needs.
    unsafe { construct_with(config_json, clock, out, out_name, H::Core::from_config) }
}

/// The body of every `_restore`: hands the snapshot (`INVALID_SNAPSHOT` when it is not JSON) to
/// `f` on a handle.
pub(crate) unsafe fn restore<H: Handle, R: Done>(
    handle: *const H,
    snapshot_json: *const c_char,
    f: impl FnOnce(&H, &Value) -> R,
) -> ab_status {
    // SAFETY: NULL or valid pointers (the caller's contract).
    boundary(|| unsafe {
        let h = self::handle(handle)?;
        f(h, &json(snapshot_json, "snapshot_json", ArgKind::Snapshot)?).done()
    })
}

/// A value as a newly allocated JSON string for C (release with `ab_string_free`).
pub(crate) fn json_string<T: Serialize + ?Sized>(value: &T) -> Result<*mut c_char> {
    let text = serde_json::to_string(value)
        .map_err(|e| Error::Internal(format!("cannot serialize a result: {e}")))?;
    // serde_json escapes every control character, so the text holds no NUL byte.
    let text = CString::new(text)
        .map_err(|e| Error::Internal(format!("a result holds a NUL byte: {e}")))?;
    Ok(text.into_raw())
}

/// An optional value as a JSON string, or NULL when absent.
pub(crate) fn optional_json_string<T: Serialize>(value: Option<&T>) -> Result<*mut c_char> {
    value.map_or(Ok(ptr::null_mut()), json_string)
}

/// Releases a handle made by [`Out::wrap`]; NULL is a no-op. A panic while dropping it is
/// swallowed, never unwound into C.
pub(crate) unsafe fn free_handle<T>(ptr: *mut T) {
    if !ptr.is_null() {
        // SAFETY: a live pointer from `Box::into_raw`, released once (the caller's contract).
        let boxed = unsafe { Box::from_raw(ptr) };
        let _ = catch_unwind(AssertUnwindSafe(move || drop(boxed)));
    }
}

/// Releases a string made by [`json_string`]; NULL is a no-op.
pub(crate) unsafe fn free_string(ptr: *mut c_char) {
    if !ptr.is_null() {
        // SAFETY: a live pointer from `CString::into_raw`, released once (the caller's contract).
        drop(unsafe { CString::from_raw(ptr) });
    }
}
