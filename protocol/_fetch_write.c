/* A Fetch answer's size prefix and headers out, in one call: the compiled twin of protocol/fastpath.py's
 * `encode_fetch_response_in_python`, which tests hold it equal to (tests/protocol/test_fetch_codec.py)
 * and which runs alone where this is not built. Its other half, the request in, is
 * protocol/_fetch_read.c.
 *
 * encode(body, version, correlation_id) gives the chunks the Python encoder gives (the size prefix and
 * headers in bytearrays, each partition's record data as it is, never copied), or None where the
 * answer holds what it does not write (a tagged field with a value, a number out of its field's
 * range, a version outside 4-16): the Python encoder writes those.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

#include "_response_bytes.h"

/* Attribute names, interned once. */
#define NAMES(X) X(throttle_time_ms) X(error_code) X(session_id) X(responses) X(topic) X(topic_id) \
    X(partitions) X(partition_index) X(high_watermark) X(last_stable_offset) X(log_start_offset) \
    X(aborted_transactions) X(preferred_read_replica) X(records) X(producer_id) X(first_offset) \
    X(diverging_epoch) X(current_leader) X(snapshot_id) X(epoch) X(end_offset) X(leader_id) X(leader_epoch) \
    X(node_endpoints) X(bytes)
#define DECLARE(name) static PyObject *S_##name;
NAMES(DECLARE)

/* ---- encode ------------------------------------------------------------------------------------ */

typedef struct {
    PyObject *chunks;
    Head head;
} Writer;

/* The head so far becomes a bytearray chunk, then `records` follows it. */
static int cut(Writer *w, PyObject *records) {
    PyObject *head = PyByteArray_FromStringAndSize((const char *)w->head.data, w->head.len);
    if (head == NULL) return -1;
    int rc = PyList_Append(w->chunks, head);
    Py_DECREF(head);
    if (rc || (records != NULL && PyList_Append(w->chunks, records))) return -1;
    w->head.len = 0;
    return 0;
}

static int partition(Writer *w, PyObject *p, int version, int flexible, Py_ssize_t *total) {
    Head *h = &w->head;
    int rc;
    if ((rc = field(h, p, S_partition_index, 4)) || (rc = field(h, p, S_error_code, 2))
        || (rc = field(h, p, S_high_watermark, 8)) || (rc = field(h, p, S_last_stable_offset, 8))
        || (version >= 5 && (rc = field(h, p, S_log_start_offset, 8))))
        return rc;
    PyObject *aborted = PyObject_GetAttr(p, S_aborted_transactions);
    if (aborted == NULL) return -1;
    if (aborted == Py_None) {
        rc = flexible ? uvarint(h, 0) : big(h, -1, 4);
    } else if (!PyList_Check(aborted)) {
        rc = -2;
    } else {
        Py_ssize_t n = PyList_GET_SIZE(aborted);
        rc = flexible ? uvarint(h, (uint64_t)n + 1) : big(h, n, 4);
        for (Py_ssize_t i = 0; i < n && rc == 0; i++) {
            PyObject *txn = PyList_GET_ITEM(aborted, i);
            if (!(rc = field(h, txn, S_producer_id, 8)) && !(rc = field(h, txn, S_first_offset, 8)) && flexible)
                rc = uvarint(h, 0);
        }
    }
    Py_DECREF(aborted);
    if (rc) return rc;
    if (version >= 11 && (rc = field(h, p, S_preferred_read_replica, 4))) return rc;
    PyObject *records = PyObject_GetAttr(p, S_records);
    if (records == NULL) return -1;
    if (records == Py_None) {
        rc = flexible ? uvarint(h, 0) : big(h, -1, 4);
    } else {
        Py_ssize_t size = PyObject_Size(records);
        if (size < 0) {
            rc = -1;
        } else if ((rc = flexible ? uvarint(h, (uint64_t)size + 1) : big(h, size, 4)) == 0 && size) {
            rc = cut(w, records);
            *total += size;
        }
    }
    Py_DECREF(records);
    if (rc || !flexible) return rc;
    int a = absent(p, S_diverging_epoch, S_epoch, S_end_offset), b = a == 1 ? absent(p, S_current_leader, S_leader_id,
                                                                                       S_leader_epoch) : a;
    int s = b == 1 ? absent(p, S_snapshot_id, S_end_offset, S_epoch) : b;
    if (s < 0) return -1;
    if (s == 0) return -2;  /* a tagged field with a value: the Python encoder's */
    return uvarint(h, 0);
}

static int topics(Writer *w, PyObject *body, int version, int flexible, Py_ssize_t *total) {
    PyObject *responses = PyObject_GetAttr(body, S_responses);
    if (responses == NULL) return -1;
    int rc = 0;
    Head *h = &w->head;
    if (!PyList_Check(responses)) {
        rc = -2;
        goto done;
    }
    Py_ssize_t n = PyList_GET_SIZE(responses);
    if ((rc = flexible ? uvarint(h, (uint64_t)n + 1) : big(h, n, 4))) goto done;
    for (Py_ssize_t i = 0; i < n && rc == 0; i++) {
        PyObject *topic = PyList_GET_ITEM(responses, i);
        if (version >= 13) {
            PyObject *id = PyObject_GetAttr(topic, S_topic_id);
            PyObject *data = id == NULL ? NULL : PyObject_GetAttr(id, S_bytes);
            Py_XDECREF(id);
            if (data == NULL) {
                rc = -1;
            } else {
                rc = PyBytes_Check(data) && PyBytes_GET_SIZE(data) == 16 ? raw(h, PyBytes_AS_STRING(data), 16) : -2;
                Py_DECREF(data);
            }
        } else {
            PyObject *name = PyObject_GetAttr(topic, S_topic);
            if (name == NULL) {
                rc = -1;
            } else if (!PyUnicode_Check(name)) {
                rc = -2;
            } else {
                Py_ssize_t size;
                const char *text = PyUnicode_AsUTF8AndSize(name, &size);
                if (text == NULL) {
                    PyErr_Clear();  /* lone surrogates: Python raises */
                    rc = -2;
                } else if (!flexible && size > 32767) {
                    rc = -2;
                } else if (!(rc = flexible ? uvarint(h, (uint64_t)size + 1) : big(h, size, 2))) {
                    rc = raw(h, text, size);
                }
            }
            Py_XDECREF(name);
        }
        if (rc) break;
        PyObject *parts = PyObject_GetAttr(topic, S_partitions);
        if (parts == NULL) {
            rc = -1;
            break;
        }
        if (!PyList_Check(parts)) {
            rc = -2;
        } else {
            Py_ssize_t m = PyList_GET_SIZE(parts);
            rc = flexible ? uvarint(h, (uint64_t)m + 1) : big(h, m, 4);
            for (Py_ssize_t j = 0; j < m && rc == 0; j++)
                rc = partition(w, PyList_GET_ITEM(parts, j), version, flexible, total);
        }
        Py_DECREF(parts);
        if (rc == 0 && flexible) rc = uvarint(h, 0);
    }
done:
    Py_DECREF(responses);
    return rc;
}

static PyObject *encode(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    long version;
    int64_t correlation;
    int unusual = encode_arguments(args, nargs, 4, 16, &version, &correlation);
    if (unusual) return unusual < 0 ? NULL : Py_NewRef(Py_None);
    PyObject *body = args[0];
    int flexible = version >= 12;
    Writer w = {PyList_New(0), {NULL, 0, 0}};
    if (w.chunks == NULL) return NULL;
    Py_ssize_t total = 0;
    int rc = big(&w.head, 0, 4) || big(&w.head, correlation, 4) || (flexible && uvarint(&w.head, 0)) ? -1 : 0;
    if (rc == 0) rc = field(&w.head, body, S_throttle_time_ms, 4);
    if (rc == 0 && version >= 7 && !(rc = field(&w.head, body, S_error_code, 2)))
        rc = field(&w.head, body, S_session_id, 4);
    if (rc == 0) rc = topics(&w, body, (int)version, flexible, &total);
    if (rc == 0 && flexible) {
        PyObject *nodes = version >= 16 ? PyObject_GetAttr(body, S_node_endpoints) : Py_NewRef(Py_None);
        if (nodes == NULL) {
            rc = -1;
        } else {
            int some = nodes == Py_None ? 0 : PyObject_IsTrue(nodes);
            Py_DECREF(nodes);
            rc = some < 0 ? -1 : some ? -2 : uvarint(&w.head, 0);
        }
    }
    if (rc == 0 && (w.head.len || PyList_GET_SIZE(w.chunks) == 0)) rc = cut(&w, NULL);
    PyObject *result = NULL;
    if (rc == 0) {
        /* The size prefix: every byte after it, headers and records */
        Py_ssize_t size = -4;
        for (Py_ssize_t i = 0; i < PyList_GET_SIZE(w.chunks); i += 2)
            size += PyByteArray_GET_SIZE(PyList_GET_ITEM(w.chunks, i));
        size += total;
        if (size > INT32_MAX) {
            rc = -2;
        } else {
            unsigned char *first = (unsigned char *)PyByteArray_AS_STRING(PyList_GET_ITEM(w.chunks, 0));
            for (int i = 3; i >= 0; i--, size >>= 8) first[i] = (unsigned char)(size & 0xFF);
            result = Py_NewRef(w.chunks);
        }
    }
    if (rc == -2) result = Py_NewRef(Py_None);
    PyMem_Free(w.head.data);
    Py_DECREF(w.chunks);
    return result;
}

static PyMethodDef methods[] = {
    {"encode", (PyCFunction)(void (*)(void))encode, METH_FASTCALL,
     "encode(body, version, correlation_id) -> list of chunks, or None: the Python encoder's"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module_def = {PyModuleDef_HEAD_INIT, "_fetch_write", NULL, 0, methods};

PyMODINIT_FUNC PyInit__fetch_write(void) {
    NAMES(INTERN)
    return PyModule_Create(&module_def);
}
