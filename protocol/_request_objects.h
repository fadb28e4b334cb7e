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

/* request_class(header, key, version, correlation, body): framing.Request, as the Python decoders make it. */
static PyObject *request_of(PyObject *request_class, PyObject *header, int64_t key, int64_t version,
                            int64_t correlation, PyObject *body) {
    PyObject *result = NULL, *key_obj = PyLong_FromLongLong(key), *version_obj = PyLong_FromLongLong(version);
    PyObject *correlation_obj = PyLong_FromLongLong(correlation);
    if (key_obj && version_obj && correlation_obj) {
        PyObject *args[] = {header, key_obj, version_obj, correlation_obj, body};
        result = PyObject_Vectorcall(request_class, args, 5, NULL);
    }
    Py_XDECREF(key_obj);
    Py_XDECREF(version_obj);
    Py_XDECREF(correlation_obj);
    return result;
}

#endif
