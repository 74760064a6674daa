/*
 * tvm/ffi/export.h -- exporting C++ functions from a shared library, and registering global
 * functions when the library is loaded.
 *
 *   int64_t Add(int64_t a, int64_t b) { return a + b; }
 *   TVM_FFI_DLL_EXPORT_TYPED_FUNC(add, Add);              // __tvm_ffi_add + its metadata
 *   TVM_FFI_DLL_EXPORT_TYPED_FUNC_DOC(add, "Adds two integers.");
 *   TVM_FFI_REGISTER_GLOBAL("mylib.add", Add);            // registered by dlopen
 *   TVM_FFI_STATIC_INIT_BLOCK() { ...any registration code... }
 *
 * Use the macros at namespace scope. Exported symbols (all TVMFFISafeCallType, called with
 * handle NULL by a module loader):
 *   __tvm_ffi_<name>            the function: converts the arguments to the parameter types
 *                               (TypeErrors name the function, the argument and both types)
 *   __tvm_ffi__metadata_<name>  0 arguments; a String {"type_schema":"<schema JSON, escaped>"}
 *   __tvm_ffi__doc_<name>       0 arguments; a String with the documentation
 */
#ifndef TVM_FFI_EXPORT_H_
#define TVM_FFI_EXPORT_H_

#include <tvm/ffi/any.h>
#include <tvm/ffi/error.h>
#include <tvm/ffi/function.h>

#include <cstdio>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>

namespace tvm::ffi::details {

/*! \brief `text` as the body of a JSON string literal. */
inline std::string JsonEscape(std::string_view text) {
  static const char kHex[] = "0123456789abcdef";
  std::string out;
  out.reserve(text.size() + 8);
  for (char c : text) {
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          out += "\\u00";
          out += kHex[(c >> 4) & 0xF];
          out += kHex[c & 0xF];
        } else {
          out += c;
        }
    }
  }
  return out;
}

/*! \brief Writes a new runtime String holding `text` into `result` (safe-call convention). */
inline int ReturnString(std::string_view text, TVMFFIAny* result) noexcept {
  TVMFFIByteArray bytes = ToByteArray(text);
  return TVMFFIStringFromByteArray(&bytes, result);
}

/*! \brief Body of __tvm_ffi_<name>. */
template <typename F>
int ExportedCall(const char* name, const F& f, const TVMFFIAny* args, int32_t num_args,
                 TVMFFIAny* result) noexcept {
  return RunSafeCall([&] {
    Any out = SignatureOf<F>::Call(name, f, args, num_args);
    *result = out.Release();
  });
}

/*! \brief Body of __tvm_ffi__metadata_<name>. */
template <typename F>
int ExportedMetadata(TVMFFIAny* result) noexcept {
  return RunSafeCall([&] {
    std::string json = "{\"type_schema\":\"" + JsonEscape(SignatureOf<F>::Schema()) + "\"}";
    CheckCall(ReturnString(json, result));
  });
}

/*! \brief Converts what TVM_FFI_REGISTER_GLOBAL was given into a Function. */
template <typename F>
Function ToGlobalFunction(const char* name, F&& f) {
  if constexpr (std::is_same_v<std::decay_t<F>, Function>) {
    return std::forward<F>(f);
  } else {
    return Function::FromTyped(name, std::forward<F>(f));
  }
}

/*! \brief Reports a failure of load-time registration on stderr (initializers must not throw). */
inline void ReportInitFailure(const char* what, const char* file, int line) noexcept {
  try {
    Error err = Error::FromRaised();
    std::string kind(err.kind());
    std::fprintf(stderr, "[tvm-ffi] %s failed (%s:%d): %s: %s\n", what, file, line, kind.c_str(),
                 err.what());
  } catch (...) {
    std::fprintf(stderr, "[tvm-ffi] %s failed (%s:%d)\n", what, file, line);
  }
}

/*! \brief A static object whose constructor registers a global function. */
struct GlobalRegistrar {
  template <typename F>
  GlobalRegistrar(const char* name, F&& f, const char* file, int line) noexcept {
    int rc = RunSafeCall(
        [&] { Function::SetGlobal(name, ToGlobalFunction(name, std::forward<F>(f)), false); });
    if (rc != 0) {
      std::string what = std::string("registering global function `") + name + "`";
      ReportInitFailure(what.c_str(), file, line);
    }
  }
};

/*! \brief Runs a TVM_FFI_STATIC_INIT_BLOCK body; an exception is reported, not propagated. */
inline int RunStaticInit(void (*body)(), const char* file, int line) noexcept {
  if (RunSafeCall(body) != 0) ReportInitFailure("TVM_FFI_STATIC_INIT_BLOCK", file, line);
  return 0;
}

}  // namespace tvm::ffi::details

#define TVM_FFI_CONCAT_IMPL(a, b) a##b
#define TVM_FFI_CONCAT(a, b) TVM_FFI_CONCAT_IMPL(a, b)

/*!
 * \brief Exports the callable (a function or a non-generic lambda) as `__tvm_ffi_<ExportName>`,
 *  with `__tvm_ffi__metadata_<ExportName>` describing its signature.
 */
#define TVM_FFI_DLL_EXPORT_TYPED_FUNC(ExportName, ...)                                             \
  static const auto tvm_ffi_exported_##ExportName = (__VA_ARGS__);                                 \
  extern "C" TVM_FFI_DLL_EXPORT int __tvm_ffi_##ExportName(void*, const TVMFFIAny* args,           \
                                                           int32_t num_args, TVMFFIAny* result) {  \
    return ::tvm::ffi::details::ExportedCall(#ExportName, tvm_ffi_exported_##ExportName, args,     \
                                             num_args, result);                                    \
  }                                                                                                \
  extern "C" TVM_FFI_DLL_EXPORT int __tvm_ffi__metadata_##ExportName(void*, const TVMFFIAny*,      \
                                                                     int32_t, TVMFFIAny* result) { \
    return ::tvm::ffi::details::ExportedMetadata<decltype(tvm_ffi_exported_##ExportName)>(result); \
  }                                                                                                \
  static_assert(true, "")

/*! \brief Exports `__tvm_ffi__doc_<ExportName>` returning DocString (a string literal). */
#define TVM_FFI_DLL_EXPORT_TYPED_FUNC_DOC(ExportName, DocString)                                  \
  extern "C" TVM_FFI_DLL_EXPORT int __tvm_ffi__doc_##ExportName(void*, const TVMFFIAny*, int32_t, \
                                                                TVMFFIAny* result) {              \
    return ::tvm::ffi::details::ReturnString(DocString, result);                                  \
  }                                                                                               \
  static_assert(true, "")

/*!
 * \brief Registers the global function `Name` (a string) when the library is loaded: the
 *  callable is wrapped with Function::FromTyped (a Function is registered as is). A failure
 *  (e.g. the name is taken) is printed to stderr; it does not abort loading.
 */
#define TVM_FFI_REGISTER_GLOBAL(Name, ...)                                           \
  [[maybe_unused]] static const ::tvm::ffi::details::GlobalRegistrar TVM_FFI_CONCAT( \
      tvm_ffi_global_registrar_, __COUNTER__)(Name, __VA_ARGS__, __FILE__, __LINE__)

/*!
 * \brief A block of code run when the library is loaded: `TVM_FFI_STATIC_INIT_BLOCK() { ... }`.
 *  An exception it throws is printed to stderr instead of propagating.
 */
#define TVM_FFI_STATIC_INIT_BLOCK() \
  TVM_FFI_STATIC_INIT_BLOCK_IMPL(TVM_FFI_CONCAT(tvm_ffi_static_init_, __COUNTER__))
#define TVM_FFI_STATIC_INIT_BLOCK_IMPL(Fn)                         \
  static void Fn();                                                \
  [[maybe_unused]] static const int TVM_FFI_CONCAT(Fn, _done) =    \
      ::tvm::ffi::details::RunStaticInit(&Fn, __FILE__, __LINE__); \
  static void Fn()

#endif  // TVM_FFI_EXPORT_H_
