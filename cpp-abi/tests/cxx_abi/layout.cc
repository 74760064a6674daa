// The layouts our headers give the classes Apache TVM FFI's C++ clients share with libtvm_ffi.so
// (the reference: shared/reference/cxx-abi-and-backend-api.md). Compiling this file is the
// test; running it checks the one offset a constant expression cannot reach (Error's bases).
#include <tvm/ffi/ffi.h>

#include <cstddef>
#include <cstdio>

namespace ffi = tvm::ffi;

#pragma GCC diagnostic ignored "-Winvalid-offsetof"

// ModuleObj: vtable pointer 0, header 8, imports_ 32, import cache 40, size 48.
struct ModuleLayout : ffi::ModuleObj {
  static void Check() {
    static_assert(offsetof(ModuleLayout, header_) == 8, "the header follows the vtable pointer");
    static_assert(offsetof(ModuleLayout, imports_) == 32, "imports_ at 32");
  }
};
static_assert(sizeof(ffi::ModuleObj) == 48, "sizeof(ModuleObj)");
static_assert(alignof(ffi::ModuleObj) == 8, "alignof(ModuleObj)");
static_assert(std::is_polymorphic_v<ffi::ModuleObj>, "ModuleObj has a vtable");
static_assert(!std::has_virtual_destructor_v<ffi::ModuleObj>, "no virtual destructor");

// Error: std::exception (its vtable pointer) at 0, the object reference at 8, size 16.
static_assert(sizeof(ffi::Error) == 16, "sizeof(Error)");
static_assert(std::is_base_of_v<ffi::ObjectRef, ffi::Error>, "Error is an ObjectRef");
static_assert(std::is_base_of_v<std::exception, ffi::Error>, "Error is a std::exception");

// The value types of the exported functions' signatures.
static_assert(sizeof(ffi::Any) == 16 && sizeof(ffi::String) == 16, "Any and String");
static_assert(sizeof(ffi::Optional<ffi::String>) == 16, "Optional<String> is an Any");
static_assert(sizeof(ffi::Optional<int>) == 16, "Optional<int> is an Any");
static_assert(sizeof(ffi::Optional<ffi::Function>) == 8, "Optional<Function> is a pointer");
static_assert(sizeof(ffi::Module) == 8 && sizeof(ffi::Array) == 8, "references");
static_assert(sizeof(ffi::TypedFunction<void(ffi::String, void*)>) == 8, "TypedFunction");

int main() {
  alignas(ffi::Error) unsigned char storage[sizeof(ffi::Error)];
  auto* error = reinterpret_cast<ffi::Error*>(storage);
  auto error_start = reinterpret_cast<const char*>(error);
  size_t exception_offset =
      reinterpret_cast<const char*>(static_cast<std::exception*>(error)) - error_start;
  size_t ref_offset =
      reinterpret_cast<const char*>(static_cast<ffi::ObjectRef*>(error)) - error_start;
  if (exception_offset != 0 || ref_offset != 8) {
    std::printf("Error bases at %zu (std::exception) and %zu (ObjectRef), expected 0 and 8\n",
                exception_offset, ref_offset);
    return 1;
  }
  std::printf("layout ok\n");
  return 0;
}
