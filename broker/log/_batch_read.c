/* broker/log/batch_read.py's read_batches for a consumer reading on: the offset asked is where the
 * segment's last read stopped, so the read starts at the batch kept in `resume` and walks the headers
 * after it as the Python code does (the same preads: the header at the last indexed batch start at or
 * below the limit alone, then 16 KiB windows), with the index's positions searched here.
 *
 * read_batches(fd, offset, max_bytes, max_position, min_one_batch, size, resume, index)
 *   -> (position, length, next_offset, (next_offset, end, following header or None)) | None
 *      | NotImplemented
 * NotImplemented steps aside for the Python code, which then runs alone and words any error: an offset
 * other than the resume offset, a resume position at or past the end, a read failing or cut short, a
 * header claiming fewer bytes than a header or more than the file holds. `index` is the segment's
 * OffsetIndex: its `_values` array (int32 batch starts, ascending) is read in place. The header kept
 * is built as protocol/batch_header.py's BatchHeader, the 13 big-endian fields of its HEADER struct.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <errno.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>

#define HEADER_SIZE 61
#define LOG_OVERHEAD 12
#define SCAN_WINDOW (16 * 1024)

static PyObject *batch_header_type;  /* protocol.batch_header.BatchHeader */

static int64_t be64(const unsigned char *p) {
    uint64_t v = 0;
    for (int i = 0; i < 8; i++) v = (v << 8) | p[i];
    return (int64_t)v;
}
static int32_t be32(const unsigned char *p) {
    return (int32_t)(((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) | ((uint32_t)p[2] << 8) | (uint32_t)p[3]);
}
static int16_t be16(const unsigned char *p) { return (int16_t)(((uint16_t)p[0] << 8) | (uint16_t)p[1]); }

typedef struct {
    int64_t base_offset;
    int32_t batch_length;
    int32_t last_offset_delta;
} Header;

static void parse(const unsigned char *p, Header *h) {
    h->base_offset = be64(p);
    h->batch_length = be32(p + 8);
    h->last_offset_delta = be32(p + 23);
}

/* The BatchHeader of the 61 bytes at p: HEADER = ">qiibIhiqqqhii" */
static PyObject *header_object(const unsigned char *p) {
    PyObject *fields = Py_BuildValue("(LiiikhiLLLhii)", (long long)be64(p), (int)be32(p + 8), (int)be32(p + 12),
                                     (int)(signed char)p[16], (unsigned long)(uint32_t)be32(p + 17), (short)be16(p + 21),
                                     (int)be32(p + 23), (long long)be64(p + 27), (long long)be64(p + 35),
                                     (long long)be64(p + 43), (short)be16(p + 51), (int)be32(p + 53),
                                     (int)be32(p + 57));
    if (fields == NULL) return NULL;
    PyObject *args = PyTuple_Pack(1, fields);  /* tuple.__new__(BatchHeader, fields) */
    Py_DECREF(fields);
    if (args == NULL) return NULL;
    PyObject *header = PyTuple_Type.tp_new((PyTypeObject *)batch_header_type, args, NULL);
    Py_DECREF(args);
    return header;
}

/* pread all of [position, position + n) or as much as the file holds; -1 on an error */
static Py_ssize_t read_at(int fd, unsigned char *buf, Py_ssize_t n, long long position) {
    Py_ssize_t got;
    int error;
    do {
        Py_BEGIN_ALLOW_THREADS
        got = pread(fd, buf, (size_t)n, (off_t)position);
        error = got < 0 ? errno : 0;
        Py_END_ALLOW_THREADS
    } while (error == EINTR && !PyErr_CheckSignals());
    if (PyErr_Occurred()) return -2;
    return got;
}

/* The largest value of the int32 array at or below `position`, 0 if none (OffsetIndex.lookup_position) */
static int lookup_position(PyObject *index, long long position, long long *found) {
    PyObject *values = PyObject_GetAttrString(index, "_values");
    if (values == NULL) return -1;
    Py_buffer view;
    if (PyObject_GetBuffer(values, &view, PyBUF_FORMAT) < 0) {
        Py_DECREF(values);
        return -1;
    }
    int ok = view.itemsize == 4 && view.format != NULL && strcmp(view.format, "i") == 0;
    if (ok) {
        const int32_t *v = (const int32_t *)view.buf;
        Py_ssize_t lo = 0, hi = view.len / 4;
        while (lo < hi) {  /* bisect_right */
            Py_ssize_t mid = (lo + hi) / 2;
            if (position < v[mid]) hi = mid; else lo = mid + 1;
        }
        *found = lo > 0 ? v[lo - 1] : 0;
    }
    PyBuffer_Release(&view);
    Py_DECREF(values);
    return ok ? 0 : 1;
}

static PyObject *step_aside(void) { Py_RETURN_NOTIMPLEMENTED; }

static PyObject *read_batches(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 8 || !PyTuple_Check(args[6]) || PyTuple_GET_SIZE(args[6]) != 3) {
        PyErr_SetString(PyExc_TypeError,
                        "read_batches(fd, offset, max_bytes, max_position, min_one_batch, size, resume, index)");
        return NULL;
    }
    int fd = (int)PyLong_AsLong(args[0]);
    long long offset = PyLong_AsLongLong(args[1]);
    long long max_bytes = PyLong_AsLongLong(args[2]);
    long long max_position = PyLong_AsLongLong(args[3]);
    int min_one_batch = PyObject_IsTrue(args[4]);
    long long size = PyLong_AsLongLong(args[5]);
    PyObject *resume = args[6];
    long long resume_offset = PyLong_AsLongLong(PyTuple_GET_ITEM(resume, 0));
    long long start = PyLong_AsLongLong(PyTuple_GET_ITEM(resume, 1));
    if (PyErr_Occurred() || min_one_batch < 0) return NULL;
    if (offset != resume_offset || start >= size || start < 0) return step_aside();

    unsigned char first_bytes[HEADER_SIZE];
    Header first;
    PyObject *kept = PyTuple_GET_ITEM(resume, 2);
    if (kept == Py_None) {
        Py_ssize_t got = read_at(fd, first_bytes, HEADER_SIZE, start);
        if (got == -2) return NULL;
        if (got < HEADER_SIZE) return step_aside();
        parse(first_bytes, &first);
        long long claimed = (long long)first.batch_length + LOG_OVERHEAD;
        if (claimed < HEADER_SIZE || start + claimed > size) return step_aside();
    } else {
        if (!PyTuple_Check(kept) || PyTuple_GET_SIZE(kept) != 13) return step_aside();
        first.base_offset = PyLong_AsLongLong(PyTuple_GET_ITEM(kept, 0));
        first.batch_length = (int32_t)PyLong_AsLong(PyTuple_GET_ITEM(kept, 1));
        first.last_offset_delta = (int32_t)PyLong_AsLong(PyTuple_GET_ITEM(kept, 6));
        if (PyErr_Occurred()) return NULL;
    }
    long long batch = (long long)first.batch_length + LOG_OVERHEAD;
    if (start + batch > max_position) Py_RETURN_NONE;
    long long end = start + batch, next_offset = first.base_offset + first.last_offset_delta + 1;
    PyObject *following = NULL;
    if (batch > max_bytes) {
        if (!min_one_batch) Py_RETURN_NONE;
    } else {
        long long limit = max_position < start + max_bytes ? max_position : start + max_bytes;
        long long indexed;
        int looked = lookup_position(args[7], limit, &indexed);
        if (looked < 0) return NULL;
        if (looked > 0) return step_aside();
        long long position = end > indexed ? end : indexed;
        unsigned char window[SCAN_WINDOW];  /* on the stack: pool threads read segments too */
        long long window_start = position;
        Py_ssize_t window_len = 0;
        Py_ssize_t wanted = HEADER_SIZE;  /* the first read: one header alone */
        while (position < size) {
            long long rel = position - window_start;
            if (rel < 0 || rel + HEADER_SIZE > window_len) {
                long long left = size - position;
                Py_ssize_t ask = (Py_ssize_t)(left < wanted ? left : wanted);
                if (ask < HEADER_SIZE) ask = HEADER_SIZE;
                window_len = read_at(fd, window, ask, position);
                if (window_len == -2) return NULL;
                window_start = position, rel = 0, wanted = SCAN_WINDOW;
                if (window_len < HEADER_SIZE) return step_aside();
            }
            Header h;
            parse(window + rel, &h);
            long long claimed = (long long)h.batch_length + LOG_OVERHEAD;
            if (claimed < HEADER_SIZE || position + claimed > size) return step_aside();
            long long batch_end = position + claimed;
            if (batch_end > limit) {
                following = header_object(window + rel);
                if (following == NULL) return NULL;
                end = position, next_offset = h.base_offset;
                break;
            }
            end = batch_end, next_offset = h.base_offset + h.last_offset_delta + 1;
            position = batch_end;
        }
    }
    if (following == NULL) following = Py_NewRef(Py_None);
    return Py_BuildValue("(LLL(LLN))", start, end - start, next_offset, next_offset, end, following);
}

static PyMethodDef methods[] = {
    {"read_batches", (PyCFunction)(void (*)(void))read_batches, METH_FASTCALL,
     "A consumer's read on from where the segment's last read stopped; NotImplemented otherwise."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_batch_read", NULL, -1, methods};

PyMODINIT_FUNC PyInit__batch_read(void) {
    PyObject *headers = PyImport_ImportModule("protocol.batch_header");
    if (headers == NULL) return NULL;
    batch_header_type = PyObject_GetAttrString(headers, "BatchHeader");
    Py_DECREF(headers);
    if (batch_header_type == NULL) return NULL;
    return PyModule_Create(&module);
}
