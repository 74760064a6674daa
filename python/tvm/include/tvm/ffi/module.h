/*
 * tvm/ffi/module.h -- ModuleObj and Module: named collections of functions with imports.
 *
 * ModuleObj is the C++ base class of modules, with the layout and virtual functions of the class
 * of the same name that C++ libraries built against Apache TVM FFI derive from (their library
 * modules, Relax VM executables, ...):
 *
 *   offset  0  the vtable pointer
 *   offset  8  the object header (TVMFFIObject); a module handle of the C ABI points here
 *   offset 32  imports_ (an ffi.Array of modules)
 *   offset 40  the import lookup cache (reserved)
 *   size   48
 *
 * Every module of the process has this shape, whoever made it: modules of the Rust runtime carry
 * a vtable whose functions call into the runtime, and C++ subclasses are called through theirs by
 * the runtime's `ffi.Module*` functions. There is no virtual destructor: a module is freed by
 * the deleter in its header (MakeModule installs one for C++ subclasses).
 */
#ifndef TVM_FFI_MODULE_H_
#define TVM_FFI_MODULE_H_

#include <tvm/ffi/container.h>
#include <tvm/ffi/function.h>
#include <tvm/ffi/optional.h>
#include <tvm/ffi/string.h>

#include <cstddef>
#include <new>
#include <utility>

namespace tvm::ffi {

class Module;

namespace details {
struct ModuleAccess;
}  // namespace details

/*! \brief The base class of modules (see the file comment for the layout). */
class TVM_FFI_DLL ModuleObj {
 public:
  /*! \brief Property bits of GetPropertyMask. */
  enum PropertyMask : int {
    kBinarySerializable = 0b001,
    kRunnable = 0b010,
    kCompilationExportable = 0b100,
  };

  /*! \brief The module kind, such as "library" (a NUL-terminated string the module owns). */
  virtual const char* kind() const = 0;
  /*! \brief The property bits (PropertyMask). */
  virtual int GetPropertyMask() const { return 0; }
  /*! \brief The module's own function `name`, or none. */
  virtual Optional<Function> GetFunction(const String& name) = 0;
  /*! \brief Whether the module (not its imports) has function `name`. */
  virtual bool ImplementsFunction(const String& name) { return GetFunction(name).has_value(); }
  /*! \brief The documentation of function `name`, if recorded. */
  virtual Optional<String> GetFunctionDoc(const String& /*name*/) { return std::nullopt; }
  /*! \brief The JSON type schema of function `name`, if recorded. */
  virtual Optional<String> GetFunctionMetadata(const String& /*name*/) { return std::nullopt; }
  /*! \brief Writes the module to a file; by default a RuntimeError naming the kind. */
  virtual void WriteToFile(const String& file_name, const String& format) const;
  /*! \brief The formats WriteToFile accepts (an array of strings). */
  virtual Array GetWriteFormats() const { return Array(); }
  /*! \brief The module serialized to bytes; by default a RuntimeError naming the kind. */
  virtual Bytes SaveToBytes() const;
  /*! \brief The module's source in `format`, empty when it has none. */
  virtual String InspectSource(const String& /*format*/) const { return String(); }
  /*! \brief Adds `other` to the imports; a RuntimeError if that would make a cycle. */
  virtual void ImportModule(const Module& other);
  /*! \brief Removes every import. */
  virtual void ClearImports();

  /*! \brief Function `name` of the module, then (with query_imports) of its imports, depth first. */
  Optional<Function> GetFunction(const String& name, bool query_imports);
  /*! \brief Whether the module, or (with query_imports) one of its imports, has `name`. */
  bool ImplementsFunction(const String& name, bool query_imports);
  /*! \brief GetFunctionDoc of the module, then (with query_imports) of its imports. */
  Optional<String> GetFunctionDoc(const String& name, bool query_imports);
  /*! \brief GetFunctionMetadata of the module, then (with query_imports) of its imports. */
  Optional<String> GetFunctionMetadata(const String& name, bool query_imports);

  /*! \brief The imported modules. */
  const Array& imports() const noexcept { return imports_; }
  /*! \brief The handle of the C ABI (the object header). */
  TVMFFIObject* handle() noexcept { return &header_; }
  const TVMFFIObject* handle() const noexcept { return &header_; }
  /*! \brief The module whose handle is `handle` (a live ffi.Module object). */
  static ModuleObj* FromHandle(TVMFFIObjectHandle handle) noexcept {
    return reinterpret_cast<ModuleObj*>(static_cast<char*>(handle) - sizeof(void*));
  }

  struct InternalUnsafe;

 protected:
  ModuleObj() noexcept {
    header_.combined_ref_count = 0;
    header_.type_index = kTVMFFIModule;
    header_.__padding = 0;
    header_.deleter = nullptr;
  }
  ModuleObj(const ModuleObj&) = delete;
  ModuleObj& operator=(const ModuleObj&) = delete;
  ~ModuleObj() = default;

  /*! \brief The object header of the C ABI. */
  TVMFFIObject header_;
  /*! \brief The imported modules (an ffi.Array). */
  Array imports_;

 private:
  friend struct details::ModuleAccess;
  ObjectRef import_lookup_cache_;
};

/*! \brief A reference to a module. */
class Module : public ObjectRef {
 public:
  Module() noexcept = default;
  /*! \brief Wraps a module object; a TypeError if `ref` is defined and not an ffi.Module. */
  explicit Module(ObjectRef ref) : ObjectRef(std::move(ref)) {
    if (defined() && type_index() != kTVMFFIModule) {
      TVM_FFI_THROW(TypeError) << "Expected `ffi.Module` but got `"
                               << TypeIndexToUserTypeName(type_index()) << "`";
    }
  }

  /*! \brief The module object (the reference must be defined). */
  ModuleObj* operator->() const noexcept { return ModuleObj::FromHandle(get()); }
  ModuleObj& operator*() const noexcept { return *ModuleObj::FromHandle(get()); }

  /*! \brief Loads a module from a file (`ffi.ModuleLoadFromFile`: by its extension). */
  TVM_FFI_DLL static Module LoadFromFile(const String& file_name);
  /*! \brief Calls `callback(name, address)` for each symbol the runtime fills in libraries. */
  TVM_FFI_DLL static void VisitContextSymbols(
      const TypedFunction<void(String, void*)>& callback);
};

template <>
struct TypeTraits<Module> {
  static constexpr bool kEnabled = true;
  static constexpr const char* kTypeName = "ffi.Module";
  static void ToView(const Module& value, TVMFFIAny* out) noexcept {
    *out = details::ObjectView(value.get());
  }
  static void MoveToAny(Module value, TVMFFIAny* out) noexcept {
    *out = details::ObjectView(value.release());
  }
  static std::optional<Module> TryFrom(const TVMFFIAny& v) {
    if (v.type_index == kTVMFFIModule) return Module(ObjectRef::Borrow(v.v_obj));
    return std::nullopt;
  }
};

namespace details {

/*! \brief What MakeModule needs of ModuleObj's protected members. */
struct ModuleAccess {
  static void Adopt(ModuleObj* obj, void (*deleter)(void*, int), Array imports) noexcept {
    obj->header_.combined_ref_count = kTVMFFIObjectBothOne;
    obj->header_.type_index = kTVMFFIModule;
    obj->header_.deleter = deleter;
    obj->imports_ = std::move(imports);
  }
};

/*! \brief The deleter of modules made by MakeModule<T>: destroys (strong) and frees (weak). */
template <typename T>
void DeleteModule(void* handle, int flags) {
  T* obj = static_cast<T*>(ModuleObj::FromHandle(handle));
  if (flags & kTVMFFIObjectDeleterFlagBitMaskStrong) obj->~T();
  if (flags & kTVMFFIObjectDeleterFlagBitMaskWeak) ::operator delete(static_cast<void*>(obj));
}

}  // namespace details

/*!
 * \brief Makes a module of the C++ subclass T (constructed from `args`), owned by the returned
 *  reference and freed by its header's deleter.
 */
template <typename T, typename... Args>
Module MakeModule(Args&&... args) {
  static_assert(std::is_base_of_v<ModuleObj, T>, "MakeModule makes subclasses of ModuleObj");
  static_assert(alignof(T) <= alignof(std::max_align_t), "over-aligned modules are not supported");
  Array imports = Array::Make();
  void* memory = ::operator new(sizeof(T));
  T* obj;
  try {
    obj = new (memory) T(std::forward<Args>(args)...);
  } catch (...) {
    ::operator delete(memory);
    throw;
  }
  details::ModuleAccess::Adopt(obj, &details::DeleteModule<T>, std::move(imports));
  return Module(ObjectRef::Steal(obj->handle()));
}

}  // namespace tvm::ffi

#endif  // TVM_FFI_MODULE_H_
