/* The loop of broker/file_sender.py's FileSender._pump in one call: an answer's pieces written into a
 * non-blocking socket in order, each bytes-like piece with send(2) (MSG_MORE on all but the last, so a
 * small header waits for the record data behind it), each (descriptor, position, length) piece with
 * sendfile(2), until all are in or the socket is full.
 *
 * pump(socket_fd, pieces, index, done) -> (index, done, state): where the writing stopped (the piece
 * and how many of its bytes are in) and why: 0 all written, 1 the socket is full (EAGAIN), 2 a file
 * ended before its piece did (sendfile wrote nothing). Any other failure raises OSError, as the
 * Python loop's calls do; an interrupted call is retried, as Python retries it (PEP 475). The GIL is
 * let go around each call, as os.sendfile and socket.send let it go.
 *
 * cached(fd, position, length) -> whether every page of that range of the open file is in the page
 * cache: cachestat(2) (Linux 6.5+), as broker/log/page_cache.py asks it through ctypes where this is not
 * built; False when the call fails, None when the kernel has no such call or refuses it (ENOSYS, EPERM).
 *
 * pieces(chunks, region_type) -> the pieces pump takes: broker/file_sender.py's pieces_of.
 *
 * regions(groups, regions, cached, region_type, empty) -> (answer, cold): broker/log/slices.py's
 * _regions_where_cached once its page-cache check `cached` is known: per group of FileSlices (whose files
 * the caller pinned once each) a FileRegion taking those pins over, made as FileRegion(group, True)
 * makes it, `empty` for a group without slices; each region whose pieces `cached` says are all in the
 * page cache goes into the answer and `regions`, the others' places hold `empty` and they go into
 * `cold` as (index in the answer, region).
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
#include <sys/sendfile.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <stdint.h>
#include <unistd.h>

#ifndef __NR_cachestat
#define __NR_cachestat 451  /* the generic syscall table's, which x86-64 and arm64 share for new calls */
#endif

static PyObject *pump(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 4 || !PyList_Check(args[1])) {
        PyErr_SetString(PyExc_TypeError, "pump(socket_fd, pieces, index, done)");
        return NULL;
    }
    int out = (int)PyLong_AsLong(args[0]);
    PyObject *pieces = args[1];
    Py_ssize_t index = PyLong_AsSsize_t(args[2]), done = PyLong_AsSsize_t(args[3]);
    if (PyErr_Occurred()) return NULL;
    if (index < 0 || done < 0) {
        PyErr_SetString(PyExc_ValueError, "pump: index and done must not be negative");
        return NULL;
    }
    Py_ssize_t last = PyList_GET_SIZE(pieces) - 1;
    int state = 0;
    while (index <= last) {
        PyObject *piece = PyList_GET_ITEM(pieces, index);
        Py_ssize_t sent, remaining;
        int error = 0;
        if (PyTuple_Check(piece)) {
            int fd;
            long long position, length;
            if (!PyArg_ParseTuple(piece, "iLL", &fd, &position, &length)) return NULL;
            remaining = (Py_ssize_t)(length - done);
            if (remaining < 0) return PyErr_Format(PyExc_ValueError, "pump: %zd bytes done of a %lld-byte region", done, length);
            off_t offset = (off_t)(position + done);
            do {
                Py_BEGIN_ALLOW_THREADS
                sent = sendfile(out, fd, &offset, (size_t)remaining);
                error = sent < 0 ? errno : 0;  /* read before the GIL is taken back */
                Py_END_ALLOW_THREADS
            } while (error == EINTR && !PyErr_CheckSignals());
            if (PyErr_Occurred()) return NULL;
            if (sent == 0) {
                state = 2;
                break;
            }
        } else {
            Py_buffer view;
            if (PyObject_GetBuffer(piece, &view, PyBUF_SIMPLE) < 0) return NULL;
            remaining = view.len - done;
            if (remaining < 0) {
                PyBuffer_Release(&view);
                return PyErr_Format(PyExc_ValueError, "pump: %zd bytes done of a %zd-byte piece", done, view.len);
            }
            int flags = index < last ? MSG_MORE : 0;
            do {
                Py_BEGIN_ALLOW_THREADS
                sent = send(out, (const char *)view.buf + done, (size_t)remaining, flags);
                error = sent < 0 ? errno : 0;  /* read before the GIL is taken back */
                Py_END_ALLOW_THREADS
            } while (error == EINTR && !PyErr_CheckSignals());
            PyBuffer_Release(&view);
            if (PyErr_Occurred()) return NULL;
        }
        if (error == EAGAIN || error == EWOULDBLOCK) {
            state = 1;
            break;
        }
        if (error) {
            errno = error;
            return PyErr_SetFromErrno(PyExc_OSError);
        }
        if (sent < remaining) {
            done += sent;
            continue;
        }
        index += 1;
        done = 0;
    }
    return Py_BuildValue("(nni)", index, done, state);
}

static PyObject *cached(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 3) {
        PyErr_SetString(PyExc_TypeError, "cached(fd, position, length)");
        return NULL;
    }
    int fd = (int)PyLong_AsLong(args[0]);
    long long position = PyLong_AsLongLong(args[1]), length = PyLong_AsLongLong(args[2]);
    if (PyErr_Occurred()) return NULL;
    if (length <= 0) Py_RETURN_TRUE;
    if (position < 0) Py_RETURN_FALSE;
    static long page = 0;
    if (page == 0) page = sysconf(_SC_PAGESIZE);
    uint64_t first = (uint64_t)position / page;
    uint64_t pages = ((uint64_t)position + (uint64_t)length + page - 1) / page - first;
    struct { uint64_t off, len; } range = {first * page, pages * page};
    struct { uint64_t nr_cache, nr_dirty, nr_writeback, nr_evicted, nr_recently_evicted; } stat;
    if (syscall(__NR_cachestat, fd, &range, &stat, 0) != 0) {
        if (errno == ENOSYS || errno == EPERM) Py_RETURN_NONE;
        Py_RETURN_FALSE;
    }
    return PyBool_FromLong(stat.nr_cache >= pages);
}

/* FileRegion(group, True): the slices as a tuple, their (fd, position, length) pieces with bytes, the total */
static PyObject *make_region(PyObject *region_type, PyObject *group) {
    PyObject *slices = PySequence_Tuple(group);
    if (slices == NULL) return NULL;
    PyObject *pieces = PyList_New(0), *region = NULL;
    long long length = 0;
    if (pieces == NULL) goto fail;
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(slices); i++) {
        PyObject *piece = PyTuple_GET_ITEM(slices, i);
        if (!PyTuple_Check(piece) || PyTuple_GET_SIZE(piece) != 3) {
            PyErr_SetString(PyExc_TypeError, "regions: a slice is (file, position, length)");
            goto fail;
        }
        long long size = PyLong_AsLongLong(PyTuple_GET_ITEM(piece, 2));
        if (size == -1 && PyErr_Occurred()) goto fail;
        if (!size) continue;  /* sendfile of nothing would read as a file cut short */
        PyObject *fd = PyObject_GetAttr(PyTuple_GET_ITEM(piece, 0), NAME("fd"));
        if (fd == NULL) goto fail;
        PyObject *entry = PyTuple_Pack(3, fd, PyTuple_GET_ITEM(piece, 1), PyTuple_GET_ITEM(piece, 2));
        Py_DECREF(fd);
        if (entry == NULL || PyList_Append(pieces, entry) < 0) {
            Py_XDECREF(entry);
            goto fail;
        }
        Py_DECREF(entry);
        length += size;
    }
    PyTypeObject *type = (PyTypeObject *)region_type;
    PyObject *no_args = PyTuple_New(0);
    if (no_args == NULL) goto fail;
    region = type->tp_new(type, no_args, NULL);  /* object.__new__(FileRegion): no __init__ */
    Py_DECREF(no_args);
    if (region == NULL) goto fail;
    PyObject *total = PyLong_FromLongLong(length);
    if (total == NULL || PyObject_SetAttr(region, NAME("slices"), slices) < 0
            || PyObject_SetAttr(region, NAME("length"), total) < 0
            || PyObject_SetAttr(region, NAME("_pieces"), pieces) < 0
            || PyObject_SetAttr(region, NAME("_pinned"), Py_True) < 0) {
        Py_XDECREF(total);
        Py_CLEAR(region);
        goto fail;
    }
    Py_DECREF(total);
    Py_DECREF(pieces);
    Py_DECREF(slices);
    return region;
fail:
    Py_XDECREF(pieces);
    Py_DECREF(slices);
    return NULL;
}

static PyObject *regions(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    (void)module;
    if (nargs != 5 || !PyList_Check(args[1])) {
        PyErr_SetString(PyExc_TypeError, "regions(groups, regions, cached, region_type, empty)");
        return NULL;
    }
    PyObject *groups = PySequence_Fast(args[0], "regions: groups must be a sequence");
    if (groups == NULL) return NULL;
    PyObject *made = args[1], *cached = args[2], *region_type = args[3], *empty = args[4];
    PyObject *answer = PyList_New(0), *cold = PyList_New(0), *region = NULL;
    if (answer == NULL || cold == NULL) goto fail;
    for (Py_ssize_t g = 0; g < PySequence_Fast_GET_SIZE(groups); g++) {
        PyObject *group = PySequence_Fast_GET_ITEM(groups, g);
        Py_ssize_t count = PyObject_Length(group);
        if (count < 0) goto fail;
        if (count == 0) {  /* what a partition without data has */
            if (PyList_Append(answer, empty) < 0) goto fail;
            continue;
        }
        region = make_region(region_type, group);
        if (region == NULL) goto fail;
        PyObject *pieces = PyObject_GetAttr(region, NAME("_pieces"));
        if (pieces == NULL) goto fail;
        int all_cached = 1;
        for (Py_ssize_t i = 0; i < PyList_GET_SIZE(pieces) && all_cached; i++) {
            PyObject *piece = PyList_GET_ITEM(pieces, i);
            PyObject *said = PyObject_Vectorcall(cached, &PyTuple_GET_ITEM(piece, 0), 3, NULL);
            if (said == NULL) {
                Py_DECREF(pieces);
                goto fail;
            }
            all_cached = PyObject_IsTrue(said);
            Py_DECREF(said);
            if (all_cached < 0) {
                Py_DECREF(pieces);
                goto fail;
            }
        }
        Py_DECREF(pieces);
        if (all_cached) {
            if (PyList_Append(made, region) < 0 || PyList_Append(answer, region) < 0) goto fail;
        } else {
            PyObject *entry = Py_BuildValue("(nO)", PyList_GET_SIZE(answer), region);
            if (entry == NULL || PyList_Append(cold, entry) < 0 || PyList_Append(answer, empty) < 0) {
                Py_XDECREF(entry);
                goto fail;
            }
            Py_DECREF(entry);
        }
        Py_CLEAR(region);
    }
    Py_DECREF(groups);
    return Py_BuildValue("(NN)", answer, cold);
fail:
    Py_XDECREF(region);
    Py_XDECREF(answer);
    Py_XDECREF(cold);
    Py_DECREF(groups);
    return NULL;
}

/* file_sender.py's pieces_of: an answer's chunks as pump's pieces, each FileRegion's (fd, position,
 * length) pieces with bytes in place of it, each non-empty bytes-like chunk as a memoryview */
static PyObject *pieces(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    (void)module;
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "pieces(chunks, region_type)");
        return NULL;
    }
    PyObject *chunks = PySequence_Fast(args[0], "pieces: chunks must be a sequence");
    if (chunks == NULL) return NULL;
    PyObject *out = PyList_New(0);
    for (Py_ssize_t i = 0; out != NULL && i < PySequence_Fast_GET_SIZE(chunks); i++) {
        PyObject *chunk = PySequence_Fast_GET_ITEM(chunks, i);
        int failed;
        if ((PyObject *)Py_TYPE(chunk) == args[1]) {
            PyObject *held = PyObject_GetAttr(chunk, NAME("_pieces"));  /* FileRegion.pieces() */
            failed = held == NULL || PyList_SetSlice(out, PY_SSIZE_T_MAX, PY_SSIZE_T_MAX, held) < 0;
            Py_XDECREF(held);
        } else {
            Py_ssize_t length = PyObject_Length(chunk);
            PyObject *view = length > 0 ? PyMemoryView_FromObject(chunk) : NULL;
            failed = length < 0 || (length > 0 && (view == NULL || PyList_Append(out, view) < 0));
            Py_XDECREF(view);
        }
        if (failed) Py_CLEAR(out);
    }
    Py_DECREF(chunks);
    return out;
}

static PyMethodDef methods[] = {
    {"pieces", (PyCFunction)(void (*)(void))pieces, METH_FASTCALL,
     "pieces(chunks, region_type) -> the pieces pump writes: FileRegions' file ranges, other chunks' bytes"},
    {"regions", (PyCFunction)(void (*)(void))regions, METH_FASTCALL,
     "regions(groups, regions, cached, region_type, empty) -> (answer, cold): FileRegions where cached"},
    {"cached", (PyCFunction)(void (*)(void))cached, METH_FASTCALL,
     "cached(fd, position, length) -> True if every page of the range is in the page cache; None: no cachestat"},
    {"pump", (PyCFunction)(void (*)(void))pump, METH_FASTCALL,
     "pump(socket_fd, pieces, index, done) -> (index, done, state): 0 all sent, 1 socket full, 2 file cut short"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module_def = {PyModuleDef_HEAD_INIT, "_file_send", NULL, 0, methods};

PyMODINIT_FUNC PyInit__file_send(void) { return PyModule_Create(&module_def); }
