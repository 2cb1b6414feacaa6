//! Listeners (SPEC 8) as a C function pointer plus `void *user_data`.

use std::ffi::{CString, c_char, c_void};
use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use agentbreaker_core::{Event, Listener, ListenerId, ListenerResult};

use crate::ffi::{self, Failure, Out, Result, boundary};
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

impl fmt::Debug for CListener {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CListener")
            .field("user_data", &self.user_data)
            .finish_non_exhaustive()
    }
}

impl CListener {
    fn deliver(&self, event: &Event) -> ListenerResult {
        let json = CString::new(serde_json::to_string(event)?)?;
        // SAFETY: `callback` is the non-NULL function pointer the caller registered with this
        // `user_data`; it receives a NUL-terminated string that lives until it returns.
        unsafe { (self.callback)(json.as_ptr(), self.user_data) };
        Ok(())
    }
}

/// The C ids of one handle's listeners (the core's `ListenerId` is opaque). Ids start at 1, so 0
/// never names a listener.
#[derive(Debug)]
pub(crate) struct ListenerTable {
    next: AtomicU64,
    ids: Mutex<Vec<(u64, ListenerId)>>,
}

impl Default for ListenerTable {
    fn default() -> Self {
        ListenerTable {
            next: AtomicU64::new(1),
            ids: Mutex::new(Vec::new()),
        }
    }
}

impl ListenerTable {
    /// Registers a C listener with `register` (the handle's `add_listener`); returns its C id.
    pub(crate) fn add(
        &self,
        callback: ab_listener_fn,
        user_data: *mut c_void,
        register: impl FnOnce(Listener) -> ListenerId,
    ) -> Result<u64> {
        let callback = callback.ok_or(Failure::Null("listener"))?;
        let listener = CListener {
            callback,
            user_data,
        };
        let id = register(Arc::new(move |event| listener.deliver(event)));
        let number = self.next.fetch_add(1, Ordering::Relaxed);
        self.ids
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push((number, id));
        Ok(number)
    }

    /// Removes the listener with C id `number` with `unregister`; false when there is none.
    pub(crate) fn remove(&self, number: u64, unregister: impl FnOnce(ListenerId) -> bool) -> bool {
        let id = {
            let mut ids = self.ids.lock().unwrap_or_else(|p| p.into_inner());
            match ids.iter().position(|(n, _)| *n == number) {
                Some(i) => ids.remove(i).1,
                None => return false,
            }
        };
        unregister(id)
    }
}

/// A handle with listeners: its table of C ids and its core object's listener methods.
pub(crate) trait Source {
    fn table(&self) -> &ListenerTable;
    fn add(&self, listener: Listener) -> ListenerId;
    fn remove(&self, id: ListenerId) -> bool;
}

/// `impl Source for $handle` whose core object is the field `$core` (and its table `listeners`).
macro_rules! source {
    ($handle:ty, $core:ident) => {
        impl $crate::listener::Source for $handle {
            fn table(&self) -> &$crate::listener::ListenerTable {
                &self.listeners
            }
            fn add(&self, listener: agentbreaker_core::Listener) -> agentbreaker_core::ListenerId {
                self.$core.add_listener(listener)
            }
            fn remove(&self, id: agentbreaker_core::ListenerId) -> bool {
                self.$core.remove_listener(id)
            }
        }
    };
}
pub(crate) use source;

/// The body of every `ab_<type>_add_listener`: registers `listener`, writes its id to `*out_id`.
///
/// # Safety
///
/// `handle` is NULL or a live handle; `listener` is NULL or a function as `ab_listener_fn`
/// describes; `out_id` is NULL or writable.
pub(crate) unsafe fn add<H: Source>(
    handle: *const H,
    name: &'static str,
    listener: ab_listener_fn,
    user_data: *mut c_void,
    out_id: *mut u64,
) -> ab_status {
    boundary(|| {
        // SAFETY: NULL or valid pointers (the caller's contract).
        let (h, out) = unsafe { (ffi::handle(handle, name)?, Out::new(out_id, "out_id")?) };
        out.write(h.table().add(listener, user_data, |l| h.add(l))?);
        Ok(())
    })
}

/// The body of every `ab_<type>_remove_listener`: writes whether `id` was registered.
///
/// # Safety
///
/// `handle` is NULL or a live handle; `out_removed` is NULL or writable.
pub(crate) unsafe fn remove<H: Source>(
    handle: *const H,
    name: &'static str,
    id: u64,
    out_removed: *mut bool,
) -> ab_status {
    boundary(|| {
        // SAFETY: NULL or valid pointers (the caller's contract).
        let (h, out) = unsafe {
            (
                ffi::handle(handle, name)?,
                Out::new(out_removed, "out_removed")?,
            )
        };
        out.write(h.table().remove(id, |l| h.remove(l)));
        Ok(())
    })
}
