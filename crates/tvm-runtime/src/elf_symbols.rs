//! The data symbols a shared library exports, read from its ELF file (64-bit little-endian, the
//! layout of x86-64 and AArch64 Linux): the loader uses them to find the `__TVM*` pointer slots
//! a compiled kernel expects the runtime to fill.

use std::fs::File;
use std::io;
use std::path::Path;

const SHT_DYNSYM: u32 = 11;
const STT_OBJECT: u8 = 1;
const SECTION_HEADER_SIZE: usize = 64;
const SYMBOL_SIZE: usize = 24;
/// Symbol or string tables larger than this are not believed (a damaged file).
const TABLE_LIMIT: u64 = 256 << 20;

/// The names of the defined data objects of `size` bytes in the dynamic symbol table of the
/// library at `path` whose names start with `prefix`. A file that is not a 64-bit
/// little-endian ELF, or has no section headers, has none.
pub(crate) fn exported_objects(path: &Path, prefix: &str, size: u64) -> io::Result<Vec<String>> {
    let file = File::open(path)?;
    let mut header = [0u8; 64];
    if read_at(&file, &mut header, 0).is_err() || &header[..4] != b"\x7fELF" {
        return Ok(Vec::new());
    }
    if header[4] != 2 || header[5] != 1 {
        return Ok(Vec::new());
    }
    let section_offset = u64_at(&header, 0x28);
    let section_count = usize::from(u16_at(&header, 0x3C));
    if section_offset == 0 || usize::from(u16_at(&header, 0x3A)) != SECTION_HEADER_SIZE {
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

#[cfg(unix)]
fn read_at(file: &File, buffer: &mut [u8], offset: u64) -> io::Result<()> {
    std::os::unix::fs::FileExt::read_exact_at(file, buffer, offset)
}

#[cfg(not(unix))]
fn read_at(file: &File, buffer: &mut [u8], offset: u64) -> io::Result<()> {
    use std::io::{Read, Seek, SeekFrom};
    let mut file = file;
    file.seek(SeekFrom::Start(offset))?;
    file.read_exact(buffer)
}

fn u16_at(bytes: &[u8], at: usize) -> u16 {
    u16::from_le_bytes([bytes[at], bytes[at + 1]])
}

fn u32_at(bytes: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(bytes[at..at + 4].try_into().expect("4 bytes"))
}

fn u64_at(bytes: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(bytes[at..at + 8].try_into().expect("8 bytes"))
}
