//! Integration tests of the runtime.

mod module;
