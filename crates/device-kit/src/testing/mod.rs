//! What the backends' tests share (feature `testing`): the fake drivers of the driver-API
//! backends (`fake`), what their launch-cost examples share (`launch_cost`), the checks every
//! driver-API backend passes over its fake (`driver_checks`, `stream_checks`), and those every
//! buffer-handle backend passes (`buffer_checks`).

mod buffer_checks;
mod driver_checks;
mod fake;
mod launch_cost;
mod stream_checks;

pub use buffer_checks::assert_default_stream_only;
pub use driver_checks::{
    ADD_ONE_META, FAKE_KERNELS_META, assert_add_one_from_file, assert_allocations_released,
    assert_argument_refusals, assert_round_trip, assert_scalars_packed, assert_two_devices,
};
pub use fake::{FakeDriver, compile_library, f32_tensor, fake_sources};
pub use launch_cost::{add_one_info, launch_cost_args, launch_packed};
pub use stream_checks::{
    alloc_floats, assert_copies_past_an_allocation_fail, assert_copies_wait_for_their_stream,
    assert_stream_hand_off, cpu, transfer,
};
