/* A Produce answer out in one call: the compiled twin of protocol/fastpath.py's
 * `encode_produce_response_in_python`, which tests hold it equal to (tests/protocol/test_fastpath.py) and
 * which runs alone where this is not built.
 *
 * encode(body, version, correlation_id) gives the one chunk the Python encoder gives (the whole frame,
 * size prefix first, in a bytearray) for the usual answer of versions 3-12: each partition's offsets
 * and error code and nothing else. Anything else gives None (record errors, an error message, a leader
 * hint, leader endpoints, another version, a value out of its field's range, a field of the wrong
 * type): the Python encoder writes those, or words why it cannot.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

#include "_response_bytes.h"

/* Attribute names, interned once. */
#define NAMES(X) X(throttle_time_ms) X(responses) X(name) X(partition_responses) X(index) X(error_code) \
    X(base_offset) X(log_append_time_ms) X(log_start_offset) X(record_errors) X(error_message) \
    X(current_leader) X(leader_id) X(leader_epoch) X(node_endpoints)
#define DECLARE(name) static PyObject *S_##name;
NAMES(DECLARE)

/* A field that is not there (v8+): no record errors, a null error message, (flexible) no tagged fields */
static const unsigned char NO_DETAILS[] = {0, 0, 0, 0, 0xff, 0xff};
static const unsigned char NO_DETAILS_FLEXIBLE[] = {1, 0, 0};

/* An array's length: compact (length + 1 as a varint) or int32. -2 where it is not a list. */
static int array_length(Head *h, PyObject *items, int flexible) {
    if (!PyList_Check(items)) return -2;
    Py_ssize_t n = PyList_GET_SIZE(items);
    if (n >= INT32_MAX) return -2;
    return flexible ? uvarint(h, (uint64_t)n + 1) : big(h, n, 4);
}

static int string(Head *h, PyObject *text, int flexible) {
    if (!PyUnicode_Check(text)) return -2;
    Py_ssize_t n;
    const char *utf8 = PyUnicode_AsUTF8AndSize(text, &n);
    if (utf8 == NULL) {
        PyErr_Clear();  /* not encodable (a lone surrogate): Python words it */
        return -2;
    }
    if (!flexible && n > INT16_MAX) return -2;
    if (flexible ? uvarint(h, (uint64_t)n + 1) : big(h, n, 2)) return -1;
    return raw(h, utf8, n);
}

/* 0 when the attribute is falsy (an empty list) or, with `none_only`, None; 1 otherwise; -1 on error. */
static int present(PyObject *obj, PyObject *name, int none_only) {
    PyObject *value = PyObject_GetAttr(obj, name);
    if (value == NULL) return -1;
    int some = none_only ? value != Py_None : PyObject_IsTrue(value);
    Py_DECREF(value);
    return some;
}

static int partition(Head *h, PyObject *p, int version, int flexible) {
    int rc = field(h, p, S_index, 4);
    if (rc == 0) rc = field(h, p, S_error_code, 2);
    if (rc == 0) rc = field(h, p, S_base_offset, 8);
    if (rc == 0) rc = field(h, p, S_log_append_time_ms, 8);
    if (rc == 0 && version >= 5) rc = field(h, p, S_log_start_offset, 8);
    if (rc || version < 8) return rc;
    int errors = present(p, S_record_errors, 0), message = errors ? errors : present(p, S_error_message, 1);
    if (errors || message) return errors < 0 || message < 0 ? -1 : -2;
    if (version >= 10) {
        int no_leader = absent(p, S_current_leader, S_leader_id, S_leader_epoch);
        if (no_leader <= 0) return no_leader < 0 ? -1 : -2;
    }
    return flexible ? raw(h, NO_DETAILS_FLEXIBLE, sizeof NO_DETAILS_FLEXIBLE) : raw(h, NO_DETAILS, sizeof NO_DETAILS);
}

static int topics(Head *h, PyObject *body, int version, int flexible) {
    PyObject *responses = PyObject_GetAttr(body, S_responses);
    if (responses == NULL) return -1;
    int rc = array_length(h, responses, flexible);
    /* Items are held while read: reading an attribute may run Python code, which could change the list */
    for (Py_ssize_t t = 0; rc == 0 && t < PyList_GET_SIZE(responses); t++) {
        PyObject *topic = Py_NewRef(PyList_GET_ITEM(responses, t));
        PyObject *name = PyObject_GetAttr(topic, S_name);
        rc = name == NULL ? -1 : string(h, name, flexible);
        Py_XDECREF(name);
        PyObject *parts = rc ? NULL : PyObject_GetAttr(topic, S_partition_responses);
        Py_DECREF(topic);
        if (rc == 0 && parts == NULL) rc = -1;
        if (rc == 0) rc = array_length(h, parts, flexible);
        for (Py_ssize_t i = 0; rc == 0 && i < PyList_GET_SIZE(parts); i++) {
            PyObject *item = Py_NewRef(PyList_GET_ITEM(parts, i));
            rc = partition(h, item, version, flexible);
            Py_DECREF(item);
        }
        Py_XDECREF(parts);
        if (rc == 0 && flexible) rc = uvarint(h, 0);
    }
    Py_DECREF(responses);
    return rc;
}

static PyObject *encode(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    (void)module;
    long version;
    int64_t correlation;
    int unusual = encode_arguments(args, nargs, 3, 12, &version, &correlation);
    if (unusual) return unusual < 0 ? NULL : Py_NewRef(Py_None);
    PyObject *body = args[0];
    int flexible = version >= 9;
    int rc = 0;
    if (version >= 10) {  /* leader endpoints (a tagged field) are the Python encoder's */
        int some = present(body, S_node_endpoints, 0);
        rc = some < 0 ? -1 : some ? -2 : 0;
    }
    Head h = {NULL, 0, 0};
    if (rc == 0) rc = big(&h, 0, 4) || big(&h, correlation, 4) || (flexible && uvarint(&h, 0)) ? -1 : 0;
    if (rc == 0) rc = topics(&h, body, (int)version, flexible);
    if (rc == 0) rc = field(&h, body, S_throttle_time_ms, 4);
    if (rc == 0 && flexible) rc = uvarint(&h, 0);
    PyObject *result = NULL;
    if (rc == 0 && h.len - 4 > INT32_MAX) rc = -2;
    if (rc == 0) {
        Py_ssize_t size = h.len - 4;
        for (int i = 3; i >= 0; i--, size >>= 8) h.data[i] = (unsigned char)(size & 0xFF);
        PyObject *frame = PyByteArray_FromStringAndSize((const char *)h.data, h.len);
        result = frame == NULL ? NULL : PyList_New(1);
        if (result != NULL) {
            PyList_SET_ITEM(result, 0, frame);
        } else {
            Py_XDECREF(frame);
        }
    }
    if (rc == -2) result = Py_NewRef(Py_None);
    PyMem_Free(h.data);
    return result;
}

static PyMethodDef methods[] = {
    {"encode", (PyCFunction)(void (*)(void))encode, METH_FASTCALL,
     "encode(body, version, correlation_id) -> [frame], or None: the Python encoder's"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module_def = {PyModuleDef_HEAD_INIT, "_produce_write", NULL, 0, methods};

PyMODINIT_FUNC PyInit__produce_write(void) {
    NAMES(INTERN)
    return PyModule_Create(&module_def);
}
