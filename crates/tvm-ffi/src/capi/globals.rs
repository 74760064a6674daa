//! Global functions registered by the core itself (`ffi.*`) and the testing functions
//! (`testing.*`) the test suites rely on.

use crate::function::Function;

/// The functions the registry starts with.
pub(crate) fn builtin_functions() -> Vec<(&'static str, Function)> {
    Vec::new()
}
