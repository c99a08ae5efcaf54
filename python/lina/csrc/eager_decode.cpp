// The remembered eager decode calls of lina.fast_calls, in C++.
//
// lina.fast_calls skips the Python checks of a decode call whose tensors and
// arguments match an earlier call's; what is left is the key, the output's
// allocation and the launch, about 20 us of host time through Python and
// ctypes. This module holds the same entries and does the same work from the
// tensors' C++ objects: a key read from each at::Tensor, a hash lookup,
// at::empty for the outputs, the lina_decode_args filled in place and one
// call of lina_decode_forward (whose address Python passes in: the module
// does not link liblina).
//
// It is built against the user's torch on first use (lina/eager_extension.py)
// and includes only headers that need no CUDA toolkit: the current stream
// and the device guard come through c10's device-generic interfaces.
//
// A call it cannot replay (no entry, a tensor that is not exactly a
// torch.Tensor on a CUDA device, a failed allocation or launch) returns None
// and Python runs the checked path, which raises the error a failure has.

#include <Python.h>

#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>
#include <c10/core/DeviceGuard.h>
#include <c10/core/GradMode.h>
#include <c10/core/impl/VirtualGuardImpl.h>
#include <torch/csrc/Dtype.h>
#include <torch/csrc/autograd/python_variable.h>

#include "lina/lina_c.h"

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

namespace {

using LaunchFn = lina_status (*)(const lina_decode_kernel *,
                                 const lina_decode_args *);

// Entries kept at once, as lina.fast_calls.MAX_ENTRIES.
constexpr size_t kMaxEntries = 256;

struct Field {
  const char *name;
  size_t offset;
  bool pointer; // else int64_t
};

#define LINA_POINTER(f)                                                        \
  { #f, offsetof(lina_decode_args, f), true }
#define LINA_COUNT(f)                                                          \
  { #f, offsetof(lina_decode_args, f), false }
// Every field of lina_decode_args but the stream, by the names lina.decode
// gives them.
const Field kFields[] = {
    LINA_POINTER(q),
    LINA_POINTER(k),
    LINA_POINTER(v),
    LINA_POINTER(g),
    LINA_POINTER(beta),
    LINA_POINTER(a),
    LINA_POINTER(b),
    LINA_POINTER(gate_a_log),
    LINA_POINTER(gate_dt_bias),
    LINA_POINTER(o),
    LINA_POINTER(state),
    LINA_POINTER(state_indices),
    LINA_POINTER(num_accepted_tokens),
    LINA_COUNT(num_slots),
    LINA_COUNT(indices_per_token),
    LINA_POINTER(initial_state),
    LINA_POINTER(final_state),
    LINA_COUNT(batch),
    LINA_COUNT(seq_len),
    LINA_POINTER(cu_seqlens),
    LINA_COUNT(cu_seqlens_int64),
    LINA_COUNT(state_v_first),
    LINA_POINTER(intermediate_states),
    LINA_POINTER(intermediate_indices),
    LINA_COUNT(num_intermediate),
    LINA_COUNT(intermediate_steps),
    LINA_COUNT(disable_state_update),
};
#undef LINA_POINTER
#undef LINA_COUNT

const Field *findField(PyObject *name) {
  const char *text = PyUnicode_AsUTF8(name);
  if (!text)
    return nullptr;
  for (const Field &field : kFields)
    if (std::strcmp(field.name, text) == 0)
      return &field;
  return nullptr;
}

// Where a pointer's tensor comes from in a call of an entry's key.
struct PointerSource {
  size_t offset;
  enum Kind { Null, Argument, Allocated } kind;
  Py_ssize_t argument; // Argument: its index in args + kwargs' values
  size_t allocation;   // Allocated: its index in Entry::allocations
};

struct Allocation {
  std::vector<int64_t> shape;
  at::ScalarType dtype;
};

struct Entry {
  PyObject *kernel = nullptr; // the DecodeKernel, kept alive (its handle)
  const lina_decode_kernel *handle = nullptr;
  int8_t device = 0; // a CUDA device's index; -1: the host (tests)
  std::vector<PointerSource> pointers;
  std::vector<std::pair<size_t, int64_t>> counts; // offset, value
  std::vector<Allocation> allocations;
  // What the call returns: -1 None, else an index into `pointers`.
  std::vector<Py_ssize_t> returns;
};

struct State {
  LaunchFn launch = nullptr;
  // Tests without a GPU: host tensors are remembered too, and a call on
  // them launches with no stream (set_host_tensors_for_tests).
  bool hostTensors = false;
  std::unordered_map<std::string, Entry> entries;
  uint64_t replays = 0;
};

State &state() {
  static State *s = new State; // never destroyed: entries hold Python refs
  return *s;
}

void forgetAll() {
  for (auto &kv : state().entries)
    Py_XDECREF(kv.second.kernel);
  state().entries.clear();
}

template <typename T> void put(std::string &key, T value) {
  key.append(reinterpret_cast<const char *>(&value), sizeof(value));
}

void putText(std::string &key, PyObject *text) {
  Py_ssize_t size = 0;
  const char *bytes = PyUnicode_AsUTF8AndSize(text, &size);
  if (!bytes) {
    PyErr_Clear();
    size = -1;
  }
  put(key, static_cast<int64_t>(size));
  if (size > 0)
    key.append(bytes, static_cast<size_t>(size));
}

// Appends what lina.fast_calls' key reads of one argument; false when the
// argument makes the call one that is never remembered.
bool putValue(std::string &key, PyObject *value) {
  if (value == Py_None) {
    put(key, 'n');
    return true;
  }
  if (Py_TYPE(value) == reinterpret_cast<PyTypeObject *>(THPVariableClass)) {
    const at::Tensor &t = THPVariable_Unpack(value);
    if (!t.defined() || t.layout() != at::kStrided ||
        !(t.is_cuda() || (t.is_cpu() && state().hostTensors)))
      return false;
    put(key, 't');
    put(key, static_cast<int64_t>(t.dim()));
    for (int64_t size : t.sizes())
      put(key, size);
    for (int64_t stride : t.strides())
      put(key, stride);
    put(key, static_cast<int16_t>(t.scalar_type()));
    put(key, static_cast<int16_t>(t.get_device()));
    put(key, static_cast<char>(t.requires_grad()));
    return true;
  }
  if (PyBool_Check(value)) {
    put(key, value == Py_True ? 'T' : 'F');
    return true;
  }
  if (PyLong_CheckExact(value)) {
    int overflow = 0;
    long long v = PyLong_AsLongLongAndOverflow(value, &overflow);
    if (overflow || (v == -1 && PyErr_Occurred())) {
      PyErr_Clear();
      return false;
    }
    put(key, 'i');
    put(key, static_cast<int64_t>(v));
    return true;
  }
  if (PyFloat_CheckExact(value)) {
    put(key, 'f');
    put(key, PyFloat_AS_DOUBLE(value));
    return true;
  }
  if (PyUnicode_CheckExact(value)) {
    put(key, 's');
    putText(key, value);
    return true;
  }
  return false;
}

// The key of a call of function `fn` (lina.fast_calls' number for it), or
// false when the call is not one that is remembered; `values` gets args +
// kwargs' values, borrowed, in lina.fast_calls' order (the indices of an
// entry's pointer sources).
bool makeKey(long fn, PyObject *args, PyObject *kwargs, std::string &key,
             std::vector<PyObject *> &values) {
  key.clear();
  values.clear();
  put(key, static_cast<int64_t>(fn));
  put(key, static_cast<char>(c10::GradMode::is_enabled()));
  Py_ssize_t count = PyTuple_GET_SIZE(args);
  put(key, static_cast<int64_t>(count));
  for (Py_ssize_t i = 0; i < count; ++i) {
    values.push_back(PyTuple_GET_ITEM(args, i));
    if (!putValue(key, values.back()))
      return false;
  }
  if (kwargs) {
    PyObject *name, *value;
    Py_ssize_t pos = 0;
    while (PyDict_Next(kwargs, &pos, &name, &value)) {
      if (!PyUnicode_CheckExact(name))
        return false;
      putText(key, name);
      values.push_back(value);
      if (!putValue(key, value))
        return false;
    }
  }
  return true;
}

// (fn, args, kwargs): a call of lina.fast_calls' function number fn.
bool parseCall(PyObject *const *call, Py_ssize_t count, long &fn,
               PyObject *&args, PyObject *&kwargs) {
  if (count != 3 || !PyTuple_Check(call[1])) {
    PyErr_SetString(PyExc_TypeError, "expected (fn, args tuple, kwargs)");
    return false;
  }
  fn = PyLong_AsLong(call[0]);
  if (fn == -1 && PyErr_Occurred())
    return false;
  args = call[1];
  kwargs = call[2];
  if (kwargs == Py_None)
    kwargs = nullptr;
  else if (!PyDict_Check(kwargs)) {
    PyErr_SetString(PyExc_TypeError, "kwargs must be a dict or None");
    return false;
  }
  return true;
}

// replay(fn, args, kwargs): the results of the remembered call with this
// key launched with these arguments, or None.
PyObject *replay(PyObject *, PyObject *const *call, Py_ssize_t count) {
  long fn;
  PyObject *args, *kwargs;
  if (!parseCall(call, count, fn, args, kwargs))
    return nullptr;
  State &s = state();
  if (!s.launch)
    Py_RETURN_NONE;
  thread_local std::string key;
  std::vector<PyObject *> values; // read after Python objects are made
  if (!makeKey(fn, args, kwargs, key, values))
    Py_RETURN_NONE;
  auto found = s.entries.find(key);
  if (found == s.entries.end())
    Py_RETURN_NONE;
  const Entry &entry = found->second;
  try {
    const bool host = entry.device < 0;
    c10::Device device = host
                             ? c10::Device(c10::DeviceType::CPU)
                             : c10::Device(c10::DeviceType::CUDA, entry.device);
    c10::DeviceGuard guard(device);
    std::vector<at::Tensor> made;
    made.reserve(entry.allocations.size());
    for (const Allocation &allocation : entry.allocations)
      made.push_back(at::empty(
          allocation.shape,
          at::TensorOptions().dtype(allocation.dtype).device(device)));
    lina_decode_args launchArgs;
    std::memset(&launchArgs, 0, sizeof(launchArgs));
    char *raw = reinterpret_cast<char *>(&launchArgs);
    for (const PointerSource &source : entry.pointers) {
      void *pointer = nullptr;
      if (source.kind == PointerSource::Argument)
        pointer =
            THPVariable_Unpack(values[source.argument]).mutable_data_ptr();
      else if (source.kind == PointerSource::Allocated)
        pointer = made[source.allocation].mutable_data_ptr();
      std::memcpy(raw + source.offset, &pointer, sizeof(pointer));
    }
    for (const auto &[offset, value] : entry.counts)
      std::memcpy(raw + offset, &value, sizeof(value));
    if (!host) {
      c10::impl::VirtualGuardImpl cuda(c10::DeviceType::CUDA);
      launchArgs.stream = cuda.getStream(device).native_handle();
    }
    if (s.launch(entry.handle, &launchArgs) != LINA_OK)
      Py_RETURN_NONE; // the checked path raises the library's error
    // Where each result comes from, copied out of the entry: making Python
    // objects may run a finalizer that calls back into this module and
    // forgets every entry.
    std::vector<PointerSource> returned;
    returned.reserve(entry.returns.size());
    for (Py_ssize_t r : entry.returns)
      returned.push_back(r < 0 ? PointerSource{0, PointerSource::Null, 0, 0}
                               : entry.pointers[r]);
    PyObject *results = PyTuple_New(returned.size());
    if (!results)
      return nullptr;
    for (size_t i = 0; i < returned.size(); ++i) {
      const PointerSource &source = returned[i];
      PyObject *item;
      if (source.kind == PointerSource::Argument)
        item = Py_NewRef(values[source.argument]);
      else if (source.kind == PointerSource::Allocated)
        item = THPVariable_Wrap(made[source.allocation]);
      else
        item = Py_NewRef(Py_None);
      if (!item) {
        Py_DECREF(results);
        return nullptr;
      }
      PyTuple_SET_ITEM(results, i, item);
    }
    ++s.replays;
    return results;
  } catch (const std::exception &) {
    Py_RETURN_NONE; // e.g. out of memory: the checked path raises it
  }
}

PyObject *fail(const char *what) {
  if (!PyErr_Occurred())
    PyErr_SetString(PyExc_ValueError, what);
  return nullptr;
}

bool toInt64(PyObject *value, int64_t &out) {
  out = PyLong_AsLongLong(value);
  return !(out == -1 && PyErr_Occurred());
}

// remember(fn, args, kwargs, launch): keeps the launch for calls with this
// call's key.
// `launch` is (kernel, handle, device, pointers, counts, allocated, returns):
//   pointers  [(field, source)], source an index into args + kwargs'
//             values, "allocated" or None;
//   counts    [(field, int)];
//   allocated [(field, shape, torch dtype)];
//   returns   (field or None, ...).
// Returns whether it was kept (False: the key cannot be made in C++).
PyObject *remember(PyObject *, PyObject *const *call, Py_ssize_t count) {
  if (count != 4 || !PyTuple_Check(call[3])) {
    PyErr_SetString(PyExc_TypeError,
                    "expected (fn, args tuple, kwargs, launch tuple)");
    return nullptr;
  }
  PyObject *launch = call[3];
  long fn;
  PyObject *args, *kwargs;
  if (!parseCall(call, 3, fn, args, kwargs))
    return nullptr;
  PyObject *kernel, *pointers, *counts, *allocated, *returns;
  unsigned long long handle;
  int device;
  if (!PyArg_ParseTuple(launch, "OKiO!O!O!O!", &kernel, &handle, &device,
                        &PyList_Type, &pointers, &PyList_Type, &counts,
                        &PyList_Type, &allocated, &PyTuple_Type, &returns))
    return nullptr;
  std::string key;
  std::vector<PyObject *> values;
  if (!makeKey(fn, args, kwargs, key, values))
    Py_RETURN_FALSE;
  const Py_ssize_t valueCount = static_cast<Py_ssize_t>(values.size());
  if (device < (state().hostTensors ? -1 : 0) || device > INT8_MAX)
    return fail("device index out of range");
  Entry entry;
  entry.handle = reinterpret_cast<const lina_decode_kernel *>(
      static_cast<uintptr_t>(handle));
  entry.device = static_cast<int8_t>(device);

  std::vector<PyObject *> allocatedNames;
  for (Py_ssize_t i = 0; i < PyList_GET_SIZE(allocated); ++i) {
    PyObject *name, *shape, *dtype;
    if (!PyArg_ParseTuple(PyList_GET_ITEM(allocated, i), "UOO", &name, &shape,
                          &dtype))
      return nullptr;
    if (!THPDtype_Check(dtype))
      return fail("an allocation's dtype must be a torch.dtype");
    PyObject *sizes = PySequence_Fast(shape, "an allocation's shape");
    if (!sizes)
      return nullptr;
    Allocation allocation;
    allocation.dtype = reinterpret_cast<THPDtype *>(dtype)->scalar_type;
    for (Py_ssize_t d = 0; d < PySequence_Fast_GET_SIZE(sizes); ++d) {
      int64_t size;
      if (!toInt64(PySequence_Fast_GET_ITEM(sizes, d), size)) {
        Py_DECREF(sizes);
        return nullptr;
      }
      allocation.shape.push_back(size);
    }
    Py_DECREF(sizes);
    entry.allocations.push_back(std::move(allocation));
    allocatedNames.push_back(name);
  }

  std::vector<PyObject *> pointerNames;
  for (Py_ssize_t i = 0; i < PyList_GET_SIZE(pointers); ++i) {
    PyObject *name, *source;
    if (!PyArg_ParseTuple(PyList_GET_ITEM(pointers, i), "UO", &name, &source))
      return nullptr;
    const Field *field = findField(name);
    if (!field || !field->pointer)
      return fail("not a pointer field of lina_decode_args");
    PointerSource ps{field->offset, PointerSource::Null, 0, 0};
    if (PyLong_Check(source)) {
      int64_t index;
      if (!toInt64(source, index))
        return nullptr;
      if (index < 0 || index >= valueCount)
        return fail("an argument index out of range");
      ps.kind = PointerSource::Argument;
      ps.argument = static_cast<Py_ssize_t>(index);
    } else if (PyUnicode_Check(source)) {
      ps.kind = PointerSource::Allocated;
      size_t a = 0;
      while (a < allocatedNames.size() &&
             PyUnicode_Compare(allocatedNames[a], name) != 0)
        ++a;
      if (a == allocatedNames.size())
        return fail("an allocated pointer without its allocation");
      ps.allocation = a;
    } else if (source != Py_None) {
      return fail("a pointer's source must be an index, \"allocated\" or None");
    }
    entry.pointers.push_back(ps);
    pointerNames.push_back(name);
  }

  for (Py_ssize_t i = 0; i < PyList_GET_SIZE(counts); ++i) {
    PyObject *name, *value;
    if (!PyArg_ParseTuple(PyList_GET_ITEM(counts, i), "UO", &name, &value))
      return nullptr;
    const Field *field = findField(name);
    if (!field || field->pointer)
      return fail("not a count field of lina_decode_args");
    int64_t count;
    if (!toInt64(value, count))
      return nullptr;
    entry.counts.emplace_back(field->offset, count);
  }

  for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(returns); ++i) {
    PyObject *name = PyTuple_GET_ITEM(returns, i);
    Py_ssize_t r = -1;
    if (name != Py_None) {
      r = 0;
      while (r < static_cast<Py_ssize_t>(pointerNames.size()) &&
             PyUnicode_Compare(pointerNames[r], name) != 0)
        ++r;
      if (r == static_cast<Py_ssize_t>(pointerNames.size()))
        return fail("a returned field that is not a pointer of the launch");
    }
    entry.returns.push_back(r);
  }

  State &s = state();
  auto found = s.entries.find(key);
  if (found == s.entries.end() && s.entries.size() >= kMaxEntries)
    forgetAll();
  entry.kernel = Py_NewRef(kernel);
  Entry &slot = s.entries[key];
  Py_XDECREF(slot.kernel);
  slot = std::move(entry);
  Py_RETURN_TRUE;
}

PyObject *setLauncher(PyObject *, PyObject *address) {
  unsigned long long value = PyLong_AsUnsignedLongLong(address);
  if (value == static_cast<unsigned long long>(-1) && PyErr_Occurred())
    return nullptr;
  state().launch = reinterpret_cast<LaunchFn>(static_cast<uintptr_t>(value));
  Py_RETURN_NONE;
}

PyObject *setHostTensorsForTests(PyObject *, PyObject *flag) {
  int on = PyObject_IsTrue(flag);
  if (on < 0)
    return nullptr;
  state().hostTensors = on != 0;
  Py_RETURN_NONE;
}

PyObject *clear(PyObject *, PyObject *) {
  forgetAll();
  Py_RETURN_NONE;
}

PyObject *stats(PyObject *, PyObject *) {
  return Py_BuildValue("(nK)", static_cast<Py_ssize_t>(state().entries.size()),
                       static_cast<unsigned long long>(state().replays));
}

PyMethodDef kMethods[] = {
    {"replay", reinterpret_cast<PyCFunction>(replay), METH_FASTCALL,
     "replay(fn, args, kwargs): the remembered call's results, or None."},
    {"remember", reinterpret_cast<PyCFunction>(remember), METH_FASTCALL,
     "remember(fn, args, kwargs, launch): keeps a checked call's launch."},
    {"set_launcher", setLauncher, METH_O,
     "set_launcher(address): lina_decode_forward's address."},
    {"set_host_tensors_for_tests", setHostTensorsForTests, METH_O,
     "set_host_tensors_for_tests(flag): remember host tensors' calls too "
     "(device -1), launched with no stream; tests without a GPU."},
    {"clear", clear, METH_NOARGS, "Forgets every remembered call."},
    {"stats", stats, METH_NOARGS, "(entries kept, calls replayed)."},
    {nullptr, nullptr, 0, nullptr}};

PyModuleDef kModule = {PyModuleDef_HEAD_INIT, "lina_eager_decode",
                       "lina's remembered eager decode calls (C++).", -1,
                       kMethods};

} // namespace

PyMODINIT_FUNC PyInit_lina_eager_decode() { return PyModule_Create(&kModule); }
