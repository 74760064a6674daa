//! JSON text to and from values (`ffi.json.Parse`, `ffi.json.Stringify`): objects are `Map`s
//! (keys in document order), arrays `Array`s, numbers `int` (when integral and within 64 bits)
//! or `float`, and `NaN`/`Infinity`/`-Infinity` are accepted and written as JavaScript does.

use std::fmt::Write as _;

use crate::any::{Any, AnyView};
use crate::containers::map::MapRead;
use crate::error::{Error, ErrorKind, Result};
use crate::repr::format_g;
use crate::{Array, Dict, List, Map, abi};

/// Parses JSON `text`; a `ValueError` saying what was expected where (line, column, char).
pub fn parse(text: &str) -> Result<Any> {
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

struct Parser<'a> {
    s: &'a [u8],
    pos: usize,
    text: &'a str,
    depth: usize,
}

impl Parser<'_> {
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

    fn value(&mut self) -> Result<Any> {
        self.depth += 1;
        if self.depth > 10_000 {
            return Err(self.error("JSON nested too deeply"));
        }
        let result = self.value_inner();
        self.depth -= 1;
        result
    }

    fn value_inner(&mut self) -> Result<Any> {
        match self.s.get(self.pos) {
            Some(b'{') => self.object(),
            Some(b'[') => self.array(),
            Some(b'"') => Ok(Any::from(self.string()?)),
            Some(b't') if self.eat("true") => Ok(Any::from(true)),
            Some(b'f') if self.eat("false") => Ok(Any::from(false)),
            Some(b'n') if self.eat("null") => Ok(Any::none()),
            Some(b'N') if self.eat("NaN") => Ok(Any::from(f64::NAN)),
            Some(b'I') if self.eat("Infinity") => Ok(Any::from(f64::INFINITY)),
            Some(b'-') if self.eat("-Infinity") => Ok(Any::from(f64::NEG_INFINITY)),
            Some(b'-' | b'0'..=b'9') => self.number(),
            _ => Err(self.error("Expecting value")),
        }
    }

    fn number(&mut self) -> Result<Any> {
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
            return Ok(Any::from(v));
        }
        match text.parse::<f64>() {
            Ok(v) if v.is_finite() => Ok(Any::from(v)),
            _ => {
                self.pos = start;
                Err(self.error("Expecting value"))
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

    fn string(&mut self) -> Result<String> {
        let start = self.pos;
        self.pos += 1;
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
                    return Ok(out);
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

    fn array(&mut self) -> Result<Any> {
        self.pos += 1;
        let mut items = Vec::new();
        self.ws();
        if self.eat("]") {
            return Ok(Array::from_vec(items).into());
        }
        loop {
            self.ws();
            items.push(self.value()?);
            self.ws();
            if self.eat(",") {
                continue;
            }
            if self.eat("]") {
                return Ok(Array::from_vec(items).into());
            }
            return Err(self.error("Expecting ',' delimiter"));
        }
    }

    fn object(&mut self) -> Result<Any> {
        self.pos += 1;
        let mut map = Map::new();
        self.ws();
        if self.eat("}") {
            return Ok(map.into());
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
            map.insert(key, value);
            self.ws();
            if self.eat(",") {
                continue;
            }
            if self.eat("}") {
                return Ok(map.into());
            }
            return Err(self.error("Expecting ',' delimiter"));
        }
    }
}

/// Writes `value` as JSON text, compact or indented by `indent` spaces; a `ValueError` for
/// values JSON cannot hold (non-string keys, objects other than containers and strings).
pub fn stringify(value: AnyView<'_>, indent: Option<usize>) -> Result<String> {
    let mut out = String::new();
    Writer {
        indent,
        out: &mut out,
    }
    .value(value, 0)?;
    Ok(out)
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
    for c in text.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            c if (c as u32) < 0x20 => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
}

struct Writer<'a> {
    indent: Option<usize>,
    out: &'a mut String,
}

impl Writer<'_> {
    fn newline(&mut self, level: usize) {
        if let Some(n) = self.indent {
            self.out.push('\n');
            self.out.extend(std::iter::repeat_n(' ', n * level));
        }
    }

    fn value(&mut self, value: AnyView<'_>, level: usize) -> Result<()> {
        if level > 10_000 {
            return Err(Error::new(
                ErrorKind::ValueError,
                "value nested too deeply for JSON",
            ));
        }
        match value.type_index() {
            abi::kTVMFFINone => self.out.push_str("null"),
            abi::kTVMFFIBool => self.out.push_str(if value.cast::<bool>()? {
                "true"
            } else {
                "false"
            }),
            abi::kTVMFFIInt => {
                let _ = write!(self.out, "{}", value.cast::<i64>()?);
            }
            abi::kTVMFFIFloat => self.out.push_str(&float_text(value.cast::<f64>()?)),
            abi::kTVMFFISmallStr | abi::kTVMFFIStr | abi::kTVMFFIRawStr => {
                let text = value.cast::<crate::String>()?;
                quote_json(&text.to_string_lossy(), self.out);
            }
            abi::kTVMFFIArray => self.seq(value.cast::<Array>()?.as_slice(), level)?,
            abi::kTVMFFIList => self.seq(&value.cast::<List>()?.to_vec(), level)?,
            abi::kTVMFFIMap => self.map(value.cast::<Map>()?.iter(), level)?,
            abi::kTVMFFIDict => self.map(value.cast::<Dict>()?.iter(), level)?,
            _ => {
                return Err(Error::new(
                    ErrorKind::ValueError,
                    format!("Unsupported type: `{}`", value.type_key()),
                ));
            }
        }
        Ok(())
    }

    fn seq(&mut self, items: &[Any], level: usize) -> Result<()> {
        self.out.push('[');
        for (i, item) in items.iter().enumerate() {
            if i > 0 {
                self.out.push(',');
            }
            self.newline(level + 1);
            self.value(item.as_view(), level + 1)?;
        }
        if !items.is_empty() {
            self.newline(level);
        }
        self.out.push(']');
        Ok(())
    }

    fn map(&mut self, entries: impl Iterator<Item = (Any, Any)>, level: usize) -> Result<()> {
        self.out.push('{');
        let mut any = false;
        for (i, (k, v)) in entries.enumerate() {
            if i > 0 {
                self.out.push(',');
            }
            any = true;
            self.newline(level + 1);
            let key = k.cast::<crate::String>().map_err(|_| {
                Error::new(
                    ErrorKind::ValueError,
                    format!("Expect key to be string, got `{}`", k.type_key()),
                )
            })?;
            quote_json(&key.to_string_lossy(), self.out);
            self.out.push(':');
            if self.indent.is_some() {
                self.out.push(' ');
            }
            self.value(v.as_view(), level + 1)?;
        }
        if any {
            self.newline(level);
        }
        self.out.push('}');
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
        assert!(parse("1 2").unwrap_err().message().contains("Extra data"));
        assert_eq!(float_text(1.0), "1.0");
        assert_eq!(float_text(1e300), "1.0000000000000001e+300");
    }
}
