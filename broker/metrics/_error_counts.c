/* broker/metrics/requests.py's count of a two-level answer's error codes (topics, then partitions: Fetch,
 * Produce and about twenty more) in one call, where the Python loop cost a Fetch ~40 opcodes a request.
 *
 * count_two_levels(answer, has_error, outer, inner, into) -> None
 * Adds to the dict `into` (error code -> count) the answer's own error_code when `has_error`, then the
 * error_code of every element of each `inner` array of the items of its `outer` array. A null (None) or
 * empty array adds nothing, as in the Python walk; an element's code is the dict's key as it comes.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

static PyObject *ERROR_CODE;  /* "error_code", interned */
static PyObject *ONE;

static int add_code(PyObject *into, PyObject *carrier) {
    PyObject *code = PyObject_GetAttr(carrier, ERROR_CODE);
    if (code == NULL) return -1;
    PyObject *count = PyDict_GetItemWithError(into, code);  /* borrowed */
    PyObject *more;
    if (count != NULL) {
        more = PyNumber_Add(count, ONE);
    } else if (PyErr_Occurred()) {
        more = NULL;
    } else {
        more = Py_NewRef(ONE);
    }
    int failed = more == NULL || PyDict_SetItem(into, code, more) < 0;
    Py_XDECREF(more);
    Py_DECREF(code);
    return failed ? -1 : 0;
}

/* The codes of `array`'s elements (a sequence; None or empty: nothing), or with `inner` those of each
 * element's own `inner` array. */
static int walk(PyObject *array, PyObject *into, PyObject *inner) {
    if (array == Py_None) return 0;
    PyObject *items = PySequence_Fast(array, "an answer's array must be a sequence");
    if (items == NULL) return -1;
    int failed = 0;
    /* The size read again and each item held while it is read: an attribute's Python code may change a list */
    for (Py_ssize_t i = 0; i < PySequence_Fast_GET_SIZE(items) && !failed; i++) {
        PyObject *item = Py_NewRef(PySequence_Fast_GET_ITEM(items, i));
        if (inner == NULL) {
            failed = add_code(into, item);
        } else {
            PyObject *found = PyObject_GetAttr(item, inner);
            if (found == NULL) {
                failed = 1;
            } else {
                int some = PyObject_IsTrue(found);  /* most are empty (a Produce answer's record errors) */
                failed = some < 0 || (some && walk(found, into, NULL) < 0);
                Py_DECREF(found);
            }
        }
        Py_DECREF(item);
    }
    Py_DECREF(items);
    return failed ? -1 : 0;
}

static PyObject *count_two_levels(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    (void)module;
    if (nargs != 5 || !PyDict_Check(args[4]) || !PyUnicode_Check(args[2]) || !PyUnicode_Check(args[3])) {
        PyErr_SetString(PyExc_TypeError, "count_two_levels(answer, has_error, outer, inner, into: dict)");
        return NULL;
    }
    PyObject *answer = args[0], *into = args[4];
    int has_error = PyObject_IsTrue(args[1]);
    if (has_error < 0 || (has_error && add_code(into, answer) < 0)) return NULL;
    PyObject *outer = PyObject_GetAttr(answer, args[2]);
    if (outer == NULL) return NULL;
    int failed = walk(outer, into, args[3]);
    Py_DECREF(outer);
    if (failed) return NULL;
    Py_RETURN_NONE;
}

static PyMethodDef error_count_methods[] = {
    {.ml_name = "count_two_levels", .ml_meth = (PyCFunction)(void (*)(void))count_two_levels,
     .ml_flags = METH_FASTCALL, .ml_doc = "add a two-level answer's error codes to a dict of counts"},
    {0},
};

static struct PyModuleDef error_count_module = {
    PyModuleDef_HEAD_INIT, .m_name = "_error_counts", .m_size = 0, .m_methods = error_count_methods,
};

PyMODINIT_FUNC PyInit__error_counts(void) {
    ERROR_CODE = PyUnicode_InternFromString("error_code");
    ONE = PyLong_FromLong(1);
    if (ERROR_CODE == NULL || ONE == NULL) return NULL;
    return PyModule_Create(&error_count_module);
}
