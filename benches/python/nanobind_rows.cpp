// The functions behind the nanobind column of bench_ffi.py: the operations of the testing.*
// rows, bound statically as a C++ library would declare them, one non-overloaded function per
// row so that each call takes nanobind's fastest dispatch. Built by benches/python/nanobind_ext.py
// against the headers and sources of the `nanobind` pip package.
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/string.h>

#include <cstdint>
#include <string>

namespace nb = nanobind;

NB_MODULE(tvm_bench_nanobind, m) {
    m.def("nop0", []() {});
    m.def("nop3", [](std::int64_t, std::int64_t, std::int64_t) {});
    m.def("echo_int", [](std::int64_t value) { return value; });
    m.def("echo_str", [](std::string value) { return value; });
    m.def("nop_array", [](nb::ndarray<> array) { static_cast<void>(array); });
    m.def("apply", [](nb::callable callback, std::int64_t value) { return callback(value); });
}
