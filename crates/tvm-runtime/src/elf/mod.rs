//! What the loader reads from a shared library's ELF file itself (64-bit little-endian, the
//! layout of x86-64 and AArch64 Linux): whether the file is whole before `dlopen` maps it, and
//! the data symbols it exports.

mod bounds;
mod symbols;

pub(crate) use bounds::check_complete;
pub(crate) use symbols::exported_objects;

use std::fs::File;
use std::io;

/// Size of the ELF header of a 64-bit file.
const HEADER_SIZE: usize = 64;
/// Size of one section header of a 64-bit file.
const SECTION_HEADER_SIZE: usize = 64;

/// The fields of a 64-bit little-endian ELF header that locate its tables.
struct Header {
    program_offset: u64,
    program_entry_size: u16,
    program_count: u16,
    section_offset: u64,
    section_entry_size: u16,
    section_count: u16,
}

impl Header {
    /// The header of `bytes` (the first [`HEADER_SIZE`] bytes of the file); `None` when it is
    /// not a 64-bit little-endian ELF file.
    fn parse(bytes: &[u8; HEADER_SIZE]) -> Option<Header> {
        if &bytes[..4] != b"\x7fELF" || bytes[4] != 2 || bytes[5] != 1 {
            return None;
        }
        Some(Header {
            program_offset: u64_at(bytes, 0x20),
            program_entry_size: u16_at(bytes, 0x36),
            program_count: u16_at(bytes, 0x38),
            section_offset: u64_at(bytes, 0x28),
            section_entry_size: u16_at(bytes, 0x3A),
            section_count: u16_at(bytes, 0x3C),
        })
    }
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
