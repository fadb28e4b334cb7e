/* protocol/framing.py's complete_frames in one call: the whole frames of a connection's scratch buffer,
 * each a bytearray of its own (the caller owns and may stamp it), as FrameReader takes them out.
 *
 * complete_frames(buffer, start, end, max_frame) -> (frames, start) | None
 * From `start` on, each frame's int32 size then its bytes, while a whole one lies before `end`; the
 * start of the first frame not complete (or `end`). None where a size is negative or above
 * `max_frame`: the Python code then words the error.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>

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
    const unsigned char *bytes = view.buf;
    while (end - start >= 4) {
        const unsigned char *p = bytes + start;
        int32_t size = (int32_t)(((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) | ((uint32_t)p[2] << 8) | p[3]);
        if (size < 0 || size > max_frame) {
            answer = Py_NewRef(Py_None);
            goto out;
        }
        if (start + 4 + (Py_ssize_t)size > end) break;
        PyObject *frame = PyByteArray_FromStringAndSize((const char *)p + 4, size);
        if (frame == NULL || PyList_Append(frames, frame) < 0) {
            Py_XDECREF(frame);
            goto out;
        }
        Py_DECREF(frame);
        start += 4 + size;
    }
    answer = Py_BuildValue("(On)", frames, start);
out:
    Py_XDECREF(frames);
    PyBuffer_Release(&view);
    return answer;
}

static PyMethodDef frame_methods[] = {
    {.ml_name = "complete_frames", .ml_meth = (PyCFunction)(void (*)(void))complete_frames,
     .ml_flags = METH_FASTCALL, .ml_doc = "(frames, start) of the whole frames from start to end; None: a bad size"},
    {0},
};

static struct PyModuleDef frames_module = {
    PyModuleDef_HEAD_INIT, .m_name = "_frames", .m_size = 0, .m_methods = frame_methods,
};

PyMODINIT_FUNC PyInit__frames(void) { return PyModule_Create(&frames_module); }
