//! Packed functions: objects with a safe-call entry point that take an array of `AnyView`
//! arguments and write an owning `Any` result, callable from any language through the C ABI.

use std::ffi::{c_int, c_void};

use crate::abi::{
    self, TVMFFIAny, TVMFFIByteArray, TVMFFIFunctionCell, TVMFFISafeCallType, kTVMFFIFunction,
};
use crate::any::{Any, AnyView, TryFromAnyView};
use crate::boundary::ffi_status;
use crate::error::{Error, ErrorKind, Result};
use crate::object::{Object, ObjectCore, ObjectRef, alloc_object};

/// The view of a function object shared by every producer: header plus function cell.
#[repr(C)]
pub struct FunctionObj {
    base: Object,
    cell: TVMFFIFunctionCell,
}

// SAFETY: the cell holds code pointers only; calls are thread-safe by the ABI's contract.
unsafe impl Send for FunctionObj {}
// SAFETY: as above.
unsafe impl Sync for FunctionObj {}

// SAFETY: repr(C) with the header first; `ffi.Function` has the static index 68.
unsafe impl ObjectCore for FunctionObj {
    const TYPE_KEY: &'static str = "ffi.Function";
    fn type_index() -> i32 {
        kTVMFFIFunction
    }
}

impl FunctionObj {
    /// A function cell calling `safe_call` (with `cpp_call` NULL, as every non-C++ producer must).
    pub fn new(safe_call: TVMFFISafeCallType) -> FunctionObj {
        FunctionObj {
            base: Object::header(),
            cell: TVMFFIFunctionCell {
                safe_call,
                cpp_call: std::ptr::null_mut(),
            },
        }
    }

    /// The function cell.
    pub fn cell(&self) -> &TVMFFIFunctionCell {
        &self.cell
    }

    /// Calls the function with packed arguments ([`Function::call_packed`] on a borrowed
    /// function object).
    #[inline]
    pub fn call_packed(&self, args: &[AnyView<'_>]) -> Result<Any> {
        let mut result = Any::none();
        self.call_packed_into(args, &mut result)?;
        Ok(result)
    }

    /// [`FunctionObj::call_packed`] that stores the result in `result`, for hot callers that
    /// read it in place (see [`call_safe_call_into`]). The old value is dropped; a failed call
    /// leaves none.
    #[inline(always)]
    pub fn call_packed_into(&self, args: &[AnyView<'_>], result: &mut Any) -> Result<()> {
        let Some(safe_call) = self.cell.safe_call else {
            *result = Any::none();
            return Err(Error::new(
                ErrorKind::InternalError,
                "function object without safe_call",
            ));
        };
        let handle = std::ptr::from_ref(self).cast_mut().cast();
        // SAFETY: the handle of a function object's own safe-call is the object itself, alive
        // for the call (borrowed); the callee takes its own references if it keeps it.
        unsafe { call_safe_call_into(safe_call, handle, args, result) }
    }
}

/// A function object holding a Rust closure right after the cell.
#[repr(C)]
struct RustFunctionObj<F> {
    function: FunctionObj,
    callable: F,
}

/// Views the packed arguments of a safe call as a slice.
///
/// # Safety
/// `args` points at `num_args` values valid for `'a` (it may be NULL when `num_args` is 0).
#[inline]
pub(crate) unsafe fn args_slice<'a>(args: *const TVMFFIAny, num_args: i32) -> &'a [AnyView<'a>] {
    if args.is_null() {
        return &[];
    }
    // SAFETY: `AnyView` is a transparent wrapper of `TVMFFIAny`; validity per the caller (a
    // negative count reads as none).
    unsafe { std::slice::from_raw_parts(args.cast::<AnyView<'a>>(), num_args.max(0) as usize) }
}

/// How the closure of a Rust function object delivers its value.
trait PackedBody {
    /// Runs the closure, its value stored in `result`.
    ///
    /// # Safety
    /// `result` is writable and owns nothing on entry (the safe-call convention); it is left
    /// owning nothing when the call fails.
    unsafe fn run(&self, args: &[AnyView<'_>], result: *mut TVMFFIAny) -> Result<()>;
}

/// A closure that returns its value ([`Function::from_packed`]).
struct Returning<F>(F);

impl<F: Fn(&[AnyView<'_>]) -> Result<Any>> PackedBody for Returning<F> {
    #[inline(always)]
    unsafe fn run(&self, args: &[AnyView<'_>], result: *mut TVMFFIAny) -> Result<()> {
        let value = (self.0)(args)?;
        // SAFETY: per the contract; the slot takes over the value's ownership.
        unsafe { result.write(value.into_raw()) };
        Ok(())
    }
}

/// A closure that stores its value in the result slot ([`Function::from_packed_into`]).
struct Storing<F>(F);

impl<F: Fn(&[AnyView<'_>], &mut Any) -> Result<()>> PackedBody for Storing<F> {
    #[inline(always)]
    unsafe fn run(&self, args: &[AnyView<'_>], result: *mut TVMFFIAny) -> Result<()> {
        // The closure may store a value and then fail or panic: the slot is reset then.
        let reset = ResetSlot(result);
        // SAFETY: per the contract: a value that owns nothing is an `Any` with nothing to release.
        let outcome = (self.0)(args, unsafe { &mut *result.cast::<Any>() });
        if outcome.is_ok() {
            std::mem::forget(reset);
        }
        outcome
    }
}

/// Resets a result slot to none (releasing what it holds) when dropped: on the failure of a
/// [`Storing`] closure, including a panic unwinding out of it.
struct ResetSlot(*mut TVMFFIAny);

impl Drop for ResetSlot {
    fn drop(&mut self) {
        // SAFETY: the slot of the running safe call, which holds an owning value (or one that
        // owns nothing) and is not borrowed any more.
        unsafe { *self.0.cast::<Any>() = Any::none() };
    }
}

/// The safe-call of a Rust function object: runs its closure behind the panic boundary.
unsafe extern "C" fn rust_safe_call<B: PackedBody>(
    handle: *mut c_void,
    args: *const TVMFFIAny,
    num_args: i32,
    result: *mut TVMFFIAny,
) -> c_int {
    // SAFETY: `handle` is this function object (the safe-call convention for function
    // objects), allocated as a `RustFunctionObj<B>`; arguments are valid for the call; the
    // caller pre-sets `result` to a value that owns nothing (the convention).
    unsafe {
        let obj = &*handle.cast::<RustFunctionObj<B>>();
        let args = args_slice(args, num_args);
        ffi_status("a Rust packed function", || obj.callable.run(args, result))
    }
}

/// A non-NULL safe-call function pointer.
pub type SafeCall =
    unsafe extern "C" fn(*mut c_void, *const TVMFFIAny, i32, *mut TVMFFIAny) -> c_int;

/// Calls a safe-call function with `handle` and packed arguments: the owning result, or the
/// error the callee raised.
///
/// # Safety
/// `safe_call` follows the safe-call convention and `handle` is what it expects (the function
/// object for a cell's safe-call, NULL for a library export).
#[inline]
pub unsafe fn call_safe_call(
    safe_call: SafeCall,
    handle: *mut c_void,
    args: &[AnyView<'_>],
) -> Result<Any> {
    let mut result = Any::none();
    // SAFETY: per the contract.
    unsafe { call_safe_call_into(safe_call, handle, args, &mut result)? };
    Ok(result)
}

/// [`call_safe_call`] that stores the result in `result`, where the caller can read it in
/// place. The old value is dropped first; a failed call leaves none.
///
/// A caller that reads the parts of the result straight from where the callee stored them
/// avoids a copy of the whole 16-byte value: loading at once what the callee has just written
/// in two 8-byte halves stalls the processor's store-to-load forwarding, a cost that shows on
/// calls of a few dozen nanoseconds.
///
/// # Safety
/// As for [`call_safe_call`].
#[inline(always)]
pub unsafe fn call_safe_call_into(
    safe_call: SafeCall,
    handle: *mut c_void,
    args: &[AnyView<'_>],
    result: &mut Any,
) -> Result<()> {
    *result = Any::none();
    let num_args = i32::try_from(args.len()).map_err(|_| {
        Error::new(
            ErrorKind::ValueError,
            format!("too many arguments: {}", args.len()),
        )
    })?;
    // SAFETY: per the contract; `AnyView` and `Any` are transparent `TVMFFIAny`s; the callee
    // writes an owning value (which `result` then owns) or nothing (leaving none).
    let rc = unsafe {
        safe_call(
            handle,
            args.as_ptr().cast(),
            num_args,
            std::ptr::from_mut(result).cast(),
        )
    };
    if rc == 0 {
        Ok(())
    } else {
        // A callee that broke the convention may have left bits there that it does not own:
        // overwritten, never released.
        std::mem::forget(std::mem::take(result));
        Err(Error::take_raised_or(
            ErrorKind::RuntimeError,
            "packed function call",
        ))
    }
}

/// A reference to a packed function.
#[derive(Clone)]
pub struct Function {
    obj: ObjectRef<FunctionObj>,
}

impl Function {
    /// Wraps a closure taking packed arguments.
    pub fn from_packed<F>(f: F) -> Function
    where
        F: Fn(&[AnyView<'_>]) -> Result<Any> + Send + Sync + 'static,
    {
        Function::from_body(Returning(f))
    }

    /// Wraps a closure taking packed arguments that stores its value in the caller's result
    /// slot (which owns nothing on entry; whatever a failed or panicking call leaves there is
    /// released and the slot reset to none). A closure that passes the slot on to another call
    /// ([`FunctionObj::call_packed_into`]) forwards that call's result without copying it.
    pub fn from_packed_into<F>(f: F) -> Function
    where
        F: Fn(&[AnyView<'_>], &mut Any) -> Result<()> + Send + Sync + 'static,
    {
        Function::from_body(Storing(f))
    }

    /// A function object holding `body`, called through [`rust_safe_call`].
    fn from_body<B: PackedBody + Send + Sync + 'static>(body: B) -> Function {
        let value = RustFunctionObj {
            function: FunctionObj::new(Some(rust_safe_call::<B>)),
            callable: body,
        };
        // SAFETY: RustFunctionObj is repr(C) with the header first; its Drop drops the closure.
        let ptr = unsafe { alloc_object(value, 0, kTVMFFIFunction) };
        // SAFETY: the new object's reference moves into the Function.
        let obj = unsafe { ObjectRef::from_raw(ptr.as_ptr().cast()) };
        Function { obj }
    }

    /// A typed function with a fast path: `fast` sees the packed arguments first and answers
    /// `Some(result)` for the inputs it handles (typically borrowing a container argument
    /// instead of converting it); for `None` the call goes through the typed adapter of `f`
    /// (see [`Function::from_typed`]), with its conversions and error messages. `fast` must
    /// answer as `f` would.
    pub fn from_typed_with_fast_path<F, Args, P>(name: &str, f: F, fast: P) -> Function
    where
        F: TypedFunction<Args>,
        P: Fn(&[AnyView<'_>]) -> Option<Result<Any>> + Send + Sync + 'static,
    {
        /// The typed path, out of line so that the fast path's frame stays small.
        #[cold]
        #[inline(never)]
        fn slow<F: TypedFunction<Args>, Args>(
            f: &F,
            signature: &str,
            args: &[AnyView<'_>],
        ) -> Result<Any> {
            f.call_typed(signature, args)
        }
        let signature = F::signature(name);
        Function::from_packed(move |args| match fast(args) {
            Some(result) => result,
            None => slow(&f, &signature, args),
        })
    }

    /// Wraps a typed closure; arguments are converted and checked, and mismatches become a
    /// `TypeError` naming `name`, the argument position and both types.
    pub fn from_typed<F, Args>(name: &str, f: F) -> Function
    where
        F: TypedFunction<Args>,
    {
        let signature = F::signature(name);
        Function::from_packed(move |args| f.call_typed(&signature, args))
    }

    /// Wraps a C safe-call function through `TVMFFIFunctionCreate`.
    ///
    /// # Safety
    /// `safe_call` follows the safe-call convention; `self_` stays valid until `deleter(self_)`.
    pub unsafe fn from_extern_c(
        self_: *mut c_void,
        safe_call: TVMFFISafeCallType,
        deleter: Option<unsafe extern "C" fn(*mut c_void)>,
    ) -> Result<Function> {
        let mut out = std::ptr::null_mut();
        // SAFETY: forwarded from the caller.
        let rc = unsafe { abi::TVMFFIFunctionCreate(self_, safe_call, deleter, &mut out) };
        if rc != 0 {
            return Err(Error::take_raised_or(
                ErrorKind::RuntimeError,
                "TVMFFIFunctionCreate",
            ));
        }
        // SAFETY: a successful create returns one owned function reference.
        let obj = unsafe { ObjectRef::from_raw(out.cast()) };
        Ok(Function { obj })
    }

    /// Wraps a function object reference.
    pub fn from_object(obj: ObjectRef<FunctionObj>) -> Function {
        Function { obj }
    }

    /// The underlying object reference.
    pub fn as_object(&self) -> &ObjectRef<FunctionObj> {
        &self.obj
    }

    /// Calls the function with packed arguments.
    #[inline]
    pub fn call_packed(&self, args: &[AnyView<'_>]) -> Result<Any> {
        self.obj.call_packed(args)
    }

    /// [`Function::call_packed`] that stores the result in `result`, for hot callers that read it
    /// in place (see [`call_safe_call_into`]). The old value is dropped; a failed call leaves
    /// none.
    #[inline(always)]
    pub fn call_packed_into(&self, args: &[AnyView<'_>], result: &mut Any) -> Result<()> {
        self.obj.call_packed_into(args, result)
    }

    /// Calls the function with a tuple of arguments convertible into `Any`.
    pub fn call<A: IntoArgs>(&self, args: A) -> Result<Any> {
        let values = args.into_args();
        let values = values.as_ref();
        // SAFETY: `Any` and `AnyView` share the transparent `TVMFFIAny` layout; the views
        // borrow `values`, which outlives the call.
        let views = unsafe {
            std::slice::from_raw_parts(values.as_ptr().cast::<AnyView<'_>>(), values.len())
        };
        self.call_packed(views)
    }

    /// The global function registered as `name`, if any.
    pub fn get_global(name: &str) -> Option<Function> {
        let key = TVMFFIByteArray::from_text(name);
        let mut out = std::ptr::null_mut();
        // SAFETY: valid pointers for the call; the result is an owned reference or NULL.
        let rc = unsafe { abi::TVMFFIFunctionGetGlobal(&key, &mut out) };
        if rc != 0 {
            drop(Error::take_raised());
            return None;
        }
        if out.is_null() {
            return None;
        }
        // SAFETY: a non-NULL result is an owned function reference.
        let obj = unsafe { ObjectRef::from_raw(out.cast()) };
        Some(Function { obj })
    }

    /// The global function `name`, or an `AttributeError` naming it.
    pub fn get_global_required(name: &str) -> Result<Function> {
        Function::get_global(name).ok_or_else(|| {
            Error::new(
                ErrorKind::AttributeError,
                format!("global function `{name}` is not registered"),
            )
        })
    }

    /// Registers this function as the global `name`; with `allow_override` false an existing
    /// entry is a `RuntimeError`.
    pub fn register_global(&self, name: &str, allow_override: bool) -> Result<()> {
        self.set_global(name, c_int::from(allow_override))
    }

    /// Registers this function as the default implementation of the global `name`: an entry
    /// already there stays, and a library loaded later that registers the name replaces this
    /// one without an error (`TVM_FFI_GLOBAL_DEFAULT`). The runtime library registers its own
    /// implementations of names that Apache TVM's C++ libraries also define this way.
    pub fn register_global_default(&self, name: &str) -> Result<()> {
        self.set_global(name, abi::TVM_FFI_GLOBAL_DEFAULT)
    }

    /// Registers this function as the global `name` with its documentation and metadata (a JSON
    /// object such as `{"type_schema": "..."}`, see [`schema_metadata`]), which
    /// `ffi.GetGlobalFuncDoc` and `ffi.GetGlobalFuncMetadata` return; with `allow_override`
    /// false an existing entry is a `RuntimeError`.
    pub fn register_global_documented(
        &self,
        name: &str,
        doc: &str,
        metadata: &str,
        allow_override: bool,
    ) -> Result<()> {
        let method = Any::from(self.clone());
        let info = abi::TVMFFIMethodInfo {
            name: TVMFFIByteArray::from_text(name),
            doc: TVMFFIByteArray::from_text(doc),
            metadata: TVMFFIByteArray::from_text(metadata),
            flags: 0,
            method: *method.as_raw(),
        };
        // SAFETY: the record is valid for the call; the registry copies the texts and retains
        // the function.
        let rc = unsafe {
            abi::TVMFFIFunctionSetGlobalFromMethodInfo(&info, c_int::from(allow_override))
        };
        registration_status(rc, name)
    }

    /// Registers typed closure `f` as the global `name` with documentation `doc` and its type
    /// schema (return and parameter types) as metadata, so stubs and signatures can be
    /// generated from the registry; an existing entry is a `RuntimeError`.
    pub fn register_typed_global<F, Args>(name: &str, f: F, doc: &str) -> Result<Function>
    where
        F: TypedFunction<Args>,
    {
        let metadata = schema_metadata(&F::type_schema());
        let function = Function::from_typed(name, f);
        function.register_global_documented(name, doc, &metadata, false)?;
        Ok(function)
    }

    fn set_global(&self, name: &str, mode: c_int) -> Result<()> {
        let key = TVMFFIByteArray::from_text(name);
        // SAFETY: the registry retains its own reference.
        let rc = unsafe { abi::TVMFFIFunctionSetGlobal(&key, self.obj.as_raw().cast(), mode) };
        registration_status(rc, name)
    }

    /// Removes the global `name`; whether it existed.
    pub fn remove_global(name: &str) -> Result<bool> {
        Function::get_global_required("ffi.FunctionRemoveGlobal")?
            .call((name,))?
            .cast()
    }

    /// The names of all global functions.
    pub fn list_global_names() -> Result<Vec<std::string::String>> {
        let functor =
            Function::get_global_required("ffi.FunctionListGlobalNamesFunctor")?.call(())?;
        let functor: Function = functor.cast()?;
        let count: i64 = functor.call((-1i64,))?.cast()?;
        (0..count).map(|i| functor.call((i,))?.cast()).collect()
    }
}

impl std::fmt::Debug for Function {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Function({:p})", self.obj.as_raw())
    }
}

impl From<Function> for Any {
    fn from(f: Function) -> Any {
        Any::from_object(f.obj)
    }
}

impl TryFromAnyView for Function {
    const TYPE_NAME: &'static str = "ffi.Function";
    fn try_from_view(view: &AnyView<'_>) -> Option<Function> {
        ObjectRef::<FunctionObj>::try_from_view(view).map(Function::from_object)
    }
}

/// Argument tuples for [`Function::call`].
pub trait IntoArgs {
    /// Storage of the converted arguments.
    type Values: AsRef<[Any]>;
    /// Converts every argument into an owning `Any`.
    fn into_args(self) -> Self::Values;
}

impl IntoArgs for &[Any] {
    type Values = Vec<Any>;
    fn into_args(self) -> Vec<Any> {
        self.to_vec()
    }
}

/// Return values of typed functions.
pub trait IntoFunctionResult {
    /// The schema name of the returned type.
    const TYPE_NAME: &'static str;
    /// Converts into the packed result.
    fn into_function_result(self) -> Result<Any>;
    /// The type schema JSON of the returned type.
    fn result_schema() -> std::string::String;
}

impl<T: Into<Any> + TryFromAnyView> IntoFunctionResult for T {
    const TYPE_NAME: &'static str = T::TYPE_NAME;
    fn into_function_result(self) -> Result<Any> {
        Ok(self.into())
    }
    fn result_schema() -> std::string::String {
        T::type_schema()
    }
}

impl<T: Into<Any> + TryFromAnyView> IntoFunctionResult for Result<T> {
    const TYPE_NAME: &'static str = T::TYPE_NAME;
    fn into_function_result(self) -> Result<Any> {
        self.map(Into::into)
    }
    fn result_schema() -> std::string::String {
        T::type_schema()
    }
}

/// The result of registering global `name`: `Ok` for status 0, else the error the registry
/// raised (or a `RuntimeError` naming `name`).
fn registration_status(rc: c_int, name: &str) -> Result<()> {
    if rc == 0 {
        Ok(())
    } else {
        Err(Error::take_raised_or(ErrorKind::RuntimeError, name))
    }
}

/// The metadata JSON of a member or function whose type schema is `schema` (JSON text):
/// `{"type_schema": "<schema>"}`, the schema as a JSON string.
pub fn schema_metadata(schema: &str) -> std::string::String {
    let quoted = schema.replace('\\', r"\\").replace('"', r#"\""#);
    format!(r#"{{"type_schema":"{quoted}"}}"#)
}

/// Closures usable as typed functions, for argument tuples `Args`.
pub trait TypedFunction<Args>: Send + Sync + 'static {
    /// The signature text `name(0: T0, 1: T1) -> R` used in error messages.
    fn signature(name: &str) -> std::string::String;
    /// The type schema of the function, as JSON: `{"type":"ffi.Function","args":[R, T0, ...]}`.
    fn type_schema() -> std::string::String;
    /// Converts the packed arguments and calls the closure.
    fn call_typed(&self, signature: &str, args: &[AnyView<'_>]) -> Result<Any>;
}

/// The `TypeError` of a typed call with the wrong number of arguments.
#[cold]
#[inline(never)]
fn count_error(signature: &str, expected: usize, got: usize) -> Error {
    Error::new(
        ErrorKind::TypeError,
        format!(
            "Mismatched number of arguments when calling: `{signature}`. \
             Expected {expected} but got {got} arguments"
        ),
    )
}

/// The `TypeError` of a typed call's argument that does not convert; `detail` says why when
/// the type alone does not (an element of a typed container).
#[cold]
#[inline(never)]
fn argument_error(
    signature: &str,
    index: usize,
    expected: &str,
    got: &AnyView<'_>,
    detail: Option<std::string::String>,
) -> Error {
    let context = format!("Argument #{index} when calling `{signature}`");
    if let Some(error) = got.text_error(expected, &context) {
        return error;
    }
    let why = detail.map(|d| format!(": {d}")).unwrap_or_default();
    Error::new(
        ErrorKind::TypeError,
        format!(
            "Mismatched type on argument #{index} when calling: `{signature}`. \
             Expected `{expected}` but got `{}`{why}",
            got.type_name()
        ),
    )
}

macro_rules! typed_arities {
    ($( ($n:expr; $($arg:ident $idx:tt),*) )*) => {$(
        impl<Func, Ret, $($arg),*> TypedFunction<($($arg,)*)> for Func
        where
            Func: Fn($($arg),*) -> Ret + Send + Sync + 'static,
            Ret: IntoFunctionResult,
            $($arg: TryFromAnyView,)*
        {
            fn signature(name: &str) -> std::string::String {
                let params: [&str; $n] = [$($arg::TYPE_NAME),*];
                let params: Vec<std::string::String> =
                    params.iter().enumerate().map(|(i, t)| format!("{i}: {t}")).collect();
                format!("{name}({}) -> {}", params.join(", "), Ret::TYPE_NAME)
            }

            fn type_schema() -> std::string::String {
                let types: [std::string::String; $n + 1] =
                    [Ret::result_schema(), $($arg::type_schema()),*];
                format!(r#"{{"type":"ffi.Function","args":[{}]}}"#, types.join(","))
            }

            #[allow(unused_variables)]
            #[inline]
            fn call_typed(&self, signature: &str, args: &[AnyView<'_>]) -> Result<Any> {
                if args.len() != $n {
                    return Err(count_error(signature, $n, args.len()));
                }
                (self)($(
                    match $arg::try_from_view(&args[$idx]) {
                        Some(value) => value,
                        None => {
                            return Err(argument_error(
                                signature,
                                $idx,
                                $arg::TYPE_NAME,
                                &args[$idx],
                                $arg::mismatch(&args[$idx]),
                            ))
                        }
                    }
                ),*)
                .into_function_result()
            }
        }

        impl<$($arg: Into<Any>),*> IntoArgs for ($($arg,)*) {
            type Values = [Any; $n];
            fn into_args(self) -> [Any; $n] {
                [$(self.$idx.into()),*]
            }
        }
    )*};
}

typed_arities! {
    (0;)
    (1; A0 0)
    (2; A0 0, A1 1)
    (3; A0 0, A1 1, A2 2)
    (4; A0 0, A1 1, A2 2, A3 3)
    (5; A0 0, A1 1, A2 2, A3 3, A4 4)
    (6; A0 0, A1 1, A2 2, A3 3, A4 4, A5 5)
    (7; A0 0, A1 1, A2 2, A3 3, A4 4, A5 5, A6 6)
    (8; A0 0, A1 1, A2 2, A3 3, A4 4, A5 5, A6 6, A7 7)
}
