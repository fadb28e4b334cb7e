/* broker/handlers/fetch_resolve.py's _reuse in one call: a sessionless consumer's Fetch answered from
 * what its connection kept, the answer objects made as partition_data, topic_response and Wanted make
 * them.
 *
 * reuse(partition_template, partition_offsets, wanted_template, wanted_offsets, topic_type, no_topic_id,
 *       known, asked, by_id) -> (topics, wanted) | None
 * known: {topic id or name: {partition index: (leader epoch asked, weakref to the Partition)}};
 * asked: the request's FetchTopics. None, as _reuse, unless every partition asked was kept at the
 * leader epoch asked now and its Partition is alive. Each PartitionData is a copy of
 * `partition_template` (partition_data(0): every field at its answer's default, which partition_data
 * owns) with its partition_index; each Wanted a copy of `wanted_template` (the dataclass's defaults)
 * with its response, partition and what the request asked. The fetch_resolve module binds the first
 * six arguments once (functools.partial); tests/unit/test_fetch_resolve_cache.py holds the answers
 * equal to _reuse's.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>

/* An attribute or method name made once and interned: PyObject_GetAttrString makes and hashes a new str
 * on every call, which cost these per-Fetch paths more than the Python they replace */
#define NAME(literal) ({                                            \
    static PyObject *interned_;                                     \
    if (interned_ == NULL) interned_ = PyUnicode_InternFromString(literal); \
    interned_;                                                      \
})

/* A copy of `template` with no __init__: its slots (the member offsets `offsets` holds, from member_offsets)
 * copied as references, as getattr and setattr of each would, without looking each name up twice */
static PyObject *copy_of(PyObject *template, PyObject *offsets) {
    PyTypeObject *type = Py_TYPE(template);
    PyObject *no_args = PyTuple_New(0);
    if (no_args == NULL) return NULL;
    PyObject *made = type->tp_new(type, no_args, NULL);  /* object.__new__: every slot empty */
    Py_DECREF(no_args);
    if (made == NULL) return NULL;
    const Py_ssize_t *offset = (const Py_ssize_t *)PyBytes_AS_STRING(offsets);
    Py_ssize_t count = PyBytes_GET_SIZE(offsets) / (Py_ssize_t)sizeof(Py_ssize_t);
    for (Py_ssize_t i = 0; i < count; i++)  /* never a write outside the object, whatever the offsets */
        if (offset[i] < (Py_ssize_t)sizeof(PyObject)
                || offset[i] > type->tp_basicsize - (Py_ssize_t)sizeof(PyObject *)) {
            Py_DECREF(made);
            PyErr_SetString(PyExc_TypeError, "copy_of: an offset outside the template's type");
            return NULL;
        }
    for (Py_ssize_t i = 0; i < count; i++) {
        PyObject *value = *(PyObject **)((char *)template + offset[i]);
        Py_XSETREF(*(PyObject **)((char *)made + offset[i]), Py_XNewRef(value));
    }
    return made;
}

/* member_offsets(cls, names) -> bytes: where each named slot of `cls` lives in its instances (for copy_of).
 * TypeError unless each is a writable object slot of cls itself */
static PyObject *member_offsets(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    (void)module;
    if (nargs != 2 || !PyType_Check(args[0]) || !PyTuple_Check(args[1])) {
        PyErr_SetString(PyExc_TypeError, "member_offsets(cls, names: tuple)");
        return NULL;
    }
    PyTypeObject *type = (PyTypeObject *)args[0];
    Py_ssize_t count = PyTuple_GET_SIZE(args[1]);
    PyObject *offsets = PyBytes_FromStringAndSize(NULL, count * (Py_ssize_t)sizeof(Py_ssize_t));
    if (offsets == NULL) return NULL;
    Py_ssize_t *offset = (Py_ssize_t *)PyBytes_AS_STRING(offsets);
    for (Py_ssize_t i = 0; i < count; i++) {
        PyObject *name = PyTuple_GET_ITEM(args[1], i);
        PyObject *found = PyDict_GetItemWithError(type->tp_dict, name);  /* borrowed; the class's own */
        PyMemberDef *member = found != NULL && Py_IS_TYPE(found, &PyMemberDescr_Type)
                              ? ((PyMemberDescrObject *)found)->d_member : NULL;
        if (member == NULL || member->type != T_OBJECT_EX || (member->flags & READONLY)) {
            if (!PyErr_Occurred()) PyErr_Format(PyExc_TypeError, "member_offsets: %R is not a slot of %s", name,
                                                type->tp_name);
            Py_DECREF(offsets);
            return NULL;
        }
        offset[i] = member->offset;
    }
    return offsets;
}

static int set(PyObject *object, PyObject *name, PyObject *value) {
    if (value == NULL) return -1;
    int result = PyObject_SetAttr(object, name, value);
    Py_DECREF(value);
    return result;
}

static PyObject *reuse(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    (void)module;
    if (nargs != 9 || !PyBytes_Check(args[1]) || !PyBytes_Check(args[3]) || !PyDict_Check(args[6])) {
        PyErr_SetString(PyExc_TypeError, "reuse(partition_template, partition_offsets, wanted_template, wanted_offsets, "
                                         "topic_type, no_topic_id, known, asked, by_id)");
        return NULL;
    }
    PyObject *partition_template = args[0], *partition_offsets = args[1], *wanted_template = args[2];
    PyObject *wanted_offsets = args[3], *topic_type = args[4], *no_topic_id = args[5], *known = args[6];
    int by_id = PyObject_IsTrue(args[8]);
    if (by_id < 0) return NULL;
    PyObject *asked = PySequence_Fast(args[7], "reuse: asked must be a sequence");
    if (asked == NULL) return NULL;
    PyObject *topics = PyList_New(0), *wanted = PyList_New(0), *answer = NULL;
    PyObject *topic = NULL, *partitions = NULL, *parts_asked = NULL, *key = NULL, *parts = NULL;
    if (topics == NULL || wanted == NULL) goto done;
    for (Py_ssize_t t = 0; t < PySequence_Fast_GET_SIZE(asked); t++) {
        PyObject *asked_topic = PySequence_Fast_GET_ITEM(asked, t);
        key = PyObject_GetAttr(asked_topic, by_id ? NAME("topic_id") : NAME("topic"));
        if (key == NULL) goto done;
        /* held, not borrowed: the lookups run Python code (a UUID's hash) */
        Py_XSETREF(parts, Py_XNewRef(PyDict_GetItemWithError(known, key)));
        if (parts == NULL) {
            if (!PyErr_Occurred()) answer = Py_NewRef(Py_None);
            goto done;
        }
        if (!PyDict_Check(parts)) {
            PyErr_SetString(PyExc_TypeError, "reuse: a kept topic is a dict");
            goto done;
        }
        partitions = PyList_New(0);
        if (partitions == NULL) goto done;
        PyTypeObject *type = (PyTypeObject *)topic_type;
        PyObject *no_args = PyTuple_New(0);
        if (no_args == NULL) goto done;
        topic = type->tp_new(type, no_args, NULL);  /* topic_response(): no Struct.__init__ */
        Py_DECREF(no_args);
        if (topic == NULL) goto done;
        if (by_id) {
            if (set(topic, NAME("topic"), PyUnicode_FromString("")) < 0
                    || PyObject_SetAttr(topic, NAME("topic_id"), key) < 0) goto done;
        } else {
            if (PyObject_SetAttr(topic, NAME("topic"), key) < 0
                    || PyObject_SetAttr(topic, NAME("topic_id"), no_topic_id) < 0) goto done;
        }
        if (PyObject_SetAttr(topic, NAME("partitions"), partitions) < 0 || PyList_Append(topics, topic) < 0) goto done;
        Py_CLEAR(topic);
        Py_CLEAR(key);
        PyObject *listed = PyObject_GetAttr(asked_topic, NAME("partitions"));
        if (listed == NULL) goto done;
        parts_asked = PySequence_Fast(listed, "reuse: a topic's partitions must be a sequence");
        Py_DECREF(listed);
        if (parts_asked == NULL) goto done;
        for (Py_ssize_t p = 0; p < PySequence_Fast_GET_SIZE(parts_asked); p++) {
            PyObject *part = PySequence_Fast_GET_ITEM(parts_asked, p);
            PyObject *index = PyObject_GetAttr(part, NAME("partition"));
            if (index == NULL) goto done;
            PyObject *found = PyDict_GetItemWithError(parts, index);  /* borrowed */
            if (found == NULL || !PyTuple_Check(found) || PyTuple_GET_SIZE(found) != 2) {
                Py_DECREF(index);
                if (found == NULL && !PyErr_Occurred()) answer = Py_NewRef(Py_None);
                else if (found != NULL) PyErr_SetString(PyExc_TypeError, "reuse: a kept partition is (epoch, ref)");
                goto done;
            }
            PyObject *epoch = PyObject_GetAttr(part, NAME("current_leader_epoch"));
            int same = epoch == NULL ? -1 : PyObject_RichCompareBool(PyTuple_GET_ITEM(found, 0), epoch, Py_EQ);
            Py_XDECREF(epoch);
            if (same <= 0) {
                Py_DECREF(index);
                if (same == 0) answer = Py_NewRef(Py_None);
                goto done;
            }
            PyObject *partition = PyObject_CallNoArgs(PyTuple_GET_ITEM(found, 1));  /* the weak reference */
            if (partition == NULL || partition == Py_None) {
                Py_DECREF(index);
                if (partition == Py_None) {  /* dropped (the counter moved then too) */
                    Py_DECREF(partition);
                    answer = Py_NewRef(Py_None);
                }
                goto done;
            }
            PyObject *response = copy_of(partition_template, partition_offsets);
            int failed = response == NULL || PyObject_SetAttr(response, NAME("partition_index"), index) < 0
                         || PyList_Append(partitions, response) < 0;
            Py_DECREF(index);
            PyObject *w = failed ? NULL : copy_of(wanted_template, wanted_offsets);
            failed = failed || w == NULL || PyObject_SetAttr(w, NAME("response"), response) < 0
                     || PyObject_SetAttr(w, NAME("partition"), partition) < 0
                     || set(w, NAME("fetch_offset"), PyObject_GetAttr(part, NAME("fetch_offset"))) < 0
                     || set(w, NAME("max_bytes"), PyObject_GetAttr(part, NAME("partition_max_bytes"))) < 0
                     || set(w, NAME("last_fetched_epoch"), PyObject_GetAttr(part, NAME("last_fetched_epoch"))) < 0
                     || PyList_Append(wanted, w) < 0;
            Py_XDECREF(w);
            Py_XDECREF(response);
            Py_DECREF(partition);
            if (failed) goto done;
        }
        Py_CLEAR(parts_asked);
        Py_CLEAR(partitions);
    }
    answer = PyTuple_Pack(2, topics, wanted);
done:  /* the references this call still holds, whichever way it ends */
    Py_XDECREF(key), Py_XDECREF(topic), Py_XDECREF(parts_asked), Py_XDECREF(partitions), Py_XDECREF(parts);
    Py_XDECREF(topics), Py_XDECREF(wanted), Py_DECREF(asked);
    return answer;
}

static PyMethodDef methods[] = {
    {.ml_name = "reuse", .ml_meth = (PyCFunction)(void (*)(void))reuse, .ml_flags = METH_FASTCALL,
     .ml_doc = "fetch_resolve._reuse: (topics, wanted) from what a connection kept, or None"},
    {.ml_name = "member_offsets", .ml_meth = (PyCFunction)(void (*)(void))member_offsets, .ml_flags = METH_FASTCALL,
     .ml_doc = "member_offsets(cls, names) -> bytes: the slots' offsets in instances of cls (reuse's copies)"},
    {0},
};

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT, .m_name = "_fetch_reuse", .m_size = 0, .m_methods = methods,
};

PyMODINIT_FUNC PyInit__fetch_reuse(void) { return PyModule_Create(&module_def); }
