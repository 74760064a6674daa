/*
 * c_host.c -- a C program that links the runtime library (libtvm_ffi.so) and uses it with no
 * Python in the process: it loads a compiled kernel library as a module, calls a kernel on CPU
 * tensors, handles the error of a bad call, allocates a tensor on a Vulkan device when one
 * exists, and calls a function through an RPC session to a server on loopback.
 *
 *   c_host KERNEL_LIBRARY RPC_PORT      (RPC_PORT 0: no RPC step)
 *
 * Each step prints one line; the exit status is 0 only when every step did what it should.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <tvm/ffi/c_api.h>

/* Prints the error raised by the last failed call (kind and message) after `what`. */
static void print_raised(const char* what) {
  TVMFFIObjectHandle error = NULL;
  TVMFFIErrorMoveFromRaised(&error);
  if (error == NULL) {
    printf("%s: failed without an error\n", what);
    return;
  }
  const TVMFFIErrorCell* cell = TVMFFIErrorGetCellPtr(error);
  printf("%s: %.*s: %.*s\n", what, (int)cell->kind.size, cell->kind.data,
         (int)cell->message.size, cell->message.data);
  TVMFFIObjectDecRef(error);
}

/* Calls the global function `name` with `args`; 0 and an owned `result` on success. */
static int call_global(const char* name, TVMFFIAny* args, int32_t num_args, TVMFFIAny* result) {
  TVMFFIByteArray key = {name, strlen(name)};
  TVMFFIObjectHandle function = NULL;
  if (TVMFFIFunctionGetGlobal(&key, &function) != 0) return -1;
  if (function == NULL) {
    TVMFFIErrorSetRaisedFromCStr("KeyError", name);
    return -1;
  }
  result->type_index = kTVMFFINone;
  result->zero_padding = 0;
  result->v_int64 = 0;
  int rc = TVMFFIFunctionCall(function, args, num_args, result);
  TVMFFIObjectDecRef(function);
  return rc;
}

/* Releases an owned value's object, if it holds one. */
static void release(TVMFFIAny* value) {
  if (value->type_index >= kTVMFFIStaticObjectBegin) TVMFFIObjectDecRef(value->v_obj);
  value->type_index = kTVMFFINone;
}

static TVMFFIAny raw_str(const char* text) {
  TVMFFIAny value = {0};
  value.type_index = kTVMFFIRawStr;
  value.v_c_str = text;
  return value;
}

static TVMFFIAny int_value(int64_t v) {
  TVMFFIAny value = {0};
  value.type_index = kTVMFFIInt;
  value.v_int64 = v;
  return value;
}

static TVMFFIAny device_value(int32_t device_type, int32_t device_id) {
  TVMFFIAny value = {0};
  value.type_index = kTVMFFIDevice;
  value.v_device = TVMFFIDLDeviceFromIntPair(device_type, device_id);
  return value;
}

/* A new float32 tensor of `length` elements on the device, via runtime.TensorEmpty. */
static int empty_tensor(int64_t length, TVMFFIAny device, TVMFFIAny* out) {
  TVMFFIAny dims[1] = {int_value(length)};
  TVMFFIAny shape;
  if (call_global("ffi.Shape", dims, 1, &shape) != 0) return -1;
  TVMFFIAny dtype = {0};
  dtype.type_index = kTVMFFIDataType;
  dtype.v_dtype.code = kDLFloat;
  dtype.v_dtype.bits = 32;
  dtype.v_dtype.lanes = 1;
  TVMFFIAny args[3] = {shape, dtype, device};
  int rc = call_global("runtime.TensorEmpty", args, 3, out);
  release(&shape);
  return rc;
}

/* Loads the kernel library and runs add_one on CPU tensors; then a call with a bad argument. */
static int kernel_steps(const char* library) {
  TVMFFIAny path = raw_str(library);
  TVMFFIAny module;
  if (call_global("ffi.ModuleLoadFromFile", &path, 1, &module) != 0) {
    print_raised("load module");
    return 1;
  }
  printf("load module: ok\n");
  TVMFFIAny get_args[3] = {module, raw_str("add_one"), int_value(1)};
  get_args[2].type_index = kTVMFFIBool;
  TVMFFIAny add_one;
  if (call_global("ffi.ModuleGetFunction", get_args, 3, &add_one) != 0 ||
      add_one.type_index != kTVMFFIFunction) {
    print_raised("get function");
    release(&module);
    return 1;
  }
  TVMFFIAny x, y;
  if (empty_tensor(4, device_value(kDLCPU, 0), &x) != 0 ||
      empty_tensor(4, device_value(kDLCPU, 0), &y) != 0) {
    print_raised("cpu tensors");
    return 1;
  }
  float* xs = (float*)TVMFFITensorGetDLTensorPtr(x.v_obj)->data;
  float* ys = (float*)TVMFFITensorGetDLTensorPtr(y.v_obj)->data;
  for (int i = 0; i < 4; ++i) xs[i] = (float)i;
  TVMFFIAny call_args[2] = {x, y};
  TVMFFIAny result;
  if (TVMFFIFunctionCall(add_one.v_obj, call_args, 2, &result) != 0) {
    print_raised("call add_one");
    return 1;
  }
  printf("call add_one: %g %g %g %g\n", ys[0], ys[1], ys[2], ys[3]);
  /* A string where a tensor belongs: the kernel's TypeError comes back through the slot. */
  TVMFFIAny bad_args[2] = {raw_str("not a tensor"), y};
  if (TVMFFIFunctionCall(add_one.v_obj, bad_args, 2, &result) == 0) {
    printf("bad call: succeeded\n");
    return 1;
  }
  print_raised("bad call");
  release(&x);
  release(&y);
  release(&add_one);
  release(&module);
  return 0;
}

/* Allocates on the first Vulkan device when the runtime reports one. */
static int vulkan_step(void) {
  TVMFFIAny attr_args[2] = {device_value(kDLVulkan, 0), int_value(0)};
  TVMFFIAny exists;
  if (call_global("runtime.DeviceGetAttr", attr_args, 2, &exists) != 0) {
    print_raised("vulkan");
    return 1;
  }
  if (exists.type_index != kTVMFFIInt || exists.v_int64 == 0) {
    printf("vulkan: absent\n");
    return 0;
  }
  TVMFFIAny tensor;
  if (empty_tensor(256, device_value(kDLVulkan, 0), &tensor) != 0) {
    print_raised("vulkan tensor");
    return 1;
  }
  DLTensor* dl = TVMFFITensorGetDLTensorPtr(tensor.v_obj);
  printf("vulkan tensor: device %d, %lld elements\n", (int)dl->device.device_type,
         (long long)dl->shape[0]);
  release(&tensor);
  return 0;
}

/* Connects to an RPC server on loopback and asks it whether its CPU exists. */
static int rpc_step(int port) {
  TVMFFIAny connect_args[3] = {raw_str("127.0.0.1"), int_value(port), raw_str("")};
  TVMFFIAny session;
  if (call_global("rpc.Connect", connect_args, 3, &session) != 0) {
    print_raised("rpc connect");
    return 1;
  }
  TVMFFIAny get_args[3] = {session, raw_str("runtime.DeviceGetAttr"), int_value(0)};
  get_args[2].type_index = kTVMFFIBool;
  TVMFFIAny remote;
  if (call_global("ffi.ModuleGetFunction", get_args, 3, &remote) != 0 ||
      remote.type_index != kTVMFFIFunction) {
    print_raised("rpc get function");
    release(&session);
    return 1;
  }
  TVMFFIAny args[2] = {device_value(kDLCPU, 0), int_value(0)};
  TVMFFIAny result;
  if (TVMFFIFunctionCall(remote.v_obj, args, 2, &result) != 0) {
    print_raised("rpc call");
    return 1;
  }
  printf("rpc: remote cpu exists = %lld\n", (long long)result.v_int64);
  release(&remote);
  release(&session);
  return 0;
}

int main(int argc, char** argv) {
  if (argc != 3) {
    fprintf(stderr, "usage: %s KERNEL_LIBRARY RPC_PORT\n", argv[0]);
    return 2;
  }
  int failures = kernel_steps(argv[1]);
  failures += vulkan_step();
  int port = atoi(argv[2]);
  if (port > 0) failures += rpc_step(port);
  return failures == 0 ? 0 : 1;
}
