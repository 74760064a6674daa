//! JSON text to and from values (`ffi.json.Parse`, `ffi.json.Stringify`): objects are `Map`s
//! (keys in document order), arrays `Array`s, numbers `int` (when integral and within 64 bits)
//! or `float`, and `NaN`/`Infinity`/`-Infinity` are accepted and written as JavaScript does.
//!
//! Text is read into and written from [`Json`], a plain Rust tree, which the JSON-graph code
//! also works on directly (no runtime objects for the document's own structure).

use std::borrow::Cow;
use std::fmt::Write as _;

use crate::any::{Any, AnyView};
use crate::containers::map::MapRead;
use crate::error::{Error, ErrorKind, Result};
use crate::extra::repr::format_g;
use crate::{Array, Dict, List, Map, abi};

/// A JSON document as a Rust tree (objects keep their keys in document order).
/// Strings borrow from the parsed text where they have no escapes (`'a`); trees built from
/// values own theirs (`Json<'static>`).
#[derive(Clone, Debug, PartialEq)]
pub enum Json<'a> {
    /// `null`.
    Null,
    /// `true` / `false`.
    Bool(bool),
    /// An integral number within 64 bits.
    Int(i64),
    /// Any other number (`NaN` and the infinities included).
    Float(f64),
    /// A string.
    Str(Cow<'a, str>),
    /// An array.
    Array(Vec<Json<'a>>),
    /// An object.
    Object(Vec<(Cow<'a, str>, Json<'a>)>),
}

impl<'a> Json<'a> {
    /// The member `key` of an object (the last one of that name); `None` otherwise.
    pub fn get(&self, key: &str) -> Option<&Json<'a>> {
        match self {
            Json::Object(members) => members.iter().rev().find(|(k, _)| k == key).map(|(_, v)| v),
            _ => None,
        }
    }

    /// The document as a value: objects become `Map`s, arrays `Array`s.
    pub fn to_any(&self) -> Any {
        match self {
            Json::Null => Any::none(),
            Json::Bool(b) => Any::from(*b),
            Json::Int(i) => Any::from(*i),
            Json::Float(x) => Any::from(*x),
            Json::Str(s) => Any::from(s.as_ref()),
            Json::Array(items) => Array::from_vec(items.iter().map(Json::to_any).collect()).into(),
            Json::Object(members) => {
                let mut map = Map::new();
                for (k, v) in members {
                    map.insert(k.as_ref(), v.to_any());
                }
                map.into()
            }
        }
    }

    /// The document a value stands for; a `ValueError` for values JSON cannot hold (non-string
    /// keys, objects other than containers and strings).
    pub fn from_any(value: AnyView<'_>) -> Result<Json<'static>> {
        from_any_at(value, 0)
    }

    /// The JSON text, compact or indented by `indent` spaces; a `MemoryError` naming the size
    /// when the text does not fit in memory.
    pub fn write(&self, indent: Option<usize>) -> Result<String> {
        let mut out = String::new();
        Writer {
            indent,
            out: &mut out,
        }
        .value(self, 0)?;
        Ok(out)
    }
}

fn from_any_at(value: AnyView<'_>, level: usize) -> Result<Json<'static>> {
    crate::stack::enter_level(level + 1, "the value to write as JSON")?;
    let seq = |items: &[Any]| -> Result<Json<'static>> {
        let items = items.iter().map(|v| from_any_at(v.as_view(), level + 1));
        Ok(Json::Array(items.collect::<Result<_>>()?))
    };
    let map = |entries: &mut dyn Iterator<Item = (Any, Any)>| -> Result<Json<'static>> {
        let mut members = Vec::new();
        for (k, v) in entries {
            let key = k.cast::<crate::String>().map_err(|_| {
                Error::new(
                    ErrorKind::ValueError,
                    format!("Expect key to be string, got `{}`", k.type_key()),
                )
            })?;
            members.push((
                Cow::Owned(key.to_string_lossy().into_owned()),
                from_any_at(v.as_view(), level + 1)?,
            ));
        }
        Ok(Json::Object(members))
    };
    Ok(match value.type_index() {
        abi::kTVMFFINone => Json::Null,
        abi::kTVMFFIBool => Json::Bool(value.cast()?),
        abi::kTVMFFIInt => Json::Int(value.cast()?),
        abi::kTVMFFIFloat => Json::Float(value.cast()?),
        abi::kTVMFFISmallStr | abi::kTVMFFIStr | abi::kTVMFFIRawStr => {
            let bytes = crate::string::bytes_of_view(&value).unwrap_or_default();
            Json::Str(Cow::Owned(owned_text(bytes)?))
        }
        abi::kTVMFFIArray => seq(value.cast::<Array>()?.as_slice())?,
        abi::kTVMFFIList => seq(&value.cast::<List>()?.to_vec())?,
        abi::kTVMFFIMap => map(&mut value.cast::<Map>()?.iter())?,
        abi::kTVMFFIDict => map(&mut value.cast::<Dict>()?.iter())?,
        _ => {
            return Err(Error::new(
                ErrorKind::ValueError,
                format!("Unsupported type: `{}`", value.type_key()),
            ));
        }
    })
}

/// Parses JSON `text` into a value; a `ValueError` saying what was expected where (line,
/// column, char).
pub fn parse(text: &str) -> Result<Any> {
    Ok(parse_tree(text)?.to_any())
}

/// Parses JSON `text` into a [`Json`] tree; errors as [`parse`].
pub fn parse_tree(text: &str) -> Result<Json<'_>> {
    let mut p = Parser {
        s: text.as_bytes(),
        pos: 0,
        text,
        depth: 0,
    };
    p.ws();
    let value = p.value()?;
    p.ws();
    if p.pos != p.s.len() {
        return Err(p.error("Extra data"));
    }
    Ok(value)
}

/// `text` for a message: at most 40 characters, with `...` where cut (numbers are ASCII).
fn clip(text: &str) -> Cow<'_, str> {
    match text.get(..40) {
        Some(head) if text.len() > 40 => Cow::Owned(format!("{head}...")),
        _ => Cow::Borrowed(text),
    }
}

struct Parser<'a> {
    s: &'a [u8],
    pos: usize,
    text: &'a str,
    depth: usize,
}

impl<'a> Parser<'a> {
    fn error(&self, what: &str) -> Error {
        let before = &self.text.as_bytes()[..self.pos.min(self.s.len())];
        let line = before.iter().filter(|b| **b == b'\n').count() + 1;
        let line_start = before
            .iter()
            .rposition(|b| *b == b'\n')
            .map_or(0, |i| i + 1);
        let char_pos = String::from_utf8_lossy(before).chars().count();
        let column = String::from_utf8_lossy(&before[line_start..])
            .chars()
            .count()
            + 1;
        Error::new(
            ErrorKind::ValueError,
            format!("{what}: line {line} column {column} (char {char_pos})"),
        )
    }

    fn ws(&mut self) {
        while self.pos < self.s.len() && matches!(self.s[self.pos], b' ' | b'\t' | b'\n' | b'\r') {
            self.pos += 1;
        }
    }

    fn eat(&mut self, word: &str) -> bool {
        if self.s[self.pos..].starts_with(word.as_bytes()) {
            self.pos += word.len();
            true
        } else {
            false
        }
    }

    fn value(&mut self) -> Result<Json<'a>> {
        self.depth += 1;
        if self.depth > crate::stack::MAX_NESTING {
            return Err(self.error("JSON nested too deeply"));
        }
        crate::stack::ensure_room("the JSON text")?;
        let result = self.value_inner();
        self.depth -= 1;
        result
    }

    fn value_inner(&mut self) -> Result<Json<'a>> {
        match self.s.get(self.pos) {
            Some(b'{') => self.object(),
            Some(b'[') => self.array(),
            Some(b'"') => Ok(Json::Str(self.string()?)),
            Some(b't') if self.eat("true") => Ok(Json::Bool(true)),
            Some(b'f') if self.eat("false") => Ok(Json::Bool(false)),
            Some(b'n') if self.eat("null") => Ok(Json::Null),
            Some(b'N') if self.eat("NaN") => Ok(Json::Float(f64::NAN)),
            Some(b'I') if self.eat("Infinity") => Ok(Json::Float(f64::INFINITY)),
            Some(b'-') if self.eat("-Infinity") => Ok(Json::Float(f64::NEG_INFINITY)),
            Some(b'-' | b'0'..=b'9') => self.number(),
            _ => Err(self.error("Expecting value")),
        }
    }

    fn number(&mut self) -> Result<Json<'a>> {
        let start = self.pos;
        if self.s[self.pos] == b'-' {
            self.pos += 1;
        }
        let digits_start = self.pos;
        while self.pos < self.s.len() && self.s[self.pos].is_ascii_digit() {
            self.pos += 1;
        }
        if self.pos == digits_start {
            self.pos = start;
            return Err(self.error("Expecting value"));
        }
        let mut is_float = false;
        if self.s.get(self.pos) == Some(&b'.') {
            is_float = true;
            self.pos += 1;
            while self.pos < self.s.len() && self.s[self.pos].is_ascii_digit() {
                self.pos += 1;
            }
        }
        if matches!(self.s.get(self.pos), Some(b'e' | b'E')) {
            is_float = true;
            self.pos += 1;
            if matches!(self.s.get(self.pos), Some(b'+' | b'-')) {
                self.pos += 1;
            }
            while self.pos < self.s.len() && self.s[self.pos].is_ascii_digit() {
                self.pos += 1;
            }
        }
        let text = &self.text[start..self.pos];
        if !is_float && let Ok(v) = text.parse::<i64>() {
            return Ok(Json::Int(v));
        }
        match text.parse::<f64>() {
            Ok(v) if v.is_finite() => Ok(Json::Float(v)),
            _ => {
                self.pos = start;
                Err(self.error(&format!(
                    "Number {} is out of range of a 64-bit float",
                    clip(text)
                )))
            }
        }
    }

    fn hex4(&mut self) -> Result<u32> {
        let digits = self
            .s
            .get(self.pos..self.pos + 4)
            .and_then(|d| std::str::from_utf8(d).ok());
        match digits.and_then(|d| u32::from_str_radix(d, 16).ok()) {
            Some(v) => {
                self.pos += 4;
                Ok(v)
            }
            None => Err(self.error("Invalid \\uXXXX escape")),
        }
    }

    fn string(&mut self) -> Result<Cow<'a, str>> {
        let start = self.pos;
        self.pos += 1;
        // A string without escapes is borrowed from the text.
        let plain_end = self.s[self.pos..]
            .iter()
            .position(|b| matches!(b, b'"' | b'\\') || *b < 0x20)
            .map(|n| self.pos + n);
        if let Some(end) = plain_end
            && self.s[end] == b'"'
        {
            let text: &'a str = self.text;
            self.pos = end + 1;
            return Ok(Cow::Borrowed(&text[start + 1..end]));
        }
        let mut out = String::new();
        loop {
            let run_start = self.pos;
            while self.pos < self.s.len()
                && !matches!(self.s[self.pos], b'"' | b'\\')
                && self.s[self.pos] >= 0x20
            {
                self.pos += 1;
            }
            out.push_str(&self.text[run_start..self.pos]);
            match self.s.get(self.pos) {
                Some(b'"') => {
                    self.pos += 1;
                    return Ok(Cow::Owned(out));
                }
                Some(b'\\') => {
                    self.pos += 1;
                    let c = match self.s.get(self.pos) {
                        Some(b'"') => '"',
                        Some(b'\\') => '\\',
                        Some(b'/') => '/',
                        Some(b'b') => '\u{8}',
                        Some(b'f') => '\u{c}',
                        Some(b'n') => '\n',
                        Some(b'r') => '\r',
                        Some(b't') => '\t',
                        Some(b'u') => {
                            self.pos += 1;
                            let mut code = self.hex4()?;
                            if (0xd800..0xdc00).contains(&code) && self.eat("\\u") {
                                let low = self.hex4()?;
                                code = 0x10000
                                    + ((code - 0xd800) << 10)
                                    + (low.wrapping_sub(0xdc00) & 0x3ff);
                            }
                            out.push(char::from_u32(code).unwrap_or('\u{fffd}'));
                            continue;
                        }
                        _ => {
                            self.pos -= 1;
                            return Err(self.error("Invalid \\escape"));
                        }
                    };
                    out.push(c);
                    self.pos += 1;
                }
                Some(_) => return Err(self.error("Invalid control character at")),
                None => {
                    self.pos = start;
                    return Err(self.error("Unterminated string starting at"));
                }
            }
        }
    }

    fn array(&mut self) -> Result<Json<'a>> {
        self.pos += 1;
        let mut items = Vec::new();
        self.ws();
        if self.eat("]") {
            return Ok(Json::Array(items));
        }
        loop {
            self.ws();
            items.push(self.value()?);
            self.ws();
            if self.eat(",") {
                continue;
            }
            if self.eat("]") {
                return Ok(Json::Array(items));
            }
            return Err(self.error("Expecting ',' delimiter"));
        }
    }

    fn object(&mut self) -> Result<Json<'a>> {
        self.pos += 1;
        let mut members = Vec::new();
        self.ws();
        if self.eat("}") {
            return Ok(Json::Object(members));
        }
        loop {
            self.ws();
            if self.s.get(self.pos) != Some(&b'"') {
                return Err(self.error("Expecting property name enclosed in double quotes"));
            }
            let key = self.string()?;
            self.ws();
            if !self.eat(":") {
                return Err(self.error("Expecting ':' delimiter"));
            }
            self.ws();
            let value = self.value()?;
            members.push((key, value));
            self.ws();
            if self.eat(",") {
                continue;
            }
            if self.eat("}") {
                return Ok(Json::Object(members));
            }
            return Err(self.error("Expecting ',' delimiter"));
        }
    }
}

/// A copy of text (invalid UTF-8 replaced); a `MemoryError` naming the size when it does not
/// fit in memory.
pub(crate) fn owned_text(bytes: &[u8]) -> Result<String> {
    let mut text = String::new();
    text.try_reserve_exact(bytes.len()).map_err(|_| {
        Error::new(
            ErrorKind::MemoryError,
            format!("cannot copy a string of {} bytes", bytes.len()),
        )
    })?;
    text.push_str(&String::from_utf8_lossy(bytes));
    Ok(text)
}

/// Writes `value` as JSON text, compact or indented by `indent` spaces; a `ValueError` for
/// values JSON cannot hold (non-string keys, objects other than containers and strings).
pub fn stringify(value: AnyView<'_>, indent: Option<usize>) -> Result<String> {
    Json::from_any(value)?.write(indent)
}

/// The JSON text of a float: `%.17g`, with `.0` added to integral values.
pub fn float_text(x: f64) -> String {
    if x.is_nan() {
        return "NaN".into();
    }
    if x.is_infinite() {
        return if x > 0.0 { "Infinity" } else { "-Infinity" }.into();
    }
    let mut text = format_g(x, 17);
    if !text.contains(['.', 'e', 'n', 'i']) {
        text.push_str(".0");
    }
    text
}

/// Appends a JSON string literal (non-ASCII written as is).
pub fn quote_json(text: &str, out: &mut String) {
    out.push('"');
    let mut start = 0;
    for (i, b) in text.bytes().enumerate() {
        let escaped = match b {
            b'"' => "\\\"",
            b'\\' => "\\\\",
            b'\n' => "\\n",
            b'\r' => "\\r",
            b'\t' => "\\t",
            0x08 => "\\b",
            0x0c => "\\f",
            b if b < 0x20 => "",
            _ => continue,
        };
        out.push_str(&text[start..i]);
        if escaped.is_empty() {
            let _ = write!(out, "\\u{b:04x}");
        } else {
            out.push_str(escaped);
        }
        start = i + 1;
    }
    out.push_str(&text[start..]);
    out.push('"');
}

/// The length of the JSON string literal of `text`, as [`quote_json`] writes it.
fn quoted_len(text: &str) -> usize {
    let escapes: usize = text
        .bytes()
        .map(|b| match b {
            b'"' | b'\\' | b'\n' | b'\r' | b'\t' | 0x08 | 0x0c => 1,
            b if b < 0x20 => 5,
            _ => 0,
        })
        .sum();
    text.len() + escapes + 2
}

/// Writes JSON text, making room before each piece: text sized by its caller (long strings,
/// deep indentation) is a `MemoryError` when it does not fit, never an abort.
struct Writer<'a> {
    indent: Option<usize>,
    out: &'a mut String,
}

impl Writer<'_> {
    /// Room for `more` bytes, or a `MemoryError` naming the size the text would reach.
    fn reserve(&mut self, more: Option<usize>) -> Result<()> {
        let len = self.out.len();
        match more {
            Some(more) if self.out.try_reserve(more).is_ok() => Ok(()),
            _ => Err(Error::new(
                ErrorKind::MemoryError,
                format!(
                    "the JSON text does not fit in memory ({len} bytes, and {} more)",
                    more.map_or_else(|| "more than 2^64".to_owned(), |more| more.to_string())
                ),
            )),
        }
    }

    fn push_str(&mut self, text: &str) -> Result<()> {
        self.reserve(Some(text.len()))?;
        self.out.push_str(text);
        Ok(())
    }

    fn newline(&mut self, level: usize) -> Result<()> {
        if let Some(n) = self.indent {
            self.reserve(
                n.checked_mul(level)
                    .and_then(|spaces| spaces.checked_add(1)),
            )?;
            self.out.push('\n');
            self.out.extend(std::iter::repeat_n(' ', n * level));
        }
        Ok(())
    }

    fn value(&mut self, value: &Json<'_>, level: usize) -> Result<()> {
        match value {
            Json::Null => self.push_str("null")?,
            Json::Bool(b) => self.push_str(if *b { "true" } else { "false" })?,
            Json::Int(i) => self.push_str(&i.to_string())?,
            Json::Float(x) => self.push_str(&float_text(*x))?,
            Json::Str(s) => {
                self.reserve(Some(quoted_len(s)))?;
                quote_json(s, self.out);
            }
            Json::Array(items) => {
                self.push_str("[")?;
                for (i, item) in items.iter().enumerate() {
                    if i > 0 {
                        self.push_str(",")?;
                    }
                    self.newline(level + 1)?;
                    self.value(item, level + 1)?;
                }
                if !items.is_empty() {
                    self.newline(level)?;
                }
                self.push_str("]")?;
            }
            Json::Object(members) => {
                self.push_str("{")?;
                for (i, (k, v)) in members.iter().enumerate() {
                    if i > 0 {
                        self.push_str(",")?;
                    }
                    self.newline(level + 1)?;
                    self.reserve(Some(quoted_len(k)))?;
                    quote_json(k, self.out);
                    self.push_str(if self.indent.is_some() { ": " } else { ":" })?;
                    self.value(v, level + 1)?;
                }
                if !members.is_empty() {
                    self.newline(level)?;
                }
                self.push_str("}")?;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_and_reports_positions() {
        let v = parse(r#"{"a": [1, 2.5, true, null, "x\u00e9"], "b": {"c": -3}}"#).unwrap();
        assert_eq!(
            stringify(v.as_view(), None).unwrap(),
            r#"{"a":[1,2.5,true,null,"xé"],"b":{"c":-3}}"#
        );
        assert_eq!(
            stringify(parse("[]").unwrap().as_view(), Some(2)).unwrap(),
            "[]"
        );
        let err = parse("[1,]").unwrap_err();
        assert!(
            err.message()
                .contains("Expecting value: line 1 column 4 (char 3)"),
            "{err}"
        );
        assert!(parse("").is_err());
        let err = parse("[0, -1e99999]").unwrap_err();
        assert_eq!(
            err.message(),
            "Number -1e99999 is out of range of a 64-bit float: line 1 column 5 (char 4)"
        );
        let long = format!("{}e999", "9".repeat(60));
        let err = parse(&long).unwrap_err();
        assert!(
            err.message()
                .starts_with(&format!("Number {}...", &long[..40])),
            "{err}"
        );
        assert!(parse("1 2").unwrap_err().message().contains("Extra data"));
        assert_eq!(float_text(1.0), "1.0");
        assert_eq!(float_text(1e300), "1.0000000000000001e+300");
    }
}
