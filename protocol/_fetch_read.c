/* A consumer's Fetch request in, in one call: the compiled twin of protocol/fetch_request.py's `_decode`,
 * which tests hold it equal to (tests/protocol/test_fetch_codec.py) and which runs alone where this is
 * not built. Its other half, the answer's headers out, is protocol/_fetch_write.c.
 *
 * decode(frame) builds the same Request[FetchRequest] as `_decode`, for the same frames: versions 4-16,
 * no tagged field anywhere, short strings and arrays. Anything else gives None, and the Python decoder
 * (then the generic codec) reads the frame and words any error, so errors are worded in one place.
 *
 * configure(...) hands over, once, the classes and shared defaults the Python decoder uses.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>

#include "_request_objects.h"

/* Set by configure(). */
static PyObject *REQUEST, *HEADER, *BODY, *REPLICA_STATE, *TOPIC, *PARTITION, *FORGOTTEN;
static PyObject *NO_DIRECTORY, *NO_HIGH_WATERMARK, *UUID_OF, *IDS;
static PyObject *EMPTY_STR, *MINUS_ONE;
static int configured = 0;

/* Attribute names, interned once. */
#define NAMES(X) X(request_api_key) X(request_api_version) X(correlation_id) X(client_id) X(replica_id) \
    X(replica_epoch) X(replica_state) X(max_wait_ms) X(min_bytes) X(max_bytes) X(isolation_level) \
    X(session_id) X(session_epoch) X(cluster_id) X(topics) X(forgotten_topics_data) X(rack_id) X(topic) \
    X(topic_id) X(partitions) X(partition) X(current_leader_epoch) X(fetch_offset) X(last_fetched_epoch) \
    X(log_start_offset) X(partition_max_bytes) X(replica_directory_id) X(high_watermark)
#define DECLARE(name) static PyObject *S_##name;
NAMES(DECLARE)

/* ---- decode ------------------------------------------------------------------------------------ */

/* The readers give 0 on success, -1 where the bytes do not fit the common layout. */
static int need(Cursor *c, Py_ssize_t n) { return c->end - c->pos < n ? -1 : 0; }

static int64_t be(const unsigned char *p, int n) {
    uint64_t v = 0;
    for (int i = 0; i < n; i++) v = v << 8 | p[i];
    if (n < 8 && (v >> (8 * n - 1)) & 1) v |= ~(uint64_t)0 << (8 * n);  /* sign-extend */
    return (int64_t)v;
}

static int fixed(Cursor *c, int n, int64_t *out) {
    if (need(c, n)) return -1;
    *out = be(c->data + c->pos, n);
    c->pos += n;
    return 0;
}

/* An empty tagged-field section; any tagged field leaves the frame to Python. */
static int no_tags(Cursor *c) {
    if (need(c, 1) || c->data[c->pos] != 0) return -1;
    c->pos += 1;
    return 0;
}

/* An array's length as fetch_request._count reads it: not null, under 127 when compact. */
static int count(Cursor *c, int compact, int64_t *out) {
    if (compact) {
        if (need(c, 1)) return -1;
        int64_t n = (int64_t)c->data[c->pos] - 1;
        if (n > 126 || n < 0) return -1;
        c->pos += 1;
        *out = n;
        return 0;
    }
    if (fixed(c, 4, out) || *out < 0) return -1;
    return 0;
}

/* A non-null string as fetch_request._string reads it; NULL and no error when it does not fit. */
static PyObject *string(Cursor *c, int compact) {
    int64_t n;
    if (compact) {
        if (need(c, 1)) return NULL;
        n = (int64_t)c->data[c->pos] - 1;
        if (n > 126) return NULL;
        c->pos += 1;
    } else if (fixed(c, 2, &n)) {
        return NULL;
    }
    if (n < 0 || need(c, (Py_ssize_t)n)) return NULL;
    PyObject *text = PyUnicode_DecodeUTF8((const char *)c->data + c->pos, (Py_ssize_t)n, NULL);
    if (text == NULL) PyErr_Clear();  /* not UTF-8: Python words it */
    c->pos += (Py_ssize_t)n;
    return text;
}

static PyObject *topic_id(Cursor *c) {
    if (need(c, 16)) return NULL;
    PyObject *raw = PyBytes_FromStringAndSize((const char *)c->data + c->pos, 16);
    if (raw == NULL) return NULL;
    c->pos += 16;
    PyObject *found = PyDict_GetItemWithError(IDS, raw);  /* borrowed */
    if (found != NULL) {
        Py_DECREF(raw);
        return Py_NewRef(found);
    }
    found = PyErr_Occurred() ? NULL : PyObject_CallOneArg(UUID_OF, raw);
    Py_DECREF(raw);
    return found;
}

#define LONG(v) PyLong_FromLongLong(v)
/* Python failed (memory): NULL out with its error. The bytes did not fit: None out. */
#define UNFIT(c) do { if (!PyErr_Occurred()) { result = Py_NewRef(Py_None); } goto done; } while (0)

static PyObject *read_topics(Cursor *c, int version, int flexible, int forgotten) {
    int64_t n;
    if (count(c, flexible, &n)) return Py_NewRef(Py_None);
    if (n > (c->end - c->pos) / 2 + 1) return Py_NewRef(Py_None);  /* more than the frame could hold */
    PyObject *topics = PyList_New((Py_ssize_t)n), *result = NULL;
    if (topics == NULL) return NULL;
    for (Py_ssize_t i = 0; i < (Py_ssize_t)n; i++) {
        PyObject *topic = blank(forgotten ? FORGOTTEN : TOPIC);
        if (topic == NULL) goto done;
        PyList_SET_ITEM(topics, i, topic);
        if (version >= 13) {
            if (put(topic, S_topic, Py_NewRef(EMPTY_STR)) || put(topic, S_topic_id, topic_id(c))) UNFIT(c);
        } else if (put(topic, S_topic, string(c, flexible)) || put(topic, S_topic_id, Py_NewRef(NO_DIRECTORY))) {
            UNFIT(c);
        }
        int64_t m;
        if (count(c, flexible, &m)) UNFIT(c);
        if (forgotten) {
            if (need(c, (Py_ssize_t)(4 * m))) UNFIT(c);
            PyObject *ids = PyList_New((Py_ssize_t)m);
            if (ids == NULL) goto done;
            for (Py_ssize_t j = 0; j < (Py_ssize_t)m; j++) {
                int64_t v;
                fixed(c, 4, &v);
                PyObject *value = LONG(v);
                if (value == NULL) {
                    Py_DECREF(ids);
                    goto done;
                }
                PyList_SET_ITEM(ids, j, value);
            }
            if (put(topic, S_partitions, ids)) goto done;
        } else {
            int size = 4 + (version >= 9 ? 4 : 0) + 8 + (version >= 12 ? 4 : 0) + (version >= 5 ? 8 : 0) + 4;
            if (m > (c->end - c->pos) / size + 1) UNFIT(c);
            PyObject *parts = PyList_New((Py_ssize_t)m);
            if (parts == NULL || put(topic, S_partitions, Py_NewRef(parts))) {
                Py_XDECREF(parts);
                goto done;
            }
            for (Py_ssize_t j = 0; j < (Py_ssize_t)m; j++) {
                int64_t index, leader_epoch = -1, offset, last_epoch = -1, start = -1, max_bytes;
                if (fixed(c, 4, &index) || (version >= 9 && fixed(c, 4, &leader_epoch)) || fixed(c, 8, &offset)
                    || (version >= 12 && fixed(c, 4, &last_epoch)) || (version >= 5 && fixed(c, 8, &start))
                    || fixed(c, 4, &max_bytes) || (flexible && no_tags(c))) {
                    Py_DECREF(parts);
                    UNFIT(c);
                }
                PyObject *p = blank(PARTITION);
                if (p == NULL) {
                    Py_DECREF(parts);
                    goto done;
                }
                PyList_SET_ITEM(parts, j, p);
                if (put(p, S_partition, LONG(index)) || put(p, S_current_leader_epoch, LONG(leader_epoch))
                    || put(p, S_fetch_offset, LONG(offset)) || put(p, S_last_fetched_epoch, LONG(last_epoch))
                    || put(p, S_log_start_offset, LONG(start)) || put(p, S_partition_max_bytes, LONG(max_bytes))
                    || put(p, S_replica_directory_id, Py_NewRef(NO_DIRECTORY))
                    || put(p, S_high_watermark, Py_NewRef(NO_HIGH_WATERMARK))) {
                    Py_DECREF(parts);
                    goto done;
                }
            }
            Py_DECREF(parts);
        }
        if (flexible && no_tags(c)) UNFIT(c);
    }
    result = Py_NewRef(topics);
done:
    Py_DECREF(topics);
    return result;
}

static PyObject *decode_frame(Cursor *c) {
    PyObject *result = NULL, *header = NULL, *body = NULL, *topics = NULL, *forgotten = NULL, *state = NULL;
    int64_t key, version, correlation, n;
    if (fixed(c, 2, &key) || fixed(c, 2, &version) || fixed(c, 4, &correlation) || fixed(c, 2, &n)) UNFIT(c);
    if (key != 1 || version < 4 || version > 16 || n < -1) UNFIT(c);
    int flexible = version >= 12;
    PyObject *client_id;
    if (n < 0) {
        client_id = Py_NewRef(EMPTY_STR);
    } else {
        if (need(c, (Py_ssize_t)n)) UNFIT(c);
        client_id = PyUnicode_DecodeUTF8((const char *)c->data + c->pos, (Py_ssize_t)n, NULL);
        if (client_id == NULL) {
            PyErr_Clear();
            UNFIT(c);
        }
        c->pos += (Py_ssize_t)n;
    }
    header = blank(HEADER);
    if (header == NULL) {
        Py_DECREF(client_id);
        goto done;
    }
    if (put(header, S_client_id, client_id) || put(header, S_request_api_key, LONG(key))
        || put(header, S_request_api_version, LONG(version)) || put(header, S_correlation_id, LONG(correlation)))
        goto done;
    if (flexible && no_tags(c)) UNFIT(c);

    int64_t replica = -1, max_wait, min_bytes, max_bytes, isolation, session_id = 0, session_epoch = -1;
    if ((version < 15 && fixed(c, 4, &replica)) || fixed(c, 4, &max_wait) || fixed(c, 4, &min_bytes)
        || fixed(c, 4, &max_bytes) || fixed(c, 1, &isolation)
        || (version >= 7 && (fixed(c, 4, &session_id) || fixed(c, 4, &session_epoch))))
        UNFIT(c);
    topics = read_topics(c, (int)version, flexible, 0);
    if (topics == NULL || topics == Py_None) {
        result = topics;
        topics = NULL;
        goto done;
    }
    if (version >= 7) {
        forgotten = read_topics(c, (int)version, flexible, 1);
        if (forgotten == NULL || forgotten == Py_None) {
            result = forgotten;
            forgotten = NULL;
            goto done;
        }
    } else if ((forgotten = PyList_New(0)) == NULL) {
        goto done;
    }
    PyObject *rack;
    if (version >= 11) {
        rack = string(c, flexible);
        if (rack == NULL) UNFIT(c);
    } else {
        rack = Py_NewRef(EMPTY_STR);
    }
    if (flexible && no_tags(c)) {
        Py_DECREF(rack);
        UNFIT(c);
    }
    body = blank(BODY);
    state = blank(REPLICA_STATE);
    if (body == NULL || state == NULL) {
        Py_DECREF(rack);
        goto done;
    }
    if (put(body, S_rack_id, rack)
        || put(state, S_replica_id, Py_NewRef(MINUS_ONE)) || put(state, S_replica_epoch, Py_NewRef(MINUS_ONE))
        || put(body, S_replica_id, LONG(replica)) || put(body, S_replica_state, Py_NewRef(state))
        || put(body, S_max_wait_ms, LONG(max_wait)) || put(body, S_min_bytes, LONG(min_bytes))
        || put(body, S_max_bytes, LONG(max_bytes)) || put(body, S_isolation_level, LONG(isolation))
        || put(body, S_session_id, LONG(session_id)) || put(body, S_session_epoch, LONG(session_epoch))
        || put(body, S_cluster_id, Py_NewRef(Py_None)) || put(body, S_topics, Py_NewRef(topics))
        || put(body, S_forgotten_topics_data, Py_NewRef(forgotten)))
        goto done;
    result = request_of(REQUEST, header, key, version, correlation, body);
done:
    Py_XDECREF(header);
    Py_XDECREF(body);
    Py_XDECREF(state);
    Py_XDECREF(topics);
    Py_XDECREF(forgotten);
    return result;
}

static PyObject *decode(PyObject *module, PyObject *frame) {
    if (!configured) {
        PyErr_SetString(PyExc_RuntimeError, "_fetch_read.configure() was not called");
        return NULL;
    }
    Py_buffer buffer;
    if (PyObject_GetBuffer(frame, &buffer, PyBUF_SIMPLE) < 0) return NULL;
    Cursor c = {buffer.buf, 0, buffer.len};
    PyObject *result = decode_frame(&c);
    PyBuffer_Release(&buffer);
    return result;
}

/* ---- configure --------------------------------------------------------------------------------- */

static PyObject *configure(PyObject *module, PyObject *args) {
    PyObject *request, *header, *body, *state, *topic, *part, *forgotten, *no_dir, *no_hw, *uuid_of, *ids;
    if (!PyArg_ParseTuple(args, "OOOOOOOOOOO!", &request, &header, &body, &state, &topic, &part, &forgotten,
                          &no_dir, &no_hw, &uuid_of, &PyDict_Type, &ids))
        return NULL;
    PyObject *classes[] = {request, header, body, state, topic, part, forgotten};
    for (int i = 0; i < 7; i++)
        if (!PyType_Check(classes[i])) {
            PyErr_SetString(PyExc_TypeError, "configure: a class expected");
            return NULL;
        }
    Py_XSETREF(REQUEST, Py_NewRef(request));
    Py_XSETREF(HEADER, Py_NewRef(header));
    Py_XSETREF(BODY, Py_NewRef(body));
    Py_XSETREF(REPLICA_STATE, Py_NewRef(state));
    Py_XSETREF(TOPIC, Py_NewRef(topic));
    Py_XSETREF(PARTITION, Py_NewRef(part));
    Py_XSETREF(FORGOTTEN, Py_NewRef(forgotten));
    Py_XSETREF(NO_DIRECTORY, Py_NewRef(no_dir));
    Py_XSETREF(NO_HIGH_WATERMARK, Py_NewRef(no_hw));
    Py_XSETREF(UUID_OF, Py_NewRef(uuid_of));
    Py_XSETREF(IDS, Py_NewRef(ids));
    configured = 1;
    Py_RETURN_NONE;
}


static PyMethodDef methods[] = {
    {"configure", configure, METH_VARARGS,
     "configure(Request, RequestHeader, FetchRequest, ReplicaState, FetchTopic, FetchPartition, ForgottenTopic, "
     "no_directory, no_high_watermark, uuid_of, ids)"},
    {"decode", decode, METH_O, "decode(frame) -> Request[FetchRequest], or None: the Python decoder's"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module_def = {PyModuleDef_HEAD_INIT, "_fetch_read", NULL, 0, methods};

PyMODINIT_FUNC PyInit__fetch_read(void) {
#define INTERN(name) if ((S_##name = PyUnicode_InternFromString(#name)) == NULL) return NULL;
    NAMES(INTERN)
    EMPTY = PyTuple_New(0);
    EMPTY_STR = PyUnicode_FromString("");
    MINUS_ONE = PyLong_FromLong(-1);
    if (EMPTY == NULL || EMPTY_STR == NULL || MINUS_ONE == NULL) return NULL;
    if (request_fields_init() < 0) return NULL;
    return PyModule_Create(&module_def);
}
