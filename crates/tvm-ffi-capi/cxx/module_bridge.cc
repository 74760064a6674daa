// The bridge of module_bridge.h: virtual calls on any module for the Rust runtime, each behind
// a catch that turns what the callee throws into the error slot, and the global function
// `ffi.CxxModuleBridge` through which the runtime finds them.
#include "module_bridge.h"

#include <tvm/ffi/module.h>

#include "native_module.h"

namespace tvm::ffi::details {
namespace {

ModuleObj* Module_(TVMFFIObjectHandle handle) { return ModuleObj::FromHandle(handle); }

String Text(const TVMFFIByteArray* bytes) { return String(ToStringView(*bytes)); }

/*! \brief Stores `value` (None when it has none) in an owning result slot. */
template <typename T>
void StoreOptional(const Optional<T>& value, TVMFFIAny* out) {
  *out = value.has_value() ? Any(value.value()).Release() : NoneAny();
}

int Kind(TVMFFIObjectHandle self, TVMFFIAny* out) {
  return RunSafeCall([&] { *out = Any(String(Module_(self)->kind())).Release(); });
}

int GetPropertyMask(TVMFFIObjectHandle self, int32_t* out) {
  return RunSafeCall([&] { *out = Module_(self)->GetPropertyMask(); });
}

int GetFunction(TVMFFIObjectHandle self, const TVMFFIByteArray* name, TVMFFIAny* out) {
  return RunSafeCall([&] { StoreOptional(Module_(self)->GetFunction(Text(name)), out); });
}

int ImplementsFunction(TVMFFIObjectHandle self, const TVMFFIByteArray* name, int32_t* out) {
  return RunSafeCall([&] { *out = Module_(self)->ImplementsFunction(Text(name)) ? 1 : 0; });
}

int GetFunctionDoc(TVMFFIObjectHandle self, const TVMFFIByteArray* name, TVMFFIAny* out) {
  return RunSafeCall([&] { StoreOptional(Module_(self)->GetFunctionDoc(Text(name)), out); });
}

int GetFunctionMetadata(TVMFFIObjectHandle self, const TVMFFIByteArray* name, TVMFFIAny* out) {
  return RunSafeCall([&] { StoreOptional(Module_(self)->GetFunctionMetadata(Text(name)), out); });
}

int WriteToFile(TVMFFIObjectHandle self, const TVMFFIByteArray* file_name,
                const TVMFFIByteArray* format) {
  return RunSafeCall([&] { Module_(self)->WriteToFile(Text(file_name), Text(format)); });
}

int GetWriteFormats(TVMFFIObjectHandle self, TVMFFIAny* out) {
  return RunSafeCall([&] { *out = Any(Module_(self)->GetWriteFormats()).Release(); });
}

int SaveToBytes(TVMFFIObjectHandle self, TVMFFIAny* out) {
  return RunSafeCall([&] { *out = Any(Module_(self)->SaveToBytes()).Release(); });
}

int InspectSource(TVMFFIObjectHandle self, const TVMFFIByteArray* format, TVMFFIAny* out) {
  return RunSafeCall([&] { *out = Any(Module_(self)->InspectSource(Text(format))).Release(); });
}

int ImportModule(TVMFFIObjectHandle self, TVMFFIObjectHandle other) {
  return RunSafeCall([&] { Module_(self)->ImportModule(Module(ObjectRef::Borrow(other))); });
}

int ClearImports(TVMFFIObjectHandle self) {
  return RunSafeCall([&] { Module_(self)->ClearImports(); });
}

const TVMFFICxxModuleBridge* Bridge() {
  static const TVMFFICxxModuleBridge bridge = {
      sizeof(TVMFFICxxModuleBridge),
      NativeModuleVtable(),
      {Kind, GetPropertyMask, GetFunction, ImplementsFunction, GetFunctionDoc,
       GetFunctionMetadata, WriteToFile, GetWriteFormats, SaveToBytes, InspectSource,
       ImportModule, ClearImports},
  };
  return &bridge;
}

/*!
 * \brief Registers `ffi.CxxModuleBridge` when the library (or executable) is loaded, before the
 *  constructors of default priority (the runtime's registrations, which may make modules).
 */
__attribute__((constructor(101))) void RegisterBridge() {
  int rc = RunSafeCall([] {
    Function bridge = Function::FromPacked(
        [](PackedArgs) { return const_cast<void*>(static_cast<const void*>(Bridge())); });
    // A second copy of this code in the process keeps the first one's registration.
    Function::SetGlobal("ffi.CxxModuleBridge", bridge, false);
  });
  if (rc != 0) {
    // Nobody called the constructor, so nobody would read the slot: empty it.
    TVMFFIObjectHandle ignored = nullptr;
    TVMFFIErrorMoveFromRaised(&ignored);
    if (ignored != nullptr) TVMFFIObjectDecRef(ignored);
  }
}

}  // namespace
}  // namespace tvm::ffi::details
