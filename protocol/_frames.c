/* protocol/framing.py's complete_frames in one call, and its FrameReader as a type (each its twin).
 *
 * complete_frames(buffer, start, end, max_frame) -> (frames, start) | None
 * From `start` on, each frame's int32 size then its bytes, while a whole one lies before `end`; the
 * start of the first frame not complete (or `end`). None where a size is negative or above
 * `max_frame`: the Python code then words the error. Each frame is a bytearray of its own (the caller
 * owns and may stamp it).
 *
 * FrameReader(max_frame, scratch_bytes, direct_min, direct_step), made by framing.frame_reader (which
 * names the defaults): framing.FrameReader's get_buffer,
 * buffer_updated, max_frame and pending, step for step, with no Python run per read from a connection
 * (the Python one cost a consumer's Fetch ~90 opcodes). Its buffers are real memoryviews of its
 * bytearrays, as the Python one's, so a transport still holding one makes the next resize fail loudly
 * (BufferError) instead of writing into freed memory.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>
#include <stdint.h>

static int32_t size_at(const unsigned char *p) {
    return (int32_t)(((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) | ((uint32_t)p[2] << 8) | p[3]);
}

/* Appends to `frames` the whole frames of bytes[*start:end], moving *start past them. 1: a size outside
 * 0..max_frame (in *bad); 0: done; -1: an error set. */
static int split(const unsigned char *bytes, Py_ssize_t *start, Py_ssize_t end, long long max_frame,
                 PyObject *frames, int32_t *bad) {
    while (end - *start >= 4) {
        const unsigned char *p = bytes + *start;
        int32_t size = size_at(p);
        if (size < 0 || size > max_frame) {
            *bad = size;
            return 1;
        }
        if ((Py_ssize_t)size > end - *start - 4) break;
        PyObject *frame = PyByteArray_FromStringAndSize((const char *)p + 4, size);
        if (frame == NULL || PyList_Append(frames, frame) < 0) {
            Py_XDECREF(frame);
            return -1;
        }
        Py_DECREF(frame);
        *start += 4 + size;
    }
    return 0;
}

static PyObject *complete_frames(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    (void)module;
    if (nargs != 4) {
        PyErr_SetString(PyExc_TypeError, "complete_frames(buffer, start, end, max_frame)");
        return NULL;
    }
    Py_ssize_t start = PyLong_AsSsize_t(args[1]), end = PyLong_AsSsize_t(args[2]);
    long long max_frame = PyLong_AsLongLong(args[3]);
    if (PyErr_Occurred()) return NULL;
    Py_buffer view;
    if (PyObject_GetBuffer(args[0], &view, PyBUF_SIMPLE) < 0) return NULL;
    PyObject *frames = PyList_New(0), *answer = NULL;
    if (frames == NULL) goto out;
    if (start < 0 || end > view.len || start > end) {
        PyErr_SetString(PyExc_ValueError, "complete_frames: start and end must lie in the buffer");
        goto out;
    }
    int32_t bad;
    int found = split(view.buf, &start, end, max_frame, frames, &bad);
    if (found < 0) goto out;
    if (found > 0) {
        answer = Py_NewRef(Py_None);
        goto out;
    }
    answer = Py_BuildValue("(On)", frames, start);
out:
    Py_XDECREF(frames);
    PyBuffer_Release(&view);
    return answer;
}

/* --- FrameReader ------------------------------------------------------------------------------------ */

typedef struct {
    PyObject_HEAD
    Py_ssize_t max_frame, direct_min, direct_step;
    PyObject *scratch;     /* bytearray: small frames, many a read */
    PyObject *view;        /* memoryview(scratch) */
    Py_ssize_t start, end; /* the bytes received into scratch and not yet taken out */
    PyObject *frame;       /* bytearray of a large frame being received into its own buffer, or NULL */
    PyObject *frame_view;  /* memoryview(frame), made by get_buffer; NULL until then */
    Py_ssize_t filled, size;
} Reader;

static PyObject *RELEASE;  /* "release", interned */

static int reader_init(Reader *self, PyObject *args, PyObject *kwargs) {
    static char *names[] = {"max_frame", "scratch_bytes", "direct_min", "direct_step", NULL};
    Py_ssize_t max_frame, scratch_bytes, direct_min, direct_step;  /* no defaults: framing.py names them */
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "nnnn:FrameReader", names, &max_frame, &scratch_bytes,
                                     &direct_min, &direct_step))
        return -1;
    if (scratch_bytes < 5 || direct_step < 1) {
        PyErr_SetString(PyExc_ValueError, "FrameReader: scratch_bytes must be above 4 and direct_step above 0");
        return -1;
    }
    PyObject *scratch = PyByteArray_FromStringAndSize(NULL, scratch_bytes);
    if (scratch == NULL) return -1;
    memset(PyByteArray_AS_STRING(scratch), 0, scratch_bytes);
    PyObject *view = PyMemoryView_FromObject(scratch);
    if (view == NULL) {
        Py_DECREF(scratch);
        return -1;
    }
    Py_XSETREF(self->view, view);
    Py_XSETREF(self->scratch, scratch);
    Py_CLEAR(self->frame_view);
    Py_CLEAR(self->frame);
    self->max_frame = max_frame;
    self->direct_min = direct_min;
    self->direct_step = direct_step;
    self->start = self->end = self->filled = self->size = 0;
    return 0;
}

static void reader_dealloc(Reader *self) {
    Py_XDECREF(self->frame_view);
    Py_XDECREF(self->frame);
    Py_XDECREF(self->view);
    Py_XDECREF(self->scratch);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static int release_view(PyObject *view) {
    PyObject *done = PyObject_CallMethodNoArgs(view, RELEASE);
    Py_XDECREF(done);
    return done == NULL ? -1 : 0;
}

static PyObject *not_initialised(void) {
    PyErr_SetString(PyExc_RuntimeError, "FrameReader.__init__ was not called");
    return NULL;
}

/* Moves the unfinished frame to the front of the scratch buffer. */
static void compact(Reader *self) {
    if (self->start) {
        char *bytes = PyByteArray_AS_STRING(self->scratch);
        memmove(bytes, bytes + self->start, self->end - self->start);
        self->end -= self->start;
        self->start = 0;
    }
}

static PyObject *reader_get_buffer(Reader *self, PyObject *const *args, Py_ssize_t nargs) {
    (void)args;
    if (nargs > 1) {
        PyErr_SetString(PyExc_TypeError, "get_buffer(sizehint=-1)");
        return NULL;
    }
    if (self->scratch == NULL) return not_initialised();
    if (self->frame != NULL) {  /* a large frame: its view is remade here whenever it is missing */
        Py_ssize_t length = PyByteArray_GET_SIZE(self->frame);
        if (self->filled == length) {
            /* Grown here, not in buffer_updated: the transport has let go of the last buffer now (a resize
             * fails with BufferError while a buffer is still held, and the next call tries again) */
            if (self->frame_view != NULL && release_view(self->frame_view) < 0) return NULL;
            Py_CLEAR(self->frame_view);
            Py_ssize_t more = self->size - self->filled < self->direct_step ? self->size - self->filled
                                                                            : self->direct_step;
            if (PyByteArray_Resize(self->frame, length + more) < 0) return NULL;
            memset(PyByteArray_AS_STRING(self->frame) + length, 0, more);
        }
        if (self->frame_view == NULL) {
            self->frame_view = PyMemoryView_FromObject(self->frame);
            if (self->frame_view == NULL) return NULL;
        }
        return PySequence_GetSlice(self->frame_view, self->filled, PyByteArray_GET_SIZE(self->frame));
    }
    Py_ssize_t capacity = PyByteArray_GET_SIZE(self->scratch);
    if (self->end == capacity) compact(self);
    return PySequence_GetSlice(self->view, self->end, capacity);
}

/* framing.frame_size_error's exception raised: the wording has one owner. */
static PyObject *bad_size(Reader *self, int32_t size) {
    PyObject *framing = PyImport_ImportModule("protocol.framing");
    if (framing == NULL) return NULL;
    PyObject *error = PyObject_CallMethod(framing, "frame_size_error", "in", (int)size, self->max_frame);
    if (error != NULL) {
        PyErr_SetObject((PyObject *)Py_TYPE(error), error);
        Py_DECREF(error);
    }
    Py_DECREF(framing);
    return NULL;
}

static PyObject *reader_buffer_updated(Reader *self, PyObject *arg) {
    Py_ssize_t nbytes = PyLong_AsSsize_t(arg);
    if (nbytes == -1 && PyErr_Occurred()) return NULL;
    if (nbytes < 0) {
        PyErr_SetString(PyExc_ValueError, "buffer_updated: a negative count");
        return NULL;
    }
    if (self->scratch == NULL) return not_initialised();
    if (self->frame != NULL) {
        if (nbytes > PyByteArray_GET_SIZE(self->frame) - self->filled) {
            PyErr_SetString(PyExc_ValueError, "buffer_updated: more bytes than the buffer given");
            return NULL;
        }
        self->filled += nbytes;
        if (self->filled < self->size) return PyList_New(0); /* get_buffer makes room for the next step */
        PyObject *whole = self->frame, *frames = PyList_New(1);
        if (frames == NULL) return NULL;
        Py_CLEAR(self->frame_view);
        self->frame = NULL;
        PyList_SET_ITEM(frames, 0, whole); /* the reference moves to the list */
        return frames;
    }
    Py_ssize_t capacity = PyByteArray_GET_SIZE(self->scratch);
    if (nbytes > capacity - self->end) {
        PyErr_SetString(PyExc_ValueError, "buffer_updated: more bytes than the buffer given");
        return NULL;
    }
    self->end += nbytes;
    const unsigned char *bytes = (const unsigned char *)PyByteArray_AS_STRING(self->scratch);
    Py_ssize_t start = self->start, end = self->end;
    PyObject *frames = PyList_New(0);
    if (frames == NULL) return NULL;
    int32_t bad;
    int found = split(bytes, &start, end, self->max_frame, frames, &bad);
    if (found != 0) {
        Py_DECREF(frames);
        return found < 0 ? NULL : bad_size(self, bad);
    }
    if (end - start >= 4) { /* a frame not all here yet */
        Py_ssize_t size = size_at(bytes + start);
        if (size >= self->direct_min || size + 4 > capacity) {
            /* The rest of this frame is received into its own buffer */
            Py_ssize_t have = end - start - 4;
            Py_ssize_t length = size - have <= self->direct_step ? size : have + self->direct_step;
            PyObject *frame = PyByteArray_FromStringAndSize(NULL, length);
            if (frame == NULL) {
                Py_DECREF(frames);
                return NULL;
            }
            memcpy(PyByteArray_AS_STRING(frame), bytes + start + 4, have);
            memset(PyByteArray_AS_STRING(frame) + have, 0, length - have);
            self->frame = frame;  /* its view is made by the next get_buffer */
            self->filled = have;
            self->size = size;
            start = end = 0;
        }
    }
    if (start == end) start = end = 0;
    self->start = start;
    self->end = end;
    if (self->frame == NULL && end == capacity) compact(self);
    return frames;
}

static PyObject *reader_pending(Reader *self, void *closure) {
    (void)closure;
    if (self->frame != NULL) return PyLong_FromSsize_t(self->filled + 4);
    return PyLong_FromSsize_t(self->end - self->start);
}

static PyMethodDef reader_methods[] = {
    {.ml_name = "get_buffer", .ml_meth = (PyCFunction)(void (*)(void))reader_get_buffer, .ml_flags = METH_FASTCALL,
     .ml_doc = "the buffer the transport reads into next"},
    {.ml_name = "buffer_updated", .ml_meth = (PyCFunction)reader_buffer_updated, .ml_flags = METH_O,
     .ml_doc = "the frames completed by the bytes just read into the buffer"},
    {0},
};

static PyMemberDef reader_members[] = {
    {"max_frame", T_PYSSIZET, offsetof(Reader, max_frame), 0, "the largest frame size accepted"},
    {"direct_min", T_PYSSIZET, offsetof(Reader, direct_min), READONLY, "frames this large get their own buffer"},
    {"direct_step", T_PYSSIZET, offsetof(Reader, direct_step), READONLY, "how far such a buffer grows ahead"},
    {0},
};

static PyGetSetDef reader_getset[] = {
    {"pending", (getter)reader_pending, NULL, "bytes held that do not yet make a whole frame", NULL},
    {0},
};

static PyTypeObject ReaderType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "protocol._frames.FrameReader",
    .tp_basicsize = sizeof(Reader),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "protocol/framing.py's FrameReader, compiled",
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)reader_init,
    .tp_dealloc = (destructor)reader_dealloc,
    .tp_methods = reader_methods,
    .tp_members = reader_members,
    .tp_getset = reader_getset,
};

static PyMethodDef frame_methods[] = {
    {.ml_name = "complete_frames", .ml_meth = (PyCFunction)(void (*)(void))complete_frames,
     .ml_flags = METH_FASTCALL, .ml_doc = "(frames, start) of the whole frames from start to end; None: a bad size"},
    {0},
};

static struct PyModuleDef frames_module = {
    PyModuleDef_HEAD_INIT, .m_name = "_frames", .m_size = 0, .m_methods = frame_methods,
};

PyMODINIT_FUNC PyInit__frames(void) {
    RELEASE = PyUnicode_InternFromString("release");
    if (RELEASE == NULL || PyType_Ready(&ReaderType) < 0) return NULL;
    PyObject *module = PyModule_Create(&frames_module);
    if (module == NULL) return NULL;
    if (PyModule_AddObjectRef(module, "FrameReader", (PyObject *)&ReaderType) < 0) {
        Py_DECREF(module);
        return NULL;
    }
    return module;
}
