/*
 * dlpack_exchange_ext.c -- a CPython extension for test_dlpack_exchange.py, built by the test with
 * gcc against Python's headers and tvm's dlpack.h. Both sides of the DLPack C exchange API:
 *
 *   Buf(n, device_type=1)  a producer: n floats (0, 1, 2, ...) in host memory, said to be on
 *                    device (device_type, 0), whose type carries a __dlpack_c_exchange_api__
 *                    table; its __dlpack__ raises, so an import that works went through the
 *                    table. Buf.set(i, v) writes element i. The table's current stream of any
 *                    device is 0x5678 + its index.
 *   PlainBuf(n)      the same producer without the table: __dlpack__ exports a versioned capsule
 *                    when the consumer passes max_version >= (1, 0), a legacy one otherwise.
 *   exports()        how many managed tensors the table has handed out; live() how many are not
 *                    released yet. fail_next() makes the next export fail with a ValueError.
 *   consume(t)       a consumer of t's type's table: (shape, dtype code, bits, first float)
 *                    from managed_tensor_from_py_object_no_sync, released at once.
 *   view(t)          (shape, data address) from dltensor_from_py_object_no_sync.
 *   allocate(cls, shape, device_type)  a tensor of cls from its table's allocator (float32),
 *                    through managed_tensor_to_py_object_no_sync; the allocator's error as a
 *                    RuntimeError "kind: message".
 *   roundtrip(t)     t exported and imported back by its own table (a new object).
 *   stream(cls, device_type, device_id)  the table's current_work_stream, as an int.
 *   null_calls(cls)  the table's entry points given NULL pointers: (allocator status, its
 *                    error text, to_py_object status, from_py_object status, its error type),
 *                    and the allocator's errors for ndim -1 and for dimensions without a shape.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <dlpack/dlpack.h>
#include <stdio.h>
#include <stdlib.h>

static long g_exports = 0, g_live = 0;
static int g_fail_next = 0;

typedef struct {
  PyObject_HEAD float* data;
  int64_t n;
  int device_type;
} Buf;

static PyTypeObject BufType;

static int Buf_init(Buf* self, PyObject* args, PyObject* kwds) {
  Py_ssize_t n;
  int device_type = kDLCPU;
  if (!PyArg_ParseTuple(args, "n|i", &n, &device_type)) return -1;
  self->device_type = device_type;
  self->data = (float*)calloc(n > 0 ? n : 1, sizeof(float));
  if (!self->data) {
    PyErr_NoMemory();
    return -1;
  }
  self->n = n;
  for (Py_ssize_t i = 0; i < n; ++i) self->data[i] = (float)i;
  return 0;
}

static void Buf_dealloc(Buf* self) {
  free(self->data);
  Py_TYPE(self)->tp_free((PyObject*)self);
}

static PyObject* Buf_set(Buf* self, PyObject* args) {
  Py_ssize_t i;
  double v;
  if (!PyArg_ParseTuple(args, "nd", &i, &v)) return NULL;
  if (i < 0 || i >= self->n) {
    PyErr_SetString(PyExc_IndexError, "Buf index out of range");
    return NULL;
  }
  self->data[i] = (float)v;
  Py_RETURN_NONE;
}

static PyObject* Buf_dlpack(PyObject* self, PyObject* args, PyObject* kwargs) {
  PyErr_SetString(PyExc_RuntimeError, "Buf.__dlpack__ must not be called");
  return NULL;
}

static int Buf_export(void* py_object, DLManagedTensorVersioned** out);

/* A capsule no consumer took releases its tensor. */
static void capsule_release(PyObject* capsule) {
  if (PyCapsule_IsValid(capsule, "dltensor_versioned")) {
    DLManagedTensorVersioned* m =
        (DLManagedTensorVersioned*)PyCapsule_GetPointer(capsule, "dltensor_versioned");
    m->deleter(m);
  }
}

typedef struct {
  DLManagedTensor managed;
  int64_t shape[1];
} LegacyExport;

static void LegacyExport_delete(DLManagedTensor* managed) {
  PyGILState_STATE state = PyGILState_Ensure();
  Py_DECREF((PyObject*)managed->manager_ctx);
  free(managed);
  --g_live;
  PyGILState_Release(state);
}

static void legacy_capsule_release(PyObject* capsule) {
  if (PyCapsule_IsValid(capsule, "dltensor")) {
    DLManagedTensor* m = (DLManagedTensor*)PyCapsule_GetPointer(capsule, "dltensor");
    m->deleter(m);
  }
}

/* Whether the call's max_version keyword asks for a versioned capsule. */
static int wants_versioned(PyObject* kwargs) {
  PyObject* version = kwargs ? PyDict_GetItemString(kwargs, "max_version") : NULL;
  if (!version || !PyTuple_Check(version) || PyTuple_GET_SIZE(version) < 1) return 0;
  return PyLong_AsLong(PyTuple_GET_ITEM(version, 0)) >= 1;
}

static PyObject* PlainBuf_dlpack(PyObject* self, PyObject* args, PyObject* kwargs) {
  DLManagedTensorVersioned* m = NULL;
  if (Buf_export(self, &m) != 0) return NULL;
  if (wants_versioned(kwargs)) {
    PyObject* capsule = PyCapsule_New(m, "dltensor_versioned", capsule_release);
    if (!capsule) m->deleter(m);
    return capsule;
  }
  LegacyExport* e = (LegacyExport*)calloc(1, sizeof(LegacyExport));
  if (!e) {
    m->deleter(m);
    return PyErr_NoMemory();
  }
  e->managed.dl_tensor = m->dl_tensor;
  e->shape[0] = m->dl_tensor.shape[0];
  e->managed.dl_tensor.shape = e->shape;
  e->managed.manager_ctx = self;
  e->managed.deleter = LegacyExport_delete;
  Py_INCREF(self);
  ++g_live;
  m->deleter(m);
  PyObject* capsule = PyCapsule_New(&e->managed, "dltensor", legacy_capsule_release);
  if (!capsule) e->managed.deleter(&e->managed);
  return capsule;
}

typedef struct {
  DLManagedTensorVersioned managed;
  int64_t shape[1];
} BufExport;

static void BufExport_delete(DLManagedTensorVersioned* managed) {
  PyGILState_STATE state = PyGILState_Ensure();
  Py_DECREF((PyObject*)managed->manager_ctx);
  free(managed);
  --g_live;
  PyGILState_Release(state);
}

static int Buf_export(void* py_object, DLManagedTensorVersioned** out) {
  if (g_fail_next) {
    g_fail_next = 0;
    PyErr_SetString(PyExc_ValueError, "Buf refused to export");
    return -1;
  }
  Buf* buf = (Buf*)py_object;
  BufExport* e = (BufExport*)calloc(1, sizeof(BufExport));
  if (!e) {
    PyErr_NoMemory();
    return -1;
  }
  e->shape[0] = buf->n;
  e->managed.version.major = DLPACK_MAJOR_VERSION;
  e->managed.version.minor = DLPACK_MINOR_VERSION;
  e->managed.manager_ctx = buf;
  e->managed.deleter = BufExport_delete;
  e->managed.dl_tensor.data = buf->data;
  e->managed.dl_tensor.device.device_type = (DLDeviceType)buf->device_type;
  e->managed.dl_tensor.ndim = 1;
  e->managed.dl_tensor.dtype.code = kDLFloat;
  e->managed.dl_tensor.dtype.bits = 32;
  e->managed.dl_tensor.dtype.lanes = 1;
  e->managed.dl_tensor.shape = e->shape;
  Py_INCREF(buf);
  ++g_exports;
  ++g_live;
  *out = &e->managed;
  return 0;
}

static int Buf_stream(DLDeviceType device_type, int32_t device_id, void** out) {
  *out = (void*)(uintptr_t)(0x5678 + device_id);
  return 0;
}

static DLPackExchangeAPI g_buf_api = {
    {{DLPACK_MAJOR_VERSION, DLPACK_MINOR_VERSION}, NULL}, NULL, Buf_export, NULL, NULL, Buf_stream};

static PyMethodDef Buf_methods[] = {
    {"set", (PyCFunction)Buf_set, METH_VARARGS, "set(i, v)"},
    {"__dlpack__", (PyCFunction)(void (*)(void))Buf_dlpack, METH_VARARGS | METH_KEYWORDS, NULL},
    {NULL, NULL, 0, NULL}};

static PyMethodDef PlainBuf_methods[] = {
    {"set", (PyCFunction)Buf_set, METH_VARARGS, "set(i, v)"},
    {"__dlpack__", (PyCFunction)(void (*)(void))PlainBuf_dlpack, METH_VARARGS | METH_KEYWORDS,
     NULL},
    {NULL, NULL, 0, NULL}};

static PyTypeObject PlainBufType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "dlpack_exchange_ext.PlainBuf",
    .tp_basicsize = sizeof(Buf),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)Buf_init,
    .tp_dealloc = (destructor)Buf_dealloc,
    .tp_methods = PlainBuf_methods,
};

static PyTypeObject BufType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "dlpack_exchange_ext.Buf",
    .tp_basicsize = sizeof(Buf),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)Buf_init,
    .tp_dealloc = (destructor)Buf_dealloc,
    .tp_methods = Buf_methods,
};

/* The exchange table of `obj`'s type (a borrowed pointer), or NULL with an error set. */
static DLPackExchangeAPI* api_of_type(PyObject* type) {
  PyObject* capsule = PyObject_GetAttrString(type, "__dlpack_c_exchange_api__");
  if (!capsule) return NULL;
  DLPackExchangeAPI* api = (DLPackExchangeAPI*)PyCapsule_GetPointer(capsule, "dlpack_exchange_api");
  Py_DECREF(capsule);
  return api;
}

static PyObject* shape_tuple(const DLTensor* t) {
  PyObject* shape = PyTuple_New(t->ndim);
  for (int i = 0; shape && i < t->ndim; ++i)
    PyTuple_SET_ITEM(shape, i, PyLong_FromLongLong(t->shape[i]));
  return shape;
}

static PyObject* consume(PyObject* mod, PyObject* obj) {
  DLPackExchangeAPI* api = api_of_type((PyObject*)Py_TYPE(obj));
  if (!api) return NULL;
  DLManagedTensorVersioned* m = NULL;
  if (api->managed_tensor_from_py_object_no_sync(obj, &m) != 0) return NULL;
  const DLTensor* t = &m->dl_tensor;
  double first = t->ndim >= 1 && t->shape[0] > 0 && t->dtype.code == kDLFloat && t->dtype.bits == 32
                     ? ((const float*)((const char*)t->data + t->byte_offset))[0]
                     : -1.0;
  PyObject* result = Py_BuildValue("(Niid)", shape_tuple(t), (int)t->dtype.code,
                                   (int)t->dtype.bits, first);
  m->deleter(m);
  return result;
}

static PyObject* view(PyObject* mod, PyObject* obj) {
  DLPackExchangeAPI* api = api_of_type((PyObject*)Py_TYPE(obj));
  if (!api) return NULL;
  DLTensor t;
  if (api->dltensor_from_py_object_no_sync(obj, &t) != 0) return NULL;
  return Py_BuildValue("(NK)", shape_tuple(&t), (unsigned long long)(uintptr_t)t.data);
}

static void set_error(void* ctx, const char* kind, const char* message) {
  snprintf((char*)ctx, 512, "%s: %s", kind, message);
}

static PyObject* allocate(PyObject* mod, PyObject* args) {
  PyObject *cls, *shape_obj;
  int device_type;
  if (!PyArg_ParseTuple(args, "OO!i", &cls, &PyTuple_Type, &shape_obj, &device_type)) return NULL;
  DLPackExchangeAPI* api = api_of_type(cls);
  if (!api) return NULL;
  int64_t shape[8];
  Py_ssize_t ndim = PyTuple_GET_SIZE(shape_obj);
  if (ndim > 8) {
    PyErr_SetString(PyExc_ValueError, "at most 8 dimensions");
    return NULL;
  }
  for (Py_ssize_t i = 0; i < ndim; ++i) shape[i] = PyLong_AsLongLong(PyTuple_GET_ITEM(shape_obj, i));
  DLTensor prototype = {0};
  prototype.device.device_type = (DLDeviceType)device_type;
  prototype.ndim = (int32_t)ndim;
  prototype.dtype.code = kDLFloat;
  prototype.dtype.bits = 32;
  prototype.dtype.lanes = 1;
  prototype.shape = shape;
  DLManagedTensorVersioned* m = NULL;
  char error[512] = "";
  if (api->managed_tensor_allocator(&prototype, &m, error, set_error) != 0) {
    PyErr_SetString(PyExc_RuntimeError, error);
    return NULL;
  }
  void* out = NULL;
  if (api->managed_tensor_to_py_object_no_sync(m, &out) != 0) return NULL;
  return (PyObject*)out;
}

static PyObject* roundtrip(PyObject* mod, PyObject* obj) {
  DLPackExchangeAPI* api = api_of_type((PyObject*)Py_TYPE(obj));
  if (!api) return NULL;
  DLManagedTensorVersioned* m = NULL;
  if (api->managed_tensor_from_py_object_no_sync(obj, &m) != 0) return NULL;
  void* out = NULL;
  if (api->managed_tensor_to_py_object_no_sync(m, &out) != 0) {
    m->deleter(m);
    return NULL;
  }
  return (PyObject*)out;
}

static PyObject* stream(PyObject* mod, PyObject* args) {
  PyObject* cls;
  int device_type, device_id;
  if (!PyArg_ParseTuple(args, "Oii", &cls, &device_type, &device_id)) return NULL;
  DLPackExchangeAPI* api = api_of_type(cls);
  if (!api) return NULL;
  void* s = NULL;
  if (api->current_work_stream((DLDeviceType)device_type, device_id, &s) != 0) {
    PyErr_SetString(PyExc_RuntimeError, "current_work_stream failed");
    return NULL;
  }
  return PyLong_FromUnsignedLongLong((unsigned long long)(uintptr_t)s);
}

static PyObject* null_calls(PyObject* mod, PyObject* cls) {
  DLPackExchangeAPI* api = api_of_type(cls);
  if (!api) return NULL;
  char error[512] = "";
  int allocated = api->managed_tensor_allocator(NULL, NULL, error, set_error);
  void* out = NULL;
  int wrapped = api->managed_tensor_to_py_object_no_sync(NULL, &out);
  PyErr_Clear();
  int exported = api->managed_tensor_from_py_object_no_sync(cls, NULL);
  PyObject* type = PyErr_Occurred();
  const char* name = type ? ((PyTypeObject*)type)->tp_name : "none";
  char negative[512] = "", shapeless[512] = "";
  DLTensor prototype = {0};
  prototype.device.device_type = kDLCPU;
  prototype.dtype.code = kDLFloat;
  prototype.dtype.bits = 32;
  prototype.dtype.lanes = 1;
  DLManagedTensorVersioned* m = NULL;
  prototype.ndim = -1;
  int negative_status = api->managed_tensor_allocator(&prototype, &m, negative, set_error);
  prototype.ndim = 2;
  int shapeless_status = api->managed_tensor_allocator(&prototype, &m, shapeless, set_error);
  PyObject* result = Py_BuildValue("(isiisisis)", allocated, error, wrapped, exported, name,
                                   negative_status, negative, shapeless_status, shapeless);
  PyErr_Clear();
  return result;
}

static PyObject* exports(PyObject* mod, PyObject* unused) { return PyLong_FromLong(g_exports); }
static PyObject* live(PyObject* mod, PyObject* unused) { return PyLong_FromLong(g_live); }
static PyObject* fail_next(PyObject* mod, PyObject* unused) {
  g_fail_next = 1;
  Py_RETURN_NONE;
}

static PyMethodDef module_methods[] = {
    {"consume", consume, METH_O, NULL},
    {"view", view, METH_O, NULL},
    {"allocate", allocate, METH_VARARGS, NULL},
    {"roundtrip", roundtrip, METH_O, NULL},
    {"stream", stream, METH_VARARGS, NULL},
    {"null_calls", null_calls, METH_O, NULL},
    {"exports", exports, METH_NOARGS, NULL},
    {"live", live, METH_NOARGS, NULL},
    {"fail_next", fail_next, METH_NOARGS, NULL},
    {NULL, NULL, 0, NULL}};

static struct PyModuleDef module_def = {PyModuleDef_HEAD_INIT, "dlpack_exchange_ext", NULL, -1,
                                        module_methods};

PyMODINIT_FUNC PyInit_dlpack_exchange_ext(void) {
  if (PyType_Ready(&BufType) < 0) return NULL;
  PyObject* capsule = PyCapsule_New(&g_buf_api, "dlpack_exchange_api", NULL);
  if (!capsule || PyDict_SetItemString(BufType.tp_dict, "__dlpack_c_exchange_api__", capsule) < 0)
    return NULL;
  Py_DECREF(capsule);
  PyType_Modified(&BufType);
  if (PyType_Ready(&PlainBufType) < 0) return NULL;
  PyObject* m = PyModule_Create(&module_def);
  if (!m) return NULL;
  Py_INCREF(&BufType);
  if (PyModule_AddObject(m, "Buf", (PyObject*)&BufType) < 0) return NULL;
  Py_INCREF(&PlainBufType);
  if (PyModule_AddObject(m, "PlainBuf", (PyObject*)&PlainBufType) < 0) return NULL;
  return m;
}
