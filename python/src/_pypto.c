// SPDX-License-Identifier: MIT
/*
 * _pypto: the C extension under the pypto and hcomm Python packages.
 *
 * Thin on purpose: it converts between Python objects and libpypto's /
 * libhcomm's structures, releases the GIL around every call that can
 * block (pypto_run, collectives, registration), and takes it back in the
 * tile functions written in Python.  Errors come back as (negative code)
 * integers with the library's message in errmsg(); the Python layer
 * (pypto/__init__.py, pypto/hcomm.py) turns them into exceptions.
 *
 * Buffers (numpy arrays or anything with the buffer protocol) are used
 * in place: the caller keeps the object alive as long as the library may
 * touch its memory (the Python layer holds a reference).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <hcomm.h>
#include <pypto.h>

/* ------------------------------------------------------------------ */
/* configuration                                                       */
/* ------------------------------------------------------------------ */

/* dict -> struct pypto_config over the defaults and the environment */
static int config_from_dict(PyObject *d, struct pypto_config *cfg)
{
	PyObject *k, *v;
	Py_ssize_t pos = 0;
	int rc;

	pypto_config_default(cfg);
	rc = pypto_config_from_env(cfg);
	if (rc) {
		PyErr_Format(PyExc_ValueError, "pypto configuration from the "
			     "environment: %s", pypto_errmsg());
		return -1;
	}
	if (!d || d == Py_None)
		return 0;
	if (!PyDict_Check(d)) {
		PyErr_SetString(PyExc_TypeError, "config must be a dict");
		return -1;
	}
	while (PyDict_Next(d, &pos, &k, &v)) {
		const char *key = PyUnicode_Check(k) ? PyUnicode_AsUTF8(k) : NULL;
		unsigned long long n;

		if (!key) {
			PyErr_SetString(PyExc_TypeError,
					"config keys must be strings");
			return -1;
		}
		if (!strcmp(key, "tile_size") && PyTuple_Check(v)) {
			/* the seed's (256, 256): tiles are square */
			if (PyTuple_GET_SIZE(v) != 2 ||
			    PyObject_RichCompareBool(PyTuple_GET_ITEM(v, 0),
						     PyTuple_GET_ITEM(v, 1),
						     Py_EQ) != 1) {
				PyErr_SetString(PyExc_ValueError,
						"tile_size: tiles are square, "
						"give n or (n, n)");
				return -1;
			}
			v = PyTuple_GET_ITEM(v, 0);
		}
		if (!strcmp(key, "double_buffering") ||
		    !strcmp(key, "profile")) {
			int b = PyObject_IsTrue(v);

			if (b < 0)
				return -1;
			if (key[0] == 'd')
				cfg->double_buffering = b;
			else
				cfg->profile = b;
			continue;
		}
		if (!PyLong_Check(v) || PyBool_Check(v)) {
			PyErr_Format(PyExc_TypeError, "config %s: an integer, "
				     "not %s", key, Py_TYPE(v)->tp_name);
			return -1;
		}
		n = PyLong_AsUnsignedLongLong(v);
		if (PyErr_Occurred()) {
			PyErr_Clear();
			PyErr_Format(PyExc_ValueError, "config %s: out of "
				     "range", key);
			return -1;
		}
		if (!strcmp(key, "seed")) {
			cfg->seed = n;
			continue;
		}
		if (n > UINT32_MAX) {
			PyErr_Format(PyExc_ValueError, "config %s: %llu is out "
				     "of range", key, n);
			return -1;
		}
		if (!strcmp(key, "workers"))
			cfg->workers = (uint32_t)n;
		else if (!strcmp(key, "devices"))
			cfg->devices = (uint32_t)n;
		else if (!strcmp(key, "prefetch_depth"))
			cfg->prefetch_depth = (uint32_t)n;
		else if (!strcmp(key, "tile_size"))
			cfg->tile_size = (uint32_t)n;
		else if (!strcmp(key, "batch_max"))
			cfg->batch_max = (uint32_t)n;
		else if (!strcmp(key, "max_retries"))
			cfg->max_retries = (uint32_t)n;
		else {
			PyErr_Format(PyExc_KeyError, "unknown pypto config key "
				     "'%s' (workers, devices, prefetch_depth, "
				     "double_buffering, tile_size, batch_max, "
				     "max_retries, profile, seed)", key);
			return -1;
		}
	}
	return 0;
}

static PyObject *config_to_dict(const struct pypto_config *c)
{
	return Py_BuildValue("{s:I,s:I,s:I,s:O,s:I,s:I,s:I,s:O,s:K}",
			     "workers", c->workers, "devices", c->devices,
			     "prefetch_depth", c->prefetch_depth,
			     "double_buffering",
			     c->double_buffering ? Py_True : Py_False,
			     "tile_size", c->tile_size, "batch_max",
			     c->batch_max, "max_retries", c->max_retries,
			     "profile", c->profile ? Py_True : Py_False,
			     "seed", (unsigned long long)c->seed);
}

/* resolve(dict) -> the configuration a run would use, as a dict */
static PyObject *py_config_resolve(PyObject *self, PyObject *arg)
{
	struct pypto_config cfg;

	(void)self;
	if (config_from_dict(arg, &cfg))
		return NULL;
	return config_to_dict(&cfg);
}

/* ------------------------------------------------------------------ */
/* Graph                                                               */
/* ------------------------------------------------------------------ */

struct tile_fn;

typedef struct {
	PyObject_HEAD
	struct pypto_graph *g;
	PyObject *fns;		/* list of the tiles' callables */
	PyObject *keep;		/* list of buffers the graph points into */
	struct tile_fn **args;	/* one per Python tile, freed with us */
	size_t nargs, cap;
	PyObject *exc;		/* first exception a tile raised (GIL) */
} GraphObject;

struct tile_fn {
	PyObject *fn;		/* borrowed from GraphObject.fns */
	GraphObject *graph;	/* borrowed: the graph outlives its runs */
};

static int tile_trampoline(void *arg, const struct pypto_exec *ex)
{
	struct tile_fn *t = arg;
	PyGILState_STATE st = PyGILState_Ensure();
	PyObject *r;
	int ret = 0;

	r = PyObject_CallFunction(t->fn, "IIi", ex->tile, ex->worker,
				  ex->device);
	if (!r) {
		PyObject *type, *val, *tb;

		PyErr_Fetch(&type, &val, &tb);
		PyErr_NormalizeException(&type, &val, &tb);
		if (tb && val)
			PyException_SetTraceback(val, tb);
		if (!t->graph->exc && val) {
			t->graph->exc = val;
			val = NULL;
		}
		Py_XDECREF(type);
		Py_XDECREF(val);
		Py_XDECREF(tb);
		ret = -1;
	} else {
		/* None or 0 succeed; any other value fails the tile */
		if (r != Py_None && !(PyLong_Check(r) && !PyObject_IsTrue(r)))
			ret = -1;
		Py_DECREF(r);
	}
	PyGILState_Release(st);
	return ret;
}

static void graph_dealloc(GraphObject *self)
{
	size_t i;

	if (self->g)
		pypto_graph_destroy(self->g);
	for (i = 0; i < self->nargs; i++)
		free(self->args[i]);
	free(self->args);
	Py_XDECREF(self->fns);
	Py_XDECREF(self->keep);
	Py_XDECREF(self->exc);
	Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyObject *graph_new(PyTypeObject *type, PyObject *args, PyObject *kw)
{
	GraphObject *self;
	int rc;

	(void)args;
	(void)kw;
	self = (GraphObject *)type->tp_alloc(type, 0);
	if (!self)
		return NULL;
	self->fns = PyList_New(0);
	self->keep = PyList_New(0);
	if (!self->fns || !self->keep) {
		Py_DECREF(self);
		return PyErr_NoMemory();
	}
	rc = pypto_graph_create(&self->g);
	if (rc) {
		self->g = NULL;
		Py_DECREF(self);
		return PyErr_NoMemory();
	}
	return (PyObject *)self;
}

/* add_fn(kind, name, fn, affinity) -> id (>= 0) or -code */
static PyObject *graph_add_fn(GraphObject *self, PyObject *a)
{
	const char *name;
	PyObject *fn;
	int kind, aff, rc;
	struct tile_fn *t;

	if (!PyArg_ParseTuple(a, "isOi", &kind, &name, &fn, &aff))
		return NULL;
	if (!PyCallable_Check(fn)) {
		PyErr_SetString(PyExc_TypeError, "tile function must be "
				"callable");
		return NULL;
	}
	if (self->nargs == self->cap) {
		size_t cap = self->cap ? 2 * self->cap : 16;
		void *p = realloc(self->args, cap * sizeof(*self->args));

		if (!p)
			return PyErr_NoMemory();
		self->args = p;
		self->cap = cap;
	}
	t = malloc(sizeof(*t));
	if (!t)
		return PyErr_NoMemory();
	if (PyList_Append(self->fns, fn)) {
		free(t);
		return NULL;
	}
	t->fn = fn;
	t->graph = self;
	self->args[self->nargs++] = t;
	rc = kind == PYPTO_HOST ?
		pypto_add_host(self->g, name, tile_trampoline, t, aff) :
		pypto_add_compute(self->g, name, tile_trampoline, t, aff);
	return PyLong_FromLong(rc);
}

/*
 * add_xfer(name, op, buffer, rows, row_bytes, local_stride, win_off,
 * win_stride, affinity) -> id or -code: one transfer of rows x row_bytes
 * between the buffer (from its first byte, rows local_stride apart) and
 * the device window.  The graph keeps the buffer alive.
 */
static PyObject *graph_add_xfer(GraphObject *self, PyObject *a)
{
	unsigned long long row_bytes, lstride, woff, wstride;
	unsigned int op, rows;
	struct pypto_xfer x;
	const char *name;
	PyObject *obj;
	Py_buffer b;
	int aff, rc, rank = PYPTO_RANK_TARGET;

	if (!PyArg_ParseTuple(a, "sIOIKKKKi|i", &name, &op, &obj, &rows,
			      &row_bytes, &lstride, &woff, &wstride, &aff,
			      &rank))
		return NULL;
	/* any layout: the Python layer checked the rows fit the buffer */
	if (PyObject_GetBuffer(obj, &b, op == PYPTO_GET ? PyBUF_WRITABLE :
			       PyBUF_SIMPLE))
		return NULL;
	if (rows == 0 || row_bytes == 0 ||
	    (rows > 1 && lstride < row_bytes) ||
	    (uint64_t)(rows - 1) * lstride + row_bytes > (uint64_t)b.len) {
		PyBuffer_Release(&b);
		PyErr_SetString(PyExc_ValueError, "transfer: the rows do not "
				"fit the buffer");
		return NULL;
	}
	memset(&x, 0, sizeof(x));
	x.op = op;
	x.rows = rows;
	x.row_bytes = row_bytes;
	x.local = b.buf;
	x.local_stride = lstride;
	x.win_off = woff;
	x.win_stride = wstride;
	PyBuffer_Release(&b);	/* kept alive by self->keep below */
	if (PyList_Append(self->keep, obj))
		return NULL;
	rc = pypto_add_transfer(self->g, name, &x, 1, aff);
	/* the rank it reaches (pypto_tile_set_rank); the tile stays */
	if (rc >= 0 && rank != PYPTO_RANK_TARGET) {
		int err = pypto_tile_set_rank(self->g, (uint32_t)rc, rank);

		if (err)
			rc = err;
	}
	return PyLong_FromLong(rc);
}

/* add_dep(from, to) -> 0 or -code */
static PyObject *graph_add_dep(GraphObject *self, PyObject *a)
{
	unsigned int from, to;

	if (!PyArg_ParseTuple(a, "II", &from, &to))
		return NULL;
	return PyLong_FromLong(pypto_add_dep(self->g, from, to));
}

static PyObject *graph_set_cost(GraphObject *self, PyObject *a)
{
	unsigned int tile;
	double cost;

	if (!PyArg_ParseTuple(a, "Id", &tile, &cost))
		return NULL;
	return PyLong_FromLong(pypto_set_cost(self->g, tile, cost));
}

static PyObject *analysis_dict(const struct pypto_analysis *an)
{
	return Py_BuildValue("{s:I,s:I,s:I,s:I,s:I,s:I,s:d,s:d}",
			     "tiles", an->tiles, "edges", an->edges,
			     "components", an->components, "levels",
			     an->levels, "max_width", an->max_width, "roots",
			     an->roots, "critical_path", an->critical_path,
			     "total_cost", an->total_cost);
}

/* validate() -> (rc, analysis dict or None, cycle list) */
static PyObject *graph_validate(GraphObject *self, PyObject *unused)
{
	struct pypto_analysis an;
	PyObject *cyc, *ad, *res;
	uint32_t ids[1024];
	unsigned int n, i;
	int rc;

	(void)unused;
	memset(&an, 0, sizeof(an));
	rc = pypto_graph_validate(self->g, &an);
	n = rc == -PYPTO_DEADLOCK ? pypto_graph_cycle(self->g, ids, 1024) : 0;
	if (n > 1024)
		n = 1024;
	cyc = PyList_New(n);
	if (!cyc)
		return NULL;
	for (i = 0; i < n; i++)
		PyList_SET_ITEM(cyc, i, PyLong_FromUnsignedLong(ids[i]));
	if (rc) {
		ad = Py_None;
		Py_INCREF(ad);
	} else {
		ad = analysis_dict(&an);
	}
	res = Py_BuildValue("(iNN)", rc, ad, cyc);
	return res;
}

static PyObject *graph_tile_info(GraphObject *self, PyObject *a)
{
	unsigned int tile;
	const char *name;

	if (!PyArg_ParseTuple(a, "I", &tile))
		return NULL;
	name = pypto_tile_name(self->g, tile);
	if (!name)
		Py_RETURN_NONE;
	return Py_BuildValue("{s:s,s:i,s:i,s:I,s:i}", "name", name, "kind",
			     pypto_tile_kind(self->g, tile), "affinity",
			     pypto_tile_affinity(self->g, tile), "inputs",
			     pypto_tile_inputs(self->g, tile), "level",
			     pypto_tile_level(self->g, tile));
}

static PyObject *graph_counts(GraphObject *self, PyObject *unused)
{
	(void)unused;
	return Py_BuildValue("(II)", pypto_graph_tiles(self->g),
			     pypto_graph_edges(self->g));
}

/* dump(path, fmt) -> 0 or -code */
static PyObject *graph_dump(GraphObject *self, PyObject *a)
{
	const char *path;
	int fmt, rc;

	if (!PyArg_ParseTuple(a, "si", &path, &fmt))
		return NULL;
	rc = pypto_dump_graph(self->g, path, (enum pypto_dump_fmt)fmt);
	return PyLong_FromLong(rc);
}

/* take_exception() -> the first exception a tile raised, or None */
static PyObject *graph_take_exception(GraphObject *self, PyObject *unused)
{
	PyObject *e = self->exc;

	(void)unused;
	self->exc = NULL;
	if (!e)
		Py_RETURN_NONE;
	return e;
}

static PyMethodDef graph_methods[] = {
	{ "add_fn", (PyCFunction)graph_add_fn, METH_VARARGS, NULL },
	{ "add_xfer", (PyCFunction)graph_add_xfer, METH_VARARGS, NULL },
	{ "add_dep", (PyCFunction)graph_add_dep, METH_VARARGS, NULL },
	{ "set_cost", (PyCFunction)graph_set_cost, METH_VARARGS, NULL },
	{ "validate", (PyCFunction)graph_validate, METH_NOARGS, NULL },
	{ "tile_info", (PyCFunction)graph_tile_info, METH_VARARGS, NULL },
	{ "counts", (PyCFunction)graph_counts, METH_NOARGS, NULL },
	{ "dump", (PyCFunction)graph_dump, METH_VARARGS, NULL },
	{ "take_exception", (PyCFunction)graph_take_exception, METH_NOARGS,
	  NULL },
	{ NULL, NULL, 0, NULL }
};

static PyTypeObject GraphType = {
	PyVarObject_HEAD_INIT(NULL, 0)
	.tp_name = "_pypto.Graph",
	.tp_basicsize = sizeof(GraphObject),
	.tp_dealloc = (destructor)graph_dealloc,
	.tp_flags = Py_TPFLAGS_DEFAULT,
	.tp_new = graph_new,
	.tp_methods = graph_methods,
};

/* ------------------------------------------------------------------ */
/* Run                                                                 */
/* ------------------------------------------------------------------ */

typedef struct {
	PyObject_HEAD
	struct pypto_run *r;
	PyObject *graph;	/* the run's record points at its names */
} RunObject;

static void run_dealloc(RunObject *self)
{
	if (self->r)
		pypto_run_free(self->r);
	Py_XDECREF(self->graph);
	Py_TYPE(self)->tp_free((PyObject *)self);
}

#define S_U(f)	"" #f, (unsigned long long)s->f
static PyObject *run_stats(RunObject *self, PyObject *unused)
{
	const struct pypto_stats *s = pypto_run_stats(self->r);
	PyObject *d, *an;

	(void)unused;
	if (!s)
		Py_RETURN_NONE;
	d = Py_BuildValue("{s:K,s:I,s:I,s:I,s:K,s:K,s:K,s:K,s:K,s:K,s:K,s:K,"
			  "s:K,s:K,s:K,s:K,s:K,s:K,s:d,s:d,s:d,s:d,s:d,s:K}",
			  S_U(wall_ns), "workers", s->workers, "devices",
			  s->devices, "tiles", s->tiles, S_U(tiles_compute),
			  S_U(tiles_transfer), S_U(tiles_host), S_U(steals),
			  S_U(steal_attempts), S_U(parks), S_U(rounds),
			  S_U(descs), S_U(xfer_bytes), S_U(xfer_retries),
			  S_U(xfer_failures), S_U(compute_ns), S_U(host_ns),
			  S_U(xfer_ns), "worker_util", s->worker_util,
			  "xfer_util", s->xfer_util, "overlap_eff",
			  s->overlap_eff, "tile_mean_ns", s->tile_mean_ns,
			  "tile_cv", s->tile_cv, S_U(events));
	if (!d)
		return NULL;
	an = analysis_dict(&s->analysis);
	if (!an || PyDict_SetItemString(d, "analysis", an)) {
		Py_XDECREF(an);
		Py_DECREF(d);
		return NULL;
	}
	Py_DECREF(an);
#define SET(k, obj) do {						\
		PyObject *o_ = (obj);					\
		if (!o_ || PyDict_SetItemString(d, k, o_)) {		\
			Py_XDECREF(o_);					\
			Py_DECREF(d);					\
			return NULL;					\
		}							\
		Py_DECREF(o_);						\
	} while (0)
	SET("xfer_cover_ns", PyLong_FromUnsignedLongLong(s->xfer_cover_ns));
	SET("xfer_exposed_ns",
	    PyLong_FromUnsignedLongLong(s->xfer_exposed_ns));
	SET("engine_known", PyBool_FromLong(s->engine_known));
	SET("engine_lanes", PyLong_FromUnsignedLong(s->engine_lanes));
	SET("engine_busy_ns", PyLong_FromUnsignedLongLong(s->engine_busy_ns));
	SET("engine_util", PyFloat_FromDouble(s->engine_util));
	SET("worker_cv", PyFloat_FromDouble(s->worker_cv));
	SET("xfer_cap", PyLong_FromUnsignedLong(s->xfer_cap));
	SET("xfer_waits", PyLong_FromUnsignedLongLong(s->xfer_waits));
	SET("link_events", PyLong_FromUnsignedLong(s->link_events));
	SET("failovers", PyLong_FromUnsignedLong(s->failovers));
	SET("failover_stall_ns",
	    PyLong_FromUnsignedLongLong(s->failover_stall_ns));
	SET("tiles_delayed", PyLong_FromUnsignedLongLong(s->tiles_delayed));
	SET("peer_lost", PyBool_FromLong(s->peer_lost));
	SET("ranks_lost", PyLong_FromUnsignedLong(s->ranks_lost));
	SET("tiles_replaced", PyLong_FromUnsignedLongLong(s->tiles_replaced));
	SET("tiles_allreduce",
	    PyLong_FromUnsignedLongLong(s->tiles_allreduce));
	SET("allreduce_ns", PyLong_FromUnsignedLongLong(s->allreduce_ns));
	SET("allreduce_bytes",
	    PyLong_FromUnsignedLongLong(s->allreduce_bytes));
#undef SET
	return d;
}
#undef S_U

/* diagnose() -> (flags, text) */
static PyObject *run_diagnose(RunObject *self, PyObject *unused)
{
	char *buf = NULL;
	size_t len = 0;
	unsigned int flags;
	PyObject *res;
	FILE *f;

	(void)unused;
	f = open_memstream(&buf, &len);
	if (!f)
		return PyErr_SetFromErrno(PyExc_OSError);
	flags = pypto_run_diagnose(self->r, f);
	fclose(f);
	res = Py_BuildValue("(Is#)", flags, buf ? buf : "",
			    (Py_ssize_t)(buf ? len : 0));
	free(buf);
	return res;
}

/* events() -> list of (t0_ns, t1_ns, stage, tile, worker, device, bytes) */
static PyObject *run_events(RunObject *self, PyObject *unused)
{
	const struct pypto_event *ev;
	unsigned int n, i;
	PyObject *l;

	(void)unused;
	n = pypto_run_events(self->r, &ev);
	l = PyList_New(n);
	if (!l)
		return NULL;
	for (i = 0; i < n; i++) {
		PyObject *t = Py_BuildValue("(KKIIiiK)",
			(unsigned long long)ev[i].t0_ns,
			(unsigned long long)ev[i].t1_ns,
			(unsigned int)ev[i].stage, ev[i].tile,
			ev[i].worker == PYPTO_NO_WORKER ? -1 :
			(int)ev[i].worker, ev[i].device,
			(unsigned long long)ev[i].bytes);

		if (!t) {
			Py_DECREF(l);
			return NULL;
		}
		PyList_SET_ITEM(l, i, t);
	}
	return l;
}

/* write(path, html) -> 0 or -code */
static PyObject *run_write(RunObject *self, PyObject *a)
{
	const char *path;
	int html, rc;

	if (!PyArg_ParseTuple(a, "sp", &path, &html))
		return NULL;
	Py_BEGIN_ALLOW_THREADS
	rc = html ? pypto_run_write_html(self->r, path) :
		    pypto_run_write_trace(self->r, path);
	Py_END_ALLOW_THREADS
	return PyLong_FromLong(rc);
}

static PyMethodDef run_methods[] = {
	{ "stats", (PyCFunction)run_stats, METH_NOARGS, NULL },
	{ "diagnose", (PyCFunction)run_diagnose, METH_NOARGS, NULL },
	{ "events", (PyCFunction)run_events, METH_NOARGS, NULL },
	{ "write", (PyCFunction)run_write, METH_VARARGS, NULL },
	{ NULL, NULL, 0, NULL }
};

static PyTypeObject RunType = {
	PyVarObject_HEAD_INIT(NULL, 0)
	.tp_name = "_pypto.Run",
	.tp_basicsize = sizeof(RunObject),
	.tp_dealloc = (destructor)run_dealloc,
	.tp_flags = Py_TPFLAGS_DEFAULT,
	.tp_methods = run_methods,
};

static PyObject *wrap_run(struct pypto_run *r, PyObject *graph)
{
	RunObject *ro;

	if (!r)
		Py_RETURN_NONE;
	ro = PyObject_New(RunObject, &RunType);
	if (!ro) {
		pypto_run_free(r);
		return NULL;
	}
	ro->r = r;
	ro->graph = graph;
	Py_XINCREF(graph);
	return (PyObject *)ro;
}

/*
 * The transport of a run over the device memory [dev, dev + len).  With a
 * communicator that memory becomes this rank's window (hcomm_win_create,
 * collective: every rank makes the same calls) and the transfer tiles
 * target this rank through libhcomm (/dev/hcomm, or the communicator's
 * transport to itself); without one, libpypto's memcpy test double.
 * Runs without the GIL.  A libhcomm failure sets *hc_rc (its code; the
 * message is hcomm_errmsg()) and returns -PYPTO_ERR_IO.
 */
static int make_xport(struct hcomm_comm *comm, void *dev, size_t len,
		      struct pypto_xport **x, struct hcomm_win **win,
		      int *hc_rc)
{
	int rc;

	*win = NULL;
	if (!comm)
		return pypto_xport_memcpy(x, dev, len);
	rc = hcomm_win_create(comm, dev, len, win);
	if (rc) {
		*hc_rc = rc;
		*win = NULL;
		return -PYPTO_ERR_IO;
	}
	rc = pypto_xport_hcomm(x, comm, *win, hcomm_comm_rank(comm), dev);
	if (rc) {
		hcomm_win_free(*win);
		*win = NULL;
	}
	return rc;
}

/* after make_xport (without the GIL): 0, or the libhcomm code */
static int drop_xport(struct pypto_xport *x, struct hcomm_win *win)
{
	if (x)
		pypto_xport_destroy(x);
	return win ? hcomm_win_free(win) : 0;
}

static struct hcomm_comm *comm_of(PyObject *cap);

/* the (rc, errno, msg) of a libhcomm failure, or None */
static PyObject *hc_failure(int hc_rc)
{
	if (!hc_rc)
		Py_RETURN_NONE;
	return Py_BuildValue("(iis)", hc_rc, hcomm_errno(), hcomm_errmsg());
}

/*
 * run(graph, config, device, comm, mirrors) -> (rc, Run or None, hcomm
 * failure or None).  device: None (no transfer tiles) or a writable
 * buffer, the memory the transfer tiles address (make_xport: comm None
 * or a communicator capsule).  mirrors: None or a sequence of (rank,
 * mirror) pairs for pypto_xport_hcomm_mirror (needs comm).
 */
static PyObject *py_run(PyObject *self, PyObject *a)
{
	struct pypto_xport *x = NULL;
	struct hcomm_comm *comm = NULL;
	struct hcomm_win *win = NULL;
	struct pypto_run *r = NULL;
	struct pypto_config cfg;
	PyObject *conf, *ro, *dev = Py_None, *ocomm = Py_None;
	PyObject *omir = Py_None;
	int mir[PYPTO_MIRRORS_MAX][2];
	Py_ssize_t nmir = 0, i;
	GraphObject *g;
	int rc = 0, hc_rc = 0, frc;
	Py_buffer b;

	(void)self;
	if (!PyArg_ParseTuple(a, "O!O|OOO", &GraphType, &g, &conf, &dev,
			      &ocomm, &omir))
		return NULL;
	if (config_from_dict(conf, &cfg))
		return NULL;
	if (omir != Py_None) {
		PyObject *seq = PySequence_Fast(omir, "mirrors: (rank, mirror) "
						"pairs");

		if (!seq)
			return NULL;
		nmir = PySequence_Fast_GET_SIZE(seq);
		if (nmir > PYPTO_MIRRORS_MAX || (nmir && ocomm == Py_None)) {
			Py_DECREF(seq);
			PyErr_Format(PyExc_ValueError, "mirrors: %s",
				     ocomm == Py_None ? "only with comm=" :
				     "16 at most");
			return NULL;
		}
		for (i = 0; i < nmir; i++)
			if (!PyArg_ParseTuple(PySequence_Fast_GET_ITEM(seq, i),
					      "ii;mirrors: (rank, mirror) pairs",
					      &mir[i][0], &mir[i][1])) {
				Py_DECREF(seq);
				return NULL;
			}
		Py_DECREF(seq);
	}
	if (ocomm != Py_None) {
		comm = comm_of(ocomm);
		if (!comm)
			return NULL;
	}
	if (dev != Py_None &&
	    PyObject_GetBuffer(dev, &b, PyBUF_WRITABLE | PyBUF_C_CONTIGUOUS))
		return NULL;
	Py_CLEAR(g->exc);
	Py_BEGIN_ALLOW_THREADS
	if (dev != Py_None)
		rc = make_xport(comm, b.buf, (size_t)b.len, &x, &win, &hc_rc);
	for (i = 0; !rc && x && i < nmir; i++)
		rc = pypto_xport_hcomm_mirror(x, mir[i][0], mir[i][1]);
	if (!rc)
		rc = pypto_run(g->g, &cfg, x, &r);
	frc = drop_xport(x, win);
	if (frc && !hc_rc)
		hc_rc = frc;
	Py_END_ALLOW_THREADS
	if (dev != Py_None)
		PyBuffer_Release(&b);
	ro = wrap_run(r, (PyObject *)g);
	if (!ro)
		return NULL;
	return Py_BuildValue("(iNN)", rc, ro, hc_failure(hc_rc));
}

static void graph_capsule_free(PyObject *cap)
{
	pypto_graph_destroy(PyCapsule_GetPointer(cap, "pypto_graph"));
}

/* A writable C-contiguous float32 buffer of n elements, or an error. */
static int get_f32(PyObject *o, Py_buffer *b, Py_ssize_t n, int writable,
		   const char *what)
{
	if (PyObject_GetBuffer(o, b, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT |
			       (writable ? PyBUF_WRITABLE : 0)))
		return -1;
	if (b->itemsize != 4 || !b->format || strcmp(b->format, "f") ||
	    b->len != n * 4) {
		PyErr_Format(PyExc_ValueError, "%s: want %zd float32 "
			     "elements, C-contiguous", what, n);
		PyBuffer_Release(b);
		return -1;
	}
	return 0;
}

/*
 * gemm(a, b, c, m, n, k, alpha, beta, config, comm) -> (rc, Run or None,
 * hcomm failure or None): the tiled SGEMM of libpypto into c; its device
 * buffer is this rank's window of comm, or (comm None) served by the
 * memcpy test transport (no module needed): make_xport.
 */
static PyObject *py_gemm(PyObject *self, PyObject *a)
{
	PyObject *oa, *ob, *oc, *conf, *ro, *ocomm = Py_None;
	struct hcomm_comm *comm = NULL;
	struct hcomm_win *win = NULL;
	int hc_rc = 0, frc;
	struct pypto_gemm_args ga;
	struct pypto_gemm *gm = NULL;
	struct pypto_xport *x = NULL;
	struct pypto_graph *g = NULL;
	struct pypto_run *r = NULL;
	struct pypto_config cfg;
	unsigned int m, n, k;
	Py_buffer ba, bb, bc;
	float alpha, beta;
	uint64_t bytes = 0;
	void *dev = NULL;
	int rc;

	(void)self;
	if (!PyArg_ParseTuple(a, "OOOIIIffO|O", &oa, &ob, &oc, &m, &n, &k,
			      &alpha, &beta, &conf, &ocomm))
		return NULL;
	if (config_from_dict(conf, &cfg))
		return NULL;
	if (ocomm != Py_None) {
		comm = comm_of(ocomm);
		if (!comm)
			return NULL;
	}
	if (get_f32(oa, &ba, (Py_ssize_t)m * k, 0, "a"))
		return NULL;
	if (get_f32(ob, &bb, (Py_ssize_t)k * n, 0, "b")) {
		PyBuffer_Release(&ba);
		return NULL;
	}
	if (get_f32(oc, &bc, (Py_ssize_t)m * n, 1, "c")) {
		PyBuffer_Release(&ba);
		PyBuffer_Release(&bb);
		return NULL;
	}
	memset(&ga, 0, sizeof(ga));
	ga.m = m;
	ga.n = n;
	ga.k = k;
	ga.alpha = alpha;
	ga.beta = beta;
	ga.a = ba.buf;
	ga.lda = k;
	ga.b = bb.buf;
	ga.ldb = n;
	ga.c = bc.buf;
	ga.ldc = n;
	Py_BEGIN_ALLOW_THREADS
	rc = pypto_gemm_device_bytes(&ga, &cfg, &bytes);
	if (!rc && (bytes > SIZE_MAX || posix_memalign(&dev, 4096, bytes)))
		rc = -PYPTO_ERR_NOMEM, dev = NULL;
	if (!rc) {
		memset(dev, 0, bytes);
		rc = make_xport(comm, dev, bytes, &x, &win, &hc_rc);
	}
	if (!rc)
		rc = pypto_graph_create(&g);
	if (!rc)
		rc = pypto_gemm_build(g, &ga, &cfg, dev, &gm);
	if (!rc)
		rc = pypto_run(g, &cfg, x, &r);
	if (gm)
		pypto_gemm_free(gm);
	frc = drop_xport(x, win);
	if (frc && !hc_rc)
		hc_rc = frc;
	Py_END_ALLOW_THREADS
	PyBuffer_Release(&ba);
	PyBuffer_Release(&bb);
	PyBuffer_Release(&bc);
	/*
	 * The run's record reads the graph (tile names, the workload): the
	 * graph lives in a capsule the run object holds, freed after it.
	 */
	ro = wrap_run(r, NULL);
	if (ro && ro != Py_None && g) {
		PyObject *cap = PyCapsule_New(g, "pypto_graph", graph_capsule_free);

		if (!cap) {
			Py_DECREF(ro);
			ro = NULL;
		} else {
			((RunObject *)ro)->graph = cap;
			g = NULL;
		}
	}
	if (g)
		pypto_graph_destroy(g);
	free(dev);
	if (!ro)
		return NULL;
	return Py_BuildValue("(iNN)", rc, ro, hc_failure(hc_rc));
}

static PyObject *py_errmsg(PyObject *self, PyObject *unused)
{
	(void)self;
	(void)unused;
	return PyUnicode_FromString(pypto_errmsg());
}

static PyObject *py_strerror(PyObject *self, PyObject *a)
{
	int code;

	(void)self;
	if (!PyArg_ParseTuple(a, "i", &code))
		return NULL;
	return PyUnicode_FromString(pypto_strerror(code));
}

/* ------------------------------------------------------------------ */
/* libhcomm: contexts, registrations, QoS, communicators               */
/* ------------------------------------------------------------------ */

static PyObject *hc_result(int rc)
{
	return Py_BuildValue("(iis)", rc, hcomm_errno(), hcomm_errmsg());
}

static PyObject *py_hc_open(PyObject *self, PyObject *a)
{
	struct hcomm_ctx *ctx = NULL;
	unsigned int flags = 0;
	int rc;

	(void)self;
	if (!PyArg_ParseTuple(a, "|I", &flags))
		return NULL;
	Py_BEGIN_ALLOW_THREADS
	rc = hcomm_open(&ctx, flags);
	Py_END_ALLOW_THREADS
	if (rc)
		return Py_BuildValue("(iisO)", rc, hcomm_errno(),
				     hcomm_errmsg(), Py_None);
	return Py_BuildValue("(iisN)", 0, 0, "",
			     PyCapsule_New(ctx, "hcomm_ctx", NULL));
}

static struct hcomm_ctx *ctx_of(PyObject *cap)
{
	return PyCapsule_GetPointer(cap, "hcomm_ctx");
}

static PyObject *py_hc_close(PyObject *self, PyObject *cap)
{
	struct hcomm_ctx *ctx = ctx_of(cap);

	(void)self;
	if (!ctx)
		return NULL;
	Py_BEGIN_ALLOW_THREADS
	hcomm_close(ctx);
	Py_END_ALLOW_THREADS
	Py_RETURN_NONE;
}

static PyObject *py_hc_info(PyObject *self, PyObject *cap)
{
	struct hcomm_ctx *ctx = ctx_of(cap);
	struct hcomm_info in;
	int rc;

	(void)self;
	if (!ctx)
		return NULL;
	rc = hcomm_get_info(ctx, &in);
	if (rc)
		return Py_BuildValue("(iisO)", rc, hcomm_errno(),
				     hcomm_errmsg(), Py_None);
	return Py_BuildValue("(iis{s:I,s:K,s:K,s:I,s:I,s:K,s:K,s:I,s:I})",
			     0, 0, "", "abi_version", in.abi_version,
			     "features", (unsigned long long)in.features,
			     "max_region_size",
			     (unsigned long long)in.max_region_size,
			     "max_regions", in.max_regions, "nr_regions",
			     in.nr_regions, "memlock_limit",
			     (unsigned long long)in.memlock_limit,
			     "pinned_bytes",
			     (unsigned long long)in.pinned_bytes,
			     "max_inline", in.max_inline, "chunk_size",
			     in.chunk_size);
}

static PyObject *py_hc_set_qos(PyObject *self, PyObject *a)
{
	hcomm_qos_config_t q;
	PyObject *cap;
	struct hcomm_ctx *ctx;

	(void)self;
	if (!PyArg_ParseTuple(a, "OIII", &cap, &q.min_rate, &q.max_rate,
			      &q.priority))
		return NULL;
	ctx = ctx_of(cap);
	if (!ctx)
		return NULL;
	return hc_result(hcomm_set_qos(ctx, &q));
}

/* reg_mem(ctx, buffer, access) -> (rc, errno, msg, mr capsule, key) */
static PyObject *py_hc_reg_mem(PyObject *self, PyObject *a)
{
	struct hcomm_ctx *ctx;
	struct hcomm_mr *mr = NULL;
	unsigned int access;
	PyObject *cap, *obj;
	Py_buffer b;
	int rc;

	(void)self;
	if (!PyArg_ParseTuple(a, "OOI", &cap, &obj, &access))
		return NULL;
	ctx = ctx_of(cap);
	if (!ctx)
		return NULL;
	if (PyObject_GetBuffer(obj, &b, PyBUF_C_CONTIGUOUS |
			       ((access & HCOMM_ACCESS_LOCAL_WRITE) ?
				PyBUF_WRITABLE : 0)))
		return NULL;
	Py_BEGIN_ALLOW_THREADS
	rc = hcomm_reg_mem(ctx, b.buf, (size_t)b.len, access, &mr);
	Py_END_ALLOW_THREADS
	PyBuffer_Release(&b);	/* the Python layer keeps obj alive */
	if (rc)
		return Py_BuildValue("(iisOK)", rc, hcomm_errno(),
				     hcomm_errmsg(), Py_None, 0ULL);
	return Py_BuildValue("(iisNK)", 0, 0, "",
			     PyCapsule_New(mr, "hcomm_mr", NULL),
			     (unsigned long long)mr->key);
}

static PyObject *py_hc_dereg(PyObject *self, PyObject *cap)
{
	struct hcomm_mr *mr = PyCapsule_GetPointer(cap, "hcomm_mr");
	int rc;

	(void)self;
	if (!mr)
		return NULL;
	Py_BEGIN_ALLOW_THREADS
	rc = hcomm_dereg(mr);
	Py_END_ALLOW_THREADS
	return hc_result(rc);
}

static PyObject *py_hc_strerror(PyObject *self, PyObject *a)
{
	int code;

	(void)self;
	if (!PyArg_ParseTuple(a, "i", &code))
		return NULL;
	return PyUnicode_FromString(hcomm_strerror(code));
}

/* hcomm_config defaults + environment, as a dict */
static PyObject *py_hc_config_default(PyObject *self, PyObject *a)
{
	struct hcomm_config c;
	int env = 1, rc = 0;

	(void)self;
	if (!PyArg_ParseTuple(a, "|p", &env))
		return NULL;
	hcomm_config_default(&c);
	if (env)
		rc = hcomm_config_from_env(&c);
	if (rc)
		return Py_BuildValue("(iisO)", rc, hcomm_errno(),
				     hcomm_errmsg(), Py_None);
	return Py_BuildValue("(iis{s:K,s:K,s:K,s:I,s:I,s:K,s:O,s:K,s:s,s:i})",
			     0, 0, "",
			     "send_buf_size", (unsigned long long)c.send_buf_size,
			     "recv_buf_size", (unsigned long long)c.recv_buf_size,
			     "max_inline", (unsigned long long)c.max_inline,
			     "num_qps", (unsigned int)c.num_qps,
			     "queue_depth", (unsigned int)c.queue_depth,
			     "cache_limit", (unsigned long long)c.cache_limit,
			     "enable_fp16_compress",
			     c.enable_fp16_compress ? Py_True : Py_False,
			     "comp_threshold",
			     (unsigned long long)c.comp_threshold,
			     "rank_table", c.rank_table ? c.rank_table : "",
			     "timeout_ms", (int)c.timeout_ms);
}

/* dict (from hc_config_default, edited) -> struct hcomm_config */
static int hc_config_from_dict(PyObject *d, struct hcomm_config *c,
			       PyObject **rt_keep)
{
	static const char *const u64[] = { "send_buf_size", "recv_buf_size",
		"cache_limit", "comp_threshold", NULL };
	PyObject *v;
	int i;

	hcomm_config_default(c);
	*rt_keep = NULL;
	if (!PyDict_Check(d)) {
		PyErr_SetString(PyExc_TypeError, "hcomm config: a dict");
		return -1;
	}
#define GET(k) (v = PyDict_GetItemString(d, k))
	for (i = 0; u64[i]; i++) {
		unsigned long long n;

		if (!GET(u64[i]))
			continue;
		n = PyLong_AsUnsignedLongLong(v);
		if (PyErr_Occurred())
			return -1;
		switch (i) {
		case 0: c->send_buf_size = n; break;
		case 1: c->recv_buf_size = n; break;
		case 2: c->cache_limit = n; break;
		default: c->comp_threshold = n; break;
		}
	}
	if (GET("max_inline"))
		c->max_inline = (uint32_t)PyLong_AsUnsignedLong(v);
	if (GET("num_qps"))
		c->num_qps = (uint32_t)PyLong_AsUnsignedLong(v);
	if (GET("queue_depth"))
		c->queue_depth = (uint32_t)PyLong_AsUnsignedLong(v);
	if (GET("timeout_ms"))
		c->timeout_ms = (uint32_t)PyLong_AsUnsignedLong(v);
	if (PyErr_Occurred())
		return -1;
	if (GET("enable_fp16_compress")) {
		int b = PyObject_IsTrue(v);

		if (b < 0)
			return -1;
		c->enable_fp16_compress = b;
	}
	if (GET("rank_table") && PyUnicode_Check(v) &&
	    PyUnicode_GET_LENGTH(v) > 0) {
		*rt_keep = PyUnicode_AsUTF8String(v);
		if (!*rt_keep)
			return -1;
		c->rank_table = PyBytes_AS_STRING(*rt_keep);
	}
#undef GET
	return 0;
}

/* comm_init(config dict) -> (rc, errno, msg, comm capsule or None) */
static PyObject *py_hc_comm_init(PyObject *self, PyObject *d)
{
	struct hcomm_comm *comm = NULL;
	struct hcomm_config c;
	PyObject *keep;
	int rc;

	(void)self;
	if (hc_config_from_dict(d, &c, &keep))
		return NULL;
	Py_BEGIN_ALLOW_THREADS
	rc = hcomm_comm_init(&comm, &c);
	Py_END_ALLOW_THREADS
	Py_XDECREF(keep);
	if (rc)
		return Py_BuildValue("(iisO)", rc, hcomm_errno(),
				     hcomm_errmsg(), Py_None);
	return Py_BuildValue("(iisN)", 0, 0, "",
			     PyCapsule_New(comm, "hcomm_comm", NULL));
}

static struct hcomm_comm *comm_of(PyObject *cap)
{
	return PyCapsule_GetPointer(cap, "hcomm_comm");
}

/* comm_info(comm) -> (rank, size, transport) */
static PyObject *py_hc_comm_info(PyObject *self, PyObject *cap)
{
	struct hcomm_comm *comm = comm_of(cap);

	(void)self;
	if (!comm)
		return NULL;
	return Py_BuildValue("(iis)", hcomm_comm_rank(comm),
			     hcomm_comm_size(comm),
			     hcomm_comm_transport(comm));
}

static PyObject *py_hc_comm_destroy(PyObject *self, PyObject *cap)
{
	struct hcomm_comm *comm = comm_of(cap);
	int rc;

	(void)self;
	if (!comm)
		return NULL;
	Py_BEGIN_ALLOW_THREADS
	rc = hcomm_comm_destroy(comm);
	Py_END_ALLOW_THREADS
	return hc_result(rc);
}

/*
 * allreduce(comm, send, recv, count, dtype, op, compress, threshold):
 * send may be recv (in place); compress < 0 keeps the communicator's.
 */
static PyObject *py_hc_allreduce(PyObject *self, PyObject *a)
{
	PyObject *cap, *os, *orv;
	Py_buffer bs, br;
	unsigned long long count, thr;
	int dt, op, compress, rc, same;
	struct hcomm_comm *comm;

	(void)self;
	if (!PyArg_ParseTuple(a, "OOOKiiiK", &cap, &os, &orv, &count, &dt, &op,
			      &compress, &thr))
		return NULL;
	comm = comm_of(cap);
	if (!comm)
		return NULL;
	same = os == orv;
	if (PyObject_GetBuffer(orv, &br, PyBUF_C_CONTIGUOUS | PyBUF_WRITABLE))
		return NULL;
	if (!same && PyObject_GetBuffer(os, &bs, PyBUF_C_CONTIGUOUS)) {
		PyBuffer_Release(&br);
		return NULL;
	}
	Py_BEGIN_ALLOW_THREADS
	rc = compress < 0 ? 0 :
	     hcomm_comm_set_fp16_compress(comm, compress, thr);
	if (!rc)
		rc = hcomm_allreduce(comm, same ? br.buf : bs.buf, br.buf,
				     (size_t)count, (enum hcomm_dtype)dt,
				     (enum hcomm_redop)op);
	Py_END_ALLOW_THREADS
	if (!same)
		PyBuffer_Release(&bs);
	PyBuffer_Release(&br);
	return hc_result(rc);
}

static PyMethodDef module_methods[] = {
	{ "config_resolve", py_config_resolve, METH_O, NULL },
	{ "run", py_run, METH_VARARGS, NULL },
	{ "gemm", py_gemm, METH_VARARGS, NULL },
	{ "errmsg", py_errmsg, METH_NOARGS, NULL },
	{ "strerror", py_strerror, METH_VARARGS, NULL },
	{ "hc_open", py_hc_open, METH_VARARGS, NULL },
	{ "hc_close", py_hc_close, METH_O, NULL },
	{ "hc_info", py_hc_info, METH_O, NULL },
	{ "hc_set_qos", py_hc_set_qos, METH_VARARGS, NULL },
	{ "hc_reg_mem", py_hc_reg_mem, METH_VARARGS, NULL },
	{ "hc_dereg", py_hc_dereg, METH_O, NULL },
	{ "hc_strerror", py_hc_strerror, METH_VARARGS, NULL },
	{ "hc_config_default", py_hc_config_default, METH_VARARGS, NULL },
	{ "hc_comm_init", py_hc_comm_init, METH_O, NULL },
	{ "hc_comm_info", py_hc_comm_info, METH_O, NULL },
	{ "hc_comm_destroy", py_hc_comm_destroy, METH_O, NULL },
	{ "hc_allreduce", py_hc_allreduce, METH_VARARGS, NULL },
	{ NULL, NULL, 0, NULL }
};

static struct PyModuleDef moduledef = {
	PyModuleDef_HEAD_INIT, "_pypto",
	"C extension of the pypto and hcomm packages", -1, module_methods,
	NULL, NULL, NULL, NULL
};

PyMODINIT_FUNC PyInit__pypto(void)
{
	PyObject *m;

	if (PyType_Ready(&GraphType) < 0 || PyType_Ready(&RunType) < 0)
		return NULL;
	m = PyModule_Create(&moduledef);
	if (!m)
		return NULL;
	Py_INCREF(&GraphType);
	PyModule_AddObject(m, "Graph", (PyObject *)&GraphType);
#define C(x) PyModule_AddIntConstant(m, #x, x)
	C(PYPTO_COMPUTE); C(PYPTO_HOST); C(PYPTO_TRANSFER); C(PYPTO_ALLREDUCE);
	C(PYPTO_ANY_DEVICE); C(PYPTO_DUMP_DOT); C(PYPTO_DUMP_JSON);
	C(PYPTO_RANK_TARGET);
	C(PYPTO_ERR_INVAL); C(PYPTO_ERR_NOMEM); C(PYPTO_DEADLOCK);
	C(PYPTO_ERR_IO); C(PYPTO_ERR_TASK); C(PYPTO_ERR_SYS);
	C(PYPTO_ERR_LIMIT); C(PYPTO_PUT); C(PYPTO_GET);
	C(PYPTO_DIAG_COMM_BOUND); C(PYPTO_DIAG_UNDERUSED);
	C(PYPTO_DIAG_IMBALANCE);
	C(PYPTO_STAGE_PREFETCH); C(PYPTO_STAGE_TRANSFER);
	C(PYPTO_STAGE_COMPUTE); C(PYPTO_STAGE_COLLECTIVE);
	C(HCOMM_ERR_NODEV); C(HCOMM_ERR_MMAP); C(HCOMM_ERR_ACCESS);
	C(HCOMM_ERR_INVAL); C(HCOMM_ERR_NOMEM); C(HCOMM_ERR_ABI);
	C(HCOMM_ERR_BUSY); C(HCOMM_ERR_IO); C(HCOMM_ERR_TIMEOUT);
	C(HCOMM_ERR_NOTSUP); C(HCOMM_ERR_NOENT); C(HCOMM_ERR_LIMIT);
	C(HCOMM_ERR_NOTHCOMM); C(HCOMM_ERR_ADMISSION);
	C(HCOMM_ACCESS_LOCAL_WRITE); C(HCOMM_ACCESS_REMOTE_READ);
	C(HCOMM_ACCESS_REMOTE_WRITE);
	C(HCOMM_FP32); C(HCOMM_FP64); C(HCOMM_FP16); C(HCOMM_BF16);
	C(HCOMM_INT8); C(HCOMM_INT32); C(HCOMM_INT64); C(HCOMM_UINT8);
	C(HCOMM_UINT32); C(HCOMM_UINT64);
	C(HCOMM_SUM); C(HCOMM_PROD); C(HCOMM_MAX); C(HCOMM_MIN); C(HCOMM_AVG);
#undef C
	return m;
}
