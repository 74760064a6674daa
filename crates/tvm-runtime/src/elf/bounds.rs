//! Whether a shared library's file holds every byte its ELF headers say it has. `dlopen` maps
//! the segments of a file cut short (a copy or download that stopped early) as they are, and
//! the first touch of a page past the end of the file kills the process with `SIGBUS` inside
//! the loader. So the header, the program header table and every segment's file range, and the
//! section header table and sections (which the loader reads for the `__TVM*` slots), are
//! checked against the file's size before `dlopen`.
//!
//! A file that is not a 64-bit little-endian ELF file is left to `dlopen`, which refuses it
//! with its own message before mapping anything.

use std::fs::File;
use std::io;
use std::path::Path;

use tvm_ffi::{Error, Result};

use super::{HEADER_SIZE, Header, SECTION_HEADER_SIZE, read_at, u32_at, u64_at};

/// An `OSError` naming the file and the first of its parts that lies past its end, when the
/// ELF file `file` is cut short; `shown` names the file in errors.
pub(crate) fn check_complete(file: &Path, shown: &Path) -> Result<()> {
    let cut = File::open(file).and_then(|file| {
        let len = file.metadata()?.len();
        Ok(cut_part(&file, len)?.map(|part| (part, len)))
    });
    match cut {
        Ok(None) => Ok(()),
        Ok(Some((part, len))) => Err(Error::new(
            "OSError",
            format!(
                "cannot load '{}' as a shared library: the file is cut short ({len} bytes, but \
                 {part})",
                shown.display()
            ),
        )),
        Err(err) => Err(Error::new(
            "OSError",
            format!("cannot read '{}': {err}", shown.display()),
        )),
    }
}

/// The first part of the file (of `len` bytes) that ends past its end, described; `None` when
/// the file is whole or not a 64-bit little-endian ELF file.
fn cut_part(file: &File, len: u64) -> io::Result<Option<String>> {
    let mut bytes = [0u8; HEADER_SIZE];
    let head = usize::try_from(len).map_or(HEADER_SIZE, |len| len.min(HEADER_SIZE));
    read_at(file, &mut bytes[..head], 0)?;
    let elf64 = head >= 4 && &bytes[..4] == b"\x7fELF" && (head == 4 || bytes[4] == 2);
    if !elf64 {
        return Ok(None);
    }
    if head < HEADER_SIZE {
        return Ok(Some(format!("its ELF header ends at byte {HEADER_SIZE}")));
    }
    let Some(header) = Header::parse(&bytes) else {
        return Ok(None);
    };

    // The segments; the loader refuses an unexpected entry size itself.
    if usize::from(header.program_entry_size) == SEGMENTS.entry_size {
        let cut = cut_entry(
            file,
            len,
            &SEGMENTS,
            header.program_offset,
            header.program_count,
        )?;
        if cut.is_some() {
            return Ok(cut);
        }
    }
    // The sections, where the file has a table of them.
    if header.section_offset == 0 || usize::from(header.section_entry_size) != SECTION_HEADER_SIZE {
        return Ok(None);
    }
    cut_entry(
        file,
        len,
        &SECTIONS,
        header.section_offset,
        header.section_count,
    )
}

/// A table of the ELF file whose entries locate bytes of the file.
struct Table {
    /// What the table and one of its entries are called.
    name: &'static str,
    entry: &'static str,
    entry_size: usize,
    /// Where an entry keeps its type, file offset and size.
    type_at: usize,
    offset_at: usize,
    size_at: usize,
    /// The type of entries that hold no bytes of the file.
    no_bytes: Option<u32>,
    /// Names of common types.
    type_names: &'static [(u32, &'static str)],
}

const SEGMENTS: Table = Table {
    name: "program header table",
    entry: "segment",
    entry_size: 56,
    type_at: 0,
    offset_at: 8,
    size_at: 32,
    no_bytes: None,
    type_names: &[(1, "PT_LOAD"), (2, "PT_DYNAMIC"), (4, "PT_NOTE")],
};

const SECTIONS: Table = Table {
    name: "section header table",
    entry: "section",
    entry_size: SECTION_HEADER_SIZE,
    type_at: 4,
    offset_at: 24,
    size_at: 32,
    no_bytes: Some(8),
    type_names: &[
        (1, "SHT_PROGBITS"),
        (2, "SHT_SYMTAB"),
        (3, "SHT_STRTAB"),
        (11, "SHT_DYNSYM"),
    ],
};

/// The table `table` of `count` entries at `offset`, or the first of its entries, that ends past
/// the end of the file (of `len` bytes), described.
fn cut_entry(
    file: &File,
    len: u64,
    table: &Table,
    offset: u64,
    count: u16,
) -> io::Result<Option<String>> {
    let size = u64::from(count) * table.entry_size as u64;
    if let Some(end) = end_past(offset, size, len) {
        return Ok(Some(format!("its {} ends at byte {end}", table.name)));
    }
    // At most 65,535 entries of 64 bytes.
    let mut bytes = vec![0u8; size as usize];
    read_at(file, &mut bytes, offset)?;
    for (index, entry) in bytes.chunks_exact(table.entry_size).enumerate() {
        let kind = u32_at(entry, table.type_at);
        if table.no_bytes == Some(kind) {
            continue;
        }
        let (start, size) = (u64_at(entry, table.offset_at), u64_at(entry, table.size_at));
        if let Some(end) = end_past(start, size, len) {
            let kind = match table.type_names.iter().find(|(known, _)| *known == kind) {
                Some((_, name)) => (*name).to_owned(),
                None => format!("type {kind:#x}"),
            };
            return Ok(Some(format!(
                "its {} {index} ({kind}) ends at byte {end}",
                table.entry
            )));
        }
    }
    Ok(None)
}

/// The end of the `size` bytes at `offset`, when it lies past the end of a file of `len` bytes.
fn end_past(offset: u64, size: u64, len: u64) -> Option<u128> {
    let end = u128::from(offset) + u128::from(size);
    (end > u128::from(len)).then_some(end)
}
