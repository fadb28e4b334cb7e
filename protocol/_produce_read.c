/* The partitions of one topic in a Produce request, read in one call (protocol/fastpath.py).
 *
 * read_partitions(view, pos, flexible, cls) reads the partition array that starts at byte `pos` of
 * the memoryview `view` and returns (partitions, pos after the array): each partition an instance of
 * `cls` (ProduceRequest's PartitionProduceData) with `index` and `records`, a memoryview slice of
 * `view` or None. Layout (big-endian):
 *   v3-v8:  count int32, then per partition: index int32, records length int32 (-1: null), bytes
 *   v9+:    count uvarint (count + 1), then per partition: index int32, records length uvarint
 *           (length + 1, 0: null), bytes, tagged fields (count uvarint, then tag uvarint, size
 *           uvarint, bytes)
 * A frame that does not fit the layout (cut short, a null or negative count, a length below null,
 * a varint longer than five bytes) gives None: the Python reader then reads the same bytes and
 * raises the ProtocolError that names the problem, so errors are worded in one place.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>

static PyObject *INDEX, *RECORDS, *EMPTY;

typedef struct {
    const unsigned char *data;
    Py_ssize_t pos, end;
} Cursor;

/* 0 on success; -1 when the bytes do not fit. */
static int read_int32(Cursor *c, int64_t *out) {
    if (c->end - c->pos < 4) return -1;
    const unsigned char *p = c->data + c->pos;
    *out = (int32_t)((uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | (uint32_t)p[3]);
    c->pos += 4;
    return 0;
}

static int read_uvarint(Cursor *c, int64_t *out) {
    uint64_t value = 0;
    for (int shift = 0; shift < 35; shift += 7) {
        if (c->pos >= c->end) return -1;
        unsigned char b = c->data[c->pos++];
        value |= (uint64_t)(b & 0x7F) << shift;
        if (b < 0x80) {
            *out = (int64_t)value;
            return 0;
        }
    }
    return -1;
}

/* A length or count (-1: null), as the Python reader's `length`. */
static int read_length(Cursor *c, int flexible, int64_t *out) {
    int64_t n;
    if (flexible ? read_uvarint(c, &n) : read_int32(c, &n)) return -1;
    if (flexible) n -= 1;
    if (n < -1) return -1;
    *out = n;
    return 0;
}

static int skip(Cursor *c, int64_t n) {
    if (n < 0 || c->end - c->pos < n) return -1;
    c->pos += (Py_ssize_t)n;
    return 0;
}

static int skip_tags(Cursor *c) {
    int64_t count, tag, size;
    if (read_uvarint(c, &count)) return -1;
    for (int64_t i = 0; i < count; i++)
        if (read_uvarint(c, &tag) || read_uvarint(c, &size) || skip(c, size)) return -1;
    return 0;
}

/* One partition as an instance of `cls`; Py_None (borrowed) when the bytes do not fit; NULL with an
 * exception set on a failure of Python's own. */
static PyObject *read_one(Cursor *c, PyObject *view, PyTypeObject *cls, int flexible) {
    int64_t index, length;
    if (read_int32(c, &index) || read_length(c, flexible, &length)) return Py_None;
    Py_ssize_t start = c->pos;
    if (length >= 0 && skip(c, length)) return Py_None;
    if (flexible && skip_tags(c)) return Py_None;
    PyObject *records = length < 0 ? Py_NewRef(Py_None) : PySequence_GetSlice(view, start, start + length);
    if (records == NULL) return NULL;
    PyObject *partition = cls->tp_new(cls, EMPTY, NULL);
    PyObject *index_obj = PyLong_FromLongLong(index);
    if (partition == NULL || index_obj == NULL || PyObject_SetAttr(partition, INDEX, index_obj) < 0
        || PyObject_SetAttr(partition, RECORDS, records) < 0) {
        Py_XDECREF(partition);
        partition = NULL;
    }
    Py_XDECREF(index_obj);
    Py_DECREF(records);
    return partition;
}

static PyObject *read_partitions(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 4 || !PyMemoryView_Check(args[0]) || !PyType_Check(args[3])) {
        PyErr_SetString(PyExc_TypeError, "read_partitions(memoryview, pos, flexible, cls)");
        return NULL;
    }
    PyObject *view = args[0];
    Py_ssize_t pos = PyLong_AsSsize_t(args[1]);
    if (pos == -1 && PyErr_Occurred()) return NULL;
    int flexible = PyObject_IsTrue(args[2]);
    if (flexible < 0) return NULL;
    PyTypeObject *cls = (PyTypeObject *)args[3];

    Py_buffer buffer;
    if (PyObject_GetBuffer(view, &buffer, PyBUF_SIMPLE) < 0) return NULL;
    PyObject *result = NULL, *partitions = NULL;
    if (pos < 0 || pos > buffer.len) {
        result = Py_NewRef(Py_None);
        goto done;
    }
    Cursor c = {buffer.buf, pos, buffer.len};
    int64_t count;
    if (read_length(&c, flexible, &count) || count < 0) {
        result = Py_NewRef(Py_None);
        goto done;
    }
    /* Each partition takes at least 5 bytes: a count larger than the frame could hold is refused
     * before any list is sized by it. */
    if (count > (c.end - c.pos) / 5 + 1) {
        result = Py_NewRef(Py_None);
        goto done;
    }
    partitions = PyList_New((Py_ssize_t)count);
    if (partitions == NULL) goto done;
    for (Py_ssize_t i = 0; i < (Py_ssize_t)count; i++) {
        PyObject *partition = read_one(&c, view, cls, flexible);
        if (partition == NULL) goto done;
        if (partition == Py_None) {
            result = Py_NewRef(Py_None);
            goto done;
        }
        PyList_SET_ITEM(partitions, i, partition);
    }
    result = Py_BuildValue("(On)", partitions, c.pos);
done:
    Py_XDECREF(partitions);
    PyBuffer_Release(&buffer);
    return result;
}

static PyMethodDef methods[] = {
    {"read_partitions", (PyCFunction)(void (*)(void))read_partitions, METH_FASTCALL,
     "read_partitions(view, pos, flexible, cls) -> (list of cls, pos after the array), or None if the "
     "bytes do not fit the layout"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_produce_read", NULL, 0, methods};

PyMODINIT_FUNC PyInit__produce_read(void) {
    INDEX = PyUnicode_InternFromString("index");
    RECORDS = PyUnicode_InternFromString("records");
    EMPTY = PyTuple_New(0);
    if (INDEX == NULL || RECORDS == NULL || EMPTY == NULL) return NULL;
    return PyModule_Create(&module);
}
