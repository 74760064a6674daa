// legacy_abi_tests.cc -- tests of tvm/ffi/extra/legacy_abi.h (the bridge from the old
// packed-function ABI) against the runtime of the process that loads this library
// (tests/cpp_layer.rs builds it with g++ and dlopens it). Each test is exported as
// `__tvm_ffi_<name>` and fails by throwing.
#include <tvm/ffi/extra/legacy_abi.h>
#include <tvm/ffi/ffi.h>

#include <atomic>
#include <cstring>
#include <string>

#include "expect.h"

namespace {

namespace ffi = tvm::ffi;

TVMValue IntValue(int64_t v) {
  TVMValue value;
  value.v_int64 = v;
  return value;
}

TVMValue HandleValue(void* handle) {
  TVMValue value;
  value.v_int64 = 0;
  value.v_handle = handle;
  return value;
}

// An object whose deleter counts its calls: observes who owns the reference.
std::atomic<int> g_deletes{0};
struct CountedObject {
  TVMFFIObject header;
};
TVMFFIObject* NewCountedObject() {
  CountedObject* obj = new CountedObject();
  obj->header.combined_ref_count = kTVMFFIObjectBothOne;
  obj->header.type_index = kTVMFFIObject;
  obj->header.__padding = 0;
  obj->header.deleter = [](void* self, int) {
    g_deletes.fetch_add(1);
    delete static_cast<CountedObject*>(self);
  };
  return &obj->header;
}

// Converts a legacy value to FFI and back, checking that the code and the 8 bytes survive.
void ExpectRoundTrip(TVMValue value, int code, int32_t expected_index) {
  TVMFFIAny any = ffi::LegacyTVMArgValueToFFIAny(value, code);
  EXPECT_EQ(any.type_index, expected_index) << "code " << code;
  TVMValue back;
  int back_code = -1;
  ffi::TVMFFIAnyToLegacyTVMArgValue(&any, &back, &back_code);
  EXPECT_EQ(back_code, code);
  EXPECT(std::memcmp(&back, &value, sizeof(TVMValue)) == 0) << "code " << code;
}

// Legacy -> FFI for every code the old ABI defines, and back.
void TestLegacyToFFIEveryCode() {
  TVMFFIAny any = ffi::LegacyTVMArgValueToFFIAny(IntValue(-7), kTVMArgInt);
  EXPECT_EQ(any.type_index, kTVMFFIInt);
  EXPECT_EQ(ffi::AnyView::FromRaw(any).cast<int64_t>(), -7);
  EXPECT_EQ(any.small_str_len, 0u);

  any = ffi::LegacyTVMArgValueToFFIAny(IntValue(5), kTVMArgBool);
  EXPECT_EQ(any.type_index, kTVMFFIBool);
  EXPECT_EQ(any.v_int64, 1);

  TVMValue value;
  value.v_float64 = 2.5;
  any = ffi::LegacyTVMArgValueToFFIAny(value, kTVMArgFloat);
  EXPECT_EQ(any.type_index, kTVMFFIFloat);
  EXPECT_EQ(any.v_float64, 2.5);
  ExpectRoundTrip(value, kTVMArgFloat, kTVMFFIFloat);

  int target = 0;
  any = ffi::LegacyTVMArgValueToFFIAny(HandleValue(&target), kTVMOpaqueHandle);
  EXPECT_EQ(any.type_index, kTVMFFIOpaquePtr);
  EXPECT(any.v_ptr == &target);

  any = ffi::LegacyTVMArgValueToFFIAny(HandleValue(&target), kTVMNullptr);
  EXPECT_EQ(any.type_index, kTVMFFINone);
  EXPECT_EQ(any.v_int64, 0);

  value.v_int64 = 0;
  value.v_type = DLDataType{kDLFloat, 16, 4};
  any = ffi::LegacyTVMArgValueToFFIAny(value, kTVMDataType);
  EXPECT_EQ(any.type_index, kTVMFFIDataType);
  EXPECT_EQ(any.v_dtype.bits, 16);
  EXPECT_EQ(any.v_dtype.lanes, 4);
  ExpectRoundTrip(value, kTVMDataType, kTVMFFIDataType);

  value.v_int64 = 0;
  value.v_device = DLDevice{kDLCUDA, 3};
  any = ffi::LegacyTVMArgValueToFFIAny(value, kDLDevice);
  EXPECT_EQ(any.type_index, kTVMFFIDevice);
  EXPECT_EQ(any.v_device.device_type, kDLCUDA);
  EXPECT_EQ(any.v_device.device_id, 3);
  ExpectRoundTrip(value, kDLDevice, kTVMFFIDevice);

  DLTensor tensor{};
  any = ffi::LegacyTVMArgValueToFFIAny(HandleValue(&tensor), kTVMDLTensorHandle);
  EXPECT_EQ(any.type_index, kTVMFFIDLTensorPtr);
  EXPECT(ffi::AnyView::FromRaw(any).cast<DLTensor*>() == &tensor);

  // Objects: the handle is the object; its own type index, or the module/function index.
  ffi::String text("a string longer than seven bytes");
  any = ffi::LegacyTVMArgValueToFFIAny(HandleValue(text.raw().v_obj), kTVMObjectHandle);
  EXPECT_EQ(any.type_index, kTVMFFIStr);
  EXPECT_EQ(ffi::AnyView::FromRaw(any).cast<std::string>(), "a string longer than seven bytes");
  ffi::Function f = ffi::Function::FromTyped("f", [](int64_t x) { return x + 1; });
  any = ffi::LegacyTVMArgValueToFFIAny(HandleValue(f.get()), kTVMPackedFuncHandle);
  EXPECT_EQ(any.type_index, kTVMFFIFunction);
  EXPECT_EQ(ffi::AnyView::FromRaw(any).cast<ffi::Function>()(41).cast<int64_t>(), 42);
  ExpectRoundTrip(HandleValue(f.get()), kTVMPackedFuncHandle, kTVMFFIFunction);
  any = ffi::LegacyTVMArgValueToFFIAny(HandleValue(f.get()), kTVMModuleHandle);
  EXPECT_EQ(any.type_index, kTVMFFIModule);
  EXPECT(any.v_obj == f.get());
  ExpectRoundTrip(HandleValue(f.get()), kTVMModuleHandle, kTVMFFIModule);
  // A string object comes back as kTVMStr (TestFFIToLegacyStringsBytesObjects); other objects
  // as they went.
  ffi::Array array = ffi::Array::Make(1, 2);
  ExpectRoundTrip(HandleValue(array.get()), kTVMObjectHandle, kTVMFFIArray);
  // A NULL object handle is None.
  any = ffi::LegacyTVMArgValueToFFIAny(HandleValue(nullptr), kTVMObjectHandle);
  EXPECT_EQ(any.type_index, kTVMFFINone);

  const char* c_str = "legacy string";
  value.v_int64 = 0;
  value.v_str = c_str;
  any = ffi::LegacyTVMArgValueToFFIAny(value, kTVMStr);
  EXPECT_EQ(any.type_index, kTVMFFIRawStr);
  EXPECT_EQ(ffi::AnyView::FromRaw(any).cast<std::string>(), "legacy string");
  ExpectRoundTrip(value, kTVMStr, kTVMFFIRawStr);

  TVMByteArray bytes{"a\0b", 3};
  any = ffi::LegacyTVMArgValueToFFIAny(HandleValue(&bytes), kTVMBytes);
  EXPECT_EQ(any.type_index, kTVMFFIByteArrayPtr);
  EXPECT_EQ(ffi::AnyView::FromRaw(any).cast<ffi::Bytes>().size(), 3u);
  ExpectRoundTrip(HandleValue(&bytes), kTVMBytes, kTVMFFIByteArrayPtr);

  TVMFFIObject* slot = text.raw().v_obj;
  any = ffi::LegacyTVMArgValueToFFIAny(HandleValue(&slot), kTVMObjectRValueRefArg);
  EXPECT_EQ(any.type_index, kTVMFFIObjectRValueRef);
  EXPECT(any.v_ptr == &slot);
  ExpectRoundTrip(HandleValue(&slot), kTVMObjectRValueRefArg, kTVMFFIObjectRValueRef);

  ExpectRoundTrip(IntValue(-7), kTVMArgInt, kTVMFFIInt);
  ExpectRoundTrip(IntValue(1), kTVMArgBool, kTVMFFIBool);
  ExpectRoundTrip(HandleValue(&target), kTVMOpaqueHandle, kTVMFFIOpaquePtr);
  ExpectRoundTrip(IntValue(0), kTVMNullptr, kTVMFFINone);
  ExpectRoundTrip(HandleValue(&tensor), kTVMDLTensorHandle, kTVMFFIDLTensorPtr);
}

// An ffi.Tensor crosses as kTVMNDArrayHandle: the handle is its DLTensor, 24 bytes in.
void TestLegacyTensor(ffi::AnyView tensor) {
  EXPECT_EQ(tensor.type_index(), kTVMFFITensor);
  TVMValue value;
  int code = -1;
  ffi::AnyViewToLegacyTVMArgValue(tensor, &value, &code);
  EXPECT_EQ(code, kTVMNDArrayHandle);
  EXPECT(value.v_handle == TVMFFITensorGetDLTensorPtr(tensor.raw().v_obj));
  EXPECT(static_cast<char*>(value.v_handle) ==
         reinterpret_cast<char*>(tensor.raw().v_obj) + sizeof(TVMFFIObject));
  TVMFFIAny back = ffi::LegacyTVMArgValueToFFIAny(value, code);
  EXPECT_EQ(back.type_index, kTVMFFITensor);
  EXPECT(back.v_obj == tensor.raw().v_obj);
  // The view reads the same tensor.
  ffi::TensorView view = ffi::AnyView::FromRaw(back).cast<ffi::TensorView>();
  EXPECT_EQ(view->ndim, static_cast<DLTensor*>(value.v_handle)->ndim);
  // A NULL tensor handle is None.
  EXPECT_EQ(ffi::LegacyTVMArgValueToFFIAny(HandleValue(nullptr), kTVMNDArrayHandle).type_index,
            kTVMFFINone);
}

// FFI -> legacy for the values that have no single legacy counterpart (owned strings and bytes,
// small ones, other objects) and for the values with none at all.
void TestFFIToLegacyStringsBytesObjects() {
  TVMValue value;
  int code = -1;

  ffi::Any small("abc");
  EXPECT_EQ(small.type_index(), kTVMFFISmallStr);
  ffi::AnyViewToLegacyTVMArgValue(small, &value, &code);
  EXPECT_EQ(code, kTVMStr);
  EXPECT(std::strcmp(value.v_str, "abc") == 0);
  // The pointer is into the Any itself.
  EXPECT(value.v_str == small.raw().v_bytes);

  ffi::Any seven("1234567");
  ffi::AnyViewToLegacyTVMArgValue(seven, &value, &code);
  EXPECT(std::strcmp(value.v_str, "1234567") == 0);

  ffi::Any heap("a string that lives in an object");
  EXPECT_EQ(heap.type_index(), kTVMFFIStr);
  ffi::AnyViewToLegacyTVMArgValue(heap, &value, &code);
  EXPECT_EQ(code, kTVMStr);
  EXPECT(std::strcmp(value.v_str, "a string that lives in an object") == 0);

  ffi::Any long_bytes(ffi::Bytes(std::string("0123456789\0abc", 14)));
  EXPECT_EQ(long_bytes.type_index(), kTVMFFIBytes);
  ffi::AnyViewToLegacyTVMArgValue(long_bytes, &value, &code);
  EXPECT_EQ(code, kTVMBytes);
  const TVMByteArray* array = static_cast<const TVMByteArray*>(value.v_handle);
  EXPECT_EQ(array->size, 14u);
  EXPECT(std::memcmp(array->data, "0123456789\0abc", 14) == 0);

  ffi::Any small_bytes(ffi::Bytes(std::string("x\0y", 3)));
  EXPECT_EQ(small_bytes.type_index(), kTVMFFISmallBytes);
  TVMByteArray storage{nullptr, 0};
  ffi::AnyViewToLegacyTVMArgValue(small_bytes, &value, &code, &storage);
  EXPECT_EQ(code, kTVMBytes);
  EXPECT(value.v_handle == &storage);
  EXPECT_EQ(storage.size, 3u);
  EXPECT(std::memcmp(storage.data, "x\0y", 3) == 0);
  ffi::Error err = ExpectError(__LINE__, [&] {
    ffi::AnyViewToLegacyTVMArgValue(small_bytes, &value, &code);
  });
  EXPECT_EQ(err.kind(), "TypeError");
  EXPECT(err.message().find("small bytes") != std::string_view::npos) << err.message();

  // Any other object is a kTVMObjectHandle; None a kTVMNullptr.
  ffi::Array array_obj = ffi::Array::Make(1, 2);
  ffi::Any array_any(array_obj);
  ffi::AnyViewToLegacyTVMArgValue(array_any, &value, &code);
  EXPECT_EQ(code, kTVMObjectHandle);
  EXPECT(value.v_handle == array_any.raw().v_obj);
  ffi::AnyView none;
  ffi::AnyViewToLegacyTVMArgValue(none, &value, &code);
  EXPECT_EQ(code, kTVMNullptr);

  // A plain type index the old ABI has no code for.
  TVMFFIAny unknown = ffi::details::NoneAny();
  unknown.type_index = 42;
  err = ExpectError(__LINE__, [&] { ffi::TVMFFIAnyToLegacyTVMArgValue(&unknown, &value, &code); });
  EXPECT_EQ(err.kind(), "TypeError");
  EXPECT(err.message().find("type index 42") != std::string_view::npos) << err.message();
  EXPECT(err.message().find("no legacy type code") != std::string_view::npos) << err.message();

  // A whole list, small bytes included, with its storage.
  ffi::Any args[] = {ffi::Any(int64_t{3}), ffi::Any("hi"), small_bytes, ffi::Any(2.0)};
  ffi::LegacyArgs legacy(reinterpret_cast<const TVMFFIAny*>(args), 4);
  EXPECT_EQ(legacy.size(), 4);
  EXPECT_EQ(legacy.type_codes()[0], kTVMArgInt);
  EXPECT_EQ(legacy.type_codes()[1], kTVMStr);
  EXPECT(std::strcmp(legacy.values()[1].v_str, "hi") == 0);
  EXPECT_EQ(legacy.type_codes()[2], kTVMBytes);
  EXPECT_EQ(static_cast<const TVMByteArray*>(legacy.values()[2].v_handle)->size, 3u);
  EXPECT_EQ(legacy.type_codes()[3], kTVMArgFloat);
  TVMFFIAny bad_list[] = {ffi::details::NoneAny(), unknown};
  err = ExpectError(__LINE__, [&] { ffi::LegacyArgs bad(bad_list, 2); });
  EXPECT(err.message().find("argument #1") != std::string_view::npos) << err.message();
}

// Type codes the old ABI never defined (1 was kDLUInt, never an argument code; 16.. were
// extensions) are TypeErrors naming the code, never a crash.
void TestBadLegacyCodes() {
  for (int code : {1, 16, 127, -1, 1000}) {
    ffi::Error err =
        ExpectError(__LINE__, [&] { ffi::LegacyTVMArgValueToFFIAny(IntValue(0), code); });
    EXPECT_EQ(err.kind(), "TypeError");
    std::string expected = "Unsupported legacy type code " + std::to_string(code);
    EXPECT(err.message().find(expected) != std::string_view::npos) << err.message();
  }
  TVMValue values[2] = {IntValue(1), IntValue(2)};
  int codes[2] = {kTVMArgInt, 99};
  TVMFFIAny out[2];
  ffi::Error err =
      ExpectError(__LINE__, [&] { ffi::LegacyTVMArgsToPackedArgs(values, codes, 2, out); });
  EXPECT(err.message().find("legacy argument #1") != std::string_view::npos) << err.message();
  EXPECT(err.message().find("99") != std::string_view::npos) << err.message();
  codes[1] = kTVMArgFloat;
  ffi::LegacyTVMArgsToPackedArgs(values, codes, 2, out);
  EXPECT_EQ(out[0].type_index, kTVMFFIInt);
  EXPECT_EQ(out[1].type_index, kTVMFFIFloat);
}

// A legacy result: an object's reference passes to the Any; strings are copied.
void TestMoveLegacyResult() {
  int before = g_deletes.load();
  {
    ffi::Any owned = ffi::MoveLegacyTVMArgValueToAny(HandleValue(NewCountedObject()),
                                                     kTVMObjectHandle);
    EXPECT_EQ(owned.type_index(), kTVMFFIObject);
    EXPECT_EQ(g_deletes.load(), before);
  }
  EXPECT_EQ(g_deletes.load(), before + 1);

  char buffer[] = "a returned string";
  TVMValue value;
  value.v_str = buffer;
  ffi::Any copied = ffi::MoveLegacyTVMArgValueToAny(value, kTVMStr);
  buffer[0] = 'A';
  EXPECT_EQ(copied.cast<std::string>(), "a returned string");
  EXPECT(ffi::MoveLegacyTVMArgValueToAny(IntValue(0), kTVMNullptr).is_none());
}

// Functions compiled for the old backend signature, wrapped as ffi::Functions.

// Sums its int, bool and float arguments; returns the length of a string argument as an int,
// and fails for any other code.
int LegacySum(TVMValue* args, int* codes, int num_args, TVMValue* ret, int* ret_code,
              void* resource) {
  double sum = *static_cast<double*>(resource);
  for (int i = 0; i < num_args; ++i) {
    if (codes[i] == kTVMArgInt || codes[i] == kTVMArgBool) {
      sum += static_cast<double>(args[i].v_int64);
    } else if (codes[i] == kTVMArgFloat) {
      sum += args[i].v_float64;
    } else if (codes[i] == kTVMStr) {
      sum += static_cast<double>(std::strlen(args[i].v_str));
    } else if (codes[i] == kTVMNullptr) {
      return -1;  // fails without an error
    } else {
      TVMFFIErrorSetRaisedFromCStr("ValueError", "legacy_sum: unsupported argument");
      return -1;
    }
  }
  ret->v_float64 = sum;
  *ret_code = kTVMArgFloat;
  return 0;
}

// Returns its first argument: objects with a new reference (the caller takes it over).
int LegacyEcho(TVMValue* args, int* codes, int num_args, TVMValue* ret, int* ret_code, void*) {
  if (num_args != 1) return -1;
  if (codes[0] == kTVMObjectHandle || codes[0] == kTVMPackedFuncHandle) {
    TVMFFIObjectIncRef(static_cast<TVMFFIObject*>(args[0].v_handle));
  }
  *ret = args[0];
  *ret_code = codes[0];
  return 0;
}

void TestWrapLegacyFunction() {
  double base = 0.5;
  ffi::Function sum = ffi::FunctionFromLegacyBackendPackedCFunc(LegacySum, &base);
  EXPECT_EQ(sum(1, 2.25, true, "four").cast<double>(), 8.75);
  EXPECT_EQ(sum(std::string("a string of 22 chars..")).cast<double>(), 22.5);
  ffi::Error err = ExpectError(__LINE__, [&] { sum(DLDevice{kDLCPU, 0}); });
  EXPECT_EQ(err.kind(), "ValueError");
  EXPECT_EQ(err.message(), "legacy_sum: unsupported argument");
  err = ExpectError(__LINE__, [&] { sum(nullptr); });
  EXPECT_EQ(err.kind(), "RuntimeError");
  EXPECT(err.message().find("returned -1 without setting an error") != std::string_view::npos)
      << err.message();

  ffi::Function echo = ffi::FunctionFromLegacyBackendPackedCFunc(LegacyEcho, nullptr);
  ffi::Array array = ffi::Array::Make(1, 2, 3);
  uint32_t count = array.use_count();
  ffi::Any back = echo(array);
  EXPECT(back.raw().v_obj == array.get());
  EXPECT_EQ(array.use_count(), count + 1);
  back = ffi::Any();
  EXPECT_EQ(array.use_count(), count);
  EXPECT_EQ(echo("short").cast<std::string>(), "short");
  EXPECT_EQ(echo(ffi::Bytes(std::string("xy"))).cast<ffi::Bytes>().size(), 2u);
  EXPECT_EQ(echo(sum).cast<ffi::Function>()(1).cast<double>(), 1.5);
}

}  // namespace

TVM_FFI_DLL_EXPORT_TYPED_FUNC(test_legacy_to_ffi_every_code, TestLegacyToFFIEveryCode);
TVM_FFI_DLL_EXPORT_TYPED_FUNC(test_ffi_to_legacy_strings_bytes_objects,
                              TestFFIToLegacyStringsBytesObjects);
TVM_FFI_DLL_EXPORT_TYPED_FUNC(test_bad_legacy_codes, TestBadLegacyCodes);
TVM_FFI_DLL_EXPORT_TYPED_FUNC(test_move_legacy_result, TestMoveLegacyResult);
TVM_FFI_DLL_EXPORT_TYPED_FUNC(test_wrap_legacy_function, TestWrapLegacyFunction);
TVM_FFI_DLL_EXPORT_TYPED_FUNC(legacy_tensor, TestLegacyTensor);
