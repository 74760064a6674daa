//! Capture of the current call stack, and its text as a TVM FFI backtrace.
//!
//! The two halves are separate because they cost very different amounts. [`capture_frames`]
//! records the return addresses of the calling thread's frames and nothing else (about 100
//! instructions for a short stack, with the walker of [`crate::unwind`]): no symbol lookup, no
//! debug information loaded, no text. [`symbolize`] turns such addresses into the text, loading
//! the debug information of the binaries the first time (tens of MiB for a large binary) and
//! looking up and classifying each return address once (a cache of [`SYMBOL_CACHE_LIMIT`]).
//! An error raised by this runtime keeps the addresses and symbolizes them only when somebody
//! reads its backtrace (see `error.rs`); [`format_backtrace`] does both at once for the callers
//! that want text now (`TVMFFIBacktrace`).
//!
//! The text is a sequence of `  File "<file>", line <n>, in <func>\n` lines, most recent call
//! first; consumers reverse it for display. Frames of the capture machinery, of the Rust runtime
//! and of the error-setting entry points are dropped, and the text stops at the FFI boundary.

use std::cell::Cell;
use std::collections::HashMap;
use std::ffi::c_void;
use std::fmt::Write as _;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock, RwLock};

use crate::unwind::Walk;

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
        // The wrapper the header's export macros generate for a kernel (`__tvm_ffi_<name>`).
        "__tvm_ffi_",
        "TVMFFIBacktrace",
        "TVMFFIErrorSetRaisedFromCStr",
        "tvm_ffi::function::rust_safe_call",
        "tvm_ffi::boundary::",
        "TVMFFIFunctionCall::{{closure}}",
    ],
    crates: &["backtrace"],
    file_fragments: &[
        // Inlined C++: the header layer's and the C++ standard library's headers.
        "/include/tvm/ffi/",
        "/include/c++/",
        "/tvm-ffi/src/function.rs",
        "/tvm-ffi/src/error.rs",
        "/tvm-ffi/src/boundary.rs",
    ],
    boundaries: &["TVMFFIFunctionCall"],
};

/// Filters registered by the layers above the core.
static FILTERS: RwLock<Vec<FrameFilter>> = RwLock::new(Vec::new());

/// Bumped by every registration: classifications made under older filters are stale.
static FILTER_GENERATION: AtomicU64 = AtomicU64::new(0);

/// Adds a layer's frame filter to every backtrace made into text from now on.
pub fn register_frame_filter(filter: FrameFilter) {
    FILTERS
        .write()
        .unwrap_or_else(|e| e.into_inner())
        .push(filter);
    FILTER_GENERATION.fetch_add(1, Ordering::AcqRel);
}

/// Registers a frame filter given as lists of text, for layers in other libraries that reach the
/// core through the global function `ffi.Backtrace.RegisterFrameFilter` (the Python glue, a
/// language binding). The lists are, in order, those of [`FrameFilter`]'s fields. The text is
/// kept for the rest of the process, as a filter cannot be removed; a layer registers once.
pub fn register_frame_filter_text(lists: [Vec<String>; 5]) {
    fn keep(list: Vec<String>) -> &'static [&'static str] {
        let texts: Vec<&'static str> = list
            .into_iter()
            .map(|text| &*Box::leak(text.into_boxed_str()))
            .collect();
        Box::leak(texts.into_boxed_slice())
    }
    let [
        symbol_prefixes,
        symbol_fragments,
        crates,
        file_fragments,
        boundaries,
    ] = lists;
    register_frame_filter(FrameFilter {
        symbol_prefixes: keep(symbol_prefixes),
        symbol_fragments: keep(symbol_fragments),
        crates: keep(crates),
        file_fragments: keep(file_fragments),
        boundaries: keep(boundaries),
    });
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

/// The crates of this runtime: their frames are hidden from users' tracebacks unless
/// `TVM_TRACEBACK_INTERNAL=1` (tests inside them stay visible).
const RUNTIME_CRATE_PATHS: [&str; 8] = [
    "tvm_ffi::",
    "tvm_ffi_capi::",
    "tvm_runtime::",
    "tvm_rpc::",
    "device_vulkan::",
    "device_webgpu::",
    "device_cuda::",
    "device_rocm::",
];

/// The source directories of those crates, for inlined frames known only by their file.
const RUNTIME_CRATE_DIRS: [&str; 8] = [
    "/tvm-ffi/src/",
    "/tvm-ffi-capi/src/",
    "/tvm-runtime/src/",
    "/tvm-rpc/src/",
    "/device-vulkan/src/",
    "/device-webgpu/src/",
    "/device-cuda/src/",
    "/device-rocm/src/",
];

/// Whether tracebacks show the runtime's own frames (`TVM_TRACEBACK_INTERNAL=1`, read once).
fn show_internal_frames() -> bool {
    static SHOW: OnceLock<bool> = OnceLock::new();
    *SHOW.get_or_init(|| {
        std::env::var("TVM_TRACEBACK_INTERNAL").is_ok_and(|v| !matches!(v.trim(), "" | "0"))
    })
}

/// Whether a frame belongs to this runtime's crates (and is not a test inside them).
fn is_runtime_frame(symbol: &str, file: Option<&str>) -> bool {
    if show_internal_frames() || symbol.contains("tests::") {
        return false;
    }
    let path = symbol.strip_prefix('<').unwrap_or(symbol);
    RUNTIME_CRATE_PATHS.iter().any(|p| path.starts_with(p))
        || file.is_some_and(|file| {
            let file = file.replace('\\', "/");
            RUNTIME_CRATE_DIRS.iter().any(|dir| file.contains(dir))
        })
}

/// The workspace this runtime was built from (its sources' paths start with it).
fn build_root() -> &'static str {
    static ROOT: OnceLock<String> = OnceLock::new();
    ROOT.get_or_init(|| {
        let manifest = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
        let root = manifest
            .parent()
            .and_then(|p| p.parent())
            .unwrap_or(manifest);
        format!("{}/", root.display())
    })
}

/// A source path as users should read it: without the directories of the machine that built
/// the runtime (its workspace, Cargo's registry, the Rust toolchain's sources). Other paths (a
/// user's kernel) are kept whole.
fn display_path(file: &str) -> &str {
    if let Some(rest) = file.strip_prefix(build_root()) {
        return rest;
    }
    if let Some((_, rest)) = file.split_once("/registry/src/") {
        // `<index>-<hash>/<crate>-<version>/src/...`
        return rest.split_once('/').map_or(rest, |(_, krate)| krate);
    }
    if let Some(rest) = file.strip_prefix("/rustc/") {
        return rest.split_once('/').map_or(rest, |(_, path)| path);
    }
    file
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

/// Whether a frame with this (demangled) symbol belongs to the runtime or error machinery, or
/// to the C++ header layer and the C++ library under a kernel.
fn is_internal(symbol: &str) -> bool {
    let path = symbol.strip_prefix('<').unwrap_or(symbol);
    let scope = cxx_function_name(symbol);
    CXX_HIDDEN_SCOPES.iter().any(|s| scope.starts_with(s))
        || any_filter(|f| {
            f.symbol_prefixes.iter().any(|p| path.starts_with(p))
                || f.symbol_fragments.iter().any(|p| symbol.contains(p))
        })
}

/// Scopes of C++ functions hidden from users' tracebacks: the inline functions of the header
/// layer (`tvm/ffi/*.h`, compiled into each kernel library: the exported call's wrappers, the
/// error builder) and the C++ standard library.
const CXX_HIDDEN_SCOPES: [&str; 4] = ["tvm::ffi::", "std::", "__gnu_cxx::", "__cxxabiv1::"];

/// The qualified name of a demangled C++ function, without its return type, template arguments
/// and parameters (`int tvm::ffi::details::RunSafeCall<...>(...)` gives
/// `tvm::ffi::details::RunSafeCall`); other symbols give a prefix of themselves.
fn cxx_function_name(symbol: &str) -> &str {
    const ANONYMOUS: &str = "(anonymous namespace)";
    let mut end = symbol.len();
    let mut i = 0;
    while i < symbol.len() {
        if symbol[i..].starts_with(ANONYMOUS) {
            i += ANONYMOUS.len();
            continue;
        }
        match symbol.as_bytes()[i] {
            // `decltype(auto) f(...)`: the parentheses are the return type's.
            b'(' if symbol[..i].ends_with("decltype") => {
                let mut depth = 0usize;
                for (offset, byte) in symbol.as_bytes()[i..].iter().enumerate() {
                    match byte {
                        b'(' => depth += 1,
                        b')' => depth -= 1,
                        _ => {}
                    }
                    if depth == 0 {
                        i += offset;
                        break;
                    }
                }
            }
            b'(' | b'<' => {
                end = i;
                break;
            }
            _ => {}
        }
        i += 1;
    }
    let head = &symbol[..end];
    // The name starts after the return type's last space (not one of an anonymous namespace).
    let inside_anonymous = |at: usize| {
        head.match_indices(ANONYMOUS)
            .any(|(start, _)| (start..start + ANONYMOUS.len()).contains(&at))
    };
    match head
        .rmatch_indices(' ')
        .find(|(at, _)| !inside_anonymous(*at))
    {
        Some((at, _)) => &head[at + 1..],
        None => head,
    }
}

/// Whether a frame is capture or raising code of this crate (other than its tests): this
/// module, and the raising code of `error.rs` that calls [`capture_frames`].
///
/// Builds with line tables only name this crate's functions by their short names (inlined or
/// not), so those are matched with the file, by name: a test helper in either file stays.
fn is_capture_frame(symbol: &str, file: Option<&str>) -> bool {
    if let Some(rest) = symbol.strip_prefix(THIS_MODULE) {
        return !rest.starts_with("tests::");
    }
    if symbol.starts_with("tvm_ffi_capi::error::raise_parts") {
        return true;
    }
    let Some(file) = file else {
        return false;
    };
    let file = file.replace('\\', "/");
    let named = |names: &[&str]| names.iter().any(|name| symbol.starts_with(name));
    (file.ends_with("/tvm-ffi-capi/src/error.rs") && named(&["raise_parts", "{closure#"]))
        || (file.ends_with("backtrace.rs") && named(&["format_backtrace", "capture_frames"]))
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

/// The return addresses of a captured stack, most recent call first, not yet symbolized.
pub(crate) type Frames = Vec<usize>;

/// How many frames [`capture_frames`] keeps at most for a text of `limit` lines: the text drops hidden
/// frames, which capture cannot tell apart without symbolizing, so it keeps twice the limit and
/// some more; a deeper stack loses its outermost frames.
fn frame_cap(limit: usize) -> usize {
    if limit == 0 {
        0
    } else {
        limit.saturating_mul(2).saturating_add(32)
    }
}

/// Where the frames of the FFI boundary function `TVMFFIFunctionCall` begin.
fn ffi_call_entry() -> usize {
    crate::function::TVMFFIFunctionCall as *const () as usize
}

/// Records the return addresses of the calling thread's stack, most recent call first: at most
/// [`frame_cap`] of the traceback limit, and (unless `cross_ffi_boundary`) none past the frame of
/// `TVMFFIFunctionCall`, where a foreign caller begins. Looks up no symbol.
///
/// The fast walker of [`crate::unwind`] does the walk where it can; where it cannot, the system
/// unwinder walks the stack again from the start. Frames of this function and of what it calls
/// (the walkers) are never recorded.
#[inline(never)]
pub(crate) fn capture_frames(cross_ffi_boundary: bool) -> Frames {
    let cap = frame_cap(traceback_limit());
    let mut frames = Frames::new();
    if cap == 0 {
        return frames;
    }
    frames.reserve(cap.min(64));
    let stop_at = (!cross_ffi_boundary).then(ffi_call_entry);
    // The stack grows down: frames whose stack pointer is at or below this local belong to this
    // function or to what it calls (the walkers), whatever their symbols say.
    let marker = 0u8;
    let marker_address = std::hint::black_box(&marker) as *const u8 as usize;
    let keep = |frames: &mut Frames, ip: usize, sp: usize, function: usize| {
        if sp != 0 && sp <= marker_address {
            return true;
        }
        frames.push(ip);
        stop_at != Some(function) && frames.len() < cap
    };
    let walked = crate::unwind::walk(&mut |ip, sp, function| keep(&mut frames, ip, sp, function));
    if walked == Walk::Unsupported {
        frames.clear();
        system_walk(&mut |ip, sp, function| keep(&mut frames, ip, sp, function));
    }
    frames
}

/// Walks the stack with the system unwinder (through the `backtrace` crate), calling `visit`
/// as [`crate::unwind::walk`] does.
#[inline(never)]
fn system_walk(visit: &mut dyn FnMut(usize, usize, usize) -> bool) {
    backtrace::trace(|frame| {
        visit(
            frame.ip() as usize,
            frame.sp() as usize,
            frame.symbol_address() as usize,
        )
    });
}

thread_local! {
    /// How many times [`symbolize`] ran on this thread (for the tests: raising must not).
    static SYMBOLIZED: Cell<u64> = const { Cell::new(0) };
}

/// How many times this thread has symbolized a captured stack.
#[cfg(test)]
pub(crate) fn symbolizations_on_this_thread() -> u64 {
    SYMBOLIZED.with(Cell::get)
}

/// The backtrace text of captured `frames`, at most `TVM_TRACEBACK_LIMIT` lines (default 512).
///
/// When `file` or `func` is given, `  File "<file>", line <line>, in <func>` is the first line;
/// when both are, that line stands for the caller of the capture, whose frame (the first one
/// with a visible symbol, inlined calls included) is then left out, as apache-tvm-ffi
/// leaves it out. The text stops before the first FFI boundary frame (`TVMFFIFunctionCall`, or one a
/// registered [`FrameFilter`] names) unless `cross_ffi_boundary`.
pub(crate) fn symbolize(
    frames: &[usize],
    location: Option<(Option<&str>, i32, Option<&str>)>,
    cross_ffi_boundary: bool,
) -> String {
    symbolize_limited(frames, location, cross_ffi_boundary, traceback_limit())
}

/// [`symbolize`] with an explicit line limit.
fn symbolize_limited(
    frames: &[usize],
    location: Option<(Option<&str>, i32, Option<&str>)>,
    cross_ffi_boundary: bool,
    limit: usize,
) -> String {
    let _ = SYMBOLIZED.try_with(|count| count.set(count.get() + 1));
    let mut out = String::new();
    let mut count = 0usize;
    let mut skip_caller = matches!(location, Some((Some(_), _, Some(_))));
    if let Some((file, line, func)) = location
        && limit > 0
        && (file.is_some() || func.is_some())
    {
        push_line(
            &mut out,
            file.unwrap_or(UNKNOWN),
            line,
            func.unwrap_or(UNKNOWN),
        );
        count += 1;
    }
    let mut done = count >= limit;
    for &ip in frames {
        if done {
            break;
        }
        let symbols = symbols_of(ip);
        if skip_caller && symbols.iter().any(|symbol| symbol.line.is_some()) {
            skip_caller = false;
            continue;
        }
        for symbol in symbols.iter() {
            if !cross_ffi_boundary && symbol.boundary {
                done = true;
                break;
            }
            if let Some(line) = &symbol.line {
                out.push_str(line);
                count += 1;
                if count >= limit {
                    done = true;
                    break;
                }
            }
        }
    }
    out
}

/// One symbol of a frame (inlined calls make several, innermost first), classified.
struct FrameSymbol {
    /// Whether it is an FFI boundary, where the text stops unless it crosses them.
    boundary: bool,
    /// Its backtrace line (newline included), or `None` for a hidden frame.
    line: Option<Box<str>>,
}

/// How many return addresses [`SYMBOLS`] keeps at most; it starts over when full.
const SYMBOL_CACHE_LIMIT: usize = 4096;

/// The classified symbols of the return addresses symbolized so far, and what they depend on.
struct SymbolCache {
    /// [`FILTER_GENERATION`] and the loader's count of unloaded objects when they were made.
    generation: (u64, u64),
    symbols: HashMap<usize, Arc<[FrameSymbol]>>,
}

/// Errors raised again and again from the same places, as a loop in Python that catches them
/// does, symbolize the same few addresses: each is looked up and classified once.
static SYMBOLS: Mutex<Option<SymbolCache>> = Mutex::new(None);

/// The classified symbols of return address `ip`.
fn symbols_of(ip: usize) -> Arc<[FrameSymbol]> {
    let generation = (
        FILTER_GENERATION.load(Ordering::Acquire),
        crate::unwind::loader_unloads(),
    );
    let lock = || SYMBOLS.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(cache) = lock().as_ref()
        && cache.generation == generation
        && let Some(symbols) = cache.symbols.get(&ip)
    {
        return Arc::clone(symbols);
    }
    let mut symbols = Vec::new();
    // `resolve` looks up `ip - 1`, inside the call instruction that the return address follows.
    backtrace::resolve(ip as *mut c_void, |symbol| {
        let name = symbol.name().map(|name| match name.as_str() {
            // C++ (the `backtrace` crate demangles Rust only).
            Some(raw) if raw.starts_with("_Z") => {
                addr2line::demangle(raw, addr2line::gimli::DW_LANG_C_plus_plus)
                    .unwrap_or_else(|| raw.to_owned())
            }
            _ => format!("{name:#}"),
        });
        let file = symbol.filename().map(|path| path.display().to_string());
        if let Some(classified) = classify(name.as_deref(), file.as_deref(), symbol.lineno()) {
            symbols.push(classified);
        }
    });
    if symbols.is_empty() {
        // A library loaded after `backtrace` listed the loaded objects.
        for symbol in crate::late_symbols::resolve(ip) {
            if let Some(classified) =
                classify(symbol.name.as_deref(), symbol.file.as_deref(), symbol.line)
            {
                symbols.push(classified);
            }
        }
    }
    let symbols: Arc<[FrameSymbol]> = symbols.into();
    let mut cache = lock();
    let cache = cache.get_or_insert_with(|| SymbolCache {
        generation,
        symbols: HashMap::new(),
    });
    if cache.generation != generation || cache.symbols.len() >= SYMBOL_CACHE_LIMIT {
        cache.generation = generation;
        cache.symbols.clear();
    }
    cache.symbols.insert(ip, Arc::clone(&symbols));
    symbols
}

/// One symbol of a frame, classified: hidden frames get no line. `None` when nothing is known
/// of it (no name and no file).
fn classify(name: Option<&str>, file: Option<&str>, lineno: Option<u32>) -> Option<FrameSymbol> {
    if name.is_none() && file.is_none() {
        return None;
    }
    let name = name.unwrap_or(UNKNOWN);
    let hidden = is_internal(name)
        || is_capture_frame(name, file)
        || file.is_some_and(is_internal_file)
        || is_runtime_frame(name, file);
    let line = (!hidden).then(|| {
        let mut line = String::new();
        push_line(
            &mut line,
            file.map_or(UNKNOWN, display_path),
            lineno.unwrap_or(0),
            name,
        );
        line.into_boxed_str()
    });
    Some(FrameSymbol {
        boundary: is_ffi_boundary(name),
        line,
    })
}

/// Captures the current stack and returns its text at once (see [`symbolize`]).
pub(crate) fn format_backtrace(
    file: Option<&str>,
    line: i32,
    func: Option<&str>,
    cross_ffi_boundary: bool,
) -> String {
    let frames = capture_frames(cross_ffi_boundary);
    symbolize(&frames, Some((file, line, func)), cross_ffi_boundary)
}

/// [`format_backtrace`] with an explicit line limit.
#[cfg(test)]
fn format_backtrace_limited(
    file: Option<&str>,
    line: i32,
    func: Option<&str>,
    cross_ffi_boundary: bool,
    limit: usize,
) -> String {
    let frames = capture_frames(cross_ffi_boundary);
    symbolize_limited(&frames, Some((file, line, func)), cross_ffi_boundary, limit)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cxx_function_names_drop_return_types_templates_and_parameters() {
        for (symbol, name) in [
            (
                "int tvm::ffi::details::RunSafeCall<int f()::{lambda()#1}>(int f()::{lambda()#1}&&)",
                "tvm::ffi::details::RunSafeCall",
            ),
            (
                "tvm::ffi::Any tvm::ffi::details::TypedSignature<int, int>::Call<int (*)(int)>(int)",
                "tvm::ffi::details::TypedSignature",
            ),
            (
                "decltype(auto) std::apply<int (* const&)(int), std::tuple<int> >(int)",
                "std::apply",
            ),
            (
                "(anonymous namespace)::add_one(int)",
                "(anonymous namespace)::add_one",
            ),
            ("add_one", "add_one"),
            ("<T as core::fmt::Debug>::fmt", ""),
        ] {
            assert_eq!(cxx_function_name(symbol), name, "{symbol}");
        }
        assert!(is_internal("decltype(auto) std::__invoke<int>(int)"));
        assert!(is_internal("__tvm_ffi_add_one"));
        assert!(!is_internal("(anonymous namespace)::add_one(int)"));
    }

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

    /// Frames as a walker reports them: (ip, sp, function).
    type Walked = Vec<(usize, usize, usize)>;

    /// The frames above `helper`'s own, as each walker reports them: (ip, sp, function).
    #[inline(never)]
    fn walk_both_from_named_helper() -> (Walk, Walked, Walked) {
        let marker = 0u8;
        let marker_address = std::hint::black_box(&marker) as *const u8 as usize;
        let (mut fast, mut system) = (Vec::new(), Vec::new());
        let walked = crate::unwind::walk(&mut |ip, sp, function| {
            if sp > marker_address {
                fast.push((ip, sp, function));
            }
            true
        });
        system_walk(&mut |ip, sp, function| {
            if sp > marker_address && ip != 0 {
                system.push((ip, sp, function));
            }
            true
        });
        std::hint::black_box((walked, fast, system))
    }

    #[test]
    fn the_fast_walker_finds_the_frames_of_the_system_unwinder() {
        let (walked, fast, system) = walk_both_from_named_helper();
        assert!(system.len() >= 2, "{system:x?}");
        if cfg!(all(target_os = "linux", target_arch = "x86_64")) {
            assert_eq!(
                walked,
                Walk::Done,
                "the fast walker handles a test thread's stack"
            );
            assert_eq!(fast, system);
        } else {
            assert_eq!(walked, Walk::Unsupported);
        }
        // The same on a thread of our own, whose stack ends elsewhere.
        let on_thread = std::thread::spawn(walk_both_from_named_helper)
            .join()
            .unwrap();
        if cfg!(all(target_os = "linux", target_arch = "x86_64")) {
            assert_eq!(on_thread.0, Walk::Done);
            assert_eq!(on_thread.1, on_thread.2);
        }
    }

    #[test]
    fn capture_records_addresses_and_symbolizes_nothing() {
        let before = symbolizations_on_this_thread();
        let frames = capture_frames(false);
        assert!(!frames.is_empty());
        assert!(frames.len() <= frame_cap(traceback_limit()));
        assert_eq!(symbolizations_on_this_thread(), before);
        assert!(
            symbolize(&frames, None, false)
                .contains("capture_records_addresses_and_symbolizes_nothing")
        );
        assert_eq!(symbolizations_on_this_thread(), before + 1);
        assert_eq!(frame_cap(0), 0);
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

    #[inline(never)]
    fn located_throw_site() -> String {
        let text = format_backtrace(Some("src/kernel.cc"), 42, Some("MyKernel"), false);
        std::hint::black_box(text)
    }

    #[inline(never)]
    fn unlocated_throw_site() -> String {
        let text = format_backtrace(None, 42, Some("MyKernel"), false);
        std::hint::black_box(text)
    }

    #[test]
    fn the_located_caller_is_not_repeated() {
        // The location line stands for the caller of TVMFFIBacktrace: its frame is left out,
        // the frames above it stay.
        let text = located_throw_site();
        assert!(
            text.starts_with("  File \"src/kernel.cc\", line 42"),
            "{text}"
        );
        assert!(!text.contains("located_throw_site"), "{text}");
        assert!(
            text.contains("the_located_caller_is_not_repeated"),
            "{text}"
        );
        // Without a file, the location is partial and every frame stays.
        let text = unlocated_throw_site();
        assert!(text.contains("unlocated_throw_site"), "{text}");
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
            "tvm_ffi_capi::backtrace::capture_frames",
            "capture_frames",
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
        let error_file = Some("/work/crates/tvm-ffi-capi/src/error.rs");
        for raising in [
            "raise_parts",
            "{closure#0}",
            "tvm_ffi_capi::error::raise_parts",
        ] {
            assert!(is_capture_frame(raising, error_file), "{raising}");
        }
        for kept in [
            "tvm_ffi_capi::error::tests::raise_from_named_helper",
            "raise_from_named_helper",
            "raising_does_not_symbolize_until_the_backtrace_is_read",
        ] {
            assert!(!is_capture_frame(kept, error_file), "{kept}");
        }
        assert!(!is_capture_frame("raise_parts", None));
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
