//! Symbols of libraries loaded after the `backtrace` crate first symbolized an address. That
//! crate lists the process's loaded objects once, when it first symbolizes, and never again: a
//! kernel library loaded later (a C++ kernel built and loaded after the process's first error)
//! is unknown to it, and its frames would vanish from tracebacks. Such an address is found with
//! `dladdr`, and its functions, files and lines are read from the library's own file: its DWARF
//! line tables with `addr2line`, else its symbol table. (Compressed debug sections are not read:
//! such a library's frames get their names only.)

use std::borrow::Cow;
use std::cell::RefCell;
use std::collections::HashMap;
use std::ffi::{CStr, c_void};
use std::rc::Rc;

use addr2line::gimli::{self, EndianRcSlice, RunTimeEndian};
use object::{Object, ObjectSection, ObjectSymbol, SymbolKind};

/// One function of a frame (inlined calls make several, innermost first).
pub(crate) struct LateSymbol {
    /// The demangled function name, when known.
    pub(crate) name: Option<String>,
    /// The source file, when the library has line tables.
    pub(crate) file: Option<String>,
    /// The source line.
    pub(crate) line: Option<u32>,
}

type Reader = EndianRcSlice<RunTimeEndian>;

/// What one library's file tells about its addresses.
struct LibrarySymbols {
    /// Its DWARF, when it has any.
    context: Option<addr2line::Context<Reader>>,
    /// Its function symbols: start, size and name, sorted by start.
    functions: Vec<(u64, u64, String)>,
}

impl LibrarySymbols {
    fn load(path: &str) -> Option<LibrarySymbols> {
        // Reading and parsing take about twice the file's size: a process short of memory (the
        // error being reported may be a MemoryError) skips this rather than abort on it.
        let len = usize::try_from(std::fs::metadata(path).ok()?.len()).ok()?;
        let mut room: Vec<u8> = Vec::new();
        room.try_reserve_exact(len.checked_mul(2)?).ok()?;
        drop(room);
        let data = std::fs::read(path).ok()?;
        let file = object::File::parse(&*data).ok()?;
        let endian = if file.is_little_endian() {
            RunTimeEndian::Little
        } else {
            RunTimeEndian::Big
        };
        let section = |id: gimli::SectionId| -> Result<Reader, gimli::Error> {
            let bytes = file
                .section_by_name(id.name())
                .and_then(|s| s.data().ok())
                .unwrap_or(&[]);
            Ok(EndianRcSlice::new(Rc::from(bytes), endian))
        };
        let context = gimli::Dwarf::load(section)
            .ok()
            .and_then(|dwarf| addr2line::Context::from_dwarf(dwarf).ok());
        let mut functions: Vec<(u64, u64, String)> = file
            .symbols()
            .chain(file.dynamic_symbols())
            .filter(|s| s.kind() == SymbolKind::Text && s.address() != 0)
            .filter_map(|s| Some((s.address(), s.size(), s.name().ok()?.to_owned())))
            .collect();
        functions.sort_by_key(|f| f.0);
        Some(LibrarySymbols { context, functions })
    }

    /// The symbol table's function containing `probe`, demangled.
    fn function_at(&self, probe: u64) -> Option<String> {
        let index = self
            .functions
            .partition_point(|f| f.0 <= probe)
            .checked_sub(1)?;
        let (start, size, name) = &self.functions[index];
        (size == &0 || probe < start + size)
            .then(|| addr2line::demangle_auto(Cow::from(name.as_str()), None).into_owned())
    }
}

/// How many libraries a thread keeps read (each holds its file's debug sections).
const LIBRARY_LIMIT: usize = 16;

/// Libraries by path and load address; `None` for a file that could not be read.
type LibraryCache = HashMap<(String, usize), Option<Rc<LibrarySymbols>>>;

thread_local! {
    static LIBRARIES: RefCell<LibraryCache> = RefCell::new(HashMap::new());
}

/// The library containing `address` and the address it is loaded at.
fn containing_library(address: usize) -> Option<(String, usize)> {
    // SAFETY: an all-zero Dl_info is valid (null pointers); dladdr fills it.
    let mut info: libc::Dl_info = unsafe { std::mem::zeroed() };
    // SAFETY: dladdr accepts any address and returns 0 when no loaded object contains it.
    let found = unsafe { libc::dladdr(address as *const c_void, &mut info) };
    if found == 0 || info.dli_fname.is_null() {
        return None;
    }
    // SAFETY: a NUL-terminated path owned by the loader (checked non-null above), copied at once.
    let path = unsafe { CStr::from_ptr(info.dli_fname) }
        .to_string_lossy()
        .into_owned();
    Some((path, info.dli_fbase as usize))
}

/// The symbols of return address `ip` (looked up at `ip - 1`, inside its call instruction),
/// innermost first; empty when no loaded object contains it or its file cannot be read.
pub(crate) fn resolve(ip: usize) -> Vec<LateSymbol> {
    let address = ip.wrapping_sub(1);
    let Some((path, base)) = containing_library(address) else {
        return Vec::new();
    };
    let library = LIBRARIES.with(|libraries| {
        let mut libraries = libraries.borrow_mut();
        if libraries.len() >= LIBRARY_LIMIT {
            libraries.clear();
        }
        libraries
            .entry((path.clone(), base))
            .or_insert_with(|| LibrarySymbols::load(&path).map(Rc::new))
            .clone()
    });
    let Some(library) = library else {
        return Vec::new();
    };
    // A shared object's addresses are stated from 0: the offset from its load address.
    let probe = (address - base) as u64;
    let mut symbols = Vec::new();
    if let Some(context) = &library.context
        && let Ok(mut frames) = context.find_frames(probe).skip_all_loads()
    {
        while let Ok(Some(frame)) = frames.next() {
            let name = frame
                .function
                .as_ref()
                .and_then(|f| f.demangle().ok())
                .map(Cow::into_owned);
            let (file, line) = frame
                .location
                .map(|l| (l.file.map(str::to_owned), l.line))
                .unwrap_or_default();
            symbols.push(LateSymbol { name, file, line });
        }
    }
    if symbols.iter().all(|s| s.name.is_none())
        && let Some(name) = library.function_at(probe)
    {
        match symbols.first_mut() {
            Some(first) => first.name = Some(name),
            None => symbols.push(LateSymbol {
                name: Some(name),
                file: None,
                line: None,
            }),
        }
    }
    symbols
}

#[cfg(test)]
mod tests {
    use super::*;

    #[inline(never)]
    fn a_function_of_this_binary() -> usize {
        std::hint::black_box(7)
    }

    #[test]
    fn an_address_is_named_from_its_library_file() {
        // An address inside the function (as a return address is, past its call).
        let ip = a_function_of_this_binary as *const () as usize + 1;
        let symbols = resolve(ip + 1);
        let names: Vec<&str> = symbols.iter().filter_map(|s| s.name.as_deref()).collect();
        assert!(
            names
                .iter()
                .any(|n| n.contains("a_function_of_this_binary")),
            "{names:?}"
        );
        assert!(
            symbols.iter().any(|s| s
                .file
                .as_deref()
                .is_some_and(|f| f.ends_with("late_symbols.rs"))),
            "no line tables read"
        );
        // An address no object contains.
        assert!(resolve(16).is_empty());
    }
}
