//! How wgpu's callbacks become futures on native: a [`Signal`] that a callback completes and a
//! future awaits, and a [`Poller`] thread per device that drives `device.poll` whenever someone
//! waits, so that the callbacks run (and wake their futures) without the waiter polling.

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::task::{Context, Poll, Waker};
use std::thread;

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// The shared state of a one-shot value: set once by a callback, taken once by its future.
struct SignalState<T> {
    value: Option<T>,
    waker: Option<Waker>,
}

/// The sending side of a one-shot value, handed to a wgpu callback.
pub(crate) struct Signal<T> {
    state: Arc<Mutex<SignalState<T>>>,
}

/// The future of a [`Signal`]'s value.
pub(crate) struct SignalFuture<T> {
    state: Arc<Mutex<SignalState<T>>>,
}

/// A new one-shot value: the callback's side and the future's side.
pub(crate) fn signal<T>() -> (Signal<T>, SignalFuture<T>) {
    let state = Arc::new(Mutex::new(SignalState {
        value: None,
        waker: None,
    }));
    (
        Signal {
            state: Arc::clone(&state),
        },
        SignalFuture { state },
    )
}

impl<T> Signal<T> {
    /// Sets the value and wakes the task awaiting it.
    pub(crate) fn complete(self, value: T) {
        let waker = {
            let mut state = lock(&self.state);
            state.value = Some(value);
            state.waker.take()
        };
        if let Some(waker) = waker {
            waker.wake();
        }
    }
}

impl<T> Future for SignalFuture<T> {
    type Output = T;

    fn poll(self: Pin<&mut Self>, context: &mut Context<'_>) -> Poll<T> {
        let mut state = lock(&self.state);
        match state.value.take() {
            Some(value) => Poll::Ready(value),
            None => {
                state.waker = Some(context.waker().clone());
                Poll::Pending
            }
        }
    }
}

/// What the poller thread is asked to do.
#[derive(Default)]
struct PollRequests {
    /// Polls asked for since the thread last started one.
    pending: u64,
    /// The device is gone: the thread ends.
    stop: bool,
    /// The last failure of `device.poll` (a lost device), reported to later waiters.
    failure: Option<String>,
}

/// A thread that waits on a device's queue whenever asked, running the callbacks of finished
/// work (submitted-work-done and buffer mapping), which complete their [`Signal`]s.
pub(crate) struct Poller {
    requests: Mutex<PollRequests>,
    asked: Condvar,
}

impl Poller {
    /// Starts the poller of `device`; it ends after [`Poller::stop`].
    pub(crate) fn start(device: wgpu::Device, label: String) -> std::io::Result<Arc<Poller>> {
        let poller = Arc::new(Poller {
            requests: Mutex::default(),
            asked: Condvar::new(),
        });
        let shared = Arc::clone(&poller);
        thread::Builder::new()
            .name(label)
            .spawn(move || shared.run(&device))?;
        Ok(poller)
    }

    fn run(&self, device: &wgpu::Device) {
        loop {
            {
                let mut requests = lock(&self.requests);
                while requests.pending == 0 && !requests.stop {
                    requests = self
                        .asked
                        .wait(requests)
                        .unwrap_or_else(PoisonError::into_inner);
                }
                if requests.stop {
                    return;
                }
                requests.pending = 0;
            }
            // Waits for the latest submission and runs the callbacks of everything finished;
            // callbacks registered since then are served by the next round.
            if let Err(e) = device.poll(wgpu::PollType::wait_indefinitely()) {
                lock(&self.requests).failure = Some(e.to_string());
            }
        }
    }

    /// Asks for a round of polling (after registering a callback that needs one).
    pub(crate) fn request(&self) {
        lock(&self.requests).pending += 1;
        self.asked.notify_one();
    }

    /// Why polling the device failed, if it did.
    pub(crate) fn failure(&self) -> Option<String> {
        lock(&self.requests).failure.clone()
    }

    /// Ends the thread after its current round.
    pub(crate) fn stop(&self) {
        lock(&self.requests).stop = true;
        self.asked.notify_one();
    }
}
