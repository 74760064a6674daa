//! Error objects and the per-thread error slot.

use std::cell::{Cell, UnsafeCell};
use std::ffi::{c_char, c_int};

use tvm_ffi::boundary::{ffi_boundary, ffi_status};
use tvm_ffi::error::ErrorObj;
use tvm_ffi::object::{alloc_object, dec_ref, inc_ref};
use tvm_ffi_sys::{
    TVMFFIByteArray, TVMFFIErrorCell, TVMFFIObject, TVMFFIObjectHandle,
    kTVMFFIBacktraceUpdateModeAppend, kTVMFFIError,
};

use crate::{backtrace::format_backtrace, bytes_arg};

/// An error object made by this runtime: the shared view followed by the storage it points at.
#[repr(C)]
struct ErrorStorage {
    view: ErrorObj,
    kind: Vec<u8>,
    message: Vec<u8>,
    backtrace: UnsafeCell<Vec<u8>>,
}

/// Copies `bytes` into a NUL-terminated buffer.
fn nul_terminated(bytes: &[u8]) -> Vec<u8> {
    let mut buf = Vec::with_capacity(bytes.len() + 1);
    buf.extend_from_slice(bytes);
    buf.push(0);
    buf
}

fn array_of(buf: &[u8]) -> TVMFFIByteArray {
    TVMFFIByteArray {
        data: buf.as_ptr().cast(),
        size: buf.len() - 1,
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
            let buf = &mut *storage.backtrace.get();
            let mut next = if mode == kTVMFFIBacktraceUpdateModeAppend {
                buf[..buf.len() - 1].to_vec()
            } else {
                Vec::new()
            };
            next.extend_from_slice(bytes);
            *buf = nul_terminated(&next);
            (*storage.view.cell_ptr()).backtrace = array_of(buf);
        }
    });
}

/// Creates an owned error object; `cause` and `extra` are borrowed and retained.
fn create_error(
    kind: &[u8],
    message: &[u8],
    backtrace: &[u8],
    cause: TVMFFIObjectHandle,
    extra: TVMFFIObjectHandle,
) -> *mut TVMFFIObject {
    for handle in [cause, extra] {
        if !handle.is_null() {
            // SAFETY: the caller lends live objects; the cell keeps its own references.
            unsafe { inc_ref(handle.cast()) };
        }
    }
    let storage = ErrorStorage {
        view: ErrorObj::new(TVMFFIErrorCell {
            kind: TVMFFIByteArray::EMPTY,
            message: TVMFFIByteArray::EMPTY,
            backtrace: TVMFFIByteArray::EMPTY,
            update_backtrace: Some(update_backtrace),
            cause_chain: cause,
            extra_context: extra,
        }),
        kind: nul_terminated(kind),
        message: nul_terminated(message),
        backtrace: UnsafeCell::new(nul_terminated(backtrace)),
    };
    // SAFETY: repr(C) with the header first; Drop releases the retained handles.
    let ptr = unsafe { alloc_object(storage, 0, kTVMFFIError) };
    // SAFETY: the object is new and not shared yet; the buffers live inside it.
    unsafe {
        let storage = &mut *ptr.as_ptr();
        let cell = storage.view.cell_mut();
        cell.kind = array_of(&storage.kind);
        cell.message = array_of(&storage.message);
        cell.backtrace = array_of(&*storage.backtrace.get());
    }
    ptr.as_ptr().cast()
}

struct RaisedSlot(Cell<*mut TVMFFIObject>);

impl Drop for RaisedSlot {
    fn drop(&mut self) {
        let obj = self.0.replace(std::ptr::null_mut());
        if !obj.is_null() {
            // SAFETY: the slot owns one reference.
            unsafe { dec_ref(obj) };
        }
    }
}

thread_local! {
    static RAISED: RaisedSlot = const { RaisedSlot(Cell::new(std::ptr::null_mut())) };
}

/// Stores an owned error reference in the calling thread's slot, releasing the previous one.
fn store_raised(obj: *mut TVMFFIObject) {
    let previous = RAISED.try_with(|slot| slot.0.replace(obj)).unwrap_or(obj);
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
            let out = crate::out_arg(out, "out")?;
            let kind = bytes_arg(kind, "kind")?;
            let message = bytes_arg(message, "message")?;
            let backtrace = if backtrace.is_null() {
                &[][..]
            } else {
                bytes_arg(backtrace, "bt")?
            };
            let obj = create_error(kind, message, backtrace, cause_chain, extra_context);
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
        let obj = RAISED
            .try_with(|slot| slot.0.replace(std::ptr::null_mut()))
            .unwrap_or_default();
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
        // SAFETY: the caller lends a live object.
        unsafe { inc_ref(error.cast()) };
        store_raised(error.cast());
    })
}

/// Builds an error of `kind` from message parts and raises it, capturing the backtrace here.
fn raise_parts(kind: &[u8], parts: &[&[u8]]) {
    let message = parts.concat();
    let backtrace = format_backtrace(None, 0, None, false);
    let obj = create_error(
        kind,
        &message,
        backtrace.as_bytes(),
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
                *buf = nul_terminated(text.as_bytes());
                *array = array_of(buf);
                array as *const TVMFFIByteArray
            })
            .unwrap_or(std::ptr::null())
    })
}
