/*
 * tvm/ffi/function.h -- Function: an owning reference to an ffi.Function, callable from C++ with
 * any convertible arguments, and made from C++ callables through TVMFFIFunctionCreate.
 *
 *   Function add = Function::FromTyped("add", [](int64_t a, int64_t b) { return a + b; });
 *   int64_t three = add(1, 2).cast<int64_t>();
 *   Function::SetGlobal("my.add", add);
 *   Any echoed = Function::GetGlobalRequired("testing.echo")("hello");
 *
 * Typed functions convert each argument with TypeTraits and report mismatches as TypeErrors:
 *   Mismatched number of arguments when calling: `add(0: int, 1: int) -> int`. Expected 2 but
 *   got 1 arguments
 *   Mismatched type on argument #1 when calling: `add(0: int, 1: int) -> int`. Expected `int`
 *   but got `str`
 * (types by the names users know: `str` and `bytes` for the string and byte types).
 */
#ifndef TVM_FFI_FUNCTION_H_
#define TVM_FFI_FUNCTION_H_

#include <tvm/ffi/any.h>
#include <tvm/ffi/error.h>
#include <tvm/ffi/object.h>

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <utility>

namespace tvm::ffi {

/*! \brief The borrowed arguments of a packed call. */
class PackedArgs {
 public:
  PackedArgs(const TVMFFIAny* args, int32_t num_args) noexcept : args_(args), size_(num_args) {}
  int32_t size() const noexcept { return size_; }
  const TVMFFIAny* data() const noexcept { return args_; }
  AnyView operator[](int32_t i) const noexcept { return AnyView::FromRaw(args_[i]); }

 private:
  const TVMFFIAny* args_;
  int32_t size_;
};

namespace details {

/*! \brief Writes the view of one call argument; `holder` keeps what the view needs alive. */
template <typename T, typename = std::enable_if_t<kConvertible<T>>>
void PackArg(const T& value, TVMFFIAny* view, Any*) noexcept {
  TypeTraits<T>::ToView(value, view);
}
inline void PackArg(const char* value, TVMFFIAny* view, Any*) noexcept {
  *view = AnyView(value).raw();
}
// Strings may hold NUL bytes and string_views are not terminated: pass a copy as a String.
inline void PackArg(const std::string& value, TVMFFIAny* view, Any* holder) {
  *holder = Any(String(value));
  *view = holder->raw();
}
inline void PackArg(std::string_view value, TVMFFIAny* view, Any* holder) {
  *holder = Any(String(value));
  *view = holder->raw();
}

/*! \brief The schema name of a return type ("None" for void); messages use UserTypeName of it. */
template <typename R>
constexpr const char* ReturnTypeName() {
  if constexpr (std::is_void_v<R>) {
    return "None";
  } else {
    return TypeTraits<std::decay_t<R>>::kTypeName;
  }
}

/*! \brief Calling convention and description of a typed signature R(Args...). */
template <typename R, typename... Args>
struct TypedSignature {
  static constexpr size_t kNumArgs = sizeof...(Args);

  /*! \brief "name(0: T0, 1: T1) -> R", as in the TypeError messages. */
  static std::string Text(std::string_view name) {
    const char* names[] = {TypeTraits<std::decay_t<Args>>::kTypeName..., nullptr};
    std::string text(name);
    text += '(';
    for (size_t i = 0; i < kNumArgs; ++i) {
      if (i != 0) text += ", ";
      text += std::to_string(i) + ": " + UserTypeName(names[i]);
    }
    text += ") -> ";
    text += UserTypeName(ReturnTypeName<R>());
    return text;
  }

  /*! \brief The type schema: {"type":"ffi.Function","args":[ret, params...]}. */
  static std::string Schema() {
    const char* names[] = {ReturnTypeName<R>(), TypeTraits<std::decay_t<Args>>::kTypeName...};
    std::string json = "{\"type\":\"ffi.Function\",\"args\":[";
    for (size_t i = 0; i <= kNumArgs; ++i) {
      if (i != 0) json += ',';
      json += "{\"type\":\"";
      json += names[i];
      json += "\"}";
    }
    json += "]}";
    return json;
  }

  /*! \brief Checks and converts the arguments, calls `f`, and returns its result as an Any. */
  template <typename F>
  static Any Call(std::string_view name, const F& f, const TVMFFIAny* args, int32_t num_args) {
    if (num_args != static_cast<int32_t>(kNumArgs)) {
      TVM_FFI_THROW(TypeError) << "Mismatched number of arguments when calling: `" << Text(name)
                               << "`. Expected " << kNumArgs << " but got " << num_args
                               << " arguments";
    }
    return CallUnpacked(name, f, args, std::index_sequence_for<Args...>());
  }

 private:
  template <typename T>
  static T Arg(std::string_view name, const TVMFFIAny* args, size_t i) {
    TVMFFIAny value = Normalize(args[i]);
    std::optional<T> converted = TypeTraits<T>::TryFrom(value);
    if (!converted.has_value()) {
      TVM_FFI_THROW(TypeError) << "Mismatched type on argument #" << i << " when calling: `"
                               << Text(name) << "`. Expected `"
                               << UserTypeName(TypeTraits<T>::kTypeName) << "` but got `"
                               << TypeIndexToUserTypeName(value.type_index) << "`";
    }
    return std::move(*converted);
  }

  template <typename F, size_t... I>
  static Any CallUnpacked(std::string_view name, const F& f, const TVMFFIAny* args,
                          std::index_sequence<I...>) {
    (void)name;  // unused when there are no arguments
    (void)args;
    // Braced initialization converts the arguments left to right.
    std::tuple<std::decay_t<Args>...> unpacked{Arg<std::decay_t<Args>>(name, args, I)...};
    if constexpr (std::is_void_v<R>) {
      std::apply(f, std::move(unpacked));
      return Any();
    } else {
      return Any(std::apply(f, std::move(unpacked)));
    }
  }
};

/*!
 * \brief The TypedSignature of a callable type: function, function pointer, or a class with one
 *  non-template operator() (a lambda). Use SignatureOf<F>, which strips const and references.
 */
template <typename F>
struct CallableSignature : CallableSignature<decltype(&F::operator())> {};
template <typename R, typename... Args>
struct CallableSignature<R(Args...)> : TypedSignature<R, Args...> {};
template <typename R, typename... Args>
struct CallableSignature<R(Args...) noexcept> : TypedSignature<R, Args...> {};
template <typename R, typename... Args>
struct CallableSignature<R (*)(Args...)> : TypedSignature<R, Args...> {};
template <typename R, typename... Args>
struct CallableSignature<R (*)(Args...) noexcept> : TypedSignature<R, Args...> {};
template <typename C, typename R, typename... Args>
struct CallableSignature<R (C::*)(Args...)> : TypedSignature<R, Args...> {};
template <typename C, typename R, typename... Args>
struct CallableSignature<R (C::*)(Args...) const> : TypedSignature<R, Args...> {};
template <typename C, typename R, typename... Args>
struct CallableSignature<R (C::*)(Args...) noexcept> : TypedSignature<R, Args...> {};
template <typename C, typename R, typename... Args>
struct CallableSignature<R (C::*)(Args...) const noexcept> : TypedSignature<R, Args...> {};

template <typename F>
using SignatureOf = CallableSignature<std::decay_t<F>>;

/*! \brief The heap cell behind Function::FromPacked: `self` of TVMFFIFunctionCreate. */
template <typename F>
struct PackedClosure {
  F callable;

  static int SafeCall(void* self, const TVMFFIAny* args, int32_t num_args,
                      TVMFFIAny* result) noexcept {
    return RunSafeCall([&] {
      F& f = static_cast<PackedClosure*>(self)->callable;
      using R = decltype(f(PackedArgs(args, num_args)));
      if constexpr (std::is_void_v<R>) {
        f(PackedArgs(args, num_args));
      } else {
        Any out(f(PackedArgs(args, num_args)));
        *result = out.Release();
      }
    });
  }
  static void Delete(void* self) noexcept { delete static_cast<PackedClosure*>(self); }
};

}  // namespace details

/*! \brief An owning reference to an ffi.Function (or null). */
class Function : public ObjectRef {
 public:
  Function() noexcept = default;
  /*! \brief Wraps a function object; a TypeError if `ref` is defined and not an ffi.Function. */
  explicit Function(ObjectRef ref) : ObjectRef(std::move(ref)) {
    if (defined() && type_index() != kTVMFFIFunction) {
      TVM_FFI_THROW(TypeError) << "Expected `ffi.Function` but got `"
                               << TypeIndexToUserTypeName(type_index()) << "`";
    }
  }

  /*!
   * \brief Calls the function with the arguments converted to views (strings are passed as
   *  String values); throws the callee's Error on failure.
   */
  template <typename... Args>
  Any operator()(const Args&... args) const {
    constexpr size_t kNum = sizeof...(Args);
    TVMFFIAny views[kNum > 0 ? kNum : 1] = {};
    Any holders[kNum > 0 ? kNum : 1];
    size_t i = 0;
    ((details::PackArg(args, &views[i], &holders[i]), ++i), ...);
    (void)i;
    return CallPacked(views, static_cast<int32_t>(kNum));
  }

  /*! \brief Calls with prepared borrowed arguments (TVMFFIFunctionCall). */
  Any CallPacked(const TVMFFIAny* args, int32_t num_args) const {
    if (!defined()) TVM_FFI_THROW(RuntimeError) << "Calling an undefined Function";
    TVMFFIAny result = details::NoneAny();
    details::CheckCall(TVMFFIFunctionCall(get(), const_cast<TVMFFIAny*>(args), num_args, &result));
    return Any::FromOwnedRaw(result);
  }
  Any CallPacked(PackedArgs args) const { return CallPacked(args.data(), args.size()); }

  /*! \brief The global function `name`, or nullopt if none is registered. */
  static std::optional<Function> GetGlobal(std::string_view name) {
    TVMFFIByteArray bytes = details::ToByteArray(name);
    TVMFFIObjectHandle handle = nullptr;
    details::CheckCall(TVMFFIFunctionGetGlobal(&bytes, &handle));
    if (handle == nullptr) return std::nullopt;
    return Function(ObjectRef::Steal(handle));
  }
  /*! \brief The global function `name`; an AttributeError naming it if none is registered. */
  static Function GetGlobalRequired(std::string_view name) {
    std::optional<Function> f = GetGlobal(name);
    if (!f.has_value()) {
      TVM_FFI_THROW(AttributeError) << "global function `" << name << "` is not registered";
    }
    return std::move(*f);
  }
  /*! \brief Registers `f` as the global `name`; without override an existing name is an error. */
  static void SetGlobal(std::string_view name, const Function& f, bool allow_override = false) {
    TVMFFIByteArray bytes = details::ToByteArray(name);
    details::CheckCall(TVMFFIFunctionSetGlobal(&bytes, f.get(), allow_override ? 1 : 0));
  }

  /*!
   * \brief A function calling `f(PackedArgs)`, whose result (if not void) is converted to Any.
   *  Exceptions become errors of the call. Made with TVMFFIFunctionCreate; `f` is destroyed
   *  with the function object.
   */
  template <typename F>
  static Function FromPacked(F f) {
    using Closure = details::PackedClosure<std::decay_t<F>>;
    Closure* closure = new Closure{std::move(f)};
    TVMFFIObjectHandle handle = nullptr;
    if (TVMFFIFunctionCreate(closure, &Closure::SafeCall, &Closure::Delete, &handle) != 0) {
      delete closure;
      throw Error::FromRaised();
    }
    return Function(ObjectRef::Steal(handle));
  }

  /*!
   * \brief A function with the signature of `f` (a function or a non-generic lambda): arguments
   *  are checked and converted, mismatches are TypeErrors naming `name`.
   */
  template <typename F>
  static Function FromTyped(std::string name, F f) {
    using Signature = details::SignatureOf<F>;
    return FromPacked([name = std::move(name), f = std::move(f)](PackedArgs args) {
      return Signature::Call(name, f, args.data(), args.size());
    });
  }
};

template <>
struct TypeTraits<Function> {
  static constexpr bool kEnabled = true;
  static constexpr const char* kTypeName = "ffi.Function";
  static void ToView(const Function& value, TVMFFIAny* out) noexcept {
    *out = details::ObjectView(value.get());
  }
  static void MoveToAny(Function value, TVMFFIAny* out) noexcept {
    *out = details::ObjectView(value.release());
  }
  static std::optional<Function> TryFrom(const TVMFFIAny& v) {
    if (v.type_index == kTVMFFIFunction) return Function(ObjectRef::Borrow(v.v_obj));
    return std::nullopt;
  }
};

/*!
 * \brief A Function with a fixed C++ signature: `TypedFunction<int(int, String)>`. Calls convert
 *  the arguments and the result; the object is the Function itself (one reference, the layout of
 *  the class of the same name in C++ libraries built against Apache TVM FFI).
 */
template <typename Signature>
class TypedFunction;

template <typename R, typename... Args>
class TypedFunction<R(Args...)> {
 public:
  TypedFunction() noexcept = default;
  TypedFunction(Function packed) noexcept : packed_(std::move(packed)) {}  // NOLINT

  /*! \brief Calls the function; the result converted to R (a TypeError if it does not fit). */
  R operator()(Args... args) const {
    if constexpr (std::is_void_v<R>) {
      packed_(args...);
    } else {
      return packed_(args...).template cast<R>();
    }
  }
  /*! \brief The untyped function. */
  const Function& packed() const noexcept { return packed_; }

 private:
  Function packed_;
};

}  // namespace tvm::ffi

#endif  // TVM_FFI_FUNCTION_H_
