//! The repr printer (`ffi.ReprPrint`): a readable, Python-literal-like text of any value.
//!
//! Arrays print as tuples `(1, 2)` (`(1,)` for one item), lists as `[1, 2]`, maps and dicts as
//! `{"a": 1}`, shapes as `Shape(1, 2)`, tensors as `float32[3, 4]@cpu:0`, strings as
//! double-quoted literals that `ast.literal_eval` reads back, floats as C's `%g`, and reflected
//! objects as `type.key(field=value, ...)` without the fields flagged `ReprOff` (just the key if
//! none is left). A type's `__ffi_repr__` attribute, a function `(self, fn_repr) -> str`,
//! replaces the default. An object met again inside itself prints as `...`. An object met
//! again elsewhere (a shared node of a DAG) prints its text again when that is at most
//! [`REPEAT_LIMIT`] bytes long, and otherwise as `<same as PATH>`, naming where it was printed
//! first as an access path (`<same as <root>[0].body>`), so the text of a graph stays linear
//! in its distinct nodes, however often they are shared. With the environment variable `TVM_FFI_REPR_WITH_ADDR` set, objects show their address
//! (`key@0x...(...)`, containers and tensors with an `@0x...` suffix).

use std::cell::RefCell;
use std::collections::HashMap;
use std::fmt::Write as _;

use crate::abi::{self, TVMFFIObject};
use crate::any::{Any, AnyView};
use crate::containers::map::MapRead;
use crate::error::Result;
use crate::function::Function;
use crate::reflection;
use crate::string::push_python_literal;
use crate::type_attr::TypeAttr;
use crate::{Array, DataType, Device, Dict, List, Map, Shape, Tensor};

static REPR_HOOK: TypeAttr = TypeAttr::new("__ffi_repr__");

thread_local! {
    /// Objects being printed on this thread (outermost first), to print cycles as `...`.
    static ACTIVE: RefCell<Vec<usize>> = const { RefCell::new(Vec::new()) };
}

/// The longest text of a shared object that is printed again where the object is met again;
/// a longer one prints as a reference to where it was printed first.
pub const REPEAT_LIMIT: usize = 80;

/// The repr of `value`.
pub fn repr(value: AnyView<'_>) -> Result<String> {
    let with_addr = std::env::var_os("TVM_FFI_REPR_WITH_ADDR").is_some_and(|v| !v.is_empty());
    let mut out = String::new();
    Printer {
        with_addr,
        printed: HashMap::new(),
        steps: Vec::new(),
    }
    .print(value, &mut out)?;
    Ok(out)
}

/// Formats `x` as C's `printf("%.{precision}g")` does.
pub fn format_g(x: f64, precision: usize) -> String {
    if x.is_nan() {
        return if x.is_sign_negative() { "-nan" } else { "nan" }.to_owned();
    }
    if x.is_infinite() {
        return if x < 0.0 { "-inf" } else { "inf" }.to_owned();
    }
    let precision = precision.max(1);
    let sci = format!("{:.*e}", precision - 1, x);
    let (mantissa, exponent) = sci.split_once('e').expect("scientific notation");
    let exponent: i32 = exponent.parse().expect("exponent");
    let strip = |s: &str| -> String {
        if s.contains('.') {
            s.trim_end_matches('0').trim_end_matches('.').to_owned()
        } else {
            s.to_owned()
        }
    };
    if exponent < -4 || exponent >= precision as i32 {
        let sign = if exponent < 0 { '-' } else { '+' };
        format!("{}e{sign}{:02}", strip(mantissa), exponent.abs())
    } else {
        let decimals = (precision as i32 - 1 - exponent).max(0) as usize;
        strip(&format!("{x:.decimals$}"))
    }
}

struct Printer {
    with_addr: bool,
    /// What a shared object printed so far prints as when met again, by address, with the
    /// object held alive so that its address names it alone.
    printed: HashMap<usize, (Any, Again)>,
    /// The path from the root to the value being printed.
    steps: Vec<Step>,
}

/// How a shared object prints where it is met again.
enum Again {
    /// Its text, repeated.
    Text(String),
    /// A reference to the path where it was printed first.
    Reference(String),
}

/// One step of the path to the value being printed.
enum Step {
    Index(usize),
    /// A map key, by the range of its text in the output.
    Key(std::ops::Range<usize>),
    Field(&'static str),
}

/// Removes an object from the active stack when printing it ends (also on error).
struct ActiveGuard;

impl Drop for ActiveGuard {
    fn drop(&mut self) {
        ACTIVE.with(|a| a.borrow_mut().pop());
    }
}

impl Printer {
    fn addr_suffix(&self, ptr: *mut TVMFFIObject, out: &mut String) {
        if self.with_addr {
            let _ = write!(out, "@{ptr:p}");
        }
    }

    fn print(&mut self, value: AnyView<'_>, out: &mut String) -> Result<()> {
        match value.type_index() {
            abi::kTVMFFINone => out.push_str("None"),
            abi::kTVMFFIBool => out.push_str(if value.cast::<bool>()? {
                "True"
            } else {
                "False"
            }),
            abi::kTVMFFIInt => {
                let _ = write!(out, "{}", value.cast::<i64>()?);
            }
            abi::kTVMFFIFloat => out.push_str(&format_g(value.cast::<f64>()?, 6)),
            abi::kTVMFFIDataType => {
                let _ = write!(out, "{}", value.cast::<DataType>()?);
            }
            abi::kTVMFFIDevice => {
                let _ = write!(out, "{}", value.cast::<Device>()?);
            }
            abi::kTVMFFIOpaquePtr => {
                let _ = write!(out, "{:p}", value.cast::<*mut std::ffi::c_void>()?);
            }
            abi::kTVMFFISmallStr | abi::kTVMFFIStr | abi::kTVMFFIRawStr => {
                let text = value.cast::<crate::String>()?;
                push_python_literal(text.as_bytes(), false, out);
            }
            abi::kTVMFFISmallBytes | abi::kTVMFFIBytes | abi::kTVMFFIByteArrayPtr => {
                let bytes = value.cast::<crate::Bytes>()?;
                push_python_literal(bytes.as_bytes(), true, out);
            }
            abi::kTVMFFIBigInt => {
                out.push_str(&crate::extra::bigint_text::to_decimal(value).unwrap_or_default())
            }
            t if t >= abi::kTVMFFIStaticObjectBegin => self.print_shared(value, out)?,
            _ => out.push_str(&value.type_key()),
        }
        Ok(())
    }

    /// Prints an object, or what it prints as again where it is shared and was printed before.
    fn print_shared(&mut self, value: AnyView<'_>, out: &mut String) -> Result<()> {
        if !crate::extra::structural::may_be_shared(value) {
            return self.print_object(value, out);
        }
        let addr = value.as_object_ptr().expect("object value") as usize;
        match self.printed.get(&addr) {
            Some((_, Again::Text(text))) => out.push_str(text),
            Some((_, Again::Reference(path))) => {
                let _ = write!(out, "<same as {path}>");
            }
            None => {
                let start = out.len();
                self.print_object(value, out)?;
                let text = &out[start..];
                let again = if text.len() <= REPEAT_LIMIT {
                    Again::Text(text.to_owned())
                } else {
                    Again::Reference(self.path(out))
                };
                self.printed.insert(addr, (value.to_owned(), again));
            }
        }
        Ok(())
    }

    /// The access path of the value being printed (`<root>[1]["k"].field`).
    fn path(&self, out: &str) -> String {
        let mut path = String::from("<root>");
        for step in &self.steps {
            match step {
                Step::Index(i) => {
                    let _ = write!(path, "[{i}]");
                }
                Step::Key(range) => {
                    let _ = write!(path, "[{}]", &out[range.clone()]);
                }
                Step::Field(name) => {
                    let _ = write!(path, ".{name}");
                }
            }
        }
        path
    }

    fn print_object(&mut self, value: AnyView<'_>, out: &mut String) -> Result<()> {
        let ptr = value.as_object_ptr().expect("object value");
        let addr = ptr as usize;
        // Cycles, and nesting deeper than the stack allows, print as `...`.
        if crate::stack::nearly_full() || ACTIVE.with(|a| a.borrow().contains(&addr)) {
            out.push_str("...");
            self.addr_suffix(ptr, out);
            return Ok(());
        }
        ACTIVE.with(|a| a.borrow_mut().push(addr));
        let _guard = ActiveGuard;
        let type_index = value.type_index();
        if let Some(hook) = REPR_HOOK.get(type_index) {
            let hook: Function = hook.cast()?;
            let fn_repr = Function::from_typed("ffi.ReprPrint", |v: Any| repr(v.as_view()));
            let text = hook.call_packed(&[value, Any::from(fn_repr).as_view()])?;
            out.push_str(&text.cast::<std::string::String>()?);
            return Ok(());
        }
        match type_index {
            abi::kTVMFFIArray => {
                let array: Array = value.cast()?;
                self.print_seq(array.iter(), "(", ")", array.len() == 1, out)?;
                self.addr_suffix(ptr, out);
            }
            abi::kTVMFFIList => {
                let list: List = value.cast()?;
                self.print_seq(list.to_vec().iter(), "[", "]", false, out)?;
                self.addr_suffix(ptr, out);
            }
            abi::kTVMFFIMap => {
                let map: Map = value.cast()?;
                self.print_map(map.iter(), out)?;
                self.addr_suffix(ptr, out);
            }
            abi::kTVMFFIDict => {
                let dict: Dict = value.cast()?;
                self.print_map(dict.iter(), out)?;
                self.addr_suffix(ptr, out);
            }
            abi::kTVMFFIShape => {
                let shape: Shape = value.cast()?;
                out.push_str("Shape(");
                join(out, shape.as_slice().iter(), |out, d| {
                    let _ = write!(out, "{d}");
                });
                out.push(')');
                self.addr_suffix(ptr, out);
            }
            abi::kTVMFFITensor => {
                let tensor: Tensor = value.cast()?;
                let _ = write!(out, "{}[", tensor.dtype());
                join(out, tensor.shape().iter(), |out, d| {
                    let _ = write!(out, "{d}");
                });
                let _ = write!(out, "]@{}", tensor.device());
                self.addr_suffix(ptr, out);
            }
            _ => match crate::extra::enums::entry_name(value) {
                Some(name) => {
                    let _ = write!(out, "{}.{name}", value.type_key());
                }
                None => self.print_fields(value, ptr, out)?,
            },
        }
        Ok(())
    }

    fn print_seq<'a>(
        &mut self,
        items: impl Iterator<Item = &'a Any>,
        open: &str,
        close: &str,
        trailing_comma: bool,
        out: &mut String,
    ) -> Result<()> {
        out.push_str(open);
        for (i, item) in items.enumerate() {
            if i > 0 {
                out.push_str(", ");
            }
            self.steps.push(Step::Index(i));
            let printed = self.print(item.as_view(), out);
            self.steps.pop();
            printed?;
        }
        if trailing_comma {
            out.push(',');
        }
        out.push_str(close);
        Ok(())
    }

    fn print_map(
        &mut self,
        entries: impl Iterator<Item = (Any, Any)>,
        out: &mut String,
    ) -> Result<()> {
        out.push('{');
        for (i, (k, v)) in entries.enumerate() {
            if i > 0 {
                out.push_str(", ");
            }
            let key_start = out.len();
            self.print(k.as_view(), out)?;
            self.steps.push(Step::Key(key_start..out.len()));
            out.push_str(": ");
            let printed = self.print(v.as_view(), out);
            self.steps.pop();
            printed?;
        }
        out.push('}');
        Ok(())
    }

    fn print_fields(
        &mut self,
        value: AnyView<'_>,
        ptr: *mut TVMFFIObject,
        out: &mut String,
    ) -> Result<()> {
        out.push_str(&value.type_key());
        self.addr_suffix(ptr, out);
        let mut first = true;
        let mut seen: Vec<&str> = Vec::new();
        let fields: Vec<_> = reflection::fields_of(value.type_index()).collect();
        // A field redeclared by a subtype prints once, at the position of its last declaration.
        for (i, field) in fields.iter().enumerate() {
            if field.flags() & abi::kTVMFFIFieldFlagBitMaskReprOff != 0 || !field.is_readable() {
                continue;
            }
            if fields[i + 1..].iter().any(|f| f.name() == field.name())
                || seen.contains(&field.name())
            {
                continue;
            }
            seen.push(field.name());
            out.push_str(if first { "(" } else { ", " });
            first = false;
            let _ = write!(out, "{}=", field.name());
            self.steps.push(Step::Field(field.name()));
            let printed = field
                .get(value)
                .and_then(|field| self.print(field.as_view(), out));
            self.steps.pop();
            printed?;
        }
        if !first {
            out.push(')');
        }
        Ok(())
    }
}

fn join<T>(out: &mut String, items: impl Iterator<Item = T>, mut each: impl FnMut(&mut String, T)) {
    for (i, item) in items.enumerate() {
        if i > 0 {
            out.push_str(", ");
        }
        each(out, item);
    }
}

/// The `ffi.ReprPrint` global: `(Any) -> str`.
pub(crate) fn repr_function() -> Function {
    Function::from_typed("ffi.ReprPrint", |value: Any| repr(value.as_view()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percent_g_matches_c() {
        assert_eq!(format_g(3.25, 6), "3.25");
        assert_eq!(format_g(0.0, 6), "0");
        assert_eq!(format_g(1e10, 6), "1e+10");
        assert_eq!(format_g(1.0 / 3.0, 6), "0.333333");
        assert_eq!(format_g(123456789.0, 6), "1.23457e+08");
        assert_eq!(format_g(1e-5, 6), "1e-05");
        assert_eq!(format_g(100.0, 6), "100");
        assert_eq!(format_g(1e300, 17), "1.0000000000000001e+300");
        assert_eq!(format_g(-1.5, 6), "-1.5");
    }
}
