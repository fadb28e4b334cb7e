/* A Produce request read in C (protocol/fastpath.py): the whole request, or one topic's partitions.
 *
 * decode(frame) builds the same Request[ProduceRequest] as fastpath's Python decoder (the reference,
 * which runs alone where this is not built and which tests hold it equal to) for versions 3-12: the
 * header, the transactional id, acks and timeout, each topic's name and partitions, tagged fields
 * skipped. Any frame that does not fit (cut short, a null where none may be, bytes that are not UTF-8,
 * another API or version) gives None: the Python decoder then reads it and words the error.
 * configure(...) hands over, once, the classes and the default topic id it uses.
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

#include "_request_objects.h"

static PyObject *INDEX, *RECORDS;

/* Set by configure(). */
static PyObject *REQUEST, *HEADER, *BODY, *TOPIC, *PARTITION, *NO_TOPIC_ID, *EMPTY_STR;
static int configured = 0;

/* Attribute names, interned once. */
#define NAMES(X) X(request_api_key) X(request_api_version) X(correlation_id) X(client_id) \
    X(transactional_id) X(acks) X(timeout_ms) X(topic_data) X(name) X(topic_id) X(partition_data)
#define DECLARE(name) static PyObject *S_##name;
NAMES(DECLARE)

/* 0 on success; -1 when the bytes do not fit. */
static int read_int32(Cursor *c, int64_t *out) {
    if (c->end - c->pos < 4) return -1;
    const unsigned char *p = c->data + c->pos;
    *out = (int32_t)((uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | (uint32_t)p[3]);
    c->pos += 4;
    return 0;
}

static int read_int16(Cursor *c, int64_t *out) {
    if (c->end - c->pos < 2) return -1;
    const unsigned char *p = c->data + c->pos;
    *out = (int16_t)((uint16_t)p[0] << 8 | (uint16_t)p[1]);
    c->pos += 2;
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
    PyObject *partition = blank((PyObject *)cls);
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

/* One topic's partition array, each partition an instance of `cls`: a new list; Py_None (a new reference) when
 * the bytes do not fit; NULL on a failure of Python's own. */
static PyObject *partitions_of(Cursor *c, PyObject *view, PyTypeObject *cls, int flexible) {
    int64_t count;
    /* Each partition takes at least 5 bytes: a count larger than the frame could hold is refused
     * before any list is sized by it. */
    if (read_length(c, flexible, &count) || count < 0 || count > (c->end - c->pos) / 5 + 1) return Py_NewRef(Py_None);
    PyObject *partitions = PyList_New((Py_ssize_t)count);
    if (partitions == NULL) return NULL;
    for (Py_ssize_t i = 0; i < (Py_ssize_t)count; i++) {
        PyObject *partition = read_one(c, view, cls, flexible);
        if (partition == NULL || partition == Py_None) {
            Py_DECREF(partitions);
            return partition == NULL ? NULL : Py_NewRef(Py_None);
        }
        PyList_SET_ITEM(partitions, i, partition);
    }
    return partitions;
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
    partitions = partitions_of(&c, view, cls, flexible);
    if (partitions == NULL || partitions == Py_None) {
        result = partitions;
        partitions = NULL;
        goto done;
    }
    result = Py_BuildValue("(On)", partitions, c.pos);
done:
    Py_XDECREF(partitions);
    PyBuffer_Release(&buffer);
    return result;
}

/* ---- the whole request ------------------------------------------------------------------------- */

/* A string as the Python reader's `string` reads it: compact or with an int16 length. A new reference
 * (Py_None for a null one where `nullable`); NULL when the bytes do not fit, with an error set only
 * when Python itself failed. */
static PyObject *string(Cursor *c, int compact, int nullable) {
    int64_t n;
    if (compact) {
        if (read_uvarint(c, &n)) return NULL;
        n -= 1;
    } else if (read_int16(c, &n)) {
        return NULL;
    }
    if (n < 0) return n == -1 && nullable ? Py_NewRef(Py_None) : NULL;
    if (c->end - c->pos < n) return NULL;
    PyObject *text = PyUnicode_DecodeUTF8((const char *)c->data + c->pos, (Py_ssize_t)n, NULL);
    if (text == NULL) PyErr_Clear();  /* not UTF-8: Python words it */
    c->pos += (Py_ssize_t)n;
    return text;
}

/* Python failed (memory): NULL out with its error. The bytes did not fit: None out. */
#define UNFIT do { if (!PyErr_Occurred()) { result = Py_NewRef(Py_None); } goto done; } while (0)

static PyObject *decode_frame(Cursor *c, PyObject *view) {
    PyObject *result = NULL, *header = NULL, *body = NULL, *topics = NULL;
    int64_t key, version, correlation, acks, timeout, count;
    if (read_int16(c, &key) || read_int16(c, &version) || read_int32(c, &correlation)) UNFIT;
    if (key != 0 || version < 3 || version > 12) UNFIT;
    int flexible = version >= 9;
    PyObject *client_id = string(c, 0, 1);
    if (client_id == NULL) UNFIT;
    if (client_id == Py_None) Py_SETREF(client_id, Py_NewRef(EMPTY_STR));
    header = blank(HEADER);
    if (header == NULL) {
        Py_DECREF(client_id);
        goto done;
    }
    if (put(header, S_client_id, client_id) || put(header, S_request_api_key, PyLong_FromLongLong(key))
        || put(header, S_request_api_version, PyLong_FromLongLong(version))
        || put(header, S_correlation_id, PyLong_FromLongLong(correlation)))  /* client_id first: put takes it */
        goto done;
    if (flexible && skip_tags(c)) UNFIT;
    body = blank(BODY);
    if (body == NULL) goto done;
    PyObject *transactional_id = string(c, flexible, 1);
    if (transactional_id == NULL) UNFIT;
    if (put(body, S_transactional_id, transactional_id)) goto done;
    if (read_int16(c, &acks) || read_int32(c, &timeout)) UNFIT;
    if (put(body, S_acks, PyLong_FromLongLong(acks)) || put(body, S_timeout_ms, PyLong_FromLongLong(timeout)))
        goto done;
    /* a topic takes at least two bytes */
    if (read_length(c, flexible, &count) || count < 0 || count > (c->end - c->pos) / 2 + 1) UNFIT;
    topics = PyList_New((Py_ssize_t)count);
    if (topics == NULL) goto done;
    for (Py_ssize_t i = 0; i < (Py_ssize_t)count; i++) {
        PyObject *topic = blank(TOPIC);
        if (topic == NULL) goto done;
        PyList_SET_ITEM(topics, i, topic);
        PyObject *name = string(c, flexible, 0);
        if (name == NULL) UNFIT;
        if (put(topic, S_name, name) || put(topic, S_topic_id, Py_NewRef(NO_TOPIC_ID))) goto done;
        PyObject *partitions = partitions_of(c, view, (PyTypeObject *)PARTITION, flexible);
        if (partitions == NULL) goto done;
        if (partitions == Py_None) {
            Py_DECREF(partitions);
            UNFIT;
        }
        if (put(topic, S_partition_data, partitions)) goto done;
        if (flexible && skip_tags(c)) UNFIT;
    }
    if (put(body, S_topic_data, Py_NewRef(topics))) goto done;
    if (flexible && skip_tags(c)) UNFIT;  /* then any trailing bytes are ignored, as the Python decoder does */
    result = request_of(REQUEST, header, key, version, correlation, body);
done:
    Py_XDECREF(header);
    Py_XDECREF(body);
    Py_XDECREF(topics);
    return result;
}

static PyObject *decode(PyObject *module, PyObject *frame) {
    (void)module;
    if (!configured) {
        PyErr_SetString(PyExc_RuntimeError, "_produce_read.configure() was not called");
        return NULL;
    }
    PyObject *view = PyMemoryView_FromObject(frame);  /* the records are slices of it, as in Python */
    if (view == NULL) return NULL;
    Py_buffer buffer;
    if (PyObject_GetBuffer(view, &buffer, PyBUF_SIMPLE) < 0) {
        Py_DECREF(view);
        return NULL;
    }
    Cursor c = {buffer.buf, 0, buffer.len};
    PyObject *result = decode_frame(&c, view);
    PyBuffer_Release(&buffer);
    Py_DECREF(view);
    return result;
}

static PyObject *configure(PyObject *module, PyObject *args) {
    (void)module;
    PyObject *request, *header, *body, *topic, *partition, *no_topic_id;
    if (!PyArg_ParseTuple(args, "O!O!O!O!O!O", &PyType_Type, &request, &PyType_Type, &header, &PyType_Type, &body,
                          &PyType_Type, &topic, &PyType_Type, &partition, &no_topic_id))
        return NULL;
    Py_XSETREF(REQUEST, Py_NewRef(request));
    Py_XSETREF(HEADER, Py_NewRef(header));
    Py_XSETREF(BODY, Py_NewRef(body));
    Py_XSETREF(TOPIC, Py_NewRef(topic));
    Py_XSETREF(PARTITION, Py_NewRef(partition));
    Py_XSETREF(NO_TOPIC_ID, Py_NewRef(no_topic_id));
    configured = 1;
    Py_RETURN_NONE;
}

static PyMethodDef methods[] = {
    {"configure", configure, METH_VARARGS,
     "configure(Request, RequestHeader, ProduceRequest, TopicProduceData, PartitionProduceData, no_topic_id)"},
    {"decode", decode, METH_O, "decode(frame) -> Request[ProduceRequest], or None: the Python decoder's"},
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
    EMPTY_STR = PyUnicode_FromString("");
    if (INDEX == NULL || RECORDS == NULL || EMPTY == NULL || EMPTY_STR == NULL) return NULL;
    if (request_fields_init() < 0) return NULL;
#define INTERN(name) if ((S_##name = PyUnicode_InternFromString(#name)) == NULL) return NULL;
    NAMES(INTERN)
    return PyModule_Create(&module);
}
