//! The values a call's arguments borrow from: converted arguments that are not views of a
//! Python object (tensors, containers, functions, copies) live here until the call returns.

use std::mem::MaybeUninit;

use pyo3::prelude::*;
use tvm_ffi::Any;
use tvm_ffi::abi::{TVMFFIAny, TVMFFIByteArray};

use crate::callback::{Lent, callable_to_function, lend};

/// How many temporaries live inline in [`Temporaries`].
const INLINE_TEMPORARIES: usize = 4;

/// Values that must live until a call returns. The first few live inline, so that a call with
/// a tensor or a list argument does not allocate for its bookkeeping, and a call with none
/// (numbers, strings, objects) costs next to nothing to set up and drop.
pub(super) struct Temporaries {
    inline: [MaybeUninit<Any>; INLINE_TEMPORARIES],
    inline_len: usize,
    /// The rest, made on first use.
    more: Option<Box<More>>,
    /// The function lent for the first callable argument.
    lent: Option<Lent>,
    /// The stream a producer's exchange table named for the first argument off the CPU:
    /// (device type, device id, stream), made current for the call.
    producer_stream: Option<(i32, i32, usize)>,
}

/// Temporaries past the inline ones.
#[derive(Default)]
struct More {
    owned: Vec<Any>,
    // Views point into the boxes, which must not move as the vector grows.
    #[allow(clippy::vec_box)]
    byte_arrays: Vec<Box<TVMFFIByteArray>>,
}

impl Default for Temporaries {
    fn default() -> Temporaries {
        Temporaries {
            inline: [const { MaybeUninit::uninit() }; INLINE_TEMPORARIES],
            inline_len: 0,
            more: None,
            lent: None,
            producer_stream: None,
        }
    }
}

impl Temporaries {
    /// The temporaries past the inline ones.
    fn more(&mut self) -> &mut More {
        self.more.get_or_insert_default()
    }

    /// Keeps a byte array (that a view points at) alive for the call.
    pub(super) fn keep_byte_array(&mut self, array: Box<TVMFFIByteArray>) {
        self.more().byte_arrays.push(array);
    }

    /// A view of a function calling `callable`: the first is lent (see [`crate::callback`]),
    /// any further one is a function of its own, kept here.
    pub(super) fn callable(&mut self, callable: &Bound<'_, PyAny>) -> TVMFFIAny {
        if self.lent.is_some() {
            return keep(self, callable_to_function(callable).into());
        }
        let lent = lend(callable);
        let view = lent.view();
        self.lent = Some(lent);
        view
    }

    /// Whether the call still needs a producer's stream (none was found for an argument).
    pub(super) fn wants_producer_stream(&self) -> bool {
        self.producer_stream.is_none()
    }

    /// Notes the current stream a tensor's producer named for its device.
    pub(super) fn note_producer_stream(&mut self, device_type: i32, device_id: i32, stream: usize) {
        self.producer_stream = Some((device_type, device_id, stream));
    }

    /// The producer's stream to make current for the call, if an argument named one.
    pub(super) fn producer_stream(&self) -> Option<(i32, i32, usize)> {
        self.producer_stream
    }

    /// Releases the temporaries once the call has returned, giving the lent function back.
    pub(super) fn release(&mut self, py: Python<'_>) {
        if let Some(lent) = self.lent.take() {
            lent.give_back(py);
        }
    }
}

impl Temporaries {
    /// Drops the inline temporaries (out of line: most calls have none).
    #[inline(never)]
    fn drop_inline(&mut self) {
        for value in &mut self.inline[..self.inline_len] {
            // SAFETY: the first `inline_len` slots were written by `keep` and drop once here.
            unsafe { value.assume_init_drop() };
        }
    }
}

impl Drop for Temporaries {
    #[inline]
    fn drop(&mut self) {
        if self.inline_len != 0 {
            self.drop_inline();
        }
    }
}

/// Keeps `value` alive in `temps` and returns a view of it. A value that owns nothing (a number,
/// a small string) needs no keeping: its view is the value itself.
#[inline]
pub(super) fn keep(temps: &mut Temporaries, value: Any) -> TVMFFIAny {
    if !value.is_object() {
        return value.into_raw();
    }
    let raw = *value.as_raw();
    if temps.inline_len < INLINE_TEMPORARIES {
        temps.inline[temps.inline_len].write(value);
        temps.inline_len += 1;
    } else {
        temps.more().owned.push(value);
    }
    raw
}
