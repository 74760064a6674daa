//! State made once per device index, on first use, and read without a lock after that: a
//! kernel launch reads two such values (the device's context and the kernel's handle), so the
//! read is a load, not a mutex and a hash lookup.

use std::collections::HashMap;
use std::sync::{Mutex, OnceLock, PoisonError};

use tvm_ffi::Result;

/// Device indices below this have a slot of their own, read without a lock; the others (no
/// machine has that many devices of one kind, but an index is any `i32`) live in a map.
const SLOTS: usize = 16;

/// Values keyed by device index, each made by the first caller that needs it. A failed
/// construction stores nothing, so a later call tries again.
#[derive(Debug)]
pub struct PerDevice<T> {
    slots: [OnceLock<T>; SLOTS],
    /// Values of the indices without a slot. Its lock is also the one every construction runs
    /// under.
    others: Mutex<HashMap<i32, T>>,
}

impl<T> Default for PerDevice<T> {
    fn default() -> Self {
        PerDevice {
            slots: [const { OnceLock::new() }; SLOTS],
            others: Mutex::new(HashMap::new()),
        }
    }
}

impl<T> PerDevice<T> {
    #[inline]
    fn slot(&self, id: i32) -> Option<&OnceLock<T>> {
        usize::try_from(id).ok().and_then(|i| self.slots.get(i))
    }

    /// Removes and returns every value (to release them), with its device index.
    pub fn drain(&mut self) -> Vec<(i32, T)> {
        let mut values: Vec<(i32, T)> = (0i32..)
            .zip(&mut self.slots)
            .filter_map(|(id, slot)| Some((id, slot.take()?)))
            .collect();
        let others = self
            .others
            .get_mut()
            .unwrap_or_else(PoisonError::into_inner);
        values.extend(others.drain());
        values
    }
}

impl<T: Clone> PerDevice<T> {
    /// The value of device `id`, made with `make` if there is none yet. `make` runs under a
    /// lock, so it runs at most once per device even when threads race; once made, the value of
    /// an index below 16 is read without the lock.
    #[inline]
    pub fn get_or_try_init(&self, id: i32, make: impl FnOnce() -> Result<T>) -> Result<T> {
        match self.slot(id).and_then(OnceLock::get) {
            Some(value) => Ok(value.clone()),
            None => self.make_under_lock(id, make),
        }
    }

    /// [`PerDevice::get_or_try_init`] for a value not made yet, or of an index without a slot.
    #[cold]
    fn make_under_lock(&self, id: i32, make: impl FnOnce() -> Result<T>) -> Result<T> {
        let mut others = self.others.lock().unwrap_or_else(PoisonError::into_inner);
        let Some(slot) = self.slot(id) else {
            if let Some(value) = others.get(&id) {
                return Ok(value.clone());
            }
            let value = make()?;
            others.insert(id, value.clone());
            return Ok(value);
        };
        // Another thread may have made it while this one waited for the lock.
        if let Some(value) = slot.get() {
            return Ok(value.clone());
        }
        let value = make()?;
        // Constructions are serialized by the lock and the slot was empty under it.
        let _ = slot.set(value.clone());
        Ok(value)
    }

    /// The value of device `id`, if made.
    #[inline]
    pub fn get(&self, id: i32) -> Option<T> {
        match self.slot(id) {
            Some(slot) => slot.get().cloned(),
            None => {
                let others = self.others.lock().unwrap_or_else(PoisonError::into_inner);
                others.get(&id).cloned()
            }
        }
    }
}

impl<T: PartialEq> PerDevice<T> {
    /// A device index whose value is `value`, if any: the lowest of 0 to 15 (read without a
    /// lock), else the lowest of the others.
    #[inline]
    pub fn find(&self, value: &T) -> Option<i32> {
        let in_slot = (0i32..)
            .zip(&self.slots)
            .find(|(_, slot)| slot.get() == Some(value));
        match in_slot {
            Some((id, _)) => Some(id),
            None => self.find_in_others(value),
        }
    }

    #[cold]
    fn find_in_others(&self, value: &T) -> Option<i32> {
        let others = self.others.lock().unwrap_or_else(PoisonError::into_inner);
        others
            .iter()
            .filter(|(_, other)| *other == value)
            .map(|(id, _)| *id)
            .min()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use tvm_ffi::{Error, ErrorKind};

    #[test]
    fn values_are_made_once_and_failures_retry() {
        // Index 1 has a slot; 40 and -1 live in the map: both behave alike.
        for id in [1, 40, -1] {
            let mut slots = PerDevice::<u32>::default();
            let err = slots
                .get_or_try_init(id, || Err(Error::new(ErrorKind::RuntimeError, "not yet")))
                .unwrap_err();
            assert_eq!(err.message(), "not yet");
            assert_eq!(slots.get(id), None);
            assert_eq!(slots.get_or_try_init(id, || Ok(7)).unwrap(), 7);
            assert_eq!(slots.get_or_try_init(id, || Ok(8)).unwrap(), 7);
            assert_eq!(slots.get(id), Some(7));
            assert_eq!(slots.find(&7), Some(id));
            assert_eq!(slots.find(&8), None);
            assert_eq!(slots.drain(), vec![(id, 7)]);
            assert_eq!(slots.get(id), None);
        }
    }

    #[test]
    fn racing_threads_make_a_value_once_and_drain_returns_all() {
        let mut slots = PerDevice::<usize>::default();
        let made = AtomicUsize::new(0);
        std::thread::scope(|scope| {
            for _ in 0..8 {
                scope.spawn(|| {
                    for id in [0, 3, 15, 16, 100] {
                        let value = slots
                            .get_or_try_init(id, || {
                                made.fetch_add(1, Ordering::Relaxed);
                                Ok(id as usize * 10)
                            })
                            .unwrap();
                        assert_eq!(value, id as usize * 10);
                    }
                });
            }
        });
        assert_eq!(
            made.load(Ordering::Relaxed),
            5,
            "one construction per device"
        );
        let mut drained = slots.drain();
        drained.sort();
        assert_eq!(
            drained,
            vec![(0, 0), (3, 30), (15, 150), (16, 160), (100, 1000)]
        );
    }
}
