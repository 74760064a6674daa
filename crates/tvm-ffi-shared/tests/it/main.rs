//! Integration tests of `libtvm_ffi.so`: host programs in C and C++ that link the library and
//! nothing else, built with the real compilers and run as processes of their own.

mod backend_api;
mod cxx_abi;
mod hosts;
