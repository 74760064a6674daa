/*
 * A device backend written in C: "host memory pretending to be a device", registered through
 * the C form of the device API (tvm/ffi/extra/device_api.h). Build it as a shared library, load
 * it into a process whose runtime is up (tvm.base.load_backend_libs, dlopen, a `tvm.backends`
 * entry point), and call example_device_register(device_type) once.
 *
 *   gcc -shared -fPIC -std=c11 -I cpp-abi/include -o libexample_device.so device_backend.c
 *
 * Every entry reports failures through TVMFFIErrorSetRaisedFromCStr and returns -1.
 */
#include <stdlib.h>
#include <string.h>
#include <tvm/ffi/extra/device_api.h>

#define MAX_DIMS 16

static int64_t g_live_allocations = 0;
static int g_released = 0;
static char g_context[] = "example device context";

static int fail(const char* kind, const char* message) {
  TVMFFIErrorSetRaisedFromCStr(kind, message);
  return -1;
}

static int check_device(DLDevice device) {
  if (device.device_id != 0) return fail("ValueError", "example device: only device 0 exists");
  return 0;
}

static int get_attr(void* self, DLDevice device, int32_t kind, TVMFFIAny* out) {
  (void)self;
  out->type_index = kTVMFFINone;
  out->zero_padding = 0;
  out->v_int64 = 0;
  switch (kind) {
    case kTVMFFIDeviceAttrExist:
      out->type_index = kTVMFFIInt;
      out->v_int64 = device.device_id == 0;
      return 0;
    case kTVMFFIDeviceAttrDeviceName:
      out->type_index = kTVMFFIRawStr;
      out->v_c_str = "example C device";
      return 0;
    case kTVMFFIDeviceAttrWarpSize:
      out->type_index = kTVMFFIInt;
      out->v_int64 = 1;
      return 0;
    default:
      return 0; /* unknown: None */
  }
}

static int alloc(void* self, DLDevice device, size_t nbytes, size_t alignment,
                 DLDataType dtype_hint, void** out) {
  (void)self;
  (void)dtype_hint;
  if (check_device(device) != 0) return -1;
  if (alignment < sizeof(void*)) alignment = sizeof(void*);
  size_t rounded = (nbytes + alignment - 1) / alignment * alignment;
  void* ptr = aligned_alloc(alignment, rounded == 0 ? alignment : rounded);
  if (ptr == NULL) return fail("MemoryError", "example device: out of memory");
  ++g_live_allocations;
  *out = ptr;
  return 0;
}

static int release_memory(void* self, DLDevice device, void* ptr) {
  (void)self;
  (void)device;
  free(ptr);
  --g_live_allocations;
  return 0;
}

static int64_t stride_of(const DLTensor* t, int dim) {
  if (t->strides != NULL) return t->strides[dim];
  int64_t stride = 1;
  for (int d = t->ndim - 1; d > dim; --d) stride *= t->shape[d];
  return stride;
}

/* Element by element, with both sides' strides and byte offsets. */
static int copy(void* self, const DLTensor* from, const DLTensor* to, TVMFFIStreamHandle stream) {
  (void)self;
  (void)stream;
  if (from->ndim > MAX_DIMS) return fail("ValueError", "example device: too many dimensions");
  size_t itemsize = ((size_t)from->dtype.bits * from->dtype.lanes + 7) / 8;
  int64_t count = 1;
  for (int d = 0; d < from->ndim; ++d) count *= from->shape[d];
  int64_t index[MAX_DIMS] = {0};
  const char* src = (const char*)from->data + from->byte_offset;
  char* dst = (char*)to->data + to->byte_offset;
  for (int64_t k = 0; k < count; ++k) {
    int64_t src_offset = 0, dst_offset = 0;
    for (int d = 0; d < from->ndim; ++d) {
      src_offset += index[d] * stride_of(from, d);
      dst_offset += index[d] * stride_of(to, d);
    }
    memcpy(dst + dst_offset * (int64_t)itemsize, src + src_offset * (int64_t)itemsize, itemsize);
    for (int d = from->ndim - 1; d >= 0; --d) {
      if (++index[d] < from->shape[d]) break;
      index[d] = 0;
    }
  }
  return 0;
}

/* Copies run at once, so streams have nothing to wait for. */
static int stream_create(void* self, DLDevice device, TVMFFIStreamHandle* out) {
  (void)self;
  *out = NULL;
  return check_device(device);
}

static int stream_free(void* self, DLDevice device, TVMFFIStreamHandle stream) {
  (void)self;
  (void)stream;
  return check_device(device);
}

static int stream_sync(void* self, DLDevice device, TVMFFIStreamHandle stream) {
  (void)self;
  (void)stream;
  return check_device(device);
}

static void release(void* self) {
  (void)self;
  ++g_released;
}

static TVMFFIDeviceAPITable make_table(void) {
  TVMFFIDeviceAPITable table;
  memset(&table, 0, sizeof(table));
  table.struct_size = sizeof(TVMFFIDeviceAPITable);
  table.version = TVM_FFI_DEVICE_API_TABLE_VERSION;
  table.self = g_context;
  table.name = "example";
  table.get_attr = get_attr;
  table.alloc = alloc;
  table.free = release_memory;
  table.copy = copy;
  table.stream_create = stream_create;
  table.stream_free = stream_free;
  table.stream_sync = stream_sync;
  table.release = release;
  return table;
}

/* Registers the example backend for `device_type`. */
TVM_FFI_DLL_EXPORT int example_device_register(int32_t device_type) {
  TVMFFIDeviceAPITable table = make_table();
  return TVMFFIDeviceAPIRegister(device_type, &table);
}

/* Registers a broken table, for tests of the checks: 1 = `copy` is NULL, 2 = wrong struct_size,
 * 3 = wrong version. */
TVM_FFI_DLL_EXPORT int example_device_register_broken(int32_t device_type, int defect) {
  TVMFFIDeviceAPITable table = make_table();
  if (defect == 1) table.copy = NULL;
  if (defect == 2) table.struct_size -= 8;
  if (defect == 3) table.version = 99;
  return TVMFFIDeviceAPIRegister(device_type, &table);
}

/* Allocations not freed yet. */
TVM_FFI_DLL_EXPORT int64_t example_device_live_allocations(void) { return g_live_allocations; }

/* How many times the runtime released a table's context. */
TVM_FFI_DLL_EXPORT int example_device_released(void) { return g_released; }
