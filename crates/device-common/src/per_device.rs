//! State made once per device index, on first use.

use std::collections::HashMap;
use std::sync::{Mutex, PoisonError};

use tvm_ffi::Result;

/// Values keyed by device index, each made by the first caller that needs it. A failed
/// construction stores nothing, so a later call tries again.
#[derive(Debug)]
pub struct PerDevice<T> {
    slots: Mutex<HashMap<i32, T>>,
}

impl<T> Default for PerDevice<T> {
    fn default() -> Self {
        PerDevice {
            slots: Mutex::new(HashMap::new()),
        }
    }
}

impl<T: Clone> PerDevice<T> {
    /// The value of device `id`, made with `make` if there is none yet. `make` runs under the
    /// lock, so it runs at most once per device even when threads race.
    pub fn get_or_try_init(&self, id: i32, make: impl FnOnce() -> Result<T>) -> Result<T> {
        let mut slots = self.slots.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(value) = slots.get(&id) {
            return Ok(value.clone());
        }
        let value = make()?;
        slots.insert(id, value.clone());
        Ok(value)
    }

    /// The value of device `id`, if made.
    pub fn get(&self, id: i32) -> Option<T> {
        let slots = self.slots.lock().unwrap_or_else(PoisonError::into_inner);
        slots.get(&id).cloned()
    }
}

impl<T> PerDevice<T> {
    /// Removes and returns every value (to release them), with its device index.
    pub fn drain(&self) -> Vec<(i32, T)> {
        let mut slots = self.slots.lock().unwrap_or_else(PoisonError::into_inner);
        slots.drain().collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tvm_ffi::{Error, ErrorKind};

    #[test]
    fn values_are_made_once_and_failures_retry() {
        let slots = PerDevice::<u32>::default();
        let err = slots
            .get_or_try_init(1, || Err(Error::new(ErrorKind::RuntimeError, "not yet")))
            .unwrap_err();
        assert_eq!(err.message(), "not yet");
        assert_eq!(slots.get(1), None);
        assert_eq!(slots.get_or_try_init(1, || Ok(7)).unwrap(), 7);
        assert_eq!(slots.get_or_try_init(1, || Ok(8)).unwrap(), 7);
        assert_eq!(slots.drain(), vec![(1, 7)]);
        assert_eq!(slots.get(1), None);
    }
}
