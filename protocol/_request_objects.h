/* What the compiled request decoders (_fetch_read.c, _produce_read.c) share: the cursor they read with,
 * and the making of the message objects as the Python decoders make them (no __init__, each field set)
 * and of the Request around them. Each module has its own copy of these statics. */
#ifndef EBB_REQUEST_OBJECTS_H
#define EBB_REQUEST_OBJECTS_H
#include <Python.h>

typedef struct {
    const unsigned char *data;
    Py_ssize_t pos, end;
} Cursor;

static PyObject *EMPTY;  /* the empty tuple: set by the module's init */

/* An instance of `cls` with no field set (object.__new__: no __init__). */
static PyObject *blank(PyObject *cls) {
    return ((PyTypeObject *)cls)->tp_new((PyTypeObject *)cls, EMPTY, NULL);
}

/* Sets `value` (stolen) as `name` of `obj`; -1 on failure or a NULL value. */
static int put(PyObject *obj, PyObject *name, PyObject *value) {
    if (value == NULL) return -1;
    int rc = PyObject_SetAttr(obj, name, value);
    Py_DECREF(value);
    return rc;
}

/* framing.Request's fields, interned by request_fields_init (from the module's init). */
static PyObject *REQUEST_FIELDS[5];

static int request_fields_init(void) {
    static const char *const names[] = {"header", "api_key", "api_version", "correlation_id", "body"};
    for (int i = 0; i < 5; i++) {
        REQUEST_FIELDS[i] = PyUnicode_InternFromString(names[i]);
        if (REQUEST_FIELDS[i] == NULL) return -1;
    }
    return 0;
}

/* framing.Request(header, key, version, correlation, body) as its __init__ would make it, without running
 * that Python function (once per request): each field set on a blank instance. */
static PyObject *request_of(PyObject *request_class, PyObject *header, int64_t key, int64_t version,
                            int64_t correlation, PyObject *body) {
    PyObject *result = blank(request_class);
    if (result == NULL) return NULL;
    if (PyObject_SetAttr(result, REQUEST_FIELDS[0], header) < 0
            || put(result, REQUEST_FIELDS[1], PyLong_FromLongLong(key)) < 0
            || put(result, REQUEST_FIELDS[2], PyLong_FromLongLong(version)) < 0
            || put(result, REQUEST_FIELDS[3], PyLong_FromLongLong(correlation)) < 0
            || PyObject_SetAttr(result, REQUEST_FIELDS[4], body) < 0) {
        Py_DECREF(result);
        return NULL;
    }
    return result;
}

#endif
