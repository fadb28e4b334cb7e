/* Kafka records (magic 2, already decompressed) to Arrow column buffers, for the Spark reader.
 *
 * pipeline/record_columns.py walks the batches of a fetch in Python (framing, CRC, decompression: a
 * few calls per batch) and hands this module each batch's record section; the per-record work,
 * where Python costs microseconds a record, happens here. The result is plain buffers in Arrow's
 * layout (little-endian values, int32 offsets, LSB-first validity bitmaps) that pyarrow wraps
 * without copying again.
 *
 * A record, inside its batch (all varints zigzag-encoded, as Kafka writes them):
 *   length varint, attributes int8, timestampDelta varlong, offsetDelta varint,
 *   keyLength varint (-1: null), key, valueLength varint (-1: null), value,
 *   headerCount varint, then per header: keyLength varint, key (UTF-8), valueLength varint (-1: null), value.
 * Anything that does not fit that layout raises ValueError naming the record; the caller hands the
 * range to the careful reader, which reports it as Kafka's CORRUPT_MESSAGE.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

#if PY_BIG_ENDIAN
#error "Arrow buffers are little-endian; this decoder writes host-order integers"
#endif

/* A growing buffer that is a bytes object all along, so handing it to Python is a resize, not a copy
 * (a fetch's columns are megabytes: a copy, and the page faults of fresh memory, cost as much as the
 * decoding). */
typedef struct {
    PyObject *obj;
    char *data;
    Py_ssize_t len, cap;
} Buf;

static int buf_resize(Buf *b, Py_ssize_t cap) {
    if (b->obj == NULL) {
        b->obj = PyBytes_FromStringAndSize(NULL, cap);
        if (b->obj == NULL) return -1;
    } else if (_PyBytes_Resize(&b->obj, cap) < 0) { /* frees the object and sets it NULL */
        b->data = NULL;
        b->len = b->cap = 0;
        return -1;
    }
    b->data = PyBytes_AS_STRING(b->obj);
    b->cap = cap;
    return 0;
}

static int buf_put(Buf *b, const void *src, Py_ssize_t n) {
    if (b->len + n > b->cap) {
        Py_ssize_t cap = b->cap ? b->cap : 4096;
        while (cap < b->len + n) cap *= 2;
        if (buf_resize(b, cap)) return -1;
    }
    if (n) memcpy(b->data + b->len, src, n);
    b->len += n;
    return 0;
}

static int buf_reserve(Buf *b, Py_ssize_t cap) { return cap > b->cap ? buf_resize(b, cap) : 0; }

static int put_i64(Buf *b, int64_t v) { return buf_put(b, &v, 8); }
static int put_i32(Buf *b, int32_t v) { return buf_put(b, &v, 4); }

/* The bytes written, as a bytes object the caller owns; `b` is empty afterwards. */
static PyObject *buf_bytes(Buf *b) {
    if (b->obj == NULL) return PyBytes_FromStringAndSize("", 0);
    PyObject *out = b->obj;
    b->obj = NULL;
    b->data = NULL;
    b->cap = 0;
    if (_PyBytes_Resize(&out, b->len) < 0) return NULL;
    return out;
}

static void buf_free(Buf *b) { Py_CLEAR(b->obj); }

/* A validity bitmap: bit i set when value i is present. */
typedef struct {
    Buf bytes;
    Py_ssize_t count, nulls;
} Bits;

static int bits_put(Bits *b, int present) {
    if (b->count % 8 == 0) {
        uint8_t zero = 0;
        if (buf_put(&b->bytes, &zero, 1)) return -1;
    }
    if (present)
        b->bytes.data[b->count / 8] |= (char)(1 << (b->count % 8));
    else
        b->nulls++;
    b->count++;
    return 0;
}

/* A binary (or UTF-8 string) column: validity, int32 offsets starting at 0, the bytes. */
typedef struct {
    Bits valid;
    Buf offsets, data;
} Column;

static int column_start(Column *c) {
    memset(c, 0, sizeof *c);
    return put_i32(&c->offsets, 0);
}

static int column_put(Column *c, const uint8_t *p, int64_t len) {
    if (bits_put(&c->valid, len >= 0)) return -1;
    if (len > 0 && buf_put(&c->data, p, len)) return -1;
    if (c->data.len > INT32_MAX) {
        PyErr_SetString(PyExc_OverflowError, "more than 2 GiB of bytes in one column chunk");
        return -1;
    }
    return put_i32(&c->offsets, (int32_t)c->data.len);
}

static void column_free(Column *c) {
    buf_free(&c->valid.bytes);
    buf_free(&c->offsets);
    buf_free(&c->data);
}

/* Room for `rows` more values and `bytes` more data. */
static int column_reserve(Column *c, Py_ssize_t rows, Py_ssize_t bytes) {
    return buf_reserve(&c->valid.bytes, rows / 8 + 1) || buf_reserve(&c->offsets, 4 * (rows + 1))
           || buf_reserve(&c->data, bytes);
}

/* (null count, validity bitmap or None when nothing is null, offsets, data) */
static PyObject *column_tuple(Column *c) {
    PyObject *valid;
    if (c->valid.nulls) {
        valid = buf_bytes(&c->valid.bytes);
        if (valid == NULL) return NULL;
    } else {
        valid = Py_NewRef(Py_None);
    }
    return Py_BuildValue("nNNN", c->valid.nulls, valid, buf_bytes(&c->offsets), buf_bytes(&c->data));
}

typedef struct {
    const uint8_t *p, *end;
} Cursor;

/* A zigzag varint of at most `max_bytes` bytes (5 for Kafka's varint, 10 for its varlong). */
static int read_var(Cursor *c, int max_bytes, int64_t *out) {
    uint64_t raw = 0;
    for (int i = 0; i < max_bytes && c->p < c->end; i++) {
        uint8_t byte = *c->p++;
        raw |= (uint64_t)(byte & 0x7f) << (7 * i);
        if (!(byte & 0x80)) {
            *out = (int64_t)(raw >> 1) ^ -(int64_t)(raw & 1);
            return 0;
        }
    }
    return -1;
}

/* A length-prefixed field inside a record: -1 (null) or 0..remaining bytes. */
static int read_field(Cursor *c, const uint8_t **start, int64_t *len, int nullable) {
    if (read_var(c, 5, len)) return -1;
    if (*len < (nullable ? -1 : 0) || *len > c->end - c->p) return -1;
    *start = c->p;
    if (*len > 0) c->p += *len;
    return 0;
}

typedef struct {
    Buf offsets, timestamps, types;
    Column keys, values;
    Buf header_lists; /* int32 offsets into the header columns, one per record plus the first 0 */
    Column header_keys, header_values;
    Py_ssize_t rows, headers;
} Out;

static void out_free(Out *o) {
    buf_free(&o->offsets);
    buf_free(&o->timestamps);
    buf_free(&o->types);
    buf_free(&o->header_lists);
    column_free(&o->keys);
    column_free(&o->values);
    column_free(&o->header_keys);
    column_free(&o->header_values);
}

static PyObject *malformed(long long base_offset, Py_ssize_t index, const char *what) {
    PyErr_Format(PyExc_ValueError, "record %zd of the batch at offset %lld: %s", index, base_offset, what);
    return NULL;
}

/* Decode one batch's records into `o`; NULL with an exception set on malformed data. */
static PyObject *decode_batch(Out *o, Py_buffer *section, long long count, long long base_offset,
                              long long base_timestamp, int log_append_time, long long max_timestamp,
                              long long lo, long long hi, int with_headers) {
    Cursor c = {section->buf, (const uint8_t *)section->buf + section->len};
    int32_t type = log_append_time ? 1 : 0;
    for (Py_ssize_t i = 0; i < count; i++) {
        int64_t length, timestamp_delta, offset_delta, header_count, key_len, value_len;
        const uint8_t *key, *value;
        if (read_var(&c, 5, &length) || length < 1 || length > c.end - c.p)
            return malformed(base_offset, i, "its length runs past the batch");
        Cursor r = {c.p, c.p + length};
        c.p += length;
        r.p++; /* attributes: unused by magic 2 */
        if (read_var(&r, 10, &timestamp_delta) || read_var(&r, 5, &offset_delta))
            return malformed(base_offset, i, "bad timestamp or offset delta");
        if (read_field(&r, &key, &key_len, 1) || read_field(&r, &value, &value_len, 1))
            return malformed(base_offset, i, "its key or value runs past the record");
        if (read_var(&r, 5, &header_count) || header_count < 0)
            return malformed(base_offset, i, "bad header count");
        long long offset = base_offset + offset_delta;
        if (offset < lo || offset >= hi) continue;
        int64_t stamp = log_append_time ? max_timestamp : base_timestamp + timestamp_delta;
        if (stamp > INT64_MAX / 1000 || stamp < INT64_MIN / 1000)
            return malformed(base_offset, i, "its timestamp is out of range");
        if (put_i64(&o->offsets, offset) || put_i64(&o->timestamps, stamp * 1000) || put_i32(&o->types, type) ||
            column_put(&o->keys, key, key_len) || column_put(&o->values, value, value_len))
            return NULL;
        if (with_headers) {
            for (int64_t h = 0; h < header_count; h++) {
                const uint8_t *hkey, *hvalue;
                int64_t hkey_len, hvalue_len;
                if (read_field(&r, &hkey, &hkey_len, 0) || read_field(&r, &hvalue, &hvalue_len, 1))
                    return malformed(base_offset, i, "a header runs past the record");
                if (column_put(&o->header_keys, hkey, hkey_len) || column_put(&o->header_values, hvalue, hvalue_len))
                    return NULL;
                o->headers++;
            }
            if (o->headers > INT32_MAX) {
                PyErr_SetString(PyExc_OverflowError, "too many headers in one column chunk");
                return NULL;
            }
            if (put_i32(&o->header_lists, (int32_t)o->headers)) return NULL;
        }
        if ((with_headers || header_count == 0) && r.p != r.end) /* headers not asked for are not read */
            return malformed(base_offset, i, "its fields do not add up to its length");
        o->rows++;
    }
    if (c.p != c.end) return malformed(base_offset, count, "bytes left after the declared record count");
    Py_RETURN_NONE;
}

PyDoc_STRVAR(decode_doc,
"decode(sections, lo, hi, with_headers) -> tuple\n\n"
"sections: (record bytes, count, base_offset, base_timestamp, log_append_time, max_timestamp) per batch.\n"
"Records with lo <= offset < hi become rows. Returns (rows, offsets int64, timestamps int64 in\n"
"microseconds, timestamp types int32, key column, value column, headers or None), a column being\n"
"(null count, validity or None, int32 offsets, data) and headers (list offsets, key column, value column).");

static PyObject *decode(PyObject *module, PyObject *args) {
    PyObject *sections;
    long long lo, hi;
    int with_headers;
    if (!PyArg_ParseTuple(args, "OLLp", &sections, &lo, &hi, &with_headers)) return NULL;
    PyObject *seq = PySequence_Fast(sections, "sections must be a sequence");
    if (seq == NULL) return NULL;
    Out o;
    memset(&o, 0, sizeof o);
    PyObject *result = NULL;
    if (column_start(&o.keys) || column_start(&o.values) || column_start(&o.header_keys) ||
        column_start(&o.header_values) || put_i32(&o.header_lists, 0))
        goto done;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    /* Sized once from the sections: at most len/7 records each (the smallest record is 7 bytes), so a
     * damaged count cannot ask for more; whatever does not fit still grows the buffers. */
    Py_ssize_t most_rows = 0, most_bytes = 0;
    for (Py_ssize_t b = 0; b < n; b++) {
        PyObject *item = PySequence_Fast_GET_ITEM(seq, b);
        if (!PyTuple_Check(item) || PyTuple_GET_SIZE(item) < 2) continue; /* refused below */
        Py_ssize_t len = PyObject_Length(PyTuple_GET_ITEM(item, 0));
        long long count = PyLong_AsLongLong(PyTuple_GET_ITEM(item, 1));
        if (len < 0 || (count == -1 && PyErr_Occurred())) {
            PyErr_Clear();
            continue;
        }
        most_rows += count < len / 7 ? (count > 0 ? (Py_ssize_t)count : 0) : len / 7;
        most_bytes += len;
    }
    if (buf_reserve(&o.offsets, 8 * most_rows) || buf_reserve(&o.timestamps, 8 * most_rows) ||
        buf_reserve(&o.types, 4 * most_rows) || column_reserve(&o.keys, most_rows, most_bytes) ||
        column_reserve(&o.values, most_rows, most_bytes))
        goto done;
    for (Py_ssize_t b = 0; b < n; b++) {
        Py_buffer section;
        long long count, base_offset, base_timestamp, max_timestamp;
        int log_append_time;
        if (!PyArg_ParseTuple(PySequence_Fast_GET_ITEM(seq, b), "y*LLLpL;a section is (bytes, count, base_offset, "
                              "base_timestamp, log_append_time, max_timestamp)", &section, &count, &base_offset,
                              &base_timestamp, &log_append_time, &max_timestamp))
            goto done;
        PyObject *ok = decode_batch(&o, &section, count, base_offset, base_timestamp, log_append_time,
                                    max_timestamp, lo, hi, with_headers);
        PyBuffer_Release(&section);
        if (ok == NULL) goto done;
        Py_DECREF(ok);
    }
    PyObject *headers;
    if (with_headers) {
        headers = Py_BuildValue("NNN", buf_bytes(&o.header_lists), column_tuple(&o.header_keys),
                                column_tuple(&o.header_values));
    } else {
        headers = Py_NewRef(Py_None);
    }
    if (headers == NULL) goto done;
    result = Py_BuildValue("nNNNNNN", o.rows, buf_bytes(&o.offsets), buf_bytes(&o.timestamps), buf_bytes(&o.types),
                           column_tuple(&o.keys), column_tuple(&o.values), headers);
done:
    out_free(&o);
    Py_DECREF(seq);
    return result;
}

static PyMethodDef methods[] = {
    {"decode", decode, METH_VARARGS, decode_doc},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_recordcols", "Kafka records to Arrow column buffers (see pipeline/record_columns.py).",
    -1, methods,
};

PyMODINIT_FUNC PyInit__recordcols(void) { return PyModule_Create(&module); }
