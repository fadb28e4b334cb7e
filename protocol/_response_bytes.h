/* What the compiled response writers (_fetch_write.c, _produce_write.c) share: a growing buffer of
 * big-endian and varint fields, and the reading of an int field off a message object with its range
 * checked. Each module has its own copy of these statics. */
#ifndef EBB_RESPONSE_BYTES_H
#define EBB_RESPONSE_BYTES_H
#include <Python.h>
#include <stdint.h>
#include <string.h>

typedef struct {
    unsigned char *data;
    Py_ssize_t len, cap;
} Head;

static int grow(Head *h, Py_ssize_t n) {
    if (h->len + n <= h->cap) return 0;
    Py_ssize_t cap = h->cap * 2 > h->len + n ? h->cap * 2 : h->len + n + 64;
    unsigned char *data = PyMem_Realloc(h->data, cap);
    if (data == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    h->data = data;
    h->cap = cap;
    return 0;
}

static int raw(Head *h, const void *p, Py_ssize_t n) {
    if (grow(h, n)) return -1;
    memcpy(h->data + h->len, p, n);
    h->len += n;
    return 0;
}

static int big(Head *h, int64_t v, int n) {
    unsigned char b[8];
    for (int i = n - 1; i >= 0; i--, v >>= 8) b[i] = (unsigned char)(v & 0xFF);
    return raw(h, b, n);
}

static int uvarint(Head *h, uint64_t v) {
    unsigned char b[10];
    int n = 0;
    while (v >= 0x80) {
        b[n++] = (unsigned char)(v | 0x80);
        v >>= 7;
    }
    b[n++] = (unsigned char)v;
    return raw(h, b, n);
}

/* -1: Python failed (error set); -2: not this encoder's (a value out of range, a field it leaves). */
static int attr_int(PyObject *obj, PyObject *name, int bytes, int64_t *out) {
    PyObject *value = PyObject_GetAttr(obj, name);
    if (value == NULL) return -1;
    if (!PyLong_Check(value)) {
        Py_DECREF(value);
        return -2;
    }
    int overflow;
    long long v = PyLong_AsLongLongAndOverflow(value, &overflow);
    Py_DECREF(value);
    if (v == -1 && PyErr_Occurred()) return -1;
    if (overflow) return -2;
    if (bytes < 8) {
        long long limit = 1LL << (8 * bytes - 1);
        if (v < -limit || v >= limit) return -2;
    }
    *out = v;
    return 0;
}

static int field(Head *h, PyObject *obj, PyObject *name, int bytes) {
    int64_t v;
    int rc = attr_int(obj, name, bytes, &v);
    return rc ? rc : big(h, v, bytes);
}

/* Whether a tagged struct holds its "absent" pair (-1, -1): 1 yes, 0 no, -1 error. */
static int absent(PyObject *obj, PyObject *name, PyObject *a, PyObject *b) {
    PyObject *s = PyObject_GetAttr(obj, name);
    if (s == NULL) return -1;
    int64_t x, y;
    int rx = attr_int(s, a, 8, &x), ry = rx ? rx : attr_int(s, b, 8, &y);
    Py_DECREF(s);
    if (rx == -1 || ry == -1) return -1;
    return rx == 0 && ry == 0 && x == -1 && y == -1;
}

/* encode(body, version, correlation_id)'s arguments: 0 when the version is in [low, high] and the
 * correlation id an int32; 1 when not (the Python encoder's answer); -1 with an error set. */
static int encode_arguments(PyObject *const *args, Py_ssize_t nargs, long low, long high, long *version,
                            int64_t *correlation) {
    if (nargs != 3) {
        PyErr_SetString(PyExc_TypeError, "encode(body, version, correlation_id)");
        return -1;
    }
    *version = PyLong_AsLong(args[1]);
    if (*version == -1 && PyErr_Occurred()) return -1;
    int overflow;
    long long id = PyLong_AsLongLongAndOverflow(args[2], &overflow);
    if (id == -1 && PyErr_Occurred()) return -1;
    *correlation = id;
    return *version < low || *version > high || overflow || id < INT32_MIN || id > INT32_MAX;
}

/* An attribute name made once, interned (in the module's init, over its NAMES list) */
#define INTERN(name) if ((S_##name = PyUnicode_InternFromString(#name)) == NULL) return NULL;

#endif
