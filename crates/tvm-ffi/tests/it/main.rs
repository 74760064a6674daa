//! Integration tests of the core, one module per area.

mod any;
mod containers;
mod error;
mod function;
mod map;
mod object;
mod string;
mod tensor;
mod types;
