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
 * header claiming fewer bytes than a header or more than the file holds, a batch ending at Long.MAX_VALUE
 * (its next offset, 2**63, is no C long long). `index` is the segment's
 * OffsetIndex: its `_values` array (int32 batch starts, ascending) is read in place. The header kept
 * is built as protocol/batch_header.py's BatchHeader, the 13 big-endian fields of its HEADER struct.
 *
 * run_slices(segments, bases, offset, max_bytes, upper, min_one_batch) -> (slices, next_offset)
 *      | NotImplemented
 * SegmentRun.slices(..., pinned=True) (broker/log/segment_run.py) for a read that stays in one segment:
 * the segment holding `offset` found by its base offsets, its file pinned through its budget (the
 * budget's own Python pin, which the read's FileSlice keeps), read as above, its `_resume` set. Steps
 * aside, pinning nothing, where the read is bounded inside the segment (`upper` below its next offset),
 * starts past its batches, would go on into the next segment, or read_batches steps aside.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

/* An attribute or method name made once and interned: PyObject_GetAttrString makes and hashes a new str
 * on every call, which cost these per-Fetch paths more than the Python they replace */
#define NAME(literal) ({                                            \
    static PyObject *interned_;                                     \
    if (interned_ == NULL) interned_ = PyUnicode_InternFromString(literal); \
    interned_;                                                      \
})
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
                                     (int)(signed char)p[16], (unsigned long)(uint32_t)be32(p + 17),
                                     (short)be16(p + 21),
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
    PyObject *values = PyObject_GetAttr(index, NAME("_values"));
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

/* An offset as a C long long: 1, no error set, for one past Long.MAX_VALUE (the next offset after a
 * batch ending there), which the Python code holds as it is: the callers step aside */
static int as_offset(PyObject *value, long long *out) {
    int overflow;
    *out = PyLong_AsLongLongAndOverflow(value, &overflow);
    if (overflow) return 1;
    return *out == -1 && PyErr_Occurred() ? -1 : 0;
}

/* The offset after the batch of header h, 0 when it is past Long.MAX_VALUE (see as_offset) */
static int next_after(const Header *h, long long *next) {
    return !__builtin_add_overflow(h->base_offset, (long long)h->last_offset_delta + 1, next);
}

/* Where a read of `offset` starts in *start when `resume` is at it, inside the file: 1; 0 to step aside,
 * -1 on an error */
static int resumes_at(PyObject *resume, long long offset, long long size, long long *start) {
    if (!PyTuple_Check(resume) || PyTuple_GET_SIZE(resume) != 3) return 0;
    long long resume_offset;
    int unfit = as_offset(PyTuple_GET_ITEM(resume, 0), &resume_offset);
    *start = PyLong_AsLongLong(PyTuple_GET_ITEM(resume, 1));
    if (unfit < 0 || PyErr_Occurred()) return -1;
    return !unfit && offset == resume_offset && *start < size && *start >= 0;
}

/* read_batches on C values: the segment's resume tuple and OffsetIndex as they are */
static PyObject *segment_read(int fd, long long offset, long long max_bytes, long long max_position, int min_one_batch,
                              long long size, PyObject *resume, PyObject *index) {
    long long start;
    int resumes = resumes_at(resume, offset, size, &start);
    if (resumes <= 0) return resumes < 0 ? NULL : step_aside();

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
    long long end = start + batch, next_offset;
    if (!next_after(&first, &next_offset)) return step_aside();
    PyObject *following = NULL;
    if (batch > max_bytes) {
        if (!min_one_batch) Py_RETURN_NONE;
    } else {
        /* min(max_position, start + max_bytes) without the sum: max_bytes may be Long.MAX (a read of the rest) */
        long long limit = max_bytes > max_position - start ? max_position : start + max_bytes;
        long long indexed;
        int looked = lookup_position(index, limit, &indexed);
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
            if (!next_after(&h, &next_offset)) return step_aside();
            end = batch_end;
            position = batch_end;
        }
    }
    if (following == NULL) following = Py_NewRef(Py_None);
    return Py_BuildValue("(LLL(LLN))", start, end - start, next_offset, next_offset, end, following);
}

static PyObject *read_batches(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    (void)module;
    if (nargs != 8) {
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
    if (PyErr_Occurred() || min_one_batch < 0) return NULL;
    return segment_read(fd, offset, max_bytes, max_position, min_one_batch, size, args[6], args[7]);
}

static PyObject *file_slice_type;  /* broker.log.results.FileSlice, looked up on the first run_slices */

/* broker.log.results.<name> into *slot, looked up once (the module imports this one's importers) */
static int result_type(PyObject **slot, const char *name) {
    if (*slot != NULL) return 0;
    PyObject *results = PyImport_ImportModule("broker.log.results");
    if (results == NULL) return -1;
    *slot = PyObject_GetAttrString(results, name);
    Py_DECREF(results);
    return *slot == NULL ? -1 : 0;
}

static long long attr_long(PyObject *object, PyObject *name) {
    PyObject *value = PyObject_GetAttr(object, name);
    if (value == NULL) return -1;
    long long v = PyLong_AsLongLong(value);
    Py_DECREF(value);
    return v;
}

static int unpin_file(PyObject *budget, PyObject *file);

/* as_offset of an attribute */
static int attr_offset(PyObject *object, PyObject *name, long long *out) {
    PyObject *value = PyObject_GetAttr(object, name);
    if (value == NULL) return -1;
    int result = as_offset(value, out);
    Py_DECREF(value);
    return result;
}

/* file.budget.unpin(file) as the Python read's `except BaseException: budget.unpin(file); raise` does it:
 * -1 when the unpin failed, its error then raised, with an error already set as its context */
static int unpin(PyObject *file) {
    PyObject *type, *value, *traceback;
    PyErr_Fetch(&type, &value, &traceback);
    PyObject *budget = PyObject_GetAttr(file, NAME("budget"));
    int failed = budget == NULL || unpin_file(budget, file) < 0;
    Py_XDECREF(budget);
    if (!failed) {
        PyErr_Restore(type, value, traceback);
        return 0;
    }
    if (type != NULL) {
        PyObject *new_type, *new_value, *new_traceback;
        PyErr_Fetch(&new_type, &new_value, &new_traceback);
        PyErr_NormalizeException(&type, &value, &traceback);
        PyErr_NormalizeException(&new_type, &new_value, &new_traceback);
        if (traceback != NULL) PyException_SetTraceback(value, traceback);
        if (new_value != value) PyException_SetContext(new_value, Py_NewRef(value));
        Py_DECREF(type), Py_XDECREF(value), Py_XDECREF(traceback);
        PyErr_Restore(new_type, new_value, new_traceback);
    }
    return -1;
}

/* broker/log/segment_file.py's OpenSegments.pin and unpin on their common path, under the budget's lock:
 * a pin of an open file needing no shrink, an unpin leaving the file open and idle within the
 * capacity. Anything else (a parked or ended file, a close wanted, the capacity passed) is the
 * Python methods', called instead, before anything changed. */
static int with_lock(PyObject *budget, PyObject **lock) {
    *lock = PyObject_GetAttr(budget, NAME("_lock"));
    if (*lock == NULL) return -1;
    PyObject *got = PyObject_CallMethodNoArgs(*lock, NAME("acquire"));
    if (got == NULL) {
        Py_CLEAR(*lock);
        return -1;
    }
    Py_DECREF(got);
    return 0;
}

static int unlock(PyObject *lock, int result) {
    PyObject *type, *value, *traceback;
    PyErr_Fetch(&type, &value, &traceback);
    PyObject *done = PyObject_CallMethodNoArgs(lock, NAME("release"));
    Py_DECREF(lock);
    if (done == NULL) {
        Py_XDECREF(type), Py_XDECREF(value), Py_XDECREF(traceback);
        return -1;
    }
    Py_DECREF(done);
    PyErr_Restore(type, value, traceback);
    return result;
}

static int set_long(PyObject *object, PyObject *name, long long v) {
    PyObject *value = PyLong_FromLongLong(v);
    if (value == NULL) return -1;
    int result = PyObject_SetAttr(object, name, value);
    Py_DECREF(value);
    return result;
}

/* The descriptor, or -1 with an exception set */
static long long pin_file(PyObject *budget, PyObject *file) {
    PyObject *lock;
    if (with_lock(budget, &lock) < 0) return -1;
    PyObject *ended = PyObject_GetAttr(file, NAME("_ended"));
    int is_ended = ended == NULL ? -1 : PyObject_IsTrue(ended);
    Py_XDECREF(ended);
    long long fd = attr_long(file, NAME("fd")), pins = attr_long(file, NAME("_pins"));
    long long open_count = attr_long(budget, NAME("open_count")), capacity = attr_long(budget, NAME("capacity"));
    if (is_ended < 0 || PyErr_Occurred()) return unlock(lock, -1);
    int common = !is_ended && fd >= 0 && (pins > 0 || open_count <= capacity);
    if (common) {
        if (pins == 0) {
            PyObject *idle = PyObject_GetAttr(budget, NAME("_idle"));
            int removed = idle == NULL ? -1 : PyObject_DelItem(idle, file);
            Py_XDECREF(idle);
            if (removed < 0) return unlock(lock, -1);
        }
        if (set_long(file, NAME("_pins"), pins + 1) < 0) return unlock(lock, -1);
    }
    if (unlock(lock, 0) < 0) return -1;
    if (common) return fd;
    PyObject *got = PyObject_CallMethodOneArg(budget, NAME("pin"), file);
    if (got == NULL) return -1;
    fd = PyLong_AsLongLong(got);
    Py_DECREF(got);
    return fd;
}

static int unpin_file(PyObject *budget, PyObject *file) {
    PyObject *lock;
    if (with_lock(budget, &lock) < 0) return -1;
    PyObject *wanted = PyObject_GetAttr(file, NAME("_close_wanted"));
    int close_wanted = wanted == NULL ? -1 : PyObject_IsTrue(wanted);
    Py_XDECREF(wanted);
    long long pins = attr_long(file, NAME("_pins"));
    long long open_count = attr_long(budget, NAME("open_count")), capacity = attr_long(budget, NAME("capacity"));
    if (close_wanted < 0 || PyErr_Occurred()) return unlock(lock, -1);
    int common = pins > 1 || (pins == 1 && !close_wanted && open_count <= capacity);
    if (common) {
        if (set_long(file, NAME("_pins"), pins - 1) < 0) return unlock(lock, -1);
        if (pins == 1) {
            PyObject *idle = PyObject_GetAttr(budget, NAME("_idle"));
            int added = idle == NULL ? -1 : PyObject_SetItem(idle, file, Py_None);
            Py_XDECREF(idle);
            if (added < 0) return unlock(lock, -1);
        }
    }
    if (unlock(lock, 0) < 0) return -1;
    if (common) return 0;
    PyObject *done = PyObject_CallMethodOneArg(budget, NAME("unpin"), file);
    if (done == NULL) return -1;
    Py_DECREF(done);
    return 0;
}

static PyObject *pin(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    (void)module;
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "pin(budget, file)");
        return NULL;
    }
    long long fd = pin_file(args[0], args[1]);
    return fd < 0 && PyErr_Occurred() ? NULL : PyLong_FromLongLong(fd);
}

static PyObject *unpin_(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    (void)module;
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "unpin(budget, file)");
        return NULL;
    }
    if (unpin_file(args[0], args[1]) < 0) return NULL;
    Py_RETURN_NONE;
}

/* broker/log/file_region.py's release_regions: each region still pinned let go (unpin_file per slice),
 * and the bytes they held summed */
static PyObject *release_regions(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    (void)module;
    if (nargs != 1 || !PyList_Check(args[0])) {
        PyErr_SetString(PyExc_TypeError, "release_regions(regions)");
        return NULL;
    }
    PyObject *regions = args[0];
    long long total = 0;
    for (Py_ssize_t r = 0; r < PyList_GET_SIZE(regions); r++) {
        PyObject *region = PyList_GET_ITEM(regions, r);
        PyObject *flag = PyObject_GetAttr(region, NAME("_pinned"));
        int pinned = flag == NULL ? -1 : PyObject_IsTrue(flag);
        Py_XDECREF(flag);
        if (pinned < 0) return NULL;
        if (pinned) {
            if (PyObject_SetAttr(region, NAME("_pinned"), Py_False) < 0) return NULL;
            PyObject *slices = PyObject_GetAttr(region, NAME("slices"));
            if (slices == NULL) return NULL;
            if (!PyTuple_Check(slices)) {
                Py_DECREF(slices);
                PyErr_SetString(PyExc_TypeError, "release_regions: a region's slices are a tuple");
                return NULL;
            }
            for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(slices); i++) {
                PyObject *file = PyTuple_GET_ITEM(PyTuple_GET_ITEM(slices, i), 0);
                PyObject *budget = PyObject_GetAttr(file, NAME("budget"));
                int failed = budget == NULL || unpin_file(budget, file) < 0;
                Py_XDECREF(budget);
                if (failed) {
                    Py_DECREF(slices);
                    return NULL;
                }
            }
            Py_DECREF(slices);
        }
        long long length = attr_long(region, NAME("length"));
        if (length == -1 && PyErr_Occurred()) return NULL;
        total += length;
    }
    return PyLong_FromLongLong(total);
}

static PyObject *empty_read(long long offset) { return Py_BuildValue("([]L)", offset); }

/* SegmentRun.slices(offset, max_bytes, upper, min_one_batch, pinned=True) for a read that stays in one
 * segment (see broker/log/segment_run.py) */
static PyObject *slices_in_one(PyObject *segments, PyObject *bases, long long offset, long long max_bytes,
                               long long upper, int min_one_batch) {
    if (!PyList_Check(segments) || !PyList_Check(bases)) return step_aside();
    if (result_type(&file_slice_type, "FileSlice") < 0) return NULL;
    Py_ssize_t n = PyList_GET_SIZE(segments), lo = 0, hi = PyList_GET_SIZE(bases);
    if (hi != n) return step_aside();
    while (lo < hi) {  /* SegmentRun.index_of: bisect_right on the base offsets */
        Py_ssize_t mid = (lo + hi) / 2;
        long long base = PyLong_AsLongLong(PyList_GET_ITEM(bases, mid));
        if (base == -1 && PyErr_Occurred()) return NULL;
        if (offset < base) hi = mid; else lo = mid + 1;
    }
    Py_ssize_t i = lo > 0 ? lo - 1 : 0;
    if (!(offset < upper && i < n)) return empty_read(offset);
    PyObject *segment = PyList_GET_ITEM(segments, i);
    long long next;
    int unfit = attr_offset(segment, NAME("next_offset"), &next);
    long long size = attr_long(segment, NAME("size"));
    if (unfit < 0 || PyErr_Occurred()) return NULL;
    /* bounded by `upper` inside the segment, an offset past its batches, an empty segment: the Python code */
    if (unfit || upper < next || offset >= next || size <= 0) return step_aside();
    PyObject *file = PyObject_GetAttr(segment, NAME("file"));
    if (file == NULL) return NULL;
    Py_INCREF(segment);  /* held across the calls below, which may run Python code (a parked file's pin) */
    PyObject *budget = PyObject_GetAttr(file, NAME("budget"));
    PyObject *resume = PyObject_GetAttr(segment, NAME("_resume"));
    PyObject *index = PyObject_GetAttr(segment, NAME("index"));
    PyObject *found = NULL, *answer = NULL;
    if (budget == NULL || resume == NULL || index == NULL) goto done;
    /* What steps aside below, seen before the pin where it can be: a parked file is not opened for
     * nothing. Not where the last read stopped; or every batch from there to the end fits, so the read
     * would go on into the next segment */
    long long start;
    int resumes = resumes_at(resume, offset, size, &start);
    if (resumes < 0) goto done;
    if (resumes == 0 || (i + 1 < n && max_bytes >= size - start)) {
        answer = step_aside();
        goto done;
    }
    long long pinned_fd = pin_file(budget, file);
    if (pinned_fd < 0) goto done;
    int fd = (int)pinned_fd;
    found = segment_read(fd, offset, max_bytes, size, min_one_batch, size, resume, index);
    if (found == NULL || found == Py_NotImplemented || found == Py_None) {
        if (unpin(file) < 0 || found == NULL) goto done;
        answer = found == Py_None ? empty_read(offset) : step_aside();  /* None: the next batch does not fit */
        goto done;
    }
    start = PyLong_AsLongLong(PyTuple_GET_ITEM(found, 0));
    long long length = PyLong_AsLongLong(PyTuple_GET_ITEM(found, 1));
    if (start + length >= size && i + 1 < n) {  /* on into the next segment (a last batch past max_bytes) */
        if (unpin(file) == 0) answer = step_aside();
        goto done;
    }
    if (PyObject_SetAttr(segment, NAME("_resume"), PyTuple_GET_ITEM(found, 3)) < 0) {
        (void)unpin(file);
        goto done;
    }
    PyObject *fields = Py_BuildValue("((OLL))", file, start, length);  /* tuple.__new__(FileSlice, fields) */
    PyObject *slice = fields == NULL ? NULL : PyTuple_Type.tp_new((PyTypeObject *)file_slice_type, fields, NULL);
    Py_XDECREF(fields);
    if (slice == NULL) {
        (void)unpin(file);
        goto done;
    }
    answer = Py_BuildValue("([N]O)", slice, PyTuple_GET_ITEM(found, 2));
done:
    Py_XDECREF(found);
    Py_XDECREF(index);
    Py_XDECREF(resume);
    Py_XDECREF(budget);
    Py_DECREF(file);
    Py_DECREF(segment);
    return answer;
}

static PyObject *run_slices(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    (void)module;
    if (nargs != 6 || !PyList_Check(args[0]) || !PyList_Check(args[1])) {
        PyErr_SetString(PyExc_TypeError, "run_slices(segments, bases, offset, max_bytes, upper, min_one_batch)");
        return NULL;
    }
    long long offset = PyLong_AsLongLong(args[2]);
    long long max_bytes = PyLong_AsLongLong(args[3]);
    long long upper;
    int unfit = as_offset(args[4], &upper);
    int min_one_batch = PyObject_IsTrue(args[5]);
    if (unfit < 0 || PyErr_Occurred() || min_one_batch < 0) return NULL;
    if (unfit) return step_aside();  /* a bound past Long.MAX_VALUE: the Python run's */
    return slices_in_one(args[0], args[1], offset, max_bytes, upper, min_one_batch);
}

static PyObject *read_info_type;  /* broker.log.results.ReadInfo */

/* PartitionLog.read(offset, max_bytes, bound=..., min_one_batch=..., max_offset=..., pinned=True) of an
 * online log, in range, whose read stays in one segment; NotImplemented, nothing pinned, otherwise. A
 * failure (a pin, an unpin, a signal handler's error during a read) is raised, nothing pinned, as the
 * Python run raises it; the caller turns an I/O error into the partition's StorageError */
static PyObject *log_read(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    (void)module;
    if (nargs != 6) {
        PyErr_SetString(PyExc_TypeError,
                        "log_read(log, offset, max_bytes, to_high_watermark, min_one_batch, max_offset)");
        return NULL;
    }
    PyObject *log = args[0];
    long long offset = PyLong_AsLongLong(args[1]);
    long long max_bytes = PyLong_AsLongLong(args[2]);
    int to_high_watermark = PyObject_IsTrue(args[3]);
    int min_one_batch = PyObject_IsTrue(args[4]);
    long long max_offset = 0;  /* no bound: None, or past Long.MAX_VALUE (above any offset held here) */
    int unbounded = args[5] == Py_None ? 1 : as_offset(args[5], &max_offset);
    if (unbounded < 0) return NULL;
    if (PyErr_Occurred() || to_high_watermark < 0 || min_one_batch < 0) return NULL;
    if (result_type(&read_info_type, "ReadInfo") < 0) return NULL;
    PyObject *offline = PyObject_GetAttr(log, NAME("offline_reason"));
    if (offline == NULL) return NULL;
    Py_DECREF(offline);
    if (offline != Py_None) return step_aside();
    PyObject *run = PyObject_GetAttr(log, NAME("_run"));
    if (run == NULL) return NULL;
    PyObject *segments = PyObject_GetAttr(run, NAME("_segments")), *bases = PyObject_GetAttr(run, NAME("_bases"));
    Py_DECREF(run);
    PyObject *found = NULL, *answer = NULL;
    if (segments == NULL || bases == NULL) goto done;
    if (!PyList_Check(segments) || PyList_GET_SIZE(segments) == 0) {
        answer = step_aside();
        goto done;
    }
    long long start, end, high_watermark;
    int unfit = attr_offset(log, NAME("_log_start_offset"), &start);
    PyObject *active = PyList_GET_ITEM(segments, PyList_GET_SIZE(segments) - 1);
    if (unfit == 0) unfit = attr_offset(active, NAME("next_offset"), &end);
    if (unfit == 0) unfit = attr_offset(log, NAME("_high_watermark"), &high_watermark);
    if (unfit < 0) goto done;
    /* OFFSET_OUT_OF_RANGE, or offsets past Long.MAX_VALUE: the Python read's */
    if (unfit || offset < start || offset > end) {
        answer = step_aside();
        goto done;
    }
    long long upper = to_high_watermark ? high_watermark : end;
    if (!unbounded && max_offset < upper) upper = max_offset;
    found = slices_in_one(segments, bases, offset, max_bytes, upper, min_one_batch);
    if (found == NULL) goto done;  /* raised as the Python run raises it; PartitionLog.read words an I/O error */
    if (found == Py_NotImplemented) {
        answer = Py_NewRef(found);
        goto done;
    }
    PyObject *slices = PyList_AsTuple(PyTuple_GET_ITEM(found, 0));
    PyObject *fields = slices == NULL ? NULL : Py_BuildValue("((NOLLL))", slices, PyTuple_GET_ITEM(found, 1),
                                                             high_watermark, start, end);
    if (fields != NULL) {  /* tuple.__new__(ReadInfo, fields) */
        answer = PyTuple_Type.tp_new((PyTypeObject *)read_info_type, fields, NULL);
        Py_DECREF(fields);
    }
    if (answer == NULL) {  /* no answer: the pins it took go back */
        PyObject *taken = PyTuple_GET_ITEM(found, 0);
        for (Py_ssize_t i = 0; i < PyList_GET_SIZE(taken); i++) {
            PyObject *file = PyTuple_GET_ITEM(PyList_GET_ITEM(taken, i), 0);
            (void)unpin(file);
        }
    }
done:
    Py_XDECREF(found), Py_XDECREF(segments), Py_XDECREF(bases);
    return answer;
}

static PyMethodDef methods[] = {
    {"read_batches", (PyCFunction)(void (*)(void))read_batches, METH_FASTCALL,
     "A consumer's read on from where the segment's last read stopped; NotImplemented otherwise."},
    {"pin", (PyCFunction)(void (*)(void))pin, METH_FASTCALL, "OpenSegments.pin(file) as pin(budget, file)"},
    {"unpin", (PyCFunction)(void (*)(void))unpin_, METH_FASTCALL, "OpenSegments.unpin(file) as unpin(budget, file)"},
    {"release_regions", (PyCFunction)(void (*)(void))release_regions, METH_FASTCALL,
     "release_regions(regions) -> the bytes they held: each still pinned let go"},
    {"log_read", (PyCFunction)(void (*)(void))log_read, METH_FASTCALL,
     "PartitionLog.read of a Fetch (pinned) in one segment; NotImplemented otherwise."},
    {"run_slices", (PyCFunction)(void (*)(void))run_slices, METH_FASTCALL,
     "SegmentRun.slices of a pinned read in one segment; NotImplemented otherwise."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_batch_read", NULL, -1, methods};

PyMODINIT_FUNC PyInit__batch_read(void) {
    PyObject *headers = PyImport_ImportModule("protocol.batch_header");
    if (headers == NULL) return NULL;
    batch_header_type = PyObject_GetAttr(headers, NAME("BatchHeader"));
    Py_DECREF(headers);
    if (batch_header_type == NULL) return NULL;
    return PyModule_Create(&module);
}
