//! Just enough of SPIR-V to check a shader before the driver sees it: the header, the
//! instruction stream's framing, and the compute entry points with their work-group sizes.

use std::collections::HashMap;

use crate::error::{VkResult, VulkanError};

const MAGIC: u32 = 0x0723_0203;
const HEADER_WORDS: usize = 5;
const OP_ENTRY_POINT: u32 = 15;
const OP_EXECUTION_MODE: u32 = 16;
const EXECUTION_MODEL_GL_COMPUTE: u32 = 5;
const EXECUTION_MODE_LOCAL_SIZE: u32 = 17;

/// A compute entry point of a shader.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct EntryPoint {
    /// The work-group size, when the shader fixes it with `LocalSize`.
    pub(crate) local_size: Option<[u32; 3]>,
}

/// The words of a SPIR-V binary given as bytes (little-endian, as `glslangValidator` writes).
pub(crate) fn words_of(bytes: &[u8], what: &str) -> VkResult<Vec<u32>> {
    if !bytes.len().is_multiple_of(4) {
        return Err(VulkanError::invalid(format!(
            "{what} is not SPIR-V: {} bytes is not a whole number of 32-bit words",
            bytes.len()
        )));
    }
    Ok(bytes
        .chunks_exact(4)
        .map(|w| u32::from_le_bytes([w[0], w[1], w[2], w[3]]))
        .collect())
}

/// A literal string operand (NUL-terminated, packed four bytes a word).
fn literal_string(words: &[u32]) -> Option<String> {
    let bytes: Vec<u8> = words.iter().flat_map(|w| w.to_le_bytes()).collect();
    let end = bytes.iter().position(|b| *b == 0)?;
    String::from_utf8(bytes[..end].to_vec()).ok()
}

/// The compute entry points of a shader by name; an error naming `what` when the words are not
/// a well-framed SPIR-V module.
pub(crate) fn compute_entry_points(
    words: &[u32],
    what: &str,
) -> VkResult<HashMap<String, EntryPoint>> {
    let bad = |why: String| VulkanError::invalid(format!("{what} is not valid SPIR-V: {why}"));
    if words.len() < HEADER_WORDS || words[0] != MAGIC {
        return Err(bad(format!(
            "it does not start with the SPIR-V magic number {MAGIC:#010x}"
        )));
    }
    let mut names: HashMap<u32, String> = HashMap::new();
    let mut sizes: HashMap<u32, [u32; 3]> = HashMap::new();
    let mut at = HEADER_WORDS;
    while at < words.len() {
        let count = (words[at] >> 16) as usize;
        let opcode = words[at] & 0xffff;
        if count == 0 || at + count > words.len() {
            return Err(bad(format!(
                "the instruction at word {at} has a length of {count} words past the end"
            )));
        }
        let operands = &words[at + 1..at + count];
        match opcode {
            OP_ENTRY_POINT if operands.len() >= 3 && operands[0] == EXECUTION_MODEL_GL_COMPUTE => {
                let name = literal_string(&operands[2..])
                    .ok_or_else(|| bad(format!("the entry point at word {at} has no name")))?;
                names.insert(operands[1], name);
            }
            OP_EXECUTION_MODE
                if operands.len() >= 5 && operands[1] == EXECUTION_MODE_LOCAL_SIZE =>
            {
                sizes.insert(operands[0], [operands[2], operands[3], operands[4]]);
            }
            _ => {}
        }
        at += count;
    }
    Ok(names
        .into_iter()
        .map(|(id, name)| {
            let local_size = sizes.get(&id).copied();
            (name, EntryPoint { local_size })
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A header, an `OpEntryPoint GLCompute %4 "main"` and its `LocalSize 64 1 1`.
    fn tiny_module() -> Vec<u32> {
        let main = u32::from_le_bytes(*b"main");
        vec![
            MAGIC,
            0x0001_0300,
            0,
            10,
            0,
            (5 << 16) | OP_ENTRY_POINT,
            EXECUTION_MODEL_GL_COMPUTE,
            4,
            main,
            0,
            (6 << 16) | OP_EXECUTION_MODE,
            4,
            EXECUTION_MODE_LOCAL_SIZE,
            64,
            1,
            1,
        ]
    }

    #[test]
    fn entry_points_and_local_sizes_are_found() {
        let points = compute_entry_points(&tiny_module(), "k").unwrap();
        assert_eq!(points.len(), 1);
        assert_eq!(points["main"].local_size, Some([64, 1, 1]));
    }

    #[test]
    fn broken_framing_and_magic_are_errors() {
        let mut words = tiny_module();
        words[5] = (40 << 16) | OP_ENTRY_POINT;
        let err = compute_entry_points(&words, "shader of k").unwrap_err();
        assert!(err.to_string().contains("word 5"), "{err}");
        words[0] = 0xdead_beef;
        let err = compute_entry_points(&words, "shader of k").unwrap_err();
        assert!(err.to_string().contains("magic"), "{err}");
        assert!(words_of(&[1, 2, 3], "x").is_err());
    }
}
