/* Arrow column buffers to Kafka record sections (magic 2, uncompressed), for the Spark writer.
 *
 * pipeline/fast_write.py hands each of Spark's Arrow record batches here as raw buffers (validity
 * bitmap, offsets, data of the value and key columns; the partition column as int64). This module
 * picks each row's partition (the partition column; else Kafka's murmur2 of the key, as the Java
 * client's default partitioner; else round-robin), appends the row as a record to that partition's
 * open section and hands back the sections that reached the batch size. protocol/records.py puts the
 * batch header (and compression, CRC) around each section: this module writes records only.
 *
 * A record (varints zigzag-encoded, as Kafka writes them):
 *   length varint, attributes int8 (0), timestampDelta varlong (0: one timestamp a batch),
 *   offsetDelta varint, keyLength varint (-1: null), key, valueLength varint (-1: null), value,
 *   headerCount varint (0).
 * The per-row loop runs without the GIL on memory of its own (malloc), so the thread that sends
 * the previous batches keeps going meanwhile. Offsets that do not fit their buffers raise ValueError.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    uint8_t *data;
    Py_ssize_t len, cap;
    int32_t count;  /* records in the section */
} Section;

typedef struct {
    int32_t partition;
    Section section;
} Done;

typedef struct {
    int32_t partitions;
    Py_ssize_t batch_bytes;
    uint64_t round_robin;
    Section *open;  /* one per partition */
    Done *done;
    Py_ssize_t done_len, done_cap;
} Encoder;

#define CAPSULE "pipeline._recordenc.Encoder"

static void encoder_free(Encoder *e) {
    if (e == NULL) return;
    for (int32_t p = 0; p < e->partitions; p++) free(e->open[p].data);
    for (Py_ssize_t i = 0; i < e->done_len; i++) free(e->done[i].section.data);
    free(e->open);
    free(e->done);
    free(e);
}

static void capsule_free(PyObject *capsule) { encoder_free(PyCapsule_GetPointer(capsule, CAPSULE)); }

static int reserve(Section *s, Py_ssize_t n) {
    if (s->len + n <= s->cap) return 0;
    Py_ssize_t cap = s->cap ? s->cap : 65536;
    while (cap < s->len + n) cap *= 2;
    uint8_t *grown = realloc(s->data, cap);
    if (grown == NULL) return -1;
    s->data = grown;
    s->cap = cap;
    return 0;
}

static Py_ssize_t put_varint(uint8_t *out, int64_t v) {
    uint64_t z = ((uint64_t)v << 1) ^ (uint64_t)(v >> 63);
    Py_ssize_t n = 0;
    while (z >= 0x80) {
        out[n++] = (uint8_t)(z | 0x80);
        z >>= 7;
    }
    out[n++] = (uint8_t)z;
    return n;
}

static Py_ssize_t varint_size(int64_t v) {
    uint64_t z = ((uint64_t)v << 1) ^ (uint64_t)(v >> 63);
    Py_ssize_t n = 1;
    while (z >= 0x80) {
        z >>= 7;
        n++;
    }
    return n;
}

/* Kafka's murmur2 (org.apache.kafka.common.utils.Utils.murmur2), seed 0x9747b28c. */
static int32_t murmur2(const uint8_t *data, Py_ssize_t length) {
    const uint32_t m = 0x5bd1e995;
    const int r = 24;
    uint32_t h = 0x9747b28c ^ (uint32_t)length;
    Py_ssize_t quads = length / 4;
    for (Py_ssize_t i = 0; i < quads; i++) {
        const uint8_t *q = data + 4 * i;
        uint32_t k = (uint32_t)q[0] | ((uint32_t)q[1] << 8) | ((uint32_t)q[2] << 16) | ((uint32_t)q[3] << 24);
        k *= m;
        k ^= k >> r;
        k *= m;
        h *= m;
        h ^= k;
    }
    const uint8_t *tail = data + 4 * quads;
    switch (length % 4) {
        case 3: h ^= (uint32_t)tail[2] << 16; /* fall through */
        case 2: h ^= (uint32_t)tail[1] << 8; /* fall through */
        case 1: h ^= (uint32_t)tail[0]; h *= m;
    }
    h ^= h >> 13;
    h *= m;
    h ^= h >> 15;
    return (int32_t)h;
}

/* One Arrow binary/string column: rows [offset, offset + rows) of it. */
typedef struct {
    Py_buffer valid, offsets, data;
    int has_valid, wide;  /* wide: int64 offsets (large_binary) */
    Py_ssize_t offset;
} Column;

static int bit(const Py_buffer *b, Py_ssize_t i) { return (((const uint8_t *)b->buf)[i >> 3] >> (i & 7)) & 1; }

static int64_t column_at(const Column *c, Py_ssize_t i) {
    return c->wide ? ((const int64_t *)c->offsets.buf)[i] : ((const int32_t *)c->offsets.buf)[i];
}

/* Fills `c` from (validity or None, offsets, data, offset, wide); checks every offset against the data. */
static int column_open(PyObject *spec, Py_ssize_t rows, Column *c) {
    PyObject *valid, *offsets, *data;
    memset(c, 0, sizeof(*c));
    if (!PyArg_ParseTuple(spec, "OOOnp", &valid, &offsets, &data, &c->offset, &c->wide)) return -1;
    if (c->offset < 0 || c->offset > PY_SSIZE_T_MAX - rows - 1) {  /* offset + rows + 1 below must not wrap */
        PyErr_SetString(PyExc_ValueError, "column offset negative or too large");
        return -1;
    }
    if (PyObject_GetBuffer(offsets, &c->offsets, PyBUF_SIMPLE) < 0) return -1;
    if (PyObject_GetBuffer(data, &c->data, PyBUF_SIMPLE) < 0) {
        PyBuffer_Release(&c->offsets);
        return -1;
    }
    if (valid != Py_None) {
        if (PyObject_GetBuffer(valid, &c->valid, PyBUF_SIMPLE) < 0) {
            PyBuffer_Release(&c->offsets);
            PyBuffer_Release(&c->data);
            return -1;
        }
        c->has_valid = 1;
    }
    Py_ssize_t width = c->wide ? 8 : 4;
    if (c->offsets.len / width < c->offset + rows + 1
        || (c->has_valid && c->valid.len * 8 < c->offset + rows)) {
        PyErr_SetString(PyExc_ValueError, "column buffers shorter than the rows");
        return -1;
    }
    int64_t previous = column_at(c, c->offset);
    if (previous < 0) {
        PyErr_SetString(PyExc_ValueError, "negative value offset");
        return -1;
    }
    for (Py_ssize_t i = 1; i <= rows; i++) {
        int64_t next = column_at(c, c->offset + i);
        if (next < previous || next > c->data.len || next - previous > INT32_MAX) {
            PyErr_Format(PyExc_ValueError, "value offsets out of order or past the data at row %zd", i - 1);
            return -1;
        }
        previous = next;
    }
    return 0;
}

static void column_close(Column *c) {
    if (c->offsets.obj) PyBuffer_Release(&c->offsets);
    if (c->data.obj) PyBuffer_Release(&c->data);
    if (c->has_valid) PyBuffer_Release(&c->valid);
}

/* Row i's bytes, or NULL for a null (length -1). */
static const uint8_t *column_get(const Column *c, Py_ssize_t i, int64_t *length) {
    Py_ssize_t at = c->offset + i;
    if (c->has_valid && !bit(&c->valid, at)) {
        *length = -1;
        return NULL;
    }
    int64_t start = column_at(c, at);
    *length = column_at(c, at + 1) - start;
    return (const uint8_t *)c->data.buf + start;
}

static int finish_section(Encoder *e, int32_t p) {
    if (e->done_len == e->done_cap) {
        Py_ssize_t cap = e->done_cap ? 2 * e->done_cap : 16;
        Done *grown = realloc(e->done, cap * sizeof(Done));
        if (grown == NULL) return -1;
        e->done = grown;
        e->done_cap = cap;
    }
    e->done[e->done_len].partition = p;
    e->done[e->done_len].section = e->open[p];
    e->done_len++;
    memset(&e->open[p], 0, sizeof(Section));
    return 0;
}

/* The per-row loop, without the GIL. Returns 0, -1 (out of memory) or -2 (a bad partition at *bad_row). */
static int encode_rows(Encoder *e, Py_ssize_t rows, const Column *values, const Column *keys,
                       const Py_buffer *parts, const Py_buffer *parts_valid, Py_ssize_t parts_offset,
                       Py_ssize_t *bad_row) {
    for (Py_ssize_t i = 0; i < rows; i++) {
        int64_t key_len = -1, value_len;
        const uint8_t *key = keys ? column_get(keys, i, &key_len) : NULL;
        const uint8_t *value = column_get(values, i, &value_len);
        int64_t p;
        if (parts && (parts_valid == NULL || bit(parts_valid, parts_offset + i))) {
            p = ((const int64_t *)parts->buf)[parts_offset + i];
        } else if (key_len >= 0) {
            p = (int64_t)(murmur2(key, key_len) & 0x7fffffff) % e->partitions;
        } else {
            p = (int64_t)(e->round_robin++ % (uint64_t)e->partitions);
        }
        if (p < 0 || p >= e->partitions) {
            *bad_row = i;
            return -2;
        }
        Section *s = &e->open[p];
        Py_ssize_t fixed = 1 + 1 + varint_size(key_len) + (key_len > 0 ? key_len : 0)
                           + varint_size(value_len) + (value_len > 0 ? value_len : 0) + 1;
        Py_ssize_t body = fixed + varint_size(s->count);
        Py_ssize_t size = varint_size(body) + body;
        if (s->count > 0 && s->len + size > e->batch_bytes) {
            if (finish_section(e, (int32_t)p) < 0) return -1;
            body = fixed + varint_size(0);  /* s is empty again: offset delta 0 */
            size = varint_size(body) + body;
        }
        if (reserve(s, size) < 0) return -1;
        uint8_t *out = s->data + s->len;
        out += put_varint(out, body);
        *out++ = 0;  /* attributes */
        *out++ = 0;  /* timestamp delta */
        out += put_varint(out, s->count);
        out += put_varint(out, key_len);
        if (key_len > 0) {
            memcpy(out, key, key_len);
            out += key_len;
        }
        out += put_varint(out, value_len);
        if (value_len > 0) {
            memcpy(out, value, value_len);
            out += value_len;
        }
        *out++ = 0;  /* no headers */
        s->len = out - s->data;
        s->count++;
    }
    return 0;
}

/* The finished sections as [(partition, bytes, count)], emptied from the encoder. */
static PyObject *take_done(Encoder *e) {
    PyObject *list = PyList_New(0);
    if (list == NULL) return NULL;
    for (Py_ssize_t i = 0; i < e->done_len; i++) {
        Done *d = &e->done[i];
        PyObject *item = Py_BuildValue("(iy#i)", d->partition, d->section.data ? (char *)d->section.data : "",
                                       d->section.len, d->section.count);
        if (item == NULL || PyList_Append(list, item) < 0) {
            Py_XDECREF(item);
            Py_DECREF(list);
            return NULL;
        }
        Py_DECREF(item);
    }
    for (Py_ssize_t i = 0; i < e->done_len; i++) free(e->done[i].section.data);
    e->done_len = 0;
    return list;
}

static Encoder *get(PyObject *capsule) { return PyCapsule_GetPointer(capsule, CAPSULE); }

static PyObject *py_encoder(PyObject *self, PyObject *args) {
    int partitions;
    Py_ssize_t batch_bytes;
    if (!PyArg_ParseTuple(args, "in", &partitions, &batch_bytes)) return NULL;
    if (partitions <= 0 || batch_bytes <= 0) {
        PyErr_SetString(PyExc_ValueError, "partitions and batch_bytes must be positive");
        return NULL;
    }
    Encoder *e = calloc(1, sizeof(Encoder));
    if (e == NULL || (e->open = calloc(partitions, sizeof(Section))) == NULL) {
        free(e);
        return PyErr_NoMemory();
    }
    e->partitions = partitions;
    e->batch_bytes = batch_bytes;
    PyObject *capsule = PyCapsule_New(e, CAPSULE, capsule_free);
    if (capsule == NULL) encoder_free(e);
    return capsule;
}

/* add(encoder, rows, values, keys or None, partitions or None) -> finished sections.
 * values, keys: (validity or None, offsets, data, offset, wide); partitions: (validity or None, int64 data, offset). */
static PyObject *py_add(PyObject *self, PyObject *args) {
    PyObject *capsule, *value_spec, *key_spec, *part_spec;
    Py_ssize_t rows;
    if (!PyArg_ParseTuple(args, "OnO!OO", &capsule, &rows, &PyTuple_Type, &value_spec, &key_spec, &part_spec))
        return NULL;
    Encoder *e = get(capsule);
    if (e == NULL) return NULL;
    if (rows < 0) {
        PyErr_SetString(PyExc_ValueError, "negative row count");
        return NULL;
    }
    Column values, keys;
    int have_keys = key_spec != Py_None, have_valid = 0, ok = -1;
    Py_buffer parts = {0}, parts_valid = {0};
    Py_ssize_t parts_offset = 0, bad_row = -1;
    memset(&keys, 0, sizeof(keys));
    if (column_open(value_spec, rows, &values) < 0) {
        column_close(&values);
        return NULL;
    }
    if (have_keys && (!PyTuple_Check(key_spec) || column_open(key_spec, rows, &keys) < 0)) {
        if (!PyErr_Occurred()) PyErr_SetString(PyExc_TypeError, "keys must be a tuple or None");
        goto done;
    }
    if (part_spec != Py_None) {
        PyObject *valid, *data;
        if (!PyArg_ParseTuple(part_spec, "OOn", &valid, &data, &parts_offset)) goto done;
        if (PyObject_GetBuffer(data, &parts, PyBUF_SIMPLE) < 0) goto done;
        if (valid != Py_None) {
            if (PyObject_GetBuffer(valid, &parts_valid, PyBUF_SIMPLE) < 0) goto done;
            have_valid = 1;
        }
        if (parts_offset < 0 || parts_offset > PY_SSIZE_T_MAX - rows || parts.len / 8 < parts_offset + rows
            || (have_valid && parts_valid.len * 8 < parts_offset + rows)) {
            PyErr_SetString(PyExc_ValueError, "partition buffers shorter than the rows");
            goto done;
        }
    }
    int status;
    Py_BEGIN_ALLOW_THREADS
    status = encode_rows(e, rows, &values, have_keys ? &keys : NULL, parts.obj ? &parts : NULL,
                         have_valid ? &parts_valid : NULL, parts_offset, &bad_row);
    Py_END_ALLOW_THREADS
    if (status == -1) {
        PyErr_NoMemory();
    } else if (status == -2) {
        PyErr_Format(PyExc_ValueError, "row %zd names a partition outside 0..%d", bad_row, e->partitions - 1);
    } else {
        ok = 0;
    }
done:
    column_close(&values);
    if (have_keys) column_close(&keys);
    if (parts.obj) PyBuffer_Release(&parts);
    if (have_valid) PyBuffer_Release(&parts_valid);
    return ok < 0 ? NULL : take_done(e);
}

/* finish(encoder) -> every section still open, then the encoder is empty. */
static PyObject *py_finish(PyObject *self, PyObject *capsule) {
    Encoder *e = get(capsule);
    if (e == NULL) return NULL;
    for (int32_t p = 0; p < e->partitions; p++) {
        if (e->open[p].count > 0 && finish_section(e, p) < 0) return PyErr_NoMemory();
    }
    return take_done(e);
}

static PyObject *py_murmur2(PyObject *self, PyObject *arg) {
    Py_buffer b;
    if (PyObject_GetBuffer(arg, &b, PyBUF_SIMPLE) < 0) return NULL;
    int32_t h = murmur2(b.buf, b.len);
    PyBuffer_Release(&b);
    return PyLong_FromLong(h);
}

static PyMethodDef methods[] = {
    {"encoder", py_encoder, METH_VARARGS, "encoder(partitions, batch_bytes) -> a new encoder"},
    {"add", py_add, METH_VARARGS, "add(encoder, rows, values, keys, partitions) -> [(partition, section, count)]"},
    {"finish", py_finish, METH_O, "finish(encoder) -> the open sections as [(partition, section, count)]"},
    {"murmur2", py_murmur2, METH_O, "Kafka's murmur2 of the bytes, as a signed int32"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_recordenc", NULL, -1, methods};

PyMODINIT_FUNC PyInit__recordenc(void) { return PyModule_Create(&module); }
