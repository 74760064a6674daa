//! The data symbols a shared library exports: the loader uses them to find the `__TVM*` pointer
//! slots a compiled kernel expects the runtime to fill.

use std::fs::File;
use std::io;
use std::path::Path;

use super::{HEADER_SIZE, Header, SECTION_HEADER_SIZE, read_at, u16_at, u32_at, u64_at};

const SHT_DYNSYM: u32 = 11;
const STT_OBJECT: u8 = 1;
const SYMBOL_SIZE: usize = 24;
/// Symbol or string tables larger than this are not believed (a damaged file).
const TABLE_LIMIT: u64 = 256 << 20;

/// The names of the defined data objects of `size` bytes in the dynamic symbol table of the
/// library at `path` whose names start with `prefix`. A file that is not a 64-bit
/// little-endian ELF, or has no section headers, has none.
pub(crate) fn exported_objects(path: &Path, prefix: &str, size: u64) -> io::Result<Vec<String>> {
    let file = File::open(path)?;
    let mut bytes = [0u8; HEADER_SIZE];
    let header = read_at(&file, &mut bytes, 0)
        .ok()
        .and_then(|()| Header::parse(&bytes));
    let Some(header) = header else {
        return Ok(Vec::new());
    };
    let section_offset = header.section_offset;
    let section_count = usize::from(header.section_count);
    if section_offset == 0 || usize::from(header.section_entry_size) != SECTION_HEADER_SIZE {
        return Ok(Vec::new());
    }
    let mut sections = vec![0u8; section_count * SECTION_HEADER_SIZE];
    read_at(&file, &mut sections, section_offset)?;
    let section = |index: usize| {
        sections
            .get(index * SECTION_HEADER_SIZE..)?
            .get(..SECTION_HEADER_SIZE)
    };
    let mut names = Vec::new();
    for index in 0..section_count {
        let Some(entry) = section(index) else { break };
        if u32_at(entry, 4) != SHT_DYNSYM {
            continue;
        }
        let symbols = read_table(&file, u64_at(entry, 24), u64_at(entry, 32))?;
        let Some(strings_entry) = section(u32_at(entry, 40) as usize) else {
            continue;
        };
        let strings = read_table(&file, u64_at(strings_entry, 24), u64_at(strings_entry, 32))?;
        for symbol in symbols.chunks_exact(SYMBOL_SIZE) {
            let is_object = symbol[4] & 0xF == STT_OBJECT;
            let defined = u16_at(symbol, 6) != 0;
            if !is_object || !defined || u64_at(symbol, 16) != size {
                continue;
            }
            let name = strings
                .get(u32_at(symbol, 0) as usize..)
                .and_then(|tail| tail.split(|&b| b == 0).next())
                .and_then(|bytes| std::str::from_utf8(bytes).ok());
            if let Some(name) = name.filter(|name| name.starts_with(prefix)) {
                names.push(name.to_owned());
            }
        }
    }
    Ok(names)
}

fn read_table(file: &File, offset: u64, size: u64) -> io::Result<Vec<u8>> {
    if size > TABLE_LIMIT {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!("a symbol table of {size} bytes"),
        ));
    }
    let mut table = vec![0u8; size as usize];
    read_at(file, &mut table, offset)?;
    Ok(table)
}
