//! Eight threads at once: calling functions, registering and removing globals, and mutating a
//! shared list and dict, as Python threads do through functions that release the interpreter
//! lock. Run under valgrind by `scripts/memcheck.sh`, which reports any invalid access.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use tvm_ffi::{Any, Dict, Function, List, MapRead};

const THREADS: usize = 8;

fn rounds() -> usize {
    // Fewer rounds under valgrind, which runs one thread at a time.
    if std::env::var_os("TVM_UNDER_VALGRIND").is_some() {
        50
    } else {
        2_000
    }
}

#[test]
fn eight_threads_call_register_and_mutate_shared_containers() {
    let list = List::new();
    let dict = Dict::new();
    let calls = Arc::new(AtomicUsize::new(0));
    let counter = Arc::clone(&calls);
    let add = Function::from_typed("stress.add", move |a: i64, b: i64| {
        counter.fetch_add(1, Ordering::Relaxed);
        a + b
    });
    add.register_global("stress.add", true).unwrap();
    let rounds = rounds();
    std::thread::scope(|scope| {
        for t in 0..THREADS {
            let (list, dict) = (list.clone(), dict.clone());
            scope.spawn(move || {
                let own = format!("stress.thread{t}");
                for i in 0..rounds {
                    let add = Function::get_global("stress.add").expect("registered");
                    let sum: i64 = add.call((i as i64, 1i64)).unwrap().cast().unwrap();
                    assert_eq!(sum, i as i64 + 1);
                    Function::from_packed(|_| Ok(Any::none()))
                        .register_global(&own, true)
                        .unwrap();
                    list.push(format!(
                        "value {t} {i} with enough text to live on the heap"
                    ));
                    if i % 7 == 0 {
                        let _ = list.get(0);
                        let _ = list.to_vec();
                    }
                    if i % 50 == 49 {
                        list.clear();
                    }
                    dict.insert(format!("key {}", i % 32), i as i64);
                    let _ = dict.get(&Any::from(format!("key {}", (i + 3) % 32)));
                    if i % 64 == 63 {
                        dict.clear();
                    }
                    for (k, v) in dict.iter().take(4) {
                        assert!(k.cast::<std::string::String>().is_ok());
                        assert!(v.cast::<i64>().is_ok());
                    }
                    assert!(Function::remove_global(&own).unwrap());
                }
            });
        }
    });
    assert_eq!(calls.load(Ordering::Relaxed), THREADS * rounds);
    assert!(dict.len() <= 32);
    assert!(Function::remove_global("stress.add").unwrap());
}

#[test]
fn copying_a_list_while_another_thread_reallocates_it() {
    // Converting a list to an array copies it under the list's lock, so a copy never reads a
    // buffer that a concurrent `reserve` has freed: every copy is a prefix 0, 1, 2, ...
    let length = rounds().min(1_000);
    let run_for = std::time::Duration::from_millis(500);
    let current = std::sync::Mutex::new(Any::from(List::new()));
    let done = std::sync::atomic::AtomicBool::new(false);
    let start = std::sync::Barrier::new(2);
    std::thread::scope(|scope| {
        scope.spawn(|| {
            start.wait();
            let began = std::time::Instant::now();
            // Fresh lists until the time is up (one under valgrind).
            loop {
                let list = List::new();
                *current.lock().unwrap() = Any::from(list.clone());
                for i in 0..length {
                    list.push(i as i64);
                    // One more than now: every push moves the elements to a new buffer.
                    list.reserve(i + 2);
                }
                if began.elapsed() >= run_for || length < 1_000 {
                    break;
                }
            }
            done.store(true, Ordering::Release);
        });
        start.wait();
        let mut copies = 0usize;
        while !done.load(Ordering::Acquire) || copies == 0 {
            let value = current.lock().unwrap().clone();
            let copy = value.cast::<tvm_ffi::Array>().unwrap();
            for (k, v) in copy.iter().enumerate() {
                assert_eq!(v.cast::<i64>().ok(), Some(k as i64), "element {k}");
            }
            copies += 1;
        }
    });
}
