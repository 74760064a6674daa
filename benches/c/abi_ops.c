/*
 * One C ABI operation, repeated: the harness of the C-level benchmark (benches/c/bench_c_abi.py).
 *
 * The same source is compiled against each side's header (ours: python/tvm/include; the
 * reference's: the include directory of the apache-tvm-ffi wheel) and linked to each side's
 * libtvm_ffi.so. It uses only functions and fields both headers declare.
 *
 *   abi_ops OP N          run OP N times (after one warm-up run); count instructions with callgrind
 *   abi_ops OP N --time   run OP N times, 5 times over, and print the best ns per operation
 *   abi_ops --list        print the names of the operations
 *
 * Every operation is a small function below, selected by name. Setup (looking up functions,
 * building the array the getter reads, ...) happens once before the loop; a failing call prints
 * the raised error and exits with status 1.
 */
#include <dlpack/dlpack.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <tvm/ffi/c_api.h>

/* ---- helpers ---------------------------------------------------------------------------------- */

/* Prints the raised error (kind and message) and exits. */
static void fail(const char* what) {
  TVMFFIObjectHandle err = NULL;
  TVMFFIErrorMoveFromRaised(&err);
  if (err != NULL) {
    const TVMFFIErrorCell* cell = (const TVMFFIErrorCell*)((char*)err + sizeof(TVMFFIObject));
    fprintf(stderr, "abi_ops: %s failed: %.*s: %.*s\n", what, (int)cell->kind.size,
            cell->kind.data, (int)cell->message.size, cell->message.data);
  } else {
    fprintf(stderr, "abi_ops: %s failed (no error raised)\n", what);
  }
  exit(1);
}

#define CHECK(call)                \
  do {                             \
    if ((call) != 0) fail(#call);  \
  } while (0)

/* Values with every unnamed byte zero, as the ABI wants them. */
#define NONE_VALUE ((TVMFFIAny){.type_index = kTVMFFINone})
#define INT_VALUE(v) ((TVMFFIAny){.type_index = kTVMFFIInt, .v_int64 = (v)})

/* Releases an owned value: objects lose their reference, everything else owns nothing. */
static void release(TVMFFIAny* value) {
  if (value->type_index >= kTVMFFIStaticObjectBegin) CHECK(TVMFFIObjectDecRef(value->v_obj));
  value->type_index = kTVMFFINone;
}

static TVMFFIObjectHandle get_global(const char* name) {
  TVMFFIByteArray bytes = {name, strlen(name)};
  TVMFFIObjectHandle f = NULL;
  CHECK(TVMFFIFunctionGetGlobal(&bytes, &f));
  return f;
}

static TVMFFIObjectHandle require_global(const char* name) {
  TVMFFIObjectHandle f = get_global(name);
  if (f == NULL) {
    fprintf(stderr, "abi_ops: no global function %s\n", name);
    exit(1);
  }
  return f;
}

/* Calls f and keeps the owned result in *out. */
static void call(TVMFFIObjectHandle f, TVMFFIAny* args, int32_t n, TVMFFIAny* out) {
  *out = NONE_VALUE;
  CHECK(TVMFFIFunctionCall(f, args, n, out));
}

/* ---- state the operations share (set up once) ------------------------------------------------- */

static TVMFFIObjectHandle nop;        /* testing.nop: a packed no-op of the library */
static TVMFFIObjectHandle typed_nop;  /* ours: bench.typed_nop (typed Rust); reference: testing.nop */
static TVMFFIObjectHandle make_array, make_map, array_get_item, map_get_item;
static TVMFFIAny array8, map8;        /* [0..7] and {0: 0, 1: 10, ..., 7: 70} */
static char text[101];

static void setup(void) {
  nop = require_global("testing.nop");
  typed_nop = get_global("bench.typed_nop");
  if (typed_nop == NULL) typed_nop = nop;
  make_array = require_global("ffi.Array");
  make_map = require_global("ffi.Map");
  array_get_item = require_global("ffi.ArrayGetItem");
  map_get_item = require_global("ffi.MapGetItem");
  TVMFFIAny args[16];
  for (int i = 0; i < 8; ++i) args[i] = INT_VALUE(i);
  call(make_array, args, 8, &array8);
  for (int i = 0; i < 8; ++i) {
    args[2 * i] = INT_VALUE(i);
    args[2 * i + 1] = INT_VALUE(10 * i);
  }
  call(make_map, args, 16, &map8);
  for (int i = 0; i < 100; ++i) text[i] = (char)('a' + i % 26);
}

/* ---- the operations --------------------------------------------------------------------------- */

static void op_call_nop0(void) {
  TVMFFIAny result = NONE_VALUE;
  CHECK(TVMFFIFunctionCall(nop, NULL, 0, &result));
}

static void op_call_nop3(void) {
  TVMFFIAny args[3] = {INT_VALUE(1), INT_VALUE(2), INT_VALUE(3)};
  TVMFFIAny result = NONE_VALUE;
  CHECK(TVMFFIFunctionCall(nop, args, 3, &result));
}

static void op_call_typed_nop3(void) {
  TVMFFIAny args[3] = {INT_VALUE(1), INT_VALUE(2), INT_VALUE(3)};
  TVMFFIAny result = NONE_VALUE;
  CHECK(TVMFFIFunctionCall(typed_nop, args, 3, &result));
}

static void op_get_global(void) { CHECK(TVMFFIObjectDecRef(get_global("testing.nop"))); }

static void string_of(size_t size) {
  TVMFFIByteArray bytes = {text, size};
  TVMFFIAny out = NONE_VALUE;
  CHECK(TVMFFIStringFromByteArray(&bytes, &out));
  release(&out);
}

static void op_string5(void) { string_of(5); }

static void op_string100(void) { string_of(100); }

static void op_raw_str_to_owned(void) {
  TVMFFIAny view = NONE_VALUE;
  view.type_index = kTVMFFIRawStr;
  view.v_c_str = "hello";
  TVMFFIAny out = NONE_VALUE;
  CHECK(TVMFFIAnyViewToOwnedAny(&view, &out));
  release(&out);
}

static void op_array8(void) {
  TVMFFIAny args[8];
  for (int i = 0; i < 8; ++i) args[i] = INT_VALUE(i);
  TVMFFIAny out;
  call(make_array, args, 8, &out);
  release(&out);
}

static void op_map8(void) {
  TVMFFIAny args[16];
  for (int i = 0; i < 8; ++i) {
    args[2 * i] = INT_VALUE(i);
    args[2 * i + 1] = INT_VALUE(10 * i);
  }
  TVMFFIAny out;
  call(make_map, args, 16, &out);
  release(&out);
}

static void op_array_get_item(void) {
  TVMFFIAny args[2] = {array8, INT_VALUE(3)};
  TVMFFIAny out;
  call(array_get_item, args, 2, &out);
  release(&out);
}

static void op_map_get_item(void) {
  TVMFFIAny args[2] = {map8, INT_VALUE(3)};
  TVMFFIAny out;
  call(map_get_item, args, 2, &out);
  release(&out);
}

/* A 2x3 float32 tensor on the CPU, owned by the caller's DLPack deleter. */
static float tensor_data[6];
static int64_t tensor_shape[2] = {2, 3};
static int deleted;

static void count_deletion(DLManagedTensorVersioned* self) {
  (void)self;
  ++deleted;
}

static void op_dlpack_roundtrip(void) {
  DLManagedTensorVersioned from;
  memset(&from, 0, sizeof(from));
  from.version.major = DLPACK_MAJOR_VERSION;
  from.version.minor = DLPACK_MINOR_VERSION;
  from.deleter = count_deletion;
  from.dl_tensor.data = tensor_data;
  from.dl_tensor.device.device_type = kDLCPU;
  from.dl_tensor.ndim = 2;
  from.dl_tensor.dtype.code = kDLFloat;
  from.dl_tensor.dtype.bits = 32;
  from.dl_tensor.dtype.lanes = 1;
  from.dl_tensor.shape = tensor_shape;
  TVMFFIObjectHandle tensor = NULL;
  CHECK(TVMFFITensorFromDLPackVersioned(&from, 0, 0, &tensor));
  DLManagedTensorVersioned* exported = NULL;
  CHECK(TVMFFITensorToDLPackVersioned(tensor, &exported));
  CHECK(TVMFFIObjectDecRef(tensor));
  exported->deleter(exported);
}

static void op_dtype_from_string(void) {
  TVMFFIByteArray name = {"float32", 7};
  DLDataType dtype;
  CHECK(TVMFFIDataTypeFromString(&name, &dtype));
}

static void op_error_raise(void) {
  TVMFFIErrorSetRaisedFromCStr("ValueError", "bad value");
  TVMFFIObjectHandle err = NULL;
  TVMFFIErrorMoveFromRaised(&err);
  if (err == NULL) {
    fprintf(stderr, "abi_ops: the raised error was not fetched\n");
    exit(1);
  }
  CHECK(TVMFFIObjectDecRef(err));
}

static void op_error_fetch_none(void) {
  TVMFFIObjectHandle err = NULL;
  TVMFFIErrorMoveFromRaised(&err);
}

static void op_incref_decref(void) {
  CHECK(TVMFFIObjectIncRef(nop));
  CHECK(TVMFFIObjectDecRef(nop));
}

/* ---- the table and the loop ------------------------------------------------------------------- */

static const struct {
  const char* name;
  void (*run)(void);
} ops[] = {
    {"call_nop0", op_call_nop0},
    {"call_nop3", op_call_nop3},
    {"call_typed_nop3", op_call_typed_nop3},
    {"get_global", op_get_global},
    {"string5", op_string5},
    {"string100", op_string100},
    {"raw_str_to_owned", op_raw_str_to_owned},
    {"array8", op_array8},
    {"map8", op_map8},
    {"array_get_item", op_array_get_item},
    {"map_get_item", op_map_get_item},
    {"dlpack_roundtrip", op_dlpack_roundtrip},
    {"dtype_from_string", op_dtype_from_string},
    {"error_raise", op_error_raise},
    {"error_fetch_none", op_error_fetch_none},
    {"incref_decref", op_incref_decref},
};

static const size_t num_ops = sizeof(ops) / sizeof(ops[0]);

/* The loop callgrind counts; noinline so that it is the same code for every operation. */
__attribute__((noinline)) static void repeat(void (*run)(void), long n) {
  for (long i = 0; i < n; ++i) run();
}

static double now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

int main(int argc, char** argv) {
  if (argc == 2 && strcmp(argv[1], "--list") == 0) {
    for (size_t i = 0; i < num_ops; ++i) printf("%s\n", ops[i].name);
    return 0;
  }
  if (argc < 3 || argc > 4 || (argc == 4 && strcmp(argv[3], "--time") != 0)) {
    fprintf(stderr, "usage: %s OP N [--time] | --list\n", argv[0]);
    return 2;
  }
  void (*run)(void) = NULL;
  for (size_t i = 0; i < num_ops; ++i) {
    if (strcmp(argv[1], ops[i].name) == 0) run = ops[i].run;
  }
  long n = strtol(argv[2], NULL, 10);
  if (run == NULL || n <= 0) {
    fprintf(stderr, "abi_ops: unknown operation '%s' or bad count '%s' (see --list)\n", argv[1],
            argv[2]);
    return 2;
  }
  setup();
  run();  /* warm-up: first-use costs (caches, lazy registrations) stay out of the difference */
  if (argc == 3) {
    repeat(run, n);
    return 0;
  }
  double best = 0;
  for (int round = 0; round < 5; ++round) {
    double start = now_ns();
    repeat(run, n);
    double ns = (now_ns() - start) / (double)n;
    if (round == 0 || ns < best) best = ns;
  }
  printf("%.1f\n", best);
  return 0;
}
