//! Listeners (contract section 8) as a C function pointer plus `void *user_data`, and the
//! [`handle!`] macro that makes a handle type over a core event source.

use std::ffi::{CString, c_char, c_void};
use std::ops::Deref;
use std::sync::Arc;

use agentbreaker_core::interop::EventSource;
use agentbreaker_core::{Event, ListenerId, ListenerResult};

use crate::ffi::{self, Failure, Handle};
use crate::status::ab_status;

/// A listener: called with one event as a JSON string (`{"type":"stateChange","from":"CLOSED",
/// "to":"OPEN","reason":"...","atMs":1000}`, `{"type":"warning","message":"...","atMs":0}`,
/// `{"type":"halt","halt":{...},"atMs":0}` or a Monitor's `{"type":"verdict","action":"warn",...,
/// "atMs":0}`) and the `user_data` it was added with.
///
/// `event_json` is valid only during the call (copy it to keep it). The listener runs on the
/// thread whose call caused the event (or on a thread already delivering events of that handle),
/// after the handle's internal lock is released, one event at a time and in order; it may call
/// back into the same handle but must not free it. It must not unwind (C++ exceptions, longjmp)
/// out of the call.
pub type ab_listener_fn =
    Option<unsafe extern "C" fn(event_json: *const c_char, user_data: *mut c_void)>;

/// A registered C listener.
struct CListener {
    callback: unsafe extern "C" fn(*const c_char, *mut c_void),
    user_data: *mut c_void,
}

// SAFETY: the pointer is only handed back to the C callback, never dereferenced here. The C API
// documents that a listener runs on whichever thread causes (or delivers) an event, so a caller
// that shares a handle between threads promises that its callback and `user_data` are safe to use
// from those threads.
unsafe impl Send for CListener {}
// SAFETY: as for `Send`; the listener registry delivers to one listener at a time.
unsafe impl Sync for CListener {}

impl CListener {
    fn deliver(&self, event: &Event) -> ListenerResult {
        let json = CString::new(serde_json::to_string(event)?)?;
        // SAFETY: `callback` is the non-NULL function pointer the caller registered with this
        // `user_data`; it receives a NUL-terminated string that lives until it returns.
        unsafe { (self.callback)(json.as_ptr(), self.user_data) };
        Ok(())
    }
}

/// What a handle over a core event source holds: the core object, whose listener ids' numbers
/// (from 1, so 0 never names a listener) are the C ids. Public only because the handles deref to
/// it; nothing of it is in the C API.
#[derive(Debug)]
pub struct Source<C> {
    pub(crate) core: C,
}

/// Makes `$handle` (a tuple struct over a `Source<$core>`) a [`Handle`] whose parameter is called
/// `$name`, which derefs to its [`Source`].
macro_rules! handle {
    ($handle:ident($core:ty), $name:literal) => {
        impl $crate::ffi::Handle for $handle {
            const NAME: &'static str = $name;
            type Core = $core;
            fn wrap(core: $core) -> Self {
                $handle($crate::listener::Source { core })
            }
        }
        impl std::ops::Deref for $handle {
            type Target = $crate::listener::Source<$core>;
            fn deref(&self) -> &Self::Target {
                &self.0
            }
        }
    };
}
pub(crate) use handle;

/// The body of every `ab_<type>_add_listener`: registers `listener`, writes its id to `*out_id`.
///
/// # Safety
///
/// `handle` is NULL or a live handle; `listener` is NULL or a function as `ab_listener_fn`
/// describes; `out_id` is NULL or writable.
pub(crate) unsafe fn add<C: EventSource, H: Handle + Deref<Target = Source<C>>>(
    handle: *const H,
    listener: ab_listener_fn,
    user_data: *mut c_void,
    out_id: *mut u64,
) -> ab_status {
    ffi::boundary(|| {
        // Checked in parameter order (ffi.rs): the handle, the listener, then `out_id`.
        // SAFETY: NULL or valid pointers (the caller's contract).
        let h = unsafe { ffi::handle(handle)? };
        let callback = listener.ok_or(Failure::Null("listener"))?;
        // SAFETY: as above.
        let out = unsafe { ffi::Out::new(out_id, "out_id")? };
        let listener = CListener {
            callback,
            user_data,
        };
        let deliver = move |event: &Event| listener.deliver(event);
        out.write(h.core.add_listener(Arc::new(deliver)).number());
        Ok(())
    })
}

/// The body of every `ab_<type>_remove_listener`: writes whether `id` was registered.
///
/// # Safety
///
/// `handle` is NULL or a live handle; `out_removed` is NULL or writable.
pub(crate) unsafe fn remove<C: EventSource, H: Handle + Deref<Target = Source<C>>>(
    handle: *const H,
    id: u64,
    out_removed: *mut bool,
) -> ab_status {
    // SAFETY: NULL or valid pointers (the caller's contract).
    unsafe {
        ffi::write_out(handle, out_removed, "out_removed", |h| {
            Ok(h.core.remove_listener(ListenerId::from_number(id)))
        })
    }
}
