// NativeModuleObj: the C++ face of the modules the Rust runtime makes. The runtime allocates
// them itself and stores this class's vtable pointer before the header; each virtual function
// calls the module's table of Rust functions (module_bridge.h) and throws a failure as
// tvm::ffi::Error, so C++ code calls these modules as it calls its own.
#include "native_module.h"

#include <cstddef>
#include <cstring>

namespace tvm::ffi::details {
namespace {

void Check(int rc) {
  if (rc != 0) throw Error::FromRaised();
}

TVMFFIByteArray Bytes(const String& text) { return ToByteArray(text.view()); }

/*! \brief Takes over an owning result that is None or a T. */
template <typename T>
Optional<T> OptionalResult(const TVMFFIAny& owned) {
  Any value = Any::FromOwnedRaw(owned);
  if (value.is_none()) return std::nullopt;
  return value.cast<T>();
}

/*! \brief Takes over an owning result that is a T. */
template <typename T>
T Result(const TVMFFIAny& owned) {
  return Any::FromOwnedRaw(owned).cast<T>();
}

class NativeModuleObj final : public ModuleObj {
 public:
  const char* kind() const override { return kind_; }

  int GetPropertyMask() const override {
    int32_t mask = 0;
    Check(methods_->get_property_mask(Self(), &mask));
    return mask;
  }

  Optional<Function> GetFunction(const String& name) override {
    TVMFFIAny out = NoneAny();
    TVMFFIByteArray bytes = Bytes(name);
    Check(methods_->get_function(Self(), &bytes, &out));
    return OptionalResult<Function>(out);
  }

  bool ImplementsFunction(const String& name) override {
    int32_t found = 0;
    TVMFFIByteArray bytes = Bytes(name);
    Check(methods_->implements_function(Self(), &bytes, &found));
    return found != 0;
  }

  Optional<String> GetFunctionDoc(const String& name) override {
    TVMFFIAny out = NoneAny();
    TVMFFIByteArray bytes = Bytes(name);
    Check(methods_->get_function_doc(Self(), &bytes, &out));
    return OptionalResult<String>(out);
  }

  Optional<String> GetFunctionMetadata(const String& name) override {
    TVMFFIAny out = NoneAny();
    TVMFFIByteArray bytes = Bytes(name);
    Check(methods_->get_function_metadata(Self(), &bytes, &out));
    return OptionalResult<String>(out);
  }

  void WriteToFile(const String& file_name, const String& format) const override {
    TVMFFIByteArray file_bytes = Bytes(file_name);
    TVMFFIByteArray format_bytes = Bytes(format);
    Check(methods_->write_to_file(Self(), &file_bytes, &format_bytes));
  }

  Array GetWriteFormats() const override {
    TVMFFIAny out = NoneAny();
    Check(methods_->get_write_formats(Self(), &out));
    return Result<Array>(out);
  }

  ffi::Bytes SaveToBytes() const override {
    TVMFFIAny out = NoneAny();
    Check(methods_->save_to_bytes(Self(), &out));
    return Result<ffi::Bytes>(out);
  }

  String InspectSource(const String& format) const override {
    TVMFFIAny out = NoneAny();
    TVMFFIByteArray bytes = Bytes(format);
    Check(methods_->inspect_source(Self(), &bytes, &out));
    return Result<String>(out);
  }

  void ImportModule(const Module& other) override {
    Check(methods_->import_module(Self(), other.get()));
  }

  void ClearImports() override { Check(methods_->clear_imports(Self())); }

  /*! \brief The offsets module_bridge.h promises, from the start of the object. */
  static void CheckLayout() {
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Winvalid-offsetof"
    static_assert(sizeof(ModuleObj) == 48, "ModuleObj is 48 bytes");
    static_assert(offsetof(NativeModuleObj, methods_) == 48, "methods at handle + 40");
    static_assert(offsetof(NativeModuleObj, kind_) == 56, "kind at handle + 48");
#pragma GCC diagnostic pop
  }

 private:
  TVMFFIObjectHandle Self() const { return const_cast<TVMFFIObject*>(handle()); }

  const TVMFFIModuleMethods* methods_ = nullptr;
  const char* kind_ = "";
};

}  // namespace

const void* NativeModuleVtable() {
  static const void* vtable = [] {
    NativeModuleObj probe;
    const void* vptr = nullptr;
    std::memcpy(&vptr, static_cast<const void*>(&probe), sizeof(vptr));
    return vptr;
  }();
  return vtable;
}

}  // namespace tvm::ffi::details
