/* The checks a broker makes on every incoming run of record batches, in one call per run.
 *
 * broker/log/batch_check.py calls scan() for each append. It walks the batches back to back and, if
 * every one is sound, returns a tuple per batch (position, size, base_offset, last_offset_delta,
 * max_timestamp, partition_leader_epoch). A batch is sound when: its header is complete, magic is 2,
 * batch_length >= 49 and the batch lies inside the buffer, its size is at most `max_size`, its CRC-32C
 * (computed by the crc32c package's function, passed in) matches, records_count and
 * last_offset_delta are not negative, its codec is one Kafka knows, and, for a producer's batches,
 * records_count equals last_offset_delta + 1 and is positive.
 *
 * On anything else scan() returns None and the caller runs the same checks in Python, which name
 * the first problem with Kafka's error code: the compiled walk covers only the path every good
 * request takes, so there is one place that words errors. No record is decoded.
 *
 * The batch header (big-endian; laid out by protocol/batch_header.py, which protocol/records.py
 * re-exports; tests hold this twin equal to it):
 *   0 base_offset int64, 8 batch_length int32, 12 partition_leader_epoch int32, 16 magic int8,
 *   17 crc uint32 (over byte 21 to the end), 21 attributes int16, 23 last_offset_delta int32,
 *   27 base_timestamp int64, 35 max_timestamp int64, 43 producer_id int64, 51 producer_epoch int16,
 *   53 base_sequence int32, 57 records_count int32; 61 bytes in all.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>

#define LOG_OVERHEAD 12
#define HEADER_SIZE 61
#define MIN_BATCH_LENGTH (HEADER_SIZE - LOG_OVERHEAD)
#define MAGIC 2
#define MAX_CODEC 4 /* zstd */

static inline uint32_t be32(const unsigned char *p) {
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | (uint32_t)p[3];
}

static inline uint64_t be64(const unsigned char *p) { return (uint64_t)be32(p) << 32 | be32(p + 4); }

/* 1: the CRC matches; 0: it does not; -1: the crc function raised. */
static int crc_matches(PyObject *crc32c, const unsigned char *data, Py_ssize_t len, uint32_t stored) {
    PyObject *view = PyMemoryView_FromMemory((char *)data, len, PyBUF_READ);
    if (view == NULL) return -1;
    PyObject *computed = PyObject_CallOneArg(crc32c, view);
    Py_DECREF(view);
    if (computed == NULL) return -1;
    unsigned long value = PyLong_AsUnsignedLong(computed);
    Py_DECREF(computed);
    if (value == (unsigned long)-1 && PyErr_Occurred()) return -1;
    return value == stored;
}

/* The batch at `p` (`available` bytes to the buffer's end) as a result tuple; Py_None (borrowed) when
 * it is not sound; NULL with an exception set on a failure of Python's own. */
static PyObject *check_one(const unsigned char *p, Py_ssize_t position, Py_ssize_t available,
                           Py_ssize_t max_size, int from_producer, PyObject *crc32c) {
    if (available < HEADER_SIZE || p[16] != MAGIC) return Py_None;
    int32_t batch_length = (int32_t)be32(p + 8);
    if (batch_length < MIN_BATCH_LENGTH) return Py_None;
    Py_ssize_t size = (Py_ssize_t)batch_length + LOG_OVERHEAD;
    if (size > available || size > max_size) return Py_None;
    uint16_t attributes = (uint16_t)(p[21] << 8 | p[22]);
    int32_t last_offset_delta = (int32_t)be32(p + 23);
    int32_t records_count = (int32_t)be32(p + 57);
    if (records_count < 0 || last_offset_delta < 0 || (attributes & 0x07) > MAX_CODEC) return Py_None;
    if (from_producer && (records_count <= 0 || (int64_t)records_count != (int64_t)last_offset_delta + 1))
        return Py_None;
    int crc = crc_matches(crc32c, p + 21, size - 21, be32(p + 17));
    if (crc < 0) return NULL;
    if (!crc) return Py_None;
    return Py_BuildValue("(nnLiLi)", position, size, (long long)(int64_t)be64(p), (int)last_offset_delta,
                         (long long)(int64_t)be64(p + 35), (int)(int32_t)be32(p + 12));
}

static PyObject *scan(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 4) {
        PyErr_SetString(PyExc_TypeError, "scan(buffer, max_size, from_producer, crc32c)");
        return NULL;
    }
    Py_ssize_t max_size = PyLong_AsSsize_t(args[1]);
    if (max_size == -1 && PyErr_Occurred()) return NULL;
    int from_producer = PyObject_IsTrue(args[2]);
    if (from_producer < 0) return NULL;
    PyObject *crc32c = args[3];

    Py_buffer view;
    if (PyObject_GetBuffer(args[0], &view, PyBUF_SIMPLE) < 0) return NULL;
    const unsigned char *data = view.buf;
    PyObject *result = PyList_New(0);
    if (result == NULL) goto done;
    for (Py_ssize_t pos = 0; pos < view.len;) {
        PyObject *batch = check_one(data + pos, pos, view.len - pos, max_size, from_producer, crc32c);
        if (batch == NULL || batch == Py_None) {
            Py_SETREF(result, batch == NULL ? NULL : Py_NewRef(Py_None));
            goto done;
        }
        int appended = PyList_Append(result, batch);
        Py_DECREF(batch);
        if (appended < 0) {
            Py_CLEAR(result);
            goto done;
        }
        pos += (Py_ssize_t)(int32_t)be32(data + pos + 8) + LOG_OVERHEAD;
    }
done:
    PyBuffer_Release(&view);
    return result;
}

static PyMethodDef methods[] = {
    {"scan", (PyCFunction)(void (*)(void))scan, METH_FASTCALL,
     "scan(buffer, max_size, from_producer, crc32c) -> list of (position, size, base_offset, "
     "last_offset_delta, max_timestamp, partition_leader_epoch), or None if any batch is not sound"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_batch_scan", NULL, 0, methods};

PyMODINIT_FUNC PyInit__batch_scan(void) { return PyModule_Create(&module); }
