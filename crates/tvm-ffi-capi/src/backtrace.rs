//! Capture of the current call stack as TVM FFI backtrace text.
//!
//! The text is a sequence of `  File "<file>", line <n>, in <func>\n` lines, most recent call
//! first; consumers reverse it for display. Frames of the capture machinery, of the Rust runtime
//! and of the error-setting entry points are dropped, and capture stops at the FFI boundary.

use std::fmt::Write as _;
use std::sync::{OnceLock, RwLock};

/// Depth limit used when `TVM_TRACEBACK_LIMIT` is unset or not a number.
const DEFAULT_LIMIT: usize = 512;

/// Placeholder for an unknown file or function name.
const UNKNOWN: &str = "<unknown>";

/// This module's path; its functions other than the tests are capture machinery.
const THIS_MODULE: &str = "tvm_ffi_capi::backtrace::";

/// Frames that a layer hides from backtraces, and the frames where its foreign callers begin.
///
/// The core knows its own plumbing (the Rust runtime, the `backtrace` crate, the safe-call and
/// error machinery of `tvm-ffi`); a layer above it (a language binding) registers its own with
/// [`register_frame_filter`], so that its wrappers stay out of users' tracebacks and capture
/// stops where its interpreter begins.
#[derive(Debug, Clone, Copy, Default)]
pub struct FrameFilter {
    /// Symbol prefixes of hidden frames (a leading `<` of the symbol is ignored).
    pub symbol_prefixes: &'static [&'static str],
    /// Fragments anywhere in the symbol of hidden frames.
    pub symbol_fragments: &'static [&'static str],
    /// Crates whose sources (`<name>/src/` or `<name>-<version>/src/`) hold hidden frames.
    pub crates: &'static [&'static str],
    /// Fragments of the source paths of hidden frames (for inlined frames, known only by file).
    pub file_fragments: &'static [&'static str],
    /// Exact symbols or symbol prefixes (ending in `*`) of the frames where the foreign caller
    /// begins: capture stops there.
    pub boundaries: &'static [&'static str],
}

/// The core's own plumbing.
const CORE_FILTER: FrameFilter = FrameFilter {
    symbol_prefixes: &[
        "std::",
        "core::",
        "alloc::",
        "backtrace::",
        "rust_begin_unwind",
        "__rust_",
        "__rustc::",
    ],
    symbol_fragments: &[
        "TVMFFIBacktrace",
        "TVMFFIErrorSetRaisedFromCStr",
        "tvm_ffi::function::rust_safe_call",
        "tvm_ffi::boundary::",
        "TVMFFIFunctionCall::{{closure}}",
    ],
    crates: &["backtrace"],
    file_fragments: &[
        "/tvm-ffi/src/function.rs",
        "/tvm-ffi/src/error.rs",
        "/tvm-ffi/src/boundary.rs",
    ],
    boundaries: &["TVMFFIFunctionCall"],
};

/// Filters registered by the layers above the core.
static FILTERS: RwLock<Vec<FrameFilter>> = RwLock::new(Vec::new());

/// Adds a layer's frame filter to every backtrace captured from now on.
pub fn register_frame_filter(filter: FrameFilter) {
    FILTERS
        .write()
        .unwrap_or_else(|e| e.into_inner())
        .push(filter);
}

/// Whether any filter (the core's or a registered one) satisfies `test`.
fn any_filter(test: impl Fn(&FrameFilter) -> bool) -> bool {
    test(&CORE_FILTER)
        || FILTERS
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
            .any(test)
}

/// Rust standard library crates whose source files mark internal (possibly inlined) frames.
const RUNTIME_CRATES: [&str; 5] = ["std", "core", "alloc", "panic_unwind", "panic_abort"];

/// The maximum number of lines, from `TVM_TRACEBACK_LIMIT` (read once), default 512.
fn traceback_limit() -> usize {
    static LIMIT: OnceLock<usize> = OnceLock::new();
    *LIMIT.get_or_init(|| {
        std::env::var("TVM_TRACEBACK_LIMIT")
            .ok()
            .and_then(|value| value.trim().parse().ok())
            .unwrap_or(DEFAULT_LIMIT)
    })
}

/// Whether a frame with this (demangled) symbol is the boundary where the foreign caller begins.
fn is_ffi_boundary(symbol: &str) -> bool {
    any_filter(|f| {
        f.boundaries.iter().any(|b| match b.strip_suffix('*') {
            Some(prefix) => symbol.starts_with(prefix),
            None => symbol == *b,
        })
    })
}

/// Whether a frame with this (demangled) symbol belongs to the runtime or error machinery.
fn is_internal(symbol: &str) -> bool {
    let path = symbol.strip_prefix('<').unwrap_or(symbol);
    any_filter(|f| {
        f.symbol_prefixes.iter().any(|p| path.starts_with(p))
            || f.symbol_fragments.iter().any(|p| symbol.contains(p))
    })
}

/// Whether a frame is this module's capture code (other than its tests).
///
/// Inlined frames carry only the short function name, so those are matched with the file.
fn is_capture_frame(symbol: &str, file: Option<&str>) -> bool {
    match symbol.strip_prefix(THIS_MODULE) {
        Some(rest) => !rest.starts_with("tests::"),
        None => {
            symbol.starts_with("format_backtrace")
                && file.is_some_and(|file| file.ends_with("backtrace.rs"))
        }
    }
}

/// Whether a frame's source file is in the Rust standard library or in the plumbing of a filter.
///
/// Inlined frames carry only a short function name, so their file is what identifies them.
fn is_internal_file(file: &str) -> bool {
    let normalized = file.replace('\\', "/");
    let parts: Vec<&str> = normalized.split('/').collect();
    let in_std = parts
        .windows(3)
        .any(|w| w[0] == "library" && RUNTIME_CRATES.contains(&w[1]) && w[2] == "src");
    let in_crate = |name: &str| {
        parts.windows(2).any(|w| {
            let versioned = w[0]
                .strip_prefix(name)
                .and_then(|rest| rest.strip_prefix('-'))
                .is_some_and(|version| version.starts_with(|c: char| c.is_ascii_digit()));
            (w[0] == name || versioned) && w[1] == "src"
        })
    };
    in_std
        || any_filter(|f| {
            f.crates.iter().any(|name| in_crate(name))
                || f.file_fragments.iter().any(|p| normalized.contains(p))
        })
}

/// Appends one backtrace line.
fn push_line(out: &mut String, file: &str, line: impl std::fmt::Display, func: &str) {
    let _ = writeln!(out, "  File \"{file}\", line {line}, in {func}");
}

/// Captures the current stack as backtrace text, most recent call first.
///
/// When `file` or `func` is given, `  File "<file>", line <line>, in <func>` is the first line.
/// Capture stops before the first FFI boundary frame (`TVMFFIFunctionCall`, or one a registered
/// [`FrameFilter`] names) unless `cross_ffi_boundary`. At most `TVM_TRACEBACK_LIMIT`
/// lines (default 512) are produced.
pub(crate) fn format_backtrace(
    file: Option<&str>,
    line: i32,
    func: Option<&str>,
    cross_ffi_boundary: bool,
) -> String {
    format_backtrace_limited(file, line, func, cross_ffi_boundary, traceback_limit())
}

/// [`format_backtrace`] with an explicit line limit.
///
/// Never inlined: its stack frame separates the capture machinery (below it) from the callers.
#[inline(never)]
fn format_backtrace_limited(
    file: Option<&str>,
    line: i32,
    func: Option<&str>,
    cross_ffi_boundary: bool,
    limit: usize,
) -> String {
    let mut out = String::new();
    let mut count = 0usize;
    if limit > 0 && (file.is_some() || func.is_some()) {
        push_line(
            &mut out,
            file.unwrap_or(UNKNOWN),
            line,
            func.unwrap_or(UNKNOWN),
        );
        count += 1;
    }
    let mut done = count >= limit;
    // The stack grows down: frames whose stack pointer is at or below this local belong to this
    // function or to what it calls (the `backtrace` crate), whatever their symbols say.
    let marker = 0u8;
    let marker_address = std::hint::black_box(&marker) as *const u8 as usize;
    backtrace::trace(|frame| {
        let sp = frame.sp() as usize;
        if sp != 0 && sp <= marker_address {
            return true;
        }
        // Inlined calls resolve to several symbols for one frame, innermost first.
        backtrace::resolve_frame(frame, |symbol| {
            if done {
                return;
            }
            let name = symbol.name().map(|name| format!("{name:#}"));
            let file = symbol.filename().map(|path| path.display().to_string());
            if name.is_none() && file.is_none() {
                return;
            }
            let name = name.as_deref().unwrap_or(UNKNOWN);
            if !cross_ffi_boundary && is_ffi_boundary(name) {
                done = true;
                return;
            }
            let file = file.as_deref();
            if is_internal(name)
                || is_capture_frame(name, file)
                || file.is_some_and(is_internal_file)
            {
                return;
            }
            let file = file.unwrap_or(UNKNOWN);
            push_line(&mut out, file, symbol.lineno().unwrap_or(0), name);
            count += 1;
            done = count >= limit;
        });
        !done
    });
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[inline(never)]
    fn capture_from_named_helper() -> String {
        let text = format_backtrace(None, 0, None, false);
        // Keeps the call above from being a tail call, so this frame stays on the stack.
        std::hint::black_box(text)
    }

    #[test]
    fn records_the_calling_function_most_recent_first() {
        let text = capture_from_named_helper();
        let helper = text
            .find("capture_from_named_helper")
            .unwrap_or_else(|| panic!("{text}"));
        assert!(text.contains("backtrace.rs"), "{text}");
        let first = text.lines().next().unwrap_or_default();
        assert!(first.contains("capture_from_named_helper"), "{text}");
        if let Some(caller) = text.find("records_the_calling_function_most_recent_first") {
            assert!(helper < caller, "{text}");
        }
        for line in text.lines() {
            assert!(line.starts_with("  File \""), "{line}");
            assert!(
                line.contains("\", line ") && line.contains(", in "),
                "{line}"
            );
            assert!(!line.contains("format_backtrace"), "{line}");
            for internal in [
                "in std::",
                "in core::",
                "in backtrace::",
                "library/core/src/",
            ] {
                assert!(!line.contains(internal), "{line}");
            }
        }
        assert!(text.ends_with('\n'));
    }

    #[test]
    fn given_location_is_the_first_line() {
        let text = format_backtrace(Some("src/kernel.cc"), 42, Some("MyKernel"), false);
        let first = text.lines().next().unwrap();
        assert_eq!(first, "  File \"src/kernel.cc\", line 42, in MyKernel");
        let text = format_backtrace(None, 7, Some("OnlyFunc"), false);
        assert!(
            text.starts_with("  File \"<unknown>\", line 7, in OnlyFunc\n"),
            "{text}"
        );
    }

    #[test]
    fn limit_bounds_the_line_count() {
        assert_eq!(
            format_backtrace_limited(Some("a.cc"), 1, Some("f"), false, 0),
            ""
        );
        let one = format_backtrace_limited(Some("a.cc"), 1, Some("f"), false, 1);
        assert_eq!(one, "  File \"a.cc\", line 1, in f\n");
        let three = format_backtrace_limited(None, 0, None, true, 3);
        assert!(three.lines().count() <= 3, "{three}");
        assert!(traceback_limit() > 0);
    }

    #[test]
    fn frame_classification() {
        assert!(!is_ffi_boundary("PyObject_Call"));
        assert!(!is_internal("pyo3::impl_::trampoline"));
        assert!(!is_internal_file("/src/pyo3-0.30.1/src/err/mod.rs"));
        // A binding registers its own frames (as the Python glue does).
        register_frame_filter(FrameFilter {
            symbol_prefixes: &["pyo3::"],
            crates: &["pyo3"],
            boundaries: &["_Py*", "PyObject_*", "slot_tp_call"],
            ..FrameFilter::default()
        });
        assert!(is_internal("pyo3::impl_::trampoline"));
        assert!(is_internal_file("/src/pyo3-0.30.1/src/err/mod.rs"));
        for boundary in [
            "TVMFFIFunctionCall",
            "_PyEval_EvalFrameDefault",
            "_PyObject_MakeTpCall",
            "PyObject_Call",
            "PyObject_Vectorcall",
            "slot_tp_call",
        ] {
            assert!(is_ffi_boundary(boundary), "{boundary}");
        }
        for not_boundary in [
            "TVMFFIFunctionCallX",
            "my_PyObject_Call",
            "main",
            "PyList_New",
        ] {
            assert!(!is_ffi_boundary(not_boundary), "{not_boundary}");
        }
        for internal in [
            "std::panicking::begin_panic",
            "core::ops::function::FnOnce::call_once",
            "<alloc::boxed::Box<F,A> as core::ops::function::FnOnce<Args>>::call_once",
            "backtrace::backtrace::libunwind::trace",
            "rust_begin_unwind",
            "__rust_try",
            "__rustc::rust_begin_unwind",
            "TVMFFIBacktrace",
            "TVMFFIErrorSetRaisedFromCStr",
            "TVMFFIErrorSetRaisedFromCStrParts",
        ] {
            assert!(is_internal(internal), "{internal}");
        }
        for kept in [
            "tvm_ffi_capi::backtrace::tests::capture_from_named_helper",
            "tvm_ffi_capi::backtrace::format_backtrace",
            "tvm_ffi::function::Function::call",
            "<tvm_ffi::Foo as core::ops::drop::Drop>::drop",
            "my_kernel",
            "main",
        ] {
            assert!(!is_internal(kept), "{kept}");
        }
        let this_file = Some("/work/src/capi/backtrace.rs");
        for capture in [
            "tvm_ffi_capi::backtrace::format_backtrace",
            "tvm_ffi_capi::backtrace::format_backtrace_limited::{{closure}}",
            "format_backtrace",
            "format_backtrace_limited",
        ] {
            assert!(is_capture_frame(capture, this_file), "{capture}");
        }
        for kept in [
            "tvm_ffi_capi::backtrace::tests::capture_from_named_helper",
            "capture_from_named_helper",
            "tvm_ffi::error::format_backtrace",
        ] {
            assert!(!is_capture_frame(kept, this_file), "{kept}");
        }
        assert!(!is_capture_frame(
            "format_backtrace",
            Some("/work/src/other.rs")
        ));
        for internal_file in [
            "/rustc/0123abcd/library/core/src/ops/function.rs",
            "/rustc/0123abcd/library/std/src/panicking.rs",
            "C:\\rustc\\0123abcd\\library\\alloc\\src\\boxed.rs",
            "/root/.cargo/registry/src/index.crates.io-0000/backtrace-0.3.77/src/backtrace/mod.rs",
            "/build/vendor/backtrace/src/lib.rs",
        ] {
            assert!(is_internal_file(internal_file), "{internal_file}");
        }
        for kept_file in [
            "/rustc/0123abcd/library/test/src/lib.rs",
            "/work/src/capi/backtrace.rs",
            "/work/crates/backtrace-tools/src/lib.rs",
            "./nptl/pthread_create.c",
        ] {
            assert!(!is_internal_file(kept_file), "{kept_file}");
        }
    }
}
