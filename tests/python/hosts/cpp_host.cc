// cpp_host.cc -- a C++ program that links the runtime library (libtvm_ffi.so) and uses it through
// the C++ headers, with no Python in the process: Module::LoadFromFile, a kernel call on CPU
// tensors, the tvm::ffi::Error of a bad call, a tensor on a Vulkan device when one exists, and
// a call through an RPC session to a server on loopback.
//
//   cpp_host KERNEL_LIBRARY RPC_PORT      (RPC_PORT 0: no RPC step)
//
// Each step prints one line; the exit status is 0 only when every step did what it should.
#include <tvm/ffi/ffi.h>
#include <tvm/ffi/module.h>

#include <cstdio>
#include <cstdlib>
#include <string>

namespace ffi = tvm::ffi;

namespace {

DLDevice MakeDevice(int32_t type, int32_t id) { return TVMFFIDLDeviceFromIntPair(type, id); }

DLDataType Float32() {
  DLDataType dtype;
  dtype.code = kDLFloat;
  dtype.bits = 32;
  dtype.lanes = 1;
  return dtype;
}

// A new float32 tensor of `length` elements on `device`, from the runtime's registry.
ffi::Any Empty(int64_t length, DLDevice device) {
  ffi::Any shape = ffi::Function::GetGlobalRequired("ffi.Shape")(length);
  return ffi::Function::GetGlobalRequired("runtime.TensorEmpty")(shape, Float32(), device);
}

float* Data(const ffi::Any& tensor) {
  return static_cast<float*>(tensor.cast<DLTensor*>()->data);
}

void KernelSteps(const char* library) {
  ffi::Module module = ffi::Module::LoadFromFile(library);
  std::printf("load module: ok\n");
  ffi::Function add_one = module->GetFunction("add_one", true).value();
  ffi::Any x = Empty(4, MakeDevice(kDLCPU, 0));
  ffi::Any y = Empty(4, MakeDevice(kDLCPU, 0));
  for (int i = 0; i < 4; ++i) Data(x)[i] = static_cast<float>(i);
  add_one(x, y);
  std::printf("call add_one: %g %g %g %g\n", Data(y)[0], Data(y)[1], Data(y)[2], Data(y)[3]);
  try {
    add_one("not a tensor", y);
    std::printf("bad call: succeeded\n");
  } catch (const ffi::Error& err) {
    std::printf("bad call: %.*s: %s\n", static_cast<int>(err.kind().size()), err.kind().data(),
                err.what());
  }
}

void VulkanStep() {
  DLDevice vulkan = MakeDevice(kDLVulkan, 0);
  int64_t exists = ffi::Function::GetGlobalRequired("runtime.DeviceGetAttr")(vulkan, 0)
                       .cast<int64_t>();
  if (exists == 0) {
    std::printf("vulkan: absent\n");
    return;
  }
  ffi::Any tensor = Empty(256, vulkan);
  const DLTensor* dl = tensor.cast<DLTensor*>();
  std::printf("vulkan tensor: device %d, %lld elements\n", static_cast<int>(dl->device.device_type),
              static_cast<long long>(dl->shape[0]));
}

void RpcStep(int port) {
  ffi::Any session = ffi::Function::GetGlobalRequired("rpc.Connect")("127.0.0.1", port, "");
  ffi::Function remote =
      session.cast<ffi::Module>()->GetFunction("runtime.DeviceGetAttr", false).value();
  int64_t exists = remote(MakeDevice(kDLCPU, 0), 0).cast<int64_t>();
  std::printf("rpc: remote cpu exists = %lld\n", static_cast<long long>(exists));
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: %s KERNEL_LIBRARY RPC_PORT\n", argv[0]);
    return 2;
  }
  try {
    KernelSteps(argv[1]);
    VulkanStep();
    int port = std::atoi(argv[2]);
    if (port > 0) RpcStep(port);
  } catch (const ffi::Error& err) {
    std::printf("failed: %.*s: %s\n", static_cast<int>(err.kind().size()), err.kind().data(),
                err.what());
    return 1;
  } catch (const std::exception& err) {
    std::printf("failed: %s\n", err.what());
    return 1;
  }
  return 0;
}
