// add_one_cpp.cc -- the kernels of add_one_c.c written with the C++ layer (tvm/ffi/ffi.h):
//
//   g++ -std=c++17 -O2 -shared -fPIC -I cpp-abi/include cpp-abi/examples/add_one_cpp.cc
//       -o libadd_one_cpp.so
//
// Exported: add_one(x, y), concat(a, b), sum_array(arr), raise_value_error(x); loading the
// library also registers the global function "cpp_example.registered_at_load".
#include <tvm/ffi/ffi.h>

#include <cstdint>
#include <string>

namespace {

namespace ffi = tvm::ffi;

void CheckFloat32Cpu(const ffi::TensorView& t, const char* name) {
  if (!t.IsFloat32()) {
    DLDataType dt = t.dtype();
    TVM_FFI_THROW(TypeError) << "add_one: argument " << name
                             << " must be a float32 tensor, got dtype (code "
                             << static_cast<int>(dt.code) << ", bits " << static_cast<int>(dt.bits)
                             << ", lanes " << dt.lanes << ")";
  }
  if (t.device().device_type != kDLCPU) {
    TVM_FFI_THROW(TypeError) << "add_one: argument " << name << " must be on the CPU (device type "
                             << kDLCPU << "), got " << t.device().device_type;
  }
  if (!t.IsContiguous()) {
    TVM_FFI_THROW(ValueError) << "add_one: argument " << name << " must be contiguous";
  }
}

// y[i] = x[i] + 1 for float32 CPU tensors of the same shape.
void AddOne(ffi::TensorView x, ffi::TensorView y) {
  CheckFloat32Cpu(x, "x");
  CheckFloat32Cpu(y, "y");
  if (x.ndim() != y.ndim()) {
    TVM_FFI_THROW(ValueError) << "add_one: x has " << x.ndim() << " dimensions but y has "
                              << y.ndim();
  }
  for (int32_t i = 0; i < x.ndim(); ++i) {
    if (x.shape(i) != y.shape(i)) {
      TVM_FFI_THROW(ValueError) << "add_one: shapes differ in dimension " << i << ": x has "
                                << x.shape(i) << ", y has " << y.shape(i);
    }
  }
  const float* src = static_cast<const float*>(x.data_ptr());
  float* dst = static_cast<float*>(y.data_ptr());
  for (int64_t i = 0, n = x.numel(); i < n; ++i) dst[i] = src[i] + 1.0f;
}

}  // namespace

TVM_FFI_DLL_EXPORT_TYPED_FUNC(add_one, AddOne);
TVM_FFI_DLL_EXPORT_TYPED_FUNC_DOC(add_one,
                                  "Writes x + 1 into y (float32 CPU tensors, same shape).");

TVM_FFI_DLL_EXPORT_TYPED_FUNC(concat, [](tvm::ffi::String a, tvm::ffi::String b) {
  return tvm::ffi::String(a.str() + b.str());
});

TVM_FFI_DLL_EXPORT_TYPED_FUNC(sum_array, [](tvm::ffi::Array arr) -> int64_t {
  int64_t sum = 0;
  for (tvm::ffi::AnyView item : arr) sum += item.cast<int64_t>();
  return sum;
});

// Always fails: the error reaches the caller with its kind, message and backtrace.
TVM_FFI_DLL_EXPORT_TYPED_FUNC(raise_value_error, [](int64_t x) -> int64_t {
  TVM_FFI_THROW(ValueError) << "raise_value_error was called with " << x;
});

// Registered in the global function table when the library is loaded.
TVM_FFI_REGISTER_GLOBAL("cpp_example.registered_at_load", [](int64_t x) { return x * 2; });
