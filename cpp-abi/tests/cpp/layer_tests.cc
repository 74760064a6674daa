// layer_tests.cc -- tests of the C++ layer (cpp-abi/include/tvm/ffi/*.h) against the runtime of
// the process that loads this library (tests/cpp_layer.rs builds it with g++ and dlopens it).
//
// Each test is exported with TVM_FFI_DLL_EXPORT_TYPED_FUNC as `__tvm_ffi_<test name>`, takes no
// arguments and fails by throwing: the runner reports the error's message.
#include <tvm/ffi/ffi.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstring>
#include <memory>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "expect.h"

namespace {

namespace ffi = tvm::ffi;

// An object of our own: header plus a payload; the deleter counts its calls per flag.
struct CountedObject {
  TVMFFIObject header;
  int64_t payload;
};
std::atomic<int> g_deleter_calls_both{0};
std::atomic<int> g_deleter_calls_other{0};

void CountedObjectDeleter(void* self, int flags) {
  if (flags == kTVMFFIObjectDeleterFlagBitMaskBoth) {
    g_deleter_calls_both.fetch_add(1);
  } else {
    g_deleter_calls_other.fetch_add(1);
  }
  delete static_cast<CountedObject*>(self);
}

ffi::ObjectRef MakeCountedObject(int64_t payload) {
  CountedObject* obj = new CountedObject();
  obj->header.combined_ref_count = kTVMFFIObjectBothOne;
  obj->header.type_index = kTVMFFIObject;
  obj->header.__padding = 0;
  obj->header.deleter = CountedObjectDeleter;
  obj->payload = payload;
  return ffi::ObjectRef::Steal(obj);
}

// Sets a flag when destroyed: observes when a function object releases its closure.
struct DropFlag {
  std::shared_ptr<std::atomic<int>> drops;
  explicit DropFlag(std::shared_ptr<std::atomic<int>> d) : drops(std::move(d)) {}
  DropFlag(const DropFlag&) = default;
  DropFlag(DropFlag&&) = default;
  ~DropFlag() {
    if (drops) drops->fetch_add(1);
  }
};

void TestAnyPlainValues() {
  ffi::Any i = 42;
  EXPECT_EQ(i.type_index(), kTVMFFIInt);
  EXPECT_EQ(i.type_key(), "int");
  EXPECT_EQ(i.cast<int64_t>(), 42);
  EXPECT_EQ(i.cast<int>(), 42);
  EXPECT_EQ(i.cast<double>(), 42.0);  // int is accepted as float
  EXPECT(i.as<ffi::String>() == std::nullopt);

  ffi::Any d = 2.5;
  EXPECT_EQ(d.type_index(), kTVMFFIFloat);
  EXPECT_EQ(d.cast<double>(), 2.5);
  ffi::Error err = ExpectError(__LINE__, [&] { d.cast<int64_t>(); });
  EXPECT_EQ(err.kind(), "TypeError");
  EXPECT_EQ(err.message(), "Cannot convert from type `float` to `int`");

  ffi::Any b = true;
  EXPECT_EQ(b.type_index(), kTVMFFIBool);
  EXPECT_EQ(b.raw().v_int64, 1);
  EXPECT(b.cast<bool>());
  EXPECT_EQ(b.cast<int64_t>(), 1);
  EXPECT(ffi::Any(0).cast<bool>() == false);

  int local = 0;
  ffi::Any p = static_cast<void*>(&local);
  EXPECT_EQ(p.type_index(), kTVMFFIOpaquePtr);
  EXPECT(p.cast<void*>() == &local);
  ffi::Any none;
  EXPECT(none.is_none());
  EXPECT(none.cast<void*>() == nullptr);
  EXPECT(ffi::Any(nullptr).is_none());

  DLDevice dev{kDLCUDA, 3};
  ffi::Any dev_any = dev;
  EXPECT_EQ(dev_any.type_index(), kTVMFFIDevice);
  EXPECT_EQ(dev_any.cast<DLDevice>().device_id, 3);

  DLDataType f16{kDLFloat, 16, 4};
  ffi::Any dt = f16;
  EXPECT_EQ(dt.type_index(), kTVMFFIDataType);
  EXPECT_EQ(dt.raw().v_uint64 >> 32, 0u);  // canonical: the four bytes after the dtype are 0
  EXPECT_EQ(dt.cast<DLDataType>().lanes, 4);

  // A string where a dtype is expected is parsed; text that is not a dtype is a ValueError.
  DLDataType parsed = ffi::AnyView("float32").cast<DLDataType>();
  EXPECT(parsed.code == kDLFloat && parsed.bits == 32 && parsed.lanes == 1);
  parsed = ffi::Any(ffi::String("int8x4")).cast<DLDataType>();
  EXPECT(parsed.code == kDLInt && parsed.bits == 8 && parsed.lanes == 4);
  err = ExpectError(__LINE__, [] { ffi::AnyView("no such dtype").cast<DLDataType>(); });
  EXPECT_EQ(err.kind(), "ValueError");

  // Copies of an Any holding a plain value hold no reference.
  ffi::Any copy = i;
  EXPECT_EQ(copy.cast<int64_t>(), 42);
}

void TestStrings() {
  ffi::String empty;
  EXPECT(empty.is_small() && empty.empty());
  EXPECT_EQ(std::strlen(empty.c_str()), 0u);

  ffi::String small("hello");
  EXPECT(small.is_small());
  EXPECT_EQ(small.raw().type_index, kTVMFFISmallStr);
  EXPECT_EQ(small.view(), "hello");
  EXPECT_EQ(std::string(small.c_str()), "hello");  // NUL-terminated inline

  ffi::String heap("a string longer than seven bytes");
  EXPECT(!heap.is_small());
  EXPECT_EQ(heap.raw().type_index, kTVMFFIStr);
  EXPECT_EQ(heap.size(), 32u);
  EXPECT_EQ(heap.c_str()[heap.size()], '\0');
  ffi::String heap2 = heap;  // shares the object
  EXPECT(heap2.raw().v_obj == heap.raw().v_obj);
  EXPECT(heap2 == heap);
  EXPECT(heap2 != small);

  ffi::String with_nul(std::string("a\0b", 3));
  EXPECT_EQ(with_nul.size(), 3u);

  ffi::Bytes bytes(std::string("\x01\x02\x00\x03", 4));
  EXPECT_EQ(bytes.raw().type_index, kTVMFFISmallBytes);
  EXPECT_EQ(bytes.size(), 4u);
  ffi::Bytes big(std::string(100, 'x'));
  EXPECT_EQ(big.raw().type_index, kTVMFFIBytes);
  EXPECT_EQ(big.view(), std::string(100, 'x'));

  // Any <-> strings; the type names of the errors.
  ffi::Any s = std::string("from std::string, long");
  EXPECT_EQ(s.type_index(), kTVMFFIStr);
  EXPECT_EQ(s.cast<std::string>(), "from std::string, long");
  EXPECT_EQ(s.cast<ffi::String>().view(), "from std::string, long");
  ffi::Any literal = "lit";
  EXPECT_EQ(literal.type_index(), kTVMFFISmallStr);
  ffi::Error err = ExpectError(__LINE__, [&] { s.cast<ffi::Bytes>(); });
  EXPECT_EQ(err.message(), "Cannot convert from type `str` to `bytes`");
  err = ExpectError(__LINE__, [&] { ffi::Any(bytes).cast<ffi::String>(); });
  EXPECT_EQ(err.message(), "Cannot convert from type `bytes` to `str`");

  // Borrowed argument forms are copied: a raw C string into a String, a byte array into Bytes.
  ffi::AnyView raw = "raw C string, long enough";
  EXPECT_EQ(raw.type_index(), kTVMFFIRawStr);
  EXPECT_EQ(raw.type_key(), "const char*");
  ffi::String copied = raw.cast<ffi::String>();
  EXPECT_EQ(copied.raw().type_index, kTVMFFIStr);
  EXPECT_EQ(copied.view(), "raw C string, long enough");
  TVMFFIByteArray array{"bytes\0here", 10};
  TVMFFIAny array_view = ffi::details::MakePod(kTVMFFIByteArrayPtr);
  array_view.v_ptr = &array;
  ffi::Bytes from_array = ffi::AnyView::FromRaw(array_view).cast<ffi::Bytes>();
  EXPECT_EQ(from_array.raw().type_index, kTVMFFIBytes);
  EXPECT_EQ(from_array.view(), std::string("bytes\0here", 10));
  // An owning Any made from a view copies too (TVMFFIAnyViewToOwnedAny).
  ffi::Any owned(raw);
  EXPECT_EQ(owned.type_index(), kTVMFFIStr);
}

void TestObjectRefCounts() {
  int both_before = g_deleter_calls_both.load();
  {
    ffi::ObjectRef obj = MakeCountedObject(7);
    EXPECT_EQ(obj.use_count(), 1u);
    EXPECT_EQ(obj.type_index(), kTVMFFIObject);
    {
      ffi::ObjectRef copy = obj;
      EXPECT_EQ(obj.use_count(), 2u);
      ffi::ObjectRef moved = std::move(copy);
      EXPECT(!copy.defined());
      EXPECT_EQ(obj.use_count(), 2u);
      ffi::Any any = moved;
      EXPECT_EQ(obj.use_count(), 3u);
      EXPECT_EQ(any.type_index(), kTVMFFIObject);
      EXPECT(any.cast<ffi::ObjectRef>().same_as(obj));
    }
    EXPECT_EQ(obj.use_count(), 1u);
    // Through the runtime and back: the runtime's reference counting sees the same count.
    ffi::Function echo = ffi::Function::GetGlobalRequired("testing.echo");
    ffi::Any back = echo(obj);
    EXPECT(back.cast<ffi::ObjectRef>().same_as(obj));
    EXPECT_EQ(obj.use_count(), 2u);
    ffi::Function use_count = ffi::Function::GetGlobalRequired("testing.object_use_count");
    EXPECT_EQ(use_count(obj).cast<int64_t>(), 2);
    back = ffi::Any();
    EXPECT_EQ(obj.use_count(), 1u);
    EXPECT_EQ(g_deleter_calls_both.load(), both_before);
    // TVMFFIObjectIncRef / DecRef of the runtime and the inline protocol agree.
    TVMFFIObjectIncRef(obj.get());
    EXPECT_EQ(obj.use_count(), 2u);
    TVMFFIObjectDecRef(obj.get());
    EXPECT_EQ(obj.use_count(), 1u);
  }
  // The last reference was dropped inline: one deleter call with both flags.
  EXPECT_EQ(g_deleter_calls_both.load(), both_before + 1);
  EXPECT_EQ(g_deleter_calls_other.load(), 0);

  // An object of the runtime released through the inline protocol.
  ffi::Any str = std::string("a heap string made by the runtime");
  ffi::ObjectRef ref = str.cast<ffi::ObjectRef>();
  EXPECT_EQ(ref.use_count(), 2u);
  str = ffi::Any();
  EXPECT_EQ(ref.use_count(), 1u);
  EXPECT_EQ(ffi::Any(ref).type_key(), "ffi.String");

  // An rvalue-reference argument is seen as the object in its slot.
  ffi::ObjectRef target = MakeCountedObject(1);
  TVMFFIObject* slot = target.get();
  TVMFFIAny rvalue = ffi::details::MakePod(kTVMFFIObjectRValueRef);
  rvalue.v_ptr = &slot;
  EXPECT(ffi::AnyView::FromRaw(rvalue).cast<ffi::ObjectRef>().same_as(target));
}

void TestFunctionCalls() {
  ffi::Function echo = ffi::Function::GetGlobalRequired("testing.echo");
  EXPECT_EQ(echo(42).cast<int64_t>(), 42);
  EXPECT_EQ(echo(1.5).cast<double>(), 1.5);
  EXPECT_EQ(echo("raw strings become strings").cast<std::string>(), "raw strings become strings");
  EXPECT_EQ(echo("raw strings become strings").type_index(), kTVMFFIStr);
  std::string with_nul("x\0y\0z", 5);
  EXPECT_EQ(echo(with_nul).cast<std::string>(), with_nul);
  EXPECT_EQ(echo(std::string_view("view")).cast<std::string>(), "view");

  ffi::Error err = ExpectError(__LINE__, [&] { echo(); });
  EXPECT_EQ(err.kind(), "TypeError");
  EXPECT(err.message().find("testing.echo") != std::string_view::npos);

  EXPECT(!ffi::Function::GetGlobal("no.such.function").has_value());
  err = ExpectError(__LINE__, [] { ffi::Function::GetGlobalRequired("no.such.function"); });
  EXPECT_EQ(err.kind(), "AttributeError");
  EXPECT_EQ(err.message(), "global function `no.such.function` is not registered");

  err = ExpectError(__LINE__, [] { ffi::Function()(1); });
  EXPECT_EQ(err.kind(), "RuntimeError");
}

void TestTypedFunctions() {
  ffi::Function add =
      ffi::Function::FromTyped("cpp.add", [](int64_t a, double b) { return a + b; });
  EXPECT_EQ(add.use_count(), 1u);
  EXPECT_EQ(add(1, 2.5).cast<double>(), 3.5);
  EXPECT_EQ(add(1, 2).cast<double>(), 3.0);  // int accepted as float
  EXPECT_EQ(add(true, 2).cast<double>(), 3.0);

  ffi::Error err = ExpectError(__LINE__, [&] { add(1, ffi::String("x")); });
  EXPECT_EQ(err.kind(), "TypeError");
  EXPECT_EQ(err.message(),
            "Mismatched type on argument #1 when calling: `cpp.add(0: int, 1: float) -> float`. "
            "Expected `float` but got `str`");
  err = ExpectError(__LINE__, [&] { add(1); });
  EXPECT_EQ(err.message(),
            "Mismatched number of arguments when calling: `cpp.add(0: int, 1: float) -> float`. "
            "Expected 2 but got 1 arguments");

  // Every parameter type the layer converts, and void results.
  ffi::Function describe = ffi::Function::FromTyped(
      "cpp.describe", [](ffi::String s, ffi::Bytes b, bool flag, DLDataType t, DLDevice d, void* p,
                         ffi::Array a, ffi::Any any, ffi::ObjectRef obj) {
        return s.str() + "/" + std::to_string(b.size()) + "/" + (flag ? "T" : "F") + "/" +
               std::to_string(t.bits) + "/" + std::to_string(d.device_id) + "/" +
               (p == nullptr ? "null" : "ptr") + "/" + std::to_string(a.size()) + "/" +
               any.type_key() + "/" + (obj.defined() ? "obj" : "none");
      });
  ffi::Any described = describe("text", ffi::Bytes("abc"), true, "float64", DLDevice{kDLCPU, 2},
                                nullptr, ffi::Array::Make(1, 2), 7, nullptr);
  EXPECT_EQ(described.cast<std::string>(), "text/3/T/64/2/null/2/int/none");
  err = ExpectError(__LINE__, [&] {
    describe("text", ffi::Bytes("abc"), true, "float64", DLDevice{kDLCPU, 2}, nullptr, 5, 7,
             nullptr);
  });
  EXPECT(err.message().find("Mismatched type on argument #6 when calling: `cpp.describe(0: "
                            "str, 1: bytes, 2: bool, 3: DataType, 4: Device, 5: "
                            "void*, 6: ffi.Array, 7: Any, 8: ffi.Object) -> str`. "
                            "Expected `ffi.Array` but got `int`") == 0);

  int calls = 0;
  ffi::Function side_effect =
      ffi::Function::FromTyped("cpp.side_effect", [&calls](int n) { calls += n; });
  EXPECT(side_effect(5).is_none());
  EXPECT_EQ(calls, 5);

  // A C++ function called by the runtime (testing.apply calls its first argument).
  ffi::Function apply = ffi::Function::GetGlobalRequired("testing.apply");
  EXPECT_EQ(apply(add, 10, 0.5).cast<double>(), 10.5);
  err = ExpectError(__LINE__, [&] { apply(add, "x", 0.5); });
  EXPECT(err.message().find("Mismatched type on argument #0") == 0);
}

void TestPackedFunctionsAndGlobals() {
  auto drops = std::make_shared<std::atomic<int>>(0);
  {
    DropFlag flag(drops);
    ffi::Function count = ffi::Function::FromPacked([flag](ffi::PackedArgs args) {
      int64_t total = 0;
      for (int32_t i = 0; i < args.size(); ++i) total += args[i].cast<int64_t>();
      return total;
    });
    EXPECT_EQ(count(1, 2, 3).cast<int64_t>(), 6);
    EXPECT_EQ(count().cast<int64_t>(), 0);
    EXPECT_EQ(TVMFFIFunctionGetCellPtr(count.get())->cpp_call, nullptr);

    // Registered, found again (same object), and refused a second time without override.
    const char* name = "cpp_layer_tests.count";
    ffi::Function::SetGlobal(name, count, /*allow_override=*/true);
    ffi::Function found = ffi::Function::GetGlobalRequired(name);
    EXPECT(found.same_as(count));
    EXPECT_EQ(found(4, 5).cast<int64_t>(), 9);
    ffi::Error err = ExpectError(__LINE__, [&] { ffi::Function::SetGlobal(name, count); });
    EXPECT_EQ(err.kind(), "RuntimeError");
    EXPECT(ffi::Function::GetGlobalRequired("ffi.FunctionRemoveGlobal")(name).cast<bool>());
    EXPECT(!ffi::Function::GetGlobal(name).has_value());

    // The closure (with its captured DropFlag) dies with the last function reference.
    int before = drops->load();
    found = ffi::Function();
    EXPECT_EQ(drops->load(), before);
    count = ffi::Function();
    EXPECT_EQ(drops->load(), before + 1);
  }

  ffi::Function nothing = ffi::Function::FromPacked([](ffi::PackedArgs) {});
  EXPECT(nothing(1, "two").is_none());
}

void TestErrors() {
  // TVM_FFI_THROW: kind, message, and a backtrace starting at the throwing line.
  int line = 0;
  ffi::Error err = ExpectError(__LINE__, [&] {
    line = __LINE__ + 1;
    TVM_FFI_THROW(ValueError) << "bad value " << 42 << " and " << ffi::String("text");
  });
  EXPECT_EQ(err.kind(), "ValueError");
  EXPECT_EQ(err.message(), "bad value 42 and text");
  EXPECT_EQ(std::string(err.what()), "bad value 42 and text");
  std::string expected_frame = "layer_tests.cc\", line " + std::to_string(line);
  EXPECT(err.backtrace().find(expected_frame) != std::string_view::npos) << err.backtrace();
  EXPECT_EQ(err.object().type_index(), kTVMFFIError);

  // Through the slot: the same object comes back.
  err.SetRaised();
  ffi::Error again = ffi::Error::FromRaised();
  EXPECT(again.object().same_as(err.object()));
  ffi::Error empty = ffi::Error::FromRaised();
  EXPECT_EQ(empty.kind(), "InternalError");

  err.UpdateBacktrace("  File \"extra\", line 1, in appended\n", /*append=*/true);
  EXPECT(err.backtrace().find("appended") != std::string_view::npos);

  // An error raised by the runtime.
  ffi::Function raise = ffi::Function::GetGlobalRequired("testing.test_raise_error");
  err = ExpectError(__LINE__, [&] { raise("KeyError", "no such key"); });
  EXPECT_EQ(err.kind(), "KeyError");
  EXPECT_EQ(err.message(), "no such key");
  // Its backtrace is made when asked for: backtrace() asks, through update_backtrace.
  EXPECT(err.backtrace().find("File \"") != std::string_view::npos) << err.backtrace();

  // Errors of C++ callees cross the runtime (testing.apply) and come back with their kind.
  ffi::Function apply = ffi::Function::GetGlobalRequired("testing.apply");
  ffi::Function throws_ffi = ffi::Function::FromPacked(
      [](ffi::PackedArgs) -> int { TVM_FFI_THROW(IndexError) << "index out of range"; });
  err = ExpectError(__LINE__, [&] { apply(throws_ffi); });
  EXPECT_EQ(err.kind(), "IndexError");
  EXPECT_EQ(err.message(), "index out of range");
  ffi::Function throws_std = ffi::Function::FromPacked(
      [](ffi::PackedArgs) -> int { throw std::runtime_error("a std::runtime_error"); });
  err = ExpectError(__LINE__, [&] { apply(throws_std); });
  EXPECT_EQ(err.kind(), "InternalError");
  EXPECT_EQ(err.message(), "a std::runtime_error");

  // SetRaisedFromCurrentException, for hand-written safe-call functions.
  int rc = 0;
  try {
    throw std::out_of_range("out of range");
  } catch (...) {
    rc = ffi::SetRaisedFromCurrentException();
  }
  EXPECT_EQ(rc, -1);
  err = ffi::Error::FromRaised();
  EXPECT_EQ(err.kind(), "InternalError");
  EXPECT_EQ(err.message(), "out of range");

  // Errors are values too.
  ffi::Any as_any = err;
  EXPECT_EQ(as_any.type_key(), "ffi.Error");
  EXPECT_EQ(as_any.cast<ffi::Error>().message(), "out of range");
}

void TestArrays() {
  ffi::Array a = ffi::Array::Make(1, 2.5, "three", ffi::String("a string of some length"));
  EXPECT_EQ(a.size(), 4);
  EXPECT(!a.is_list());
  EXPECT_EQ(a.type_index(), kTVMFFIArray);
  EXPECT_EQ(a[0].cast<int64_t>(), 1);
  EXPECT_EQ(a[1].cast<double>(), 2.5);
  EXPECT_EQ(a[2].cast<std::string>(), "three");
  EXPECT_EQ(a[3].type_index(), kTVMFFIStr);
  std::vector<std::string> keys;
  for (ffi::AnyView item : a) keys.push_back(item.type_key());
  EXPECT_EQ(keys.size(), 4u);
  EXPECT_EQ(keys[1], "float");
  ffi::Error err = ExpectError(__LINE__, [&] { a.at(4); });
  EXPECT_EQ(err.kind(), "IndexError");

  ffi::Array ints = ffi::Array::FromValues({ffi::Any(3), ffi::Any(4), ffi::Any(5)});
  std::vector<int64_t> values = ints.ToVector<int64_t>();
  EXPECT(values == (std::vector<int64_t>{3, 4, 5}));
  err = ExpectError(__LINE__, [&] { a.ToVector<int64_t>(); });
  EXPECT_EQ(err.kind(), "TypeError");

  ffi::Array empty = ffi::Array::Make();
  EXPECT(empty.defined() && empty.empty());
  EXPECT(ffi::Array().empty());

  // Arrays through the runtime: the same object comes back; the runtime reads the elements.
  ffi::Function echo = ffi::Function::GetGlobalRequired("testing.echo");
  EXPECT(echo(ints).cast<ffi::Array>().same_as(ints));
  EXPECT_EQ(ffi::Function::GetGlobalRequired("ffi.ArraySize")(ints).cast<int64_t>(), 3);
  EXPECT_EQ(ffi::Function::GetGlobalRequired("ffi.ArrayGetItem")(ints, 2).cast<int64_t>(), 5);

  // A List is read through the same cell.
  ffi::Array list = ffi::Function::GetGlobalRequired("ffi.List")(7, 8, "nine").cast<ffi::Array>();
  EXPECT(list.is_list());
  EXPECT_EQ(list.size(), 3);
  EXPECT_EQ(list[2].cast<std::string>(), "nine");
  EXPECT_EQ(ffi::Any(list).type_key(), "ffi.List");

  err = ExpectError(__LINE__, [] { ffi::Any(1).cast<ffi::Array>(); });
  EXPECT_EQ(err.message(), "Cannot convert from type `int` to `ffi.Array`");
}

void TestTensorViews() {
  float data[6] = {0, 1, 2, 3, 4, 5};
  int64_t shape[2] = {2, 3};
  DLTensor t;
  std::memset(&t, 0, sizeof(t));
  t.data = data;
  t.device = DLDevice{kDLCPU, 0};
  t.ndim = 2;
  t.dtype = DLDataType{kDLFloat, 32, 1};
  t.shape = shape;
  t.strides = nullptr;  // compact strides are filled in by the view

  ffi::TensorView view(&t);
  EXPECT(view.strides() != nullptr);
  EXPECT_EQ(view.stride(0), 3);
  EXPECT_EQ(view.stride(1), 1);
  EXPECT(view.IsFloat32() && view.IsContiguous());
  EXPECT_EQ(view.numel(), 6);
  EXPECT(view.object() == nullptr);
  ffi::TensorView copy = view;
  EXPECT(copy.strides() != view.strides() && copy.stride(0) == 3);

  int64_t transposed_strides[2] = {1, 2};
  DLTensor transposed = t;
  transposed.strides = transposed_strides;
  EXPECT(!ffi::TensorView(&transposed).IsContiguous());
  int64_t unit_strides[2] = {99, 1};
  int64_t unit_shape[2] = {1, 3};
  DLTensor unit = t;
  unit.shape = unit_shape;
  unit.strides = unit_strides;
  EXPECT(ffi::TensorView(&unit).IsContiguous());  // extents of 1 may have any stride

  // As an argument: a DLTensor* is accepted for TensorView and DLTensor* parameters.
  ffi::Function sum = ffi::Function::FromTyped("cpp.sum", [](ffi::TensorView v) {
    const float* p = static_cast<const float*>(v.data_ptr());
    double total = 0;
    for (int64_t i = 0; i < v.numel(); ++i) total += p[i];
    return total;
  });
  EXPECT_EQ(sum(&t).cast<double>(), 15.0);
  EXPECT_EQ(sum(view).cast<double>(), 15.0);
  ffi::Function ndim = ffi::Function::FromTyped("cpp.ndim", [](DLTensor* p) { return p->ndim; });
  EXPECT_EQ(ndim(&t).cast<int>(), 2);
  ffi::Error err = ExpectError(__LINE__, [&] { sum(1.0); });
  EXPECT_EQ(err.message(),
            "Mismatched type on argument #0 when calling: `cpp.sum(0: ffi.Tensor) -> float`. "
            "Expected `ffi.Tensor` but got `float`");
}

// Runs `body` with the process's stderr (fd 2) sent to a temporary file; returns what it wrote.
template <typename Body>
std::string CaptureStderr(Body&& body) {
  std::fflush(stderr);
  FILE* capture = std::tmpfile();
  EXPECT(capture != nullptr);
  int saved = dup(2);
  dup2(fileno(capture), 2);
  body();
  std::fflush(stderr);
  dup2(saved, 2);
  close(saved);
  std::string text;
  std::rewind(capture);
  char buf[256];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof(buf), capture)) > 0) text.append(buf, n);
  std::fclose(capture);
  return text;
}

void TestLoadTimeRegistration() {
  // The TVM_FFI_STATIC_INIT_BLOCK below ran when the library was loaded.
  ffi::Function init = ffi::Function::GetGlobalRequired("cpp_layer_tests.static_init");
  EXPECT_EQ(init("four").cast<int64_t>(), 4);

  // A registration that fails (the name is taken) is reported on stderr; nothing is thrown and
  // the existing function stays.
  ffi::Function echo_before = ffi::Function::GetGlobalRequired("testing.echo");
  std::string report = CaptureStderr([] {
    ffi::details::GlobalRegistrar registrar(
        "testing.echo", [](int64_t x) { return x; }, "layer_tests.cc", 1);
  });
  EXPECT(report.find("registering global function `testing.echo` failed (layer_tests.cc:1)") !=
         std::string::npos)
      << report;
  EXPECT(report.find("RuntimeError") != std::string::npos) << report;
  EXPECT(ffi::Function::GetGlobalRequired("testing.echo").same_as(echo_before));

  // So is an exception escaping a static-init block.
  report = CaptureStderr([] {
    ffi::details::RunStaticInit(
        +[] { TVM_FFI_THROW(ValueError) << "init failed"; }, "layer_tests.cc", 2);
  });
  EXPECT(report.find("TVM_FFI_STATIC_INIT_BLOCK failed (layer_tests.cc:2): ValueError: init "
                     "failed") != std::string::npos)
      << report;
}

// Exported: the tests, and helpers the Rust side calls with its own values.

// Reads an ffi.Tensor made by the runtime and returns (ndim, numel, sum, contiguous, float32).
ffi::Array InspectTensor(ffi::TensorView t) {
  double total = 0;
  if (t.IsFloat32()) {
    const float* p = static_cast<const float*>(t.data_ptr());
    for (int64_t i = 0; i < t.numel(); ++i) total += p[i];
  }
  return ffi::Array::Make(t.ndim(), t.numel(), total, t.IsContiguous(), t.IsFloat32(),
                          t.object() != nullptr);
}

}  // namespace

TVM_FFI_DLL_EXPORT_TYPED_FUNC(test_any_plain_values, TestAnyPlainValues);
TVM_FFI_DLL_EXPORT_TYPED_FUNC(test_strings, TestStrings);
TVM_FFI_DLL_EXPORT_TYPED_FUNC(test_object_ref_counts, TestObjectRefCounts);
TVM_FFI_DLL_EXPORT_TYPED_FUNC(test_function_calls, TestFunctionCalls);
TVM_FFI_DLL_EXPORT_TYPED_FUNC(test_typed_functions, TestTypedFunctions);
TVM_FFI_DLL_EXPORT_TYPED_FUNC(test_packed_functions_and_globals, TestPackedFunctionsAndGlobals);
TVM_FFI_DLL_EXPORT_TYPED_FUNC(test_errors, TestErrors);
TVM_FFI_DLL_EXPORT_TYPED_FUNC(test_arrays, TestArrays);
TVM_FFI_DLL_EXPORT_TYPED_FUNC(test_tensor_views, TestTensorViews);
TVM_FFI_DLL_EXPORT_TYPED_FUNC(test_load_time_registration, TestLoadTimeRegistration);
TVM_FFI_DLL_EXPORT_TYPED_FUNC(inspect_tensor, InspectTensor);

// Echoes its argument back through Any (owning conversion of whatever the caller passed).
TVM_FFI_DLL_EXPORT_TYPED_FUNC(echo_any, [](ffi::Any value) { return value; });

// Registered by a static-init block (the C++ example uses TVM_FFI_REGISTER_GLOBAL).
TVM_FFI_STATIC_INIT_BLOCK() {
  ffi::Function::SetGlobal("cpp_layer_tests.static_init",
                           ffi::Function::FromTyped("cpp_layer_tests.static_init",
                                                    [](ffi::String s) { return s.size(); }),
                           /*allow_override=*/true);
}
