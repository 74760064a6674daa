/*
 * tvm/ffi/error.h -- Error (a C++ exception holding an ffi.Error object), TVM_FFI_THROW, and the
 * bridges between exceptions and the thread's error slot of the C ABI.
 *
 *   TVM_FFI_THROW(ValueError) << "expected 3 dims, got " << ndim;
 *
 * builds the error through TVMFFIErrorCreate, with a backtrace starting at the throwing line, and
 * throws it. Code called through the ABI turns exceptions back into the slot with
 * SetRaisedFromCurrentException() (export.h and function.h do this for you).
 */
#ifndef TVM_FFI_ERROR_H_
#define TVM_FFI_ERROR_H_

#include <tvm/ffi/object.h>

#include <exception>
#include <new>
#include <sstream>
#include <string>
#include <string_view>
#include <utility>

namespace tvm::ffi {
namespace details {

/*! \brief A borrowed byte array over `text`. */
inline TVMFFIByteArray ToByteArray(std::string_view text) noexcept {
  TVMFFIByteArray array;
  array.data = text.data();
  array.size = text.size();
  return array;
}

/*! \brief A view of a byte array (empty when its size is 0, whatever its data pointer). */
inline std::string_view ToStringView(const TVMFFIByteArray& array) noexcept {
  return array.size == 0 ? std::string_view() : std::string_view(array.data, array.size);
}

}  // namespace details

/*!
 * \brief An ffi.Error as a C++ exception: kind, message and backtrace live in the error object,
 *  so the same object crosses the ABI unchanged (SetRaised / FromRaised).
 *
 *  The layout is the one C++ libraries built against Apache TVM FFI expect, so that an Error
 *  thrown by their code is caught here and the other way round: the std::exception part (its
 *  vtable pointer) at offset 0, the reference to the error object at offset 8, 16 bytes in all.
 *  what() returns the message, which error objects store NUL-terminated.
 */
class Error : public ObjectRef, public std::exception {
 public:
  /*! \brief Creates a new error object (TVMFFIErrorCreate). Throws std::bad_alloc if that fails. */
  Error(std::string_view kind, std::string_view message, std::string_view backtrace = {}) {
    TVMFFIByteArray kind_bytes = details::ToByteArray(kind);
    TVMFFIByteArray message_bytes = details::ToByteArray(message);
    TVMFFIByteArray backtrace_bytes = details::ToByteArray(backtrace);
    TVMFFIObjectHandle handle = nullptr;
    if (TVMFFIErrorCreate(&kind_bytes, &message_bytes, &backtrace_bytes, &handle) != 0) {
      throw std::bad_alloc();
    }
    obj_ = static_cast<TVMFFIObject*>(handle);
  }

  /*!
   * \brief Wraps an existing error object. Anything that is not an ffi.Error becomes a new
   *  InternalError saying so.
   */
  explicit Error(ObjectRef obj) {
    if (obj.type_index() == kTVMFFIError) {
      ObjectRef::operator=(std::move(obj));
    } else {
      *this = Error("InternalError", "an object that is not an ffi.Error was used as an error");
    }
  }

  /*! \brief The error kind, e.g. "ValueError". */
  std::string_view kind() const noexcept { return details::ToStringView(cell()->kind); }
  /*! \brief The message. */
  std::string_view message() const noexcept { return details::ToStringView(cell()->message); }
  /*!
   * \brief The backtrace text (most recent call first). An empty field is first asked for its
   *  text with an empty append, which a producer that makes the text on request (the Rust
   *  runtime) answers by filling it in.
   */
  std::string_view backtrace() const noexcept {
    if (cell()->backtrace.size == 0) {
      TVMFFIByteArray nothing{"", 0};
      cell()->update_backtrace(obj_, &nothing, kTVMFFIBacktraceUpdateModeAppend);
    }
    return details::ToStringView(cell()->backtrace);
  }
  /*! \brief The message (NUL-terminated in every error object of the ABI). */
  const char* what() const noexcept override {
    const TVMFFIByteArray& message = cell()->message;
    return message.size == 0 ? "" : message.data;
  }
  /*! \brief The ffi.Error object. */
  const ObjectRef& object() const noexcept { return *this; }

  /*! \brief Replaces (or, with append, extends) the backtrace of the error object. */
  void UpdateBacktrace(std::string_view text, bool append) const noexcept {
    TVMFFIByteArray bytes = details::ToByteArray(text);
    cell()->update_backtrace(
        obj_, &bytes,
        append ? kTVMFFIBacktraceUpdateModeAppend : kTVMFFIBacktraceUpdateModeReplace);
  }

  /*! \brief Puts this error in the calling thread's error slot (the slot takes a reference). */
  void SetRaised() const noexcept { TVMFFIErrorSetRaised(obj_); }

  /*!
   * \brief Takes the error out of the calling thread's slot. An empty slot (a callee that failed
   *  without raising) gives an InternalError saying so.
   */
  static Error FromRaised() {
    TVMFFIObjectHandle handle = nullptr;
    TVMFFIErrorMoveFromRaised(&handle);
    if (handle == nullptr) {
      return Error("InternalError", "a call failed without setting an error");
    }
    return Error(ObjectRef::Steal(handle));
  }

 private:
  TVMFFIErrorCell* cell() const noexcept { return TVMFFIErrorGetCellPtr(obj_); }
};

/*!
 * \brief Stores the exception being handled in the thread's error slot and returns -1; call it
 *  from a `catch (...)` block of a safe-call function. An Error is stored as is; another
 *  std::exception becomes an InternalError with its what(); anything else an InternalError too.
 */
inline int SetRaisedFromCurrentException() noexcept {
  try {
    throw;
  } catch (const Error& err) {
    err.SetRaised();
  } catch (const std::exception& err) {
    TVMFFIErrorSetRaisedFromCStr("InternalError", err.what());
  } catch (...) {
    TVMFFIErrorSetRaisedFromCStr("InternalError", "unknown C++ exception");
  }
  return -1;
}

namespace details {

/*! \brief Throws the error in the thread's slot if `rc` (a C API return code) is non-zero. */
inline void CheckCall(int rc) {
  if (rc != 0) throw Error::FromRaised();
}

/*! \brief Runs `body` and reports an exception it throws as a safe-call failure (-1). */
template <typename Body>
int RunSafeCall(Body&& body) noexcept {
  try {
    body();
    return 0;
  } catch (...) {
    return SetRaisedFromCurrentException();
  }
}

/*! \brief Collects the message of TVM_FFI_THROW. */
class ErrorBuilder {
 public:
  ErrorBuilder(const char* kind, const char* file, int line, const char* func)
      : kind_(kind), file_(file), line_(line), func_(func) {}

  template <typename T>
  ErrorBuilder& operator<<(const T& value) {
    stream_ << value;
    return *this;
  }

  /*! \brief Creates the error (backtrace from the throwing line) and throws it. */
  [[noreturn]] void Throw() {
    const TVMFFIByteArray* backtrace = TVMFFIBacktrace(file_, line_, func_, 0);
    std::string message = stream_.str();
    throw Error(kind_, message, backtrace != nullptr ? ToStringView(*backtrace) : "");
  }

 private:
  const char* kind_;
  const char* file_;
  int line_;
  const char* func_;
  std::ostringstream stream_;
};

/*! \brief `&` binds looser than `<<`: the whole message is collected before Throw runs. */
struct ErrorThrower {
  [[noreturn]] void operator&(ErrorBuilder& builder) const { builder.Throw(); }
  [[noreturn]] void operator&(ErrorBuilder&& builder) const { builder.Throw(); }
};

}  // namespace details
}  // namespace tvm::ffi

/*!
 * \brief Throws a tvm::ffi::Error of the given kind (an identifier such as ValueError, TypeError,
 *  RuntimeError) with the streamed message: `TVM_FFI_THROW(TypeError) << "got " << x;`.
 */
#define TVM_FFI_THROW(Kind)             \
  ::tvm::ffi::details::ErrorThrower() & \
      ::tvm::ffi::details::ErrorBuilder(#Kind, __FILE__, __LINE__, __func__)

/*! \brief Throws an error of `Kind` unless `cond` holds; more text may be streamed after it. */
#define TVM_FFI_CHECK(cond, Kind) \
  if (cond) {                     \
  } else                          \
    TVM_FFI_THROW(Kind) << "Check failed: (" #cond ") "

#endif  // TVM_FFI_ERROR_H_
