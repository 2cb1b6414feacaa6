//! The boundary between C and Rust: the panic boundary, the thread-local last error, and the
//! conversions of raw pointers (handles, strings, JSON strings, out-parameters).
//!
//! Every exported function runs its body through [`boundary`]. The pointer helpers are `unsafe`
//! functions whose contract is the exported function's documented one ("NULL or a valid ...");
//! they check NULL and UTF-8 themselves.

use std::cell::RefCell;
use std::ffi::{CStr, CString, c_char};
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::ptr;

use agentbreaker_core::interop::{self, ArgKind};
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

thread_local! {
    // `None` is "no error": clearing it on every successful call (the hot path) allocates nothing.
    static LAST_ERROR: RefCell<Option<CString>> = const { RefCell::new(None) };
}

fn set_last_error(message: String) {
    let message = CString::new(message).unwrap_or_else(|e| {
        let mut bytes = e.into_vec();
        bytes.retain(|b| *b != 0);
        CString::new(bytes).unwrap_or_default()
    });
    replace_last_error(Some(message));
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
    static EMPTY: &[u8] = b"\0";
    LAST_ERROR
        .try_with(|slot| match slot.try_borrow() {
            // The pointer stays valid until the slot is next replaced (the next status-returning
            // call on this thread), as documented.
            Ok(message) => message
                .as_ref()
                .map_or(EMPTY.as_ptr().cast(), |m| m.as_ptr()),
            Err(_) => EMPTY.as_ptr().cast(),
        })
        .unwrap_or(EMPTY.as_ptr().cast())
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
    set_last_error(message);
    status
}

/// For functions without a status (the `_free`s): a panic is swallowed, never unwound into C.
pub(crate) fn quietly(body: impl FnOnce()) {
    let _ = catch_unwind(AssertUnwindSafe(body));
}

fn invalid_utf8(name: &str, e: std::str::Utf8Error) -> Failure {
    Failure::Core(ArgKind::Argument.error(format_args!(
        "{name} is not valid UTF-8 (invalid byte at offset {})",
        e.valid_up_to()
    )))
}

/// A required UTF-8 string argument.
///
/// # Safety
///
/// `ptr` is NULL or points to a NUL-terminated string that stays valid and unchanged for `'a`.
pub(crate) unsafe fn text<'a>(ptr: *const c_char, name: &'static str) -> Result<&'a str> {
    if ptr.is_null() {
        return Err(Failure::Null(name));
    }
    // SAFETY: non-NULL, and the caller guarantees a NUL-terminated string valid for 'a.
    let s = unsafe { CStr::from_ptr(ptr) };
    s.to_str().map_err(|e| invalid_utf8(name, e))
}

/// An optional UTF-8 string argument (NULL = absent).
///
/// # Safety
///
/// As for [`text`].
pub(crate) unsafe fn optional_text<'a>(
    ptr: *const c_char,
    name: &'static str,
) -> Result<Option<&'a str>> {
    if ptr.is_null() {
        return Ok(None);
    }
    // SAFETY: non-NULL; the caller's contract is the one `text` needs.
    unsafe { text(ptr, name) }.map(Some)
}

/// A JSON string argument; text that is not JSON is an error of the argument's kind
/// (`INVALID_CONFIG` for configs, `INVALID_EVENT` for events, ...). NULL is `Value::Null` when
/// `optional`, `AB_ERR_NULL_ARG` otherwise.
///
/// # Safety
///
/// As for [`text`].
pub(crate) unsafe fn json(
    ptr: *const c_char,
    name: &'static str,
    optional: bool,
    kind: ArgKind,
) -> Result<Value> {
    if ptr.is_null() && optional {
        return Ok(Value::Null);
    }
    // SAFETY: the caller's contract is the one `text` needs.
    let s = unsafe { text(ptr, name) }?;
    serde_json::from_str(s)
        .map_err(|e| Failure::Core(kind.error(format_args!("{name} is not JSON: {e}"))))
}

/// A config argument: a JSON string, NULL = all defaults; anything but JSON is `INVALID_CONFIG`.
///
/// # Safety
///
/// As for [`text`].
pub(crate) unsafe fn config(ptr: *const c_char) -> Result<Value> {
    // SAFETY: the caller's contract is the one `json` needs.
    unsafe { json(ptr, "config_json", true, ArgKind::Config) }
}

/// A handle argument.
///
/// # Safety
///
/// `ptr` is NULL or points to a live `T` made by this library that stays alive for `'a`.
pub(crate) unsafe fn handle<'a, T>(ptr: *const T, name: &'static str) -> Result<&'a T> {
    // SAFETY: the caller guarantees NULL or a live T for 'a; `as_ref` maps NULL to None.
    unsafe { ptr.as_ref() }.ok_or(Failure::Null(name))
}

/// The clock a constructor was given: the manual clock's, or the system clock for NULL.
///
/// # Safety
///
/// `ptr` is NULL or points to a live `ab_manual_clock`.
pub(crate) unsafe fn clock_arg(ptr: *const ab_manual_clock) -> SharedClock {
    // SAFETY: the caller guarantees NULL or a live clock handle.
    match unsafe { ptr.as_ref() } {
        Some(clock) => clock.shared(),
        None => SystemClock::shared(),
    }
}

/// An out-parameter, checked for NULL before the operation runs and written only on success.
pub(crate) struct Out<T> {
    ptr: *mut T,
}

impl<T> Out<T> {
    /// # Safety
    ///
    /// `ptr` is NULL or valid for writing a `T` until [`Out::write`] is called.
    pub(crate) unsafe fn new(ptr: *mut T, name: &'static str) -> Result<Self> {
        if ptr.is_null() {
            Err(Failure::Null(name))
        } else {
            Ok(Out { ptr })
        }
    }

    pub(crate) fn write(self, value: T) {
        // SAFETY: non-NULL (checked in `new`) and valid for writes (`new`'s contract). `write`
        // does not drop the old value: C memory holds no Rust value to drop.
        unsafe { self.ptr.write(value) }
    }
}

/// The body of an entry point that reads a handle and writes `f`'s result as a JSON string to
/// `*out_json`.
///
/// # Safety
///
/// `handle` is NULL or a live handle of this library; `out_json` is NULL or writable.
pub(crate) unsafe fn json_out<H, T: Serialize>(
    handle: *const H,
    name: &'static str,
    out_json: *mut *mut c_char,
    f: impl FnOnce(&H) -> Result<T>,
) -> ab_status {
    boundary(|| {
        // SAFETY: NULL or valid pointers (the caller's contract).
        let (h, out) = unsafe { (self::handle(handle, name)?, Out::new(out_json, "out_json")?) };
        out.write(json_string(&f(h)?)?);
        Ok(())
    })
}

/// What an operation on a handle returns: nothing, or a core result whose value is dropped.
pub(crate) trait Done {
    fn done(self) -> Result<()>;
}

impl Done for () {
    fn done(self) -> Result<()> {
        Ok(())
    }
}

impl<T> Done for std::result::Result<T, Error> {
    fn done(self) -> Result<()> {
        self.map(drop).map_err(Failure::Core)
    }
}

/// The body of an entry point that only acts on a handle.
///
/// # Safety
///
/// `handle` is NULL or a live handle of this library.
pub(crate) unsafe fn with_handle<H, R: Done>(
    handle: *const H,
    name: &'static str,
    f: impl FnOnce(&H) -> R,
) -> ab_status {
    // SAFETY: NULL or a live handle (the caller's contract).
    boundary(|| f(unsafe { self::handle(handle, name) }?).done())
}

/// A value as a newly allocated JSON string for C (release with `ab_string_free`).
pub(crate) fn json_string<T: Serialize + ?Sized>(value: &T) -> Result<*mut c_char> {
    let text = serde_json::to_string(value)
        .map_err(|e| Failure::Core(Error::Internal(format!("cannot serialize a result: {e}"))))?;
    // serde_json escapes every control character, so the text holds no NUL byte.
    let text = CString::new(text)
        .map_err(|e| Failure::Core(Error::Internal(format!("a result holds a NUL byte: {e}"))))?;
    Ok(text.into_raw())
}

/// An optional value as a JSON string, or NULL when absent.
pub(crate) fn optional_json_string<T: Serialize>(value: Option<&T>) -> Result<*mut c_char> {
    match value {
        Some(v) => json_string(v),
        None => Ok(ptr::null_mut()),
    }
}

/// A new handle for C.
pub(crate) fn into_handle<T>(value: T) -> *mut T {
    Box::into_raw(Box::new(value))
}

/// Releases a handle made by [`into_handle`]; NULL is a no-op.
///
/// # Safety
///
/// `ptr` is NULL or came from [`into_handle`] for this `T` and has not been released.
pub(crate) unsafe fn free_handle<T>(ptr: *mut T) {
    if ptr.is_null() {
        return;
    }
    // SAFETY: a live pointer from `Box::into_raw` that is released once (the caller's contract).
    let boxed = unsafe { Box::from_raw(ptr) };
    quietly(move || drop(boxed));
}

/// Releases a string made by [`json_string`]; NULL is a no-op.
///
/// # Safety
///
/// `ptr` is NULL or came from `CString::into_raw` in this library and has not been released.
pub(crate) unsafe fn free_string(ptr: *mut c_char) {
    if ptr.is_null() {
        return;
    }
    // SAFETY: a live pointer from `CString::into_raw`, released once (the caller's contract).
    drop(unsafe { CString::from_raw(ptr) });
}

#[cfg(test)]
mod tests {
    use super::*;

    fn last_error() -> String {
        // SAFETY: last_error_message always returns a valid NUL-terminated string.
        unsafe { CStr::from_ptr(last_error_message()) }
            .to_string_lossy()
            .into_owned()
    }

    #[test]
    fn a_panic_becomes_internal_and_the_next_call_works() {
        let status = boundary(|| panic!("boom"));
        assert_eq!(status, ab_status::AB_ERR_INTERNAL);
        assert_eq!(last_error(), "INTERNAL: panic: boom");
        let status = boundary(|| Ok(()));
        assert_eq!(status, ab_status::AB_OK);
        assert_eq!(last_error(), "");
        let status = boundary(|| panic!("{}", String::from("formatted")));
        assert_eq!(status, ab_status::AB_ERR_INTERNAL);
        assert_eq!(last_error(), "INTERNAL: panic: formatted");
    }

    #[test]
    fn errors_set_the_message_with_their_code() {
        let status = boundary(|| Err(Error::InvalidEvent("bad".into()).into()));
        assert_eq!(status, ab_status::AB_ERR_INVALID_EVENT);
        assert_eq!(last_error(), "INVALID_EVENT: bad");
        let status = boundary(|| Err(Failure::Null("breaker")));
        assert_eq!(status, ab_status::AB_ERR_NULL_ARG);
        assert_eq!(last_error(), "NULL_ARG: breaker must not be NULL");
    }

    #[test]
    fn the_last_error_is_per_thread() {
        let _ = boundary(|| Err(Error::Io("disk".into()).into()));
        std::thread::spawn(|| assert_eq!(last_error(), ""))
            .join()
            .unwrap();
        assert_eq!(last_error(), "IO: disk");
    }

    #[test]
    fn strings_are_checked_for_null_and_utf8() {
        let bad = b"ab\xffcd\0";
        // SAFETY: a NUL-terminated byte string that outlives the call.
        let e = unsafe { text(bad.as_ptr().cast(), "error") }.unwrap_err();
        assert!(matches!(e, Failure::Core(Error::InvalidArgument(m)) if m.contains("offset 2")));
        // SAFETY: NULL is allowed.
        let e = unsafe { text(ptr::null(), "error") }.unwrap_err();
        assert!(matches!(e, Failure::Null("error")));
        // SAFETY: NULL is allowed.
        assert!(
            unsafe { optional_text(ptr::null(), "x") }
                .unwrap()
                .is_none()
        );
        let cfg = b"{\"a\": \0";
        // SAFETY: a NUL-terminated byte string that outlives the call.
        let e = unsafe { config(cfg.as_ptr().cast()) }.unwrap_err();
        assert!(matches!(e, Failure::Core(Error::InvalidConfig(_))));
        // SAFETY: NULL is allowed.
        assert_eq!(unsafe { config(ptr::null()) }.unwrap(), Value::Null);
    }

    #[test]
    fn a_message_with_a_nul_byte_is_kept_without_it() {
        let _ = boundary(|| Err(Error::InvalidArgument("a\0b".into()).into()));
        assert_eq!(last_error(), "INVALID_ARGUMENT: ab");
    }
}
