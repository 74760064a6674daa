//! Functions that complete asynchronously.
//!
//! A Rust future is served as an ordinary global function ([`register_async_function`]): each
//! call runs the future to completion on the calling thread (parked while the future waits), so
//! a caller, local or remote over RPC, gets its result when the future completes, its error
//! with its kind. A WebGPU device's synchronization is such a future. The other way round,
//! [`call_async`] turns a function call (a remote one, say) into a future that completes when
//! the call returns, without blocking the executor that polls it. They live in the runtime, so
//! that device backends use them without knowing RPC.

use std::future::Future;
use std::pin::pin;
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll, Wake, Waker};
use std::thread::{self, Thread};

use tvm_ffi::{Any, AnyView, Error, ErrorKind, Function, Result};

/// Wakes a thread parked in [`block_on`].
struct ThreadWaker(Thread);

impl Wake for ThreadWaker {
    fn wake(self: Arc<Self>) {
        self.0.unpark();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        self.0.unpark();
    }
}

/// Runs `future` to completion on this thread, parking it while the future waits.
pub fn block_on<F: Future>(future: F) -> F::Output {
    let mut future = pin!(future);
    let waker = Waker::from(Arc::new(ThreadWaker(thread::current())));
    let mut context = Context::from_waker(&waker);
    loop {
        if let Poll::Ready(output) = future.as_mut().poll(&mut context) {
            return output;
        }
        // A wake that came before this park makes it return at once (the park token).
        thread::park();
    }
}

/// Registers the asynchronous function `f` as global function `name`: a call with arguments
/// `args` runs `f(args)` to completion and returns its output. Served over RPC, the remote
/// caller's call returns when the future completes. `override_existing` replaces a function
/// already registered under `name`.
pub fn register_async_function<F, Fut>(name: &str, f: F, override_existing: bool) -> Result<()>
where
    F: Fn(Vec<Any>) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<Any>>,
{
    Function::from_packed(move |args: &[AnyView<'_>]| {
        let owned = args.iter().map(AnyView::to_owned).collect();
        block_on(f(owned))
    })
    .register_global(name, override_existing)
}

/// The state a call started by [`call_async`] shares with its future.
#[derive(Default)]
struct Completion {
    output: Option<Result<Any>>,
    waker: Option<Waker>,
}

/// The future of a call started by [`call_async`].
pub struct CallFuture {
    completion: Arc<Mutex<Completion>>,
}

impl Future for CallFuture {
    type Output = Result<Any>;

    fn poll(self: std::pin::Pin<&mut Self>, context: &mut Context<'_>) -> Poll<Result<Any>> {
        let mut completion = self
            .completion
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        match completion.output.take() {
            Some(output) => Poll::Ready(output),
            None => {
                completion.waker = Some(context.waker().clone());
                Poll::Pending
            }
        }
    }
}

/// Calls `function` with `args` on a thread of its own and returns a future of the result, so
/// that an executor keeps running other work while a remote call is in flight.
pub fn call_async(function: Function, args: Vec<Any>) -> Result<CallFuture> {
    let completion = Arc::new(Mutex::new(Completion::default()));
    let shared = Arc::clone(&completion);
    thread::Builder::new()
        .name("tvm-async-call".into())
        .spawn(move || {
            let views: Vec<AnyView<'_>> = args.iter().map(AnyView::from).collect();
            let output = function.call_packed(&views);
            let waker = {
                let mut completion = shared.lock().unwrap_or_else(PoisonError::into_inner);
                completion.output = Some(output);
                completion.waker.take()
            };
            if let Some(waker) = waker {
                waker.wake();
            }
        })
        .map_err(|e| {
            Error::new(
                ErrorKind::RuntimeError,
                format!("cannot start a thread for an asynchronous call: {e}"),
            )
        })?;
    Ok(CallFuture { completion })
}
