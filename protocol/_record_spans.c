/* Where each record of a batch's record section lies, and what the log cleaner asks of it, in one call
 * per batch: the compiled twin of protocol/record_format.py's record_spans_in_python, which tests hold
 * it equal to.
 *
 * spans(body, count) walks `count` records of `body` (an uncompressed record section) and returns a list
 * with one tuple per record: (start, end, offset_delta, timestamp_delta, key, value_is_null), `start` and
 * `end` bounding the record's bytes (its length varint included), `key` bytes or None. Nothing else is
 * copied. On any malformed record (a varint too long or out of range, a field past its record, a
 * negative header count, a null or non-UTF-8 header key, fields not adding up to the record's length,
 * bytes left over) it returns None and the caller runs the Python walk, which words the error.
 *
 * A record (all varints zigzag-encoded; varint: at most 5 bytes, int32; varlong: at most 10, int64):
 *   length varint, attributes int8, timestamp_delta varlong, offset_delta varint,
 *   key_length varint (-1: null), key, value_length varint (-1: null), value,
 *   header_count varint, then per header: key_length varint, key (UTF-8), value_length varint, value.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

#define DIGEST_BYTES 16

typedef struct {
    const uint8_t *p, *end;
} Cursor;

/* A zigzag varint of at most `max_bytes` bytes whose raw value stays below 2^(`bits`). */
static int read_var(Cursor *c, int max_bytes, int bits, int64_t *out) {
    uint64_t raw = 0;
    for (int i = 0; i < max_bytes && c->p < c->end; i++) {
        uint8_t byte = *c->p++;
        int shift = 7 * i;
        uint64_t part = (uint64_t)(byte & 0x7f);
        if (shift + 7 > bits && (part >> (bits - shift)) != 0) return -1; /* out of range */
        raw |= part << shift;
        if (!(byte & 0x80)) {
            *out = (int64_t)(raw >> 1) ^ -(int64_t)(raw & 1);
            return 0;
        }
    }
    return -1;
}

/* A length-prefixed field inside the record ending at `record_end`: -1 (null) or 0..remaining bytes. */
static int read_field(Cursor *c, const uint8_t *record_end, const uint8_t **start, int64_t *len) {
    if (read_var(c, 5, 32, len)) return -1;
    if (*len < -1 || (*len >= 0 && *len > record_end - c->p)) return -1;
    *start = c->p;
    if (*len > 0) c->p += *len;
    return 0;
}

typedef struct {
    const uint8_t *start, *end, *key;
    int64_t key_len, offset_delta, timestamp_delta;
    int value_is_null;
} Span;

/* 1: the record at the cursor was read into *span; 0: malformed; -1: Python failed (exception set). */
static int read_record(Cursor *c, Span *span) {
    int64_t length, value_len, header_count;
    const uint8_t *value;
    span->start = c->p;
    if (read_var(c, 5, 32, &length) || length < 1 || length > c->end - c->p) return 0;
    const uint8_t *record_end = c->p + length;
    Cursor r = {c->p + 1, c->end}; /* + 1 skips the record attributes */
    if (read_var(&r, 10, 64, &span->timestamp_delta) || read_var(&r, 5, 32, &span->offset_delta)) return 0;
    if (read_field(&r, record_end, &span->key, &span->key_len)) return 0;
    if (read_field(&r, record_end, &value, &value_len)) return 0;
    if (read_var(&r, 5, 32, &header_count) || header_count < 0) return 0;
    for (int64_t i = 0; i < header_count; i++) {
        const uint8_t *hkey, *hvalue;
        int64_t hkey_len, hvalue_len;
        if (read_field(&r, record_end, &hkey, &hkey_len) || hkey_len < 0) return 0;
        PyObject *name = PyUnicode_DecodeUTF8((const char *)hkey, hkey_len, "strict");
        if (name == NULL) {
            if (!PyErr_ExceptionMatches(PyExc_UnicodeDecodeError)) return -1;
            PyErr_Clear();
            return 0;
        }
        Py_DECREF(name);
        if (read_field(&r, record_end, &hvalue, &hvalue_len)) return 0;
    }
    if (r.p != record_end) return 0;
    c->p = span->end = record_end;
    span->value_is_null = value_len < 0;
    return 1;
}

/* The records of a section, walked: the spans (PyMem_Free them) and their count in *count_out; NULL
 * with *malformed set, or NULL with an exception set. */
typedef struct {
    Py_buffer view;
    Span *spans;
    Py_ssize_t count;
} Walk;

static void walk_free(Walk *w) {
    PyMem_Free(w->spans);
    PyBuffer_Release(&w->view);
}

/* 1: walked; 0: malformed (nothing held); -1: Python failed (exception set, nothing held). */
static int walk(PyObject *body, PyObject *count_object, Walk *w) {
    w->spans = NULL;
    w->count = PyLong_AsSsize_t(count_object);
    if (w->count == -1 && PyErr_Occurred()) return -1;
    if (PyObject_GetBuffer(body, &w->view, PyBUF_SIMPLE) < 0) return -1;
    const uint8_t *base = w->view.buf;
    Cursor c = {base, base + w->view.len};
    /* every record takes two bytes at least */
    if (w->count < 0 || w->count > w->view.len) goto malformed;
    w->spans = PyMem_Malloc(sizeof(Span) * (w->count ? w->count : 1));
    if (w->spans == NULL) {
        PyErr_NoMemory();
        walk_free(w);
        return -1;
    }
    for (Py_ssize_t i = 0; i < w->count; i++) {
        int read = read_record(&c, &w->spans[i]);
        if (read < 0) {
            walk_free(w);
            return -1;
        }
        if (read == 0) goto malformed;
    }
    if (c.p != c.end) goto malformed;
    return 1;
malformed:
    walk_free(w);
    return 0;
}

static PyObject *spans(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "spans(body, count)");
        return NULL;
    }
    Walk w;
    int walked = walk(args[0], args[1], &w);
    if (walked < 0) return NULL;
    if (walked == 0) Py_RETURN_NONE;
    const uint8_t *base = w.view.buf;
    PyObject *out = PyList_New(w.count);
    if (out == NULL) goto fail;
    for (Py_ssize_t i = 0; i < w.count; i++) {
        Span *s = &w.spans[i];
        PyObject *key = s->key_len < 0 ? Py_NewRef(Py_None)
                                       : PyBytes_FromStringAndSize((const char *)s->key, s->key_len);
        if (key == NULL) goto fail;
        PyObject *tuple = Py_BuildValue("(nnLLNO)", (Py_ssize_t)(s->start - base), (Py_ssize_t)(s->end - base),
                                        (long long)s->offset_delta, (long long)s->timestamp_delta, key,
                                        s->value_is_null ? Py_True : Py_False);
        if (tuple == NULL) goto fail;
        PyList_SET_ITEM(out, i, tuple);
    }
    walk_free(&w);
    return out;
fail:
    Py_XDECREF(out);
    walk_free(&w);
    return NULL;
}

/* What the key map holds for a record's key (broker/log/offset_map.py's map_key): the key itself when
 * shorter than a digest, else digest(key). New reference, or NULL with an exception set. */
static PyObject *map_key(const Span *s, PyObject *digest) {
    PyObject *key = PyBytes_FromStringAndSize((const char *)s->key, s->key_len);
    if (key == NULL || s->key_len < DIGEST_BYTES) return key;
    PyObject *hashed = PyObject_CallOneArg(digest, key);
    Py_DECREF(key);
    return hashed;
}

/* map_keys(body, count, base_offset, start, offsets, capacity, digest): put each keyed record at or
 * past `start` in the dict `offsets` (map key -> offset), stopping before a put when it holds
 * `capacity` keys. (highest offset put or -1, stopped full), or None when a record is malformed (then
 * nothing was put). */
static PyObject *map_keys(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 7 || !PyDict_Check(args[4])) {
        PyErr_SetString(PyExc_TypeError, "map_keys(body, count, base_offset, start, offsets: dict, capacity, digest)");
        return NULL;
    }
    long long base_offset = PyLong_AsLongLong(args[2]), start = PyLong_AsLongLong(args[3]);
    Py_ssize_t capacity = PyLong_AsSsize_t(args[5]);
    if (PyErr_Occurred()) return NULL;
    PyObject *offsets = args[4], *digest = args[6];
    Walk w;
    int walked = walk(args[0], args[1], &w);
    if (walked < 0) return NULL;
    if (walked == 0) Py_RETURN_NONE;
    long long last = -1;
    int full = 0;
    for (Py_ssize_t i = 0; i < w.count; i++) {
        Span *s = &w.spans[i];
        long long offset = base_offset + s->offset_delta;
        if (s->key_len < 0 || offset < start) continue;
        if (PyDict_GET_SIZE(offsets) >= capacity) {
            full = 1;
            break;
        }
        PyObject *key = map_key(s, digest);
        if (key == NULL) goto fail;
        PyObject *value = PyLong_FromLongLong(offset);
        if (value == NULL) {
            Py_DECREF(key);
            goto fail;
        }
        int set = PyDict_SetItem(offsets, key, value);
        Py_DECREF(key);
        Py_DECREF(value);
        if (set < 0) goto fail;
        if (offset > last) last = offset;  /* the highest, as KeyOffsetMap.put keeps it */
    }
    walk_free(&w);
    return Py_BuildValue("(LO)", last, full ? Py_True : Py_False);
fail:
    walk_free(&w);
    return NULL;
}

/* retain(body, count, base_offset, offsets, latest_offset, tombstones_stay, digest): which records a
 * cleaned batch keeps (the cleaner's shouldRetainRecord): past `latest_offset` (not mapped) every
 * record; a keyless one never; else a record at or past its key's offset in `offsets`, and a tombstone
 * only while `tombstones_stay`. (kept, keyless dropped, a tombstone kept, the kept records' largest
 * timestamp delta or None, their bytes back to back — None unless some but not all are kept), or None
 * when a record is malformed. */
static PyObject *retain(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 7 || !PyDict_Check(args[3])) {
        PyErr_SetString(PyExc_TypeError,
                        "retain(body, count, base_offset, offsets: dict, latest_offset, tombstones_stay, digest)");
        return NULL;
    }
    long long base_offset = PyLong_AsLongLong(args[2]), latest = PyLong_AsLongLong(args[4]);
    if (PyErr_Occurred()) return NULL;
    int tombstones_stay = PyObject_IsTrue(args[5]);
    if (tombstones_stay < 0) return NULL;
    PyObject *offsets = args[3], *digest = args[6];
    Walk w;
    int walked = walk(args[0], args[1], &w);
    if (walked < 0) return NULL;
    if (walked == 0) Py_RETURN_NONE;
    char *keep = PyMem_Malloc(w.count ? w.count : 1);
    if (keep == NULL) {
        PyErr_NoMemory();
        goto fail;
    }
    Py_ssize_t kept = 0, keyless = 0, kept_bytes = 0;
    int tombstone = 0, any = 0;
    long long max_delta = 0;
    for (Py_ssize_t i = 0; i < w.count; i++) {
        Span *s = &w.spans[i];
        long long offset = base_offset + s->offset_delta;
        keep[i] = 0;
        if (offset > latest) {
            keep[i] = 1;
        } else if (s->key_len < 0) {
            keyless++;
        } else if (!s->value_is_null || tombstones_stay) {
            PyObject *key = map_key(s, digest);
            if (key == NULL) goto fail;
            PyObject *mapped = PyDict_GetItemWithError(offsets, key); /* borrowed */
            Py_DECREF(key);
            if (mapped == NULL && PyErr_Occurred()) goto fail;
            long long mapped_offset = -1;
            if (mapped != NULL) {
                mapped_offset = PyLong_AsLongLong(mapped);
                if (mapped_offset == -1 && PyErr_Occurred()) goto fail;
            }
            keep[i] = offset >= mapped_offset;
        }
        if (keep[i]) {
            kept++;
            kept_bytes += s->end - s->start;
            tombstone |= s->value_is_null;
            if (!any || s->timestamp_delta > max_delta) max_delta = s->timestamp_delta;
            any = 1;
        }
    }
    PyObject *section = Py_NewRef(Py_None);
    if (kept > 0 && kept < w.count) {
        Py_DECREF(section);
        section = PyBytes_FromStringAndSize(NULL, kept_bytes);
        if (section == NULL) goto fail;
        char *out = PyBytes_AS_STRING(section);
        for (Py_ssize_t i = 0; i < w.count; i++) {
            if (!keep[i]) continue;
            memcpy(out, w.spans[i].start, w.spans[i].end - w.spans[i].start);
            out += w.spans[i].end - w.spans[i].start;
        }
    }
    PyObject *max_object = any ? PyLong_FromLongLong(max_delta) : Py_NewRef(Py_None);
    if (max_object == NULL) {
        Py_DECREF(section);
        goto fail;
    }
    PyMem_Free(keep);
    walk_free(&w);
    return Py_BuildValue("(nnONN)", kept, keyless, tombstone ? Py_True : Py_False, max_object, section);
fail:
    PyMem_Free(keep);
    walk_free(&w);
    return NULL;
}

static PyMethodDef methods[] = {
    {"spans", (PyCFunction)(void (*)(void))spans, METH_FASTCALL,
     "spans(body, count): (start, end, offset_delta, timestamp_delta, key, value_is_null) per record, "
     "or None when a record is malformed."},
    {"map_keys", (PyCFunction)(void (*)(void))map_keys, METH_FASTCALL, "See the comment above map_keys."},
    {"retain", (PyCFunction)(void (*)(void))retain, METH_FASTCALL, "See the comment above retain."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_record_spans", NULL, -1, methods};

PyMODINIT_FUNC PyInit__record_spans(void) { return PyModule_Create(&module); }
