//! Error objects and the per-thread error slot.
//!
//! # Backtraces are symbolized when read
//!
//! An error raised here (`TVMFFIErrorSetRaisedFromCStr*`, and so `Error::new` of the safe API)
//! records only the return addresses of the raising thread's stack; turning them into text
//! (symbol lookup, file names, frame filters) costs several times as much as the whole raise
//! (about 2,000 instructions through the C ABI), and loading the debug information behind it
//! takes tens of MiB the first time. Many errors are caught and dropped, or tested for their
//! kind, without anyone reading the backtrace, so the text is made on first request instead.
//!
//! The cell's `backtrace` field is part of the C ABI, and C reads it directly, so the request
//! has to reach us through the cell itself: while the frames are pending the field is empty,
//! and the cell's `update_backtrace` hook symbolizes them before it does anything else. A reader
//! that finds the field empty asks for the text by appending nothing
//! (`update_backtrace(self, &(TVMFFIByteArray){"", 0}, kTVMFFIBacktraceUpdateModeAppend)`,
//! harmless for an error from any producer), then reads the field: the safe API's
//! `Error::backtrace`, the C++ layer's `Error::backtrace()` and so the Python traceback do this.
//! A replacement (`kTVMFFIBacktraceUpdateModeReplace`) drops the pending frames unread.
//!
//! Symbolizing when the error is handed to C (`TVMFFIErrorMoveFromRaised`) would keep the field
//! filled for readers that do not ask, but every caller that only checks or converts the error,
//! Rust and Python included, fetches it through that function and would pay the full price.
//!
//! The hook's work runs under the error's own lock, so readers on several threads may ask at
//! once, and the text is made once: after that, a request writes nothing. The size of the text
//! is stored last, with release ordering, so a reader that loads a non-zero size with acquire
//! ordering (`Error::backtrace` does) reads complete text without asking.

use std::cell::{Cell, UnsafeCell};
use std::ffi::{c_char, c_int};
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use tvm_ffi::boundary::{ffi_boundary, ffi_status};
use tvm_ffi::error::ErrorObj;
use tvm_ffi::object::{alloc_object, dec_ref, inc_ref};
use tvm_ffi_sys::{
    TVMFFIByteArray, TVMFFIErrorCell, TVMFFIObject, TVMFFIObjectHandle,
    kTVMFFIBacktraceUpdateModeAppend, kTVMFFIError,
};

use crate::args::bytes_arg;
use crate::backtrace::{Frames, capture_frames, format_backtrace, symbolize};

/// What an empty text field points at: a NUL-terminated empty string.
static EMPTY_TEXT: [u8; 1] = [0];

/// An error object made by this runtime: the shared view followed by the storage it points at.
#[repr(C)]
struct ErrorStorage {
    view: ErrorObj,
    /// The kind and the message, each followed by a NUL: `kind\0message\0`.
    text: Vec<u8>,
    /// The backtrace text followed by a NUL, or empty (the cell then points at [`EMPTY_TEXT`]).
    /// Written under `pending`'s lock.
    backtrace: UnsafeCell<Vec<u8>>,
    /// Frames captured when the error was raised, not yet symbolized into `backtrace`.
    pending: PendingFrames,
}

/// The unsymbolized frames of an error and the lock of its backtrace updates.
struct PendingFrames {
    /// Whether `frames` may hold frames; cleared (with release ordering) once the text is in
    /// the cell, so a reader that sees it clear needs no lock.
    any: AtomicBool,
    /// The frames; the lock also serializes every rewrite of the backtrace.
    frames: Mutex<Frames>,
}

/// The backtrace a new error starts with.
enum Backtrace<'a> {
    /// Given text.
    Text(&'a [u8]),
    /// Frames captured now, symbolized on first request.
    Frames(Frames),
}

/// The array of `buf` without its final NUL, or the empty text for an empty buffer.
fn array_of(buf: &[u8]) -> TVMFFIByteArray {
    match buf.split_last() {
        Some((_, text)) => TVMFFIByteArray::from_bytes(text),
        None => TVMFFIByteArray {
            data: EMPTY_TEXT.as_ptr().cast(),
            size: 0,
        },
    }
}

impl Drop for ErrorStorage {
    fn drop(&mut self) {
        let cell = self.view.cell_mut();
        for handle in [cell.cause_chain, cell.extra_context] {
            if !handle.is_null() {
                // SAFETY: the cell owns one reference to each non-NULL handle.
                unsafe { dec_ref(handle.cast()) };
            }
        }
    }
}

impl ErrorStorage {
    /// Appends `bytes` to the backtrace (`append`) or replaces it with them; an append first
    /// symbolizes pending frames, a replacement drops them.
    fn update_backtrace(&self, bytes: &[u8], append: bool) {
        if append && bytes.is_empty() && !self.pending.any.load(Ordering::Acquire) {
            // A request for text that is already there.
            return;
        }
        let mut frames = self
            .pending
            .frames
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        let frames = std::mem::take(&mut *frames);
        if append && bytes.is_empty() && frames.is_empty() {
            // Another reader made the text while this one waited: nothing to write.
            return;
        }
        // SAFETY: rewrites of the buffer and of the cell's array happen under the lock held
        // here; readers without the lock read only after seeing `any` clear, which is set
        // after the rewrite, or (C readers that do not ask) are serialized by the error's owner
        // as the ABI requires.
        unsafe {
            let buf = &mut *self.backtrace.get();
            let mut next = Vec::new();
            if append {
                next.extend_from_slice(buf.split_last().map_or(&[][..], |(_, text)| text));
                if !frames.is_empty() {
                    next.extend_from_slice(symbolize(&frames, None, false).as_bytes());
                }
            }
            next.extend_from_slice(bytes);
            if !next.is_empty() {
                next.push(0);
            }
            *buf = next;
            let array = array_of(buf);
            let cell = self.view.cell_ptr();
            (*cell).backtrace.data = array.data;
            // Published last, with release ordering: a reader that loads a non-zero size with
            // acquire ordering (as `Error::backtrace` does) then reads complete text.
            AtomicUsize::from_ptr(&raw mut (*cell).backtrace.size)
                .store(array.size, Ordering::Release);
        }
        self.pending.any.store(false, Ordering::Release);
    }
}

unsafe extern "C" fn update_backtrace(
    handle: TVMFFIObjectHandle,
    text: *const TVMFFIByteArray,
    mode: i32,
) {
    // A bad argument is ignored; a panic is raised as an `InternalError`.
    ffi_boundary("the update_backtrace hook of an error", || {
        // SAFETY: the hook is installed only on `ErrorStorage` objects; `text` is valid.
        unsafe {
            let Ok(bytes) = bytes_arg(text, "backtrace") else {
                return;
            };
            let storage = &*handle.cast::<ErrorStorage>();
            storage.update_backtrace(bytes, mode == kTVMFFIBacktraceUpdateModeAppend);
        }
    });
}

/// Creates an owned error object; `cause` and `extra` are borrowed and retained.
///
/// `message` is the concatenation of `message_parts`.
fn create_error(
    kind: &[u8],
    message_parts: &[&[u8]],
    backtrace: Backtrace<'_>,
    cause: TVMFFIObjectHandle,
    extra: TVMFFIObjectHandle,
) -> *mut TVMFFIObject {
    for handle in [cause, extra] {
        if !handle.is_null() {
            // SAFETY: the caller lends live objects; the cell keeps its own references.
            unsafe { inc_ref(handle.cast()) };
        }
    }
    let message_len: usize = message_parts.iter().map(|part| part.len()).sum();
    let mut text = Vec::with_capacity(kind.len() + message_len + 2);
    text.extend_from_slice(kind);
    text.push(0);
    for part in message_parts {
        text.extend_from_slice(part);
    }
    text.push(0);
    let (backtrace, frames) = match backtrace {
        Backtrace::Text([]) => (Vec::new(), Frames::new()),
        Backtrace::Text(bytes) => {
            let mut buf = Vec::with_capacity(bytes.len() + 1);
            buf.extend_from_slice(bytes);
            buf.push(0);
            (buf, Frames::new())
        }
        Backtrace::Frames(frames) => (Vec::new(), frames),
    };
    let storage = ErrorStorage {
        view: ErrorObj::new(TVMFFIErrorCell {
            kind: TVMFFIByteArray::EMPTY,
            message: TVMFFIByteArray::EMPTY,
            backtrace: TVMFFIByteArray::EMPTY,
            update_backtrace: Some(update_backtrace),
            cause_chain: cause,
            extra_context: extra,
        }),
        text,
        backtrace: UnsafeCell::new(backtrace),
        pending: PendingFrames {
            any: AtomicBool::new(!frames.is_empty()),
            frames: Mutex::new(frames),
        },
    };
    // SAFETY: repr(C) with the header first; Drop releases the retained handles.
    let ptr = unsafe { alloc_object(storage, 0, kTVMFFIError) };
    // SAFETY: the object is new and not shared yet; the buffers live inside it.
    unsafe {
        let storage = &mut *ptr.as_ptr();
        let (kind_len, text) = (kind.len(), &storage.text);
        let cell = storage.view.cell_mut();
        cell.kind = array_of(&text[..=kind_len]);
        cell.message = array_of(&text[kind_len + 1..]);
        cell.backtrace = array_of(&*storage.backtrace.get());
    }
    ptr.as_ptr().cast()
}

thread_local! {
    /// The error raised in this thread: an owned reference, or NULL. It has no destructor of
    /// its own, so reading it costs no registration check; [`RaisedRelease`] releases what it
    /// holds when the thread exits.
    static RAISED: Cell<*mut TVMFFIObject> = const { Cell::new(std::ptr::null_mut()) };
    /// Touched by every store, so that its destructor is registered before a thread holds an
    /// error.
    static RAISED_RELEASE: RaisedRelease = const { RaisedRelease };
}

/// Releases the thread's raised error when the thread exits.
struct RaisedRelease;

impl Drop for RaisedRelease {
    fn drop(&mut self) {
        let obj = RAISED.with(|slot| slot.replace(std::ptr::null_mut()));
        if !obj.is_null() {
            // SAFETY: the slot owned one reference.
            unsafe { dec_ref(obj) };
        }
    }
}

/// Stores an owned error reference in the calling thread's slot, releasing the previous one.
fn store_raised(obj: *mut TVMFFIObject) {
    // Once the thread's release has run (thread exit), nothing would release a stored error:
    // the new one is released right away instead.
    let previous = if RAISED_RELEASE.try_with(|_| ()).is_ok() {
        RAISED.with(|slot| slot.replace(obj))
    } else {
        obj
    };
    if !previous.is_null() {
        // SAFETY: the slot owned one reference (or, during thread exit, the new error does).
        unsafe { dec_ref(previous) };
    }
}

/// Creates an error object.
///
/// # Safety
/// Arrays are valid; `out` is valid for writes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn TVMFFIErrorCreate(
    kind: *const TVMFFIByteArray,
    message: *const TVMFFIByteArray,
    backtrace: *const TVMFFIByteArray,
    out: *mut TVMFFIObjectHandle,
) -> c_int {
    ffi_boundary("TVMFFIErrorCreate", || {
        // SAFETY: forwarded.
        unsafe {
            TVMFFIErrorCreateWithCauseAndExtraContext(
                kind,
                message,
                backtrace,
                std::ptr::null_mut(),
                std::ptr::null_mut(),
                out,
            )
        }
    })
}

/// Creates an error object with a cause and extra context (both borrowed, may be NULL).
///
/// # Safety
/// Arrays are valid; handles are NULL or live objects; `out` is valid for writes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn TVMFFIErrorCreateWithCauseAndExtraContext(
    kind: *const TVMFFIByteArray,
    message: *const TVMFFIByteArray,
    backtrace: *const TVMFFIByteArray,
    cause_chain: TVMFFIObjectHandle,
    extra_context: TVMFFIObjectHandle,
    out: *mut TVMFFIObjectHandle,
) -> c_int {
    ffi_status("TVMFFIErrorCreateWithCauseAndExtraContext", || {
        // SAFETY: per the function contract.
        unsafe {
            let out = crate::args::out_arg(out, "out")?;
            let kind = bytes_arg(kind, "kind")?;
            let message = bytes_arg(message, "message")?;
            let backtrace = if backtrace.is_null() {
                &[][..]
            } else {
                bytes_arg(backtrace, "bt")?
            };
            let obj = create_error(
                kind,
                &[message],
                Backtrace::Text(backtrace),
                cause_chain,
                extra_context,
            );
            *out = obj.cast();
        }
        Ok(())
    })
}

/// Moves the calling thread's raised error to `*result` (NULL if none), clearing the slot.
///
/// # Safety
/// `result` is valid for writes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn TVMFFIErrorMoveFromRaised(result: *mut TVMFFIObjectHandle) {
    ffi_boundary("TVMFFIErrorMoveFromRaised", || {
        let obj = RAISED.with(|slot| slot.replace(std::ptr::null_mut()));
        if result.is_null() {
            if !obj.is_null() {
                // SAFETY: nobody takes the reference; release it.
                unsafe { dec_ref(obj) };
            }
            return;
        }
        // SAFETY: guaranteed by the caller.
        unsafe { *result = obj.cast() };
    })
}

/// Raises `error` in the calling thread (borrowed: the slot takes its own reference).
///
/// # Safety
/// `error` is NULL or a live error object.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn TVMFFIErrorSetRaised(error: TVMFFIObjectHandle) {
    ffi_boundary("TVMFFIErrorSetRaised", || {
        if error.is_null() {
            return;
        }
        // SAFETY: the caller lends a live object; its header comes first.
        let type_index = unsafe { (*error.cast::<tvm_ffi_sys::TVMFFIObject>()).type_index };
        if type_index != tvm_ffi_sys::kTVMFFIError {
            // Only errors belong in the slot: whoever takes it out reads an error cell.
            let key = tvm_ffi::types::type_key_of(type_index);
            let message = format!(
                "TVMFFIErrorSetRaised was given an object of type `{key}`, not an ffi.Error"
            );
            raise_parts(b"TypeError", &[message.as_bytes()]);
            return;
        }
        // SAFETY: the caller lends a live object.
        unsafe { inc_ref(error.cast()) };
        store_raised(error.cast());
    })
}

/// Builds an error of `kind` from message parts and raises it, capturing the stack here (its
/// text is made when somebody reads it: see the module documentation).
fn raise_parts(kind: &[u8], parts: &[&[u8]]) {
    let frames = capture_frames(false);
    let obj = create_error(
        kind,
        parts,
        Backtrace::Frames(frames),
        std::ptr::null_mut(),
        std::ptr::null_mut(),
    );
    store_raised(obj);
}

/// # Safety
/// `ptr` is NULL or NUL-terminated.
unsafe fn cstr_bytes<'a>(ptr: *const c_char) -> &'a [u8] {
    if ptr.is_null() {
        return &[];
    }
    // SAFETY: guaranteed by the caller.
    unsafe { std::ffi::CStr::from_ptr(ptr) }.to_bytes()
}

/// Raises a new error of `kind` with `message`.
///
/// # Safety
/// Both are NULL or NUL-terminated strings.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn TVMFFIErrorSetRaisedFromCStr(kind: *const c_char, message: *const c_char) {
    ffi_boundary("TVMFFIErrorSetRaisedFromCStr", || {
        // SAFETY: per the contract.
        unsafe { raise_parts(cstr_bytes(kind), &[cstr_bytes(message)]) }
    });
}

/// Raises a new error whose message is the concatenation of the non-NULL parts.
///
/// # Safety
/// `parts` points at `num_parts` pointers that are NULL or NUL-terminated.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn TVMFFIErrorSetRaisedFromCStrParts(
    kind: *const c_char,
    parts: *const *const c_char,
    num_parts: i32,
) {
    ffi_boundary("TVMFFIErrorSetRaisedFromCStrParts", || {
        // SAFETY: per the contract.
        unsafe {
            let parts: Vec<&[u8]> = if parts.is_null() || num_parts <= 0 {
                Vec::new()
            } else {
                std::slice::from_raw_parts(parts, num_parts as usize)
                    .iter()
                    .map(|p| cstr_bytes(*p))
                    .collect()
            };
            raise_parts(cstr_bytes(kind), &parts);
        }
    });
}

thread_local! {
    static BACKTRACE_BUF: UnsafeCell<(Vec<u8>, TVMFFIByteArray)> =
        const { UnsafeCell::new((Vec::new(), TVMFFIByteArray { data: std::ptr::null(), size: 0 })) };
}

/// Captures the backtrace of the caller into a thread-local buffer valid until the next call.
///
/// # Safety
/// `file` and `func` are NULL or NUL-terminated.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn TVMFFIBacktrace(
    file: *const c_char,
    line: c_int,
    func: *const c_char,
    cross_ffi_boundary: c_int,
) -> *const TVMFFIByteArray {
    ffi_boundary("TVMFFIBacktrace", || {
        // SAFETY: per the contract.
        let (file, func) = unsafe { (cstr_bytes(file), cstr_bytes(func)) };
        let file = (!file.is_empty()).then(|| String::from_utf8_lossy(file));
        let func = (!func.is_empty()).then(|| String::from_utf8_lossy(func));
        let text = format_backtrace(
            file.as_deref(),
            line,
            func.as_deref(),
            cross_ffi_boundary != 0,
        );
        BACKTRACE_BUF
            .try_with(|cell| {
                // SAFETY: the buffer is thread-local and only touched here; callers read the
                // result before their next call on this thread.
                let (buf, array) = unsafe { &mut *cell.get() };
                buf.clear();
                buf.extend_from_slice(text.as_bytes());
                buf.push(0);
                *array = array_of(buf);
                array as *const TVMFFIByteArray
            })
            .unwrap_or(std::ptr::null())
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backtrace::symbolizations_on_this_thread;
    use tvm_ffi::Error;

    /// The byte arrays of an error's cell, as C would read them now.
    struct Arrays {
        kind: TVMFFIByteArray,
        message: TVMFFIByteArray,
        backtrace: TVMFFIByteArray,
    }

    fn cell(err: &Error) -> Arrays {
        let cell = err.as_object().cell();
        Arrays {
            kind: cell.kind,
            message: cell.message,
            backtrace: cell.backtrace,
        }
    }

    #[inline(never)]
    fn raise_from_named_helper() -> Error {
        // SAFETY: NUL-terminated strings.
        unsafe { TVMFFIErrorSetRaisedFromCStr(c"ValueError".as_ptr(), c"lazy".as_ptr()) };
        let err = Error::take_raised().expect("raised");
        // Keeps the call above from being a tail call, so this frame stays on the stack.
        std::hint::black_box(err)
    }

    #[test]
    fn raising_does_not_symbolize_until_the_backtrace_is_read() {
        let before = symbolizations_on_this_thread();
        let err = raise_from_named_helper();
        let rust_err = Error::new("KeyError", "also lazy");
        let _ = Error::new("Kind", "a third one").with_cause(rust_err.clone());
        let symbolized_by_with_cause = symbolizations_on_this_thread() - before;
        assert_eq!(symbolized_by_with_cause, 1, "with_cause copies the text");
        assert_eq!(err.kind(), "ValueError");
        assert_eq!(err.message(), "lazy");
        assert_eq!(rust_err.message(), "also lazy");
        // Pending frames: the field is empty (and NUL-terminated) until someone asks.
        let pending = cell(&err).backtrace;
        assert_eq!(pending.size, 0);
        // SAFETY: the field points at a NUL-terminated buffer.
        assert_eq!(unsafe { *pending.data }, 0);
        assert_eq!(symbolizations_on_this_thread() - before, 1);

        let text = err.backtrace().into_owned();
        assert_eq!(symbolizations_on_this_thread() - before, 2);
        assert!(text.contains("raise_from_named_helper"), "{text}");
        assert!(!text.contains("raise_parts"), "{text}");
        assert_eq!(cell(&err).backtrace.size, text.len());
        // Asked once: reading again symbolizes nothing.
        assert_eq!(err.backtrace(), text);
        assert_eq!(symbolizations_on_this_thread() - before, 2);

        assert!(
            rust_err
                .backtrace()
                .contains("raising_does_not_symbolize_until_the_backtrace_is_read"),
            "{}",
            rust_err.backtrace()
        );
        assert_eq!(symbolizations_on_this_thread() - before, 3);
    }

    #[test]
    fn updates_of_a_pending_backtrace() {
        let before = symbolizations_on_this_thread();
        // Replacing drops the frames unread.
        let replaced = raise_from_named_helper();
        replaced.update_backtrace("  File \"x\", line 1, in y\n", false);
        assert_eq!(replaced.backtrace(), "  File \"x\", line 1, in y\n");
        assert_eq!(symbolizations_on_this_thread(), before);
        // Appending symbolizes first.
        let appended = raise_from_named_helper();
        appended.update_backtrace("  File \"x\", line 1, in y\n", true);
        let text = appended.backtrace();
        assert!(text.contains("raise_from_named_helper"), "{text}");
        assert!(text.ends_with("  File \"x\", line 1, in y\n"), "{text}");
        assert_eq!(symbolizations_on_this_thread(), before + 1);
        // Replacing with nothing leaves an empty backtrace for good.
        appended.update_backtrace("", false);
        assert_eq!(appended.backtrace(), "");
    }

    #[test]
    fn readers_on_several_threads_get_the_same_text() {
        let err = raise_from_named_helper();
        let texts: Vec<String> = std::thread::scope(|scope| {
            let readers: Vec<_> = (0..4)
                .map(|_| scope.spawn(|| err.backtrace().into_owned()))
                .collect();
            readers.into_iter().map(|r| r.join().unwrap()).collect()
        });
        assert!(texts[0].contains("raise_from_named_helper"), "{}", texts[0]);
        assert!(texts.iter().all(|text| *text == texts[0]));
    }

    #[test]
    fn given_backtraces_are_kept_as_text() {
        let err = Error::with_backtrace("RuntimeError", "m", "  File \"a\", line 1, in f\n");
        assert_eq!(cell(&err).backtrace.size, 25);
        let empty = Error::with_backtrace("RuntimeError", "m", "");
        assert_eq!(empty.backtrace(), "");
        assert_eq!(cell(&empty).kind.size, 12);
        assert_eq!(cell(&empty).message.size, 1);
    }
}
