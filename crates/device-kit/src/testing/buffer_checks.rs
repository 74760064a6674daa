//! Checks every buffer-handle backend passes on a real device.

use tvm_ffi::Device;

/// Checks that `device`, of a registered backend with one queue per device (the buffer-handle
/// backends), has the default stream only: a foreign stream is refused alike when made current
/// and when synchronized, in a `ValueError` saying that `<title> devices have one queue`, and
/// the thread's current stream stays the default one.
pub fn assert_default_stream_only(device: Device, title: &str) {
    use tvm_runtime::device::{StreamHandle, current_stream, set_current_stream, sync_stream};
    let foreign = StreamHandle(0x5150 as *mut std::ffi::c_void);
    let refused = set_current_stream(device, foreign).unwrap_err();
    let by_sync = sync_stream(device, Some(foreign)).unwrap_err();
    assert_eq!(refused.kind(), "ValueError");
    assert_eq!(refused.message(), by_sync.message());
    let says = format!("{title} devices have one queue");
    assert!(refused.message().contains(&says), "{refused}");
    assert_eq!(current_stream(device), StreamHandle::NULL);
    assert_eq!(
        set_current_stream(device, StreamHandle::NULL).unwrap(),
        StreamHandle::NULL
    );
}
