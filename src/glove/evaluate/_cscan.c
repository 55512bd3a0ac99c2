/* glove.evaluate._cscan: the evaluator's scanning in C (C99, CPython C API only).
 *
 * Two things, each the exact counterpart of a pure-Python module that stays the
 * reference and the fallback (docs/decisions/0039-evaluator-throughput.md):
 *
 *   Normalizer   glove-text-v1 (_normalize.py) as a byte-at-a-time state machine, driven
 *                by one table lookup per byte; its state (one of five, plus a held-back
 *                C2 byte) lives in the object between chunks.
 *   Automaton    an Aho-Corasick automaton over bytes, built once per fixture from all
 *                its literals: a dense transition table (byte classes) for the nodes
 *                nearest the root, within DENSE_MAX_BYTES; sorted child ranges and
 *                failure links for the rest.
 *   Matcher      one stream's position in an Automaton: fed chunk by chunk, it keeps the
 *                first offset of each literal it was asked for (_match.py's LiteralScan),
 *                and skips, with path compression, the dictionary-suffix links of
 *                literals already found, so a found literal costs nothing again.
 *
 * Memory: an automaton over literals of T bytes in all holds at most T + 1 nodes of
 * 13 bytes, 12 bytes per literal and 8 per node where literals end, and a dense table
 * of at most DENSE_MAX_BYTES (building it takes about as much again, freed at once); a
 * matcher 9 bytes per literal and 8 per node where literals end; a scanner one slice's
 * text (SLICE_BYTES); a normalizer a few bytes. Nothing grows with the stream. `nbytes`
 * reports each object's tables.
 *
 * Chunks of SCAN_NOGIL_BYTES or more are scanned without the GIL; an object used by two
 * threads at once raises RuntimeError rather than race.
 */

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* Bumped whenever the interface changes: the Python side refuses another (a stale
 * build in an editable checkout) and falls back to the pure-Python scanner. */
#define ABI_VERSION 1
#define NORMALIZER_VERSION "glove-text-v1"

/* The dense table's bound (1 MiB). */
#define DENSE_MAX_BYTES (1024u * 1024u)
/* Chunks at least this long are scanned with the GIL released. */
#define SCAN_NOGIL_BYTES 4096
/* Node ids fit in 30 bits. */
#define MAX_NODES ((1u << 30) - 2u)
#define NONE UINT32_MAX

/* An automaton state as a matcher holds it: the address of the node's dense row, or
 * (id << 2 | S_SPARSE) for a node without one; S_HIT when a literal ends there. A walk
 * through dense rows is then one load per byte, the flags tested off its critical path. */
typedef uintptr_t State;
#define S_HIT ((State)1)
#define S_SPARSE ((State)2)
#define S_FLAGS ((State)3)

/* ------------------------------------------------------------------------------------ */
/* The normalizer                                                                       */
/* ------------------------------------------------------------------------------------ */

enum { N_GROUND = 0, N_ESC = 1, N_ESC_I = 2, N_CSI = 3, N_STR = 4, N_STATES = 5 };
#define T_STATE 0x07 /* the next state */
#define T_EMIT 0x08  /* the byte is text */
#define T_C2 0x80    /* a C2 byte: a C1 control or text, by the byte after it */

static uint8_t norm_table[N_STATES][256];
static uint8_t norm_c2[N_STATES]; /* the rule for a C2 byte that starts no C1 control */

/* The rule for one byte that is not part of a C1 control, from `state` (the module
 * docstring of _normalize.py; tests/evaluate/reference.py is the same machine). */
static uint8_t
norm_rule(int state, unsigned b)
{
    if (b == 0x1B) {
        return N_ESC;
    }
    if (b == 0x18 || b == 0x1A) {
        return N_GROUND;
    }
    switch (state) {
    case N_GROUND:
        if (b == 0x09 || b == 0x0A || (b >= 0x20 && b != 0x7F)) {
            return N_GROUND | T_EMIT;
        }
        return N_GROUND;
    case N_ESC:
    case N_ESC_I:
        if (state == N_ESC && b == '[') {
            return N_CSI;
        }
        if (state == N_ESC && (b == ']' || b == 'P' || b == 'X' || b == '^' || b == '_')) {
            return N_STR;
        }
        if (b >= 0x30 && b <= 0x7E) {
            return N_GROUND;
        }
        if (b >= 0x80) {
            return N_GROUND | T_EMIT;
        }
        return N_ESC_I;
    case N_CSI:
        if (b >= 0x40 && b <= 0x7E) {
            return N_GROUND;
        }
        if (b >= 0x80) {
            return N_GROUND | T_EMIT;
        }
        return N_CSI;
    default: /* N_STR */
        return b == 0x07 ? N_GROUND : N_STR;
    }
}

/* The state a C1 control (C2 80..C2 9F, `code` its second byte) leads to, from any. */
static unsigned
c1_state(unsigned code)
{
    if (code == 0x9B) {
        return N_CSI;
    }
    if (code == 0x90 || code == 0x98 || code == 0x9D || code == 0x9E || code == 0x9F) {
        return N_STR;
    }
    return N_GROUND;
}

static void
norm_init_tables(void)
{
    for (int s = 0; s < N_STATES; s++) {
        for (unsigned b = 0; b < 256; b++) {
            norm_table[s][b] = norm_rule(s, b);
        }
        norm_c2[s] = norm_table[s][0xC2];
        norm_table[s][0xC2] = T_C2;
    }
}

typedef struct {
    unsigned state;
    int pending_c2; /* a C2 byte ended the last chunk */
} NormState;

/* Whether none of the 8 bytes in x is outside 0x20..0x7E (printable ASCII, text in
 * the ground state): no high bit, no 0x7F (which +1 makes 0x80), nothing below 0x20
 * (which -0x20 borrows into the high bit). */
#define SWAR_ONES 0x0101010101010101ull
#define SWAR_HIGH 0x8080808080808080ull
static inline int
all_printable(uint64_t x)
{
    return ((x | (x + SWAR_ONES) | (x - 0x20 * SWAR_ONES)) & SWAR_HIGH) == 0;
}

/* Normalize p[0:n] into out (room for n + 1 bytes); the count written.
 *
 * One step is norm_table's rule for one byte (a C2 looks at the next). In the ground
 * state, a CSI and a string, the bytes whose rule keeps the state are consumed by a loop
 * that tests each byte alone, so no byte waits on the state its predecessor left: text
 * eight bytes at a time where it is printable ASCII. */
static Py_ssize_t
norm_run(NormState *ns, const uint8_t *p, Py_ssize_t n, uint8_t *out)
{
    const uint8_t *ground = norm_table[N_GROUND], *csi = norm_table[N_CSI],
                  *str = norm_table[N_STR];
    unsigned st = ns->state;
    Py_ssize_t i = 0, j = 0;
    if (n == 0) {
        return 0;
    }
    if (ns->pending_c2) {
        ns->pending_c2 = 0;
        if (p[0] >= 0x80 && p[0] <= 0x9F) {
            st = c1_state(p[0]);
            i = 1;
        }
        else {
            unsigned t = norm_c2[st];
            out[j] = 0xC2;
            j += (t & T_EMIT) != 0;
            st = t & T_STATE;
        }
    }
    while (i < n) {
        if (st == N_GROUND) {
            while (n - i >= 8) {
                uint64_t x;
                memcpy(&x, p + i, 8);
                if (!all_printable(x)) {
                    break;
                }
                memcpy(out + j, &x, 8);
                i += 8;
                j += 8;
            }
            /* Text, and the controls dropped in the ground state (CR, BEL, ...). */
            for (unsigned t; i < n && ((t = ground[p[i]]) & ~T_EMIT) == N_GROUND; i++) {
                out[j] = p[i];
                j += (t & T_EMIT) != 0;
            }
            /* The commonest sequence by far, ESC [ (SGR, cursor motion, erase): into
             * its body at once (the two steps norm_table would take). */
            if (n - i >= 2 && p[i] == 0x1B && p[i + 1] == '[') {
                i += 2;
                st = N_CSI;
            }
        }
        if (st == N_CSI) {
            while (i < n && csi[p[i]] == N_CSI) {
                i++;
            }
            /* Its final byte (norm_table's step for it). */
            if (i < n && csi[p[i]] == N_GROUND) {
                i++;
                st = N_GROUND;
                continue;
            }
        }
        else if (st == N_STR) {
            while (i < n && str[p[i]] == N_STR) {
                i++;
            }
        }
        if (i == n) {
            break;
        }
        unsigned b = p[i];
        unsigned t = norm_table[st][b];
        if (t & T_C2) {
            if (i + 1 == n) {
                ns->pending_c2 = 1;
                break;
            }
            unsigned next = p[i + 1];
            if (next >= 0x80 && next <= 0x9F) {
                st = c1_state(next);
                i += 2;
                continue;
            }
            t = norm_c2[st];
        }
        out[j] = (uint8_t)b;
        j += (t & T_EMIT) != 0;
        st = t & T_STATE;
        i++;
    }
    ns->state = st;
    return j;
}

/* The end of the stream: a held-back C2 is a lone byte (text unless in a string). */
static Py_ssize_t
norm_finish(NormState *ns, uint8_t *out)
{
    Py_ssize_t j = 0;
    if (ns->pending_c2 && (norm_c2[ns->state] & T_EMIT)) {
        out[j++] = 0xC2;
    }
    ns->state = N_GROUND;
    ns->pending_c2 = 0;
    return j;
}

/* ------------------------------------------------------------------------------------ */
/* The strict UTF-8 check (_utf8.py)                                                    */
/* ------------------------------------------------------------------------------------ */

/* Well-formed sequences (Unicode, table 3-7): the lead byte says how many continuation
 * bytes follow and the range of the first (80..BF for the others). The first fault is
 * reported at the start of its sequence, as CPython's strict decoder reports it; a
 * sequence cut off by the end of the stream is "truncated" at its start. */
typedef struct {
    long long seen;  /* bytes checked */
    long long start; /* the open sequence's first byte */
    long long error; /* the first ill-formed sequence's first byte, or -1 */
    unsigned need;   /* continuation bytes still expected */
    unsigned lo, hi; /* the range of the next one */
} Utf8State;

static void
utf8_init(Utf8State *u)
{
    u->seen = 0;
    u->start = 0;
    u->error = -1;
    u->need = 0;
    u->lo = 0x80;
    u->hi = 0xBF;
}

static void
utf8_run(Utf8State *u, const uint8_t *p, Py_ssize_t n)
{
    Py_ssize_t i = 0;
    unsigned need = u->need, lo = u->lo, hi = u->hi;
    if (u->error >= 0) {
        u->seen += n;
        return;
    }
    while (i < n) {
        if (need == 0) {
            while (n - i >= 8) {
                uint64_t x;
                memcpy(&x, p + i, 8);
                if (x & SWAR_HIGH) {
                    break;
                }
                i += 8;
            }
            while (i < n && p[i] < 0x80) {
                i++;
            }
            if (i == n) {
                break;
            }
            unsigned b = p[i];
            u->start = u->seen + i;
            lo = 0x80;
            hi = 0xBF;
            if (b >= 0xC2 && b <= 0xDF) {
                need = 1;
            }
            else if (b >= 0xE0 && b <= 0xEF) {
                need = 2;
                lo = b == 0xE0 ? 0xA0 : 0x80;
                hi = b == 0xED ? 0x9F : 0xBF;
            }
            else if (b >= 0xF0 && b <= 0xF4) {
                need = 3;
                lo = b == 0xF0 ? 0x90 : 0x80;
                hi = b == 0xF4 ? 0x8F : 0xBF;
            }
            else {
                u->error = u->start;
                break;
            }
            i++;
        }
        else {
            unsigned b = p[i];
            if (b < lo || b > hi) {
                u->error = u->start;
                break;
            }
            need--;
            lo = 0x80;
            hi = 0xBF;
            i++;
        }
    }
    u->need = need;
    u->lo = lo;
    u->hi = hi;
    u->seen += n;
}

typedef struct {
    PyObject_HEAD
    NormState ns;
    int busy;
} Normalizer;

static int
enter(int *busy, const char *what)
{
    if (*busy) {
        PyErr_Format(PyExc_RuntimeError, "a %s is being fed by another thread", what);
        return -1;
    }
    *busy = 1;
    return 0;
}

static PyObject *
Normalizer_new(PyTypeObject *type, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = {NULL};
    if (!PyArg_ParseTupleAndKeywords(args, kwds, ":Normalizer", kwlist)) {
        return NULL;
    }
    Normalizer *self = (Normalizer *)type->tp_alloc(type, 0);
    if (self != NULL) {
        self->ns.state = N_GROUND;
        self->ns.pending_c2 = 0;
        self->busy = 0;
    }
    return (PyObject *)self;
}

static PyObject *
Normalizer_feed(Normalizer *self, PyObject *arg)
{
    Py_buffer view;
    if (PyObject_GetBuffer(arg, &view, PyBUF_SIMPLE) < 0) {
        return NULL;
    }
    if (view.len > PY_SSIZE_T_MAX - 1) {
        PyBuffer_Release(&view);
        return PyErr_NoMemory();
    }
    PyObject *out = PyBytes_FromStringAndSize(NULL, view.len + 1);
    if (out == NULL || enter(&self->busy, "Normalizer") < 0) {
        Py_XDECREF(out);
        PyBuffer_Release(&view);
        return NULL;
    }
    uint8_t *dst = (uint8_t *)PyBytes_AS_STRING(out);
    const uint8_t *src = (const uint8_t *)view.buf;
    Py_ssize_t len = view.len, written;
    if (len >= SCAN_NOGIL_BYTES) {
        Py_BEGIN_ALLOW_THREADS
        written = norm_run(&self->ns, src, len, dst);
        Py_END_ALLOW_THREADS
    }
    else {
        written = norm_run(&self->ns, src, len, dst);
    }
    self->busy = 0;
    PyBuffer_Release(&view);
    if (_PyBytes_Resize(&out, written) < 0) {
        return NULL;
    }
    return out;
}

static PyObject *
Normalizer_finish(Normalizer *self, PyObject *Py_UNUSED(ignored))
{
    uint8_t buf[1];
    if (enter(&self->busy, "Normalizer") < 0) {
        return NULL;
    }
    Py_ssize_t written = norm_finish(&self->ns, buf);
    self->busy = 0;
    return PyBytes_FromStringAndSize((const char *)buf, written);
}

static PyMethodDef Normalizer_methods[] = {
    {"feed", (PyCFunction)Normalizer_feed, METH_O,
     "feed(chunk) -> bytes: the text of chunk that is settled now (a trailing C2 byte\n"
     "waits for the next chunk)."},
    {"finish", (PyCFunction)Normalizer_finish, METH_NOARGS,
     "finish() -> bytes: the text still held back at the end of the stream (a lone C2,\n"
     "or nothing); the normalizer is back in its initial state."},
    {NULL, NULL, 0, NULL},
};

static PyTypeObject NormalizerType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "glove.evaluate._cscan.Normalizer",
    .tp_basicsize = sizeof(Normalizer),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "Normalizer(): glove-text-v1, streamed; feed each chunk, then finish once.",
    .tp_new = Normalizer_new,
    .tp_methods = Normalizer_methods,
};

/* ------------------------------------------------------------------------------------ */
/* The automaton                                                                        */
/* ------------------------------------------------------------------------------------ */

typedef struct {
    PyObject_HEAD
    uint32_t npat;      /* literals */
    uint32_t nnodes;    /* trie nodes, the root included, in breadth-first order */
    uint32_t ndense;    /* nodes 0 .. ndense - 1 have a dense row */
    uint32_t ncls;      /* byte classes: 0 for bytes in no literal, one per other byte */
    uint32_t nterm;     /* nodes where a literal ends ("terminals") */
    uint8_t cls[256];   /* byte -> class */
    State *dense;       /* ndense * ncls transitions, each a State */
    uint8_t *label;     /* per node: the byte on the edge into it */
    uint32_t *child_lo; /* per node + 1: its children are child_lo[n] .. child_lo[n + 1] - 1 */
    uint32_t *fail;     /* per node: the longest proper suffix that is a node */
    uint32_t *hit;      /* per node: the first terminal on its suffix chain, or NONE */
    uint32_t *term_next;/* per terminal: the next terminal on its suffix chain, or NONE */
    uint32_t *term_pat; /* per terminal: the first literal ending there */
    uint32_t *pat_next; /* per literal: the next literal ending at the same node, or NONE */
    uint32_t *pat_len;  /* per literal: its length */
    uint32_t *pat_term; /* per literal: its terminal */
    size_t nbytes;
} Automaton;

static inline State
enc_node(const Automaton *a, uint32_t node)
{
    State v = node < a->ndense ? (State)(a->dense + (size_t)node * a->ncls)
                               : (((State)node << 2) | S_SPARSE);
    return a->hit[node] != NONE ? (v | S_HIT) : v;
}

static inline uint32_t
node_of(const Automaton *a, State v)
{
    if (v & S_SPARSE) {
        return (uint32_t)(v >> 2);
    }
    return (uint32_t)(((const State *)(v & ~S_FLAGS) - a->dense) / a->ncls);
}

/* The child of `node` on byte b, or NONE (children are sorted by label). */
static inline uint32_t
child_on(const Automaton *a, uint32_t node, uint8_t b)
{
    uint32_t lo = a->child_lo[node], hi = a->child_lo[node + 1];
    while (hi - lo > 8) {
        uint32_t mid = lo + (hi - lo) / 2;
        if (a->label[mid] < b) {
            lo = mid + 1;
        }
        else {
            hi = mid;
        }
    }
    for (; lo < hi; lo++) {
        if (a->label[lo] == b) {
            return lo;
        }
        if (a->label[lo] > b) {
            break;
        }
    }
    return NONE;
}

/* The encoded transition from sparse `node` on byte b (failure links down to a node
 * with a dense row, which holds the rest). */
static inline State
step_sparse(const Automaton *a, uint32_t node, uint8_t b)
{
    for (;;) {
        if (node < a->ndense) {
            return a->dense[(size_t)node * a->ncls + a->cls[b]];
        }
        uint32_t child = child_on(a, node, b);
        if (child != NONE) {
            return enc_node(a, child);
        }
        node = a->fail[node];
    }
}

static void
Automaton_free_tables(Automaton *a)
{
    PyMem_Free(a->dense);
    PyMem_Free(a->label);
    PyMem_Free(a->child_lo);
    PyMem_Free(a->fail);
    PyMem_Free(a->hit);
    PyMem_Free(a->term_next);
    PyMem_Free(a->term_pat);
    PyMem_Free(a->pat_next);
    PyMem_Free(a->pat_len);
    PyMem_Free(a->pat_term);
    a->dense = NULL;
    a->label = NULL;
    a->child_lo = a->fail = a->hit = a->term_next = a->term_pat = NULL;
    a->pat_next = a->pat_len = a->pat_term = NULL;
}

static void
Automaton_dealloc(Automaton *self)
{
    Automaton_free_tables(self);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

typedef struct {
    const uint8_t *p;
    size_t len;
    uint32_t id;
} Lit;

static int
lit_cmp(const void *x, const void *y)
{
    const Lit *a = (const Lit *)x, *b = (const Lit *)y;
    size_t n = a->len < b->len ? a->len : b->len;
    int c = memcmp(a->p, b->p, n);
    if (c != 0) {
        return c;
    }
    if (a->len != b->len) {
        return a->len < b->len ? -1 : 1;
    }
    return a->id < b->id ? -1 : (a->id > b->id);
}

static void *
alloc_array(size_t count, size_t size, size_t *total)
{
    if (count == 0) {
        count = 1;
    }
    if (count > SIZE_MAX / size) {
        return NULL;
    }
    *total += count * size;
    return PyMem_Malloc(count * size);
}

/* Build the automaton's tables from `lits` (npat literals, each non-empty, `total`
 * bytes in all, the longest `longest`). 0, or -1 with MemoryError set.
 *
 * Scratch while building: 13 bytes per node (the trie in the order the sorted literals
 * create its nodes: label, first child, next sibling; the breadth-first order), freed
 * before returning; about as much as the tables themselves. */
static int
Automaton_build(Automaton *a, Lit *lits, uint32_t npat, uint32_t total, size_t longest)
{
    size_t scratch = 0;
    uint32_t cap = total + 1; /* nodes, the root included */
    uint8_t *t_label = alloc_array(cap, 1, &scratch);
    uint32_t *t_first = alloc_array(cap, 4, &scratch); /* first child, later the new id */
    uint32_t *t_next = alloc_array(cap, 4, &scratch);  /* next sibling */
    uint32_t *order = alloc_array(cap, 4, &scratch);   /* breadth-first id -> first id */
    uint32_t *path = alloc_array(longest + 1, 4, &scratch); /* the last literal's nodes */
    uint32_t *pat_end = alloc_array(npat, 4, &scratch);     /* per literal: its node */
    int ok = -1;
    if (!t_label || !t_first || !t_next || !order || !path || !pat_end) {
        goto done;
    }
    a->nbytes = 0;
    a->pat_next = alloc_array(npat, 4, &a->nbytes);
    a->pat_len = alloc_array(npat, 4, &a->nbytes);
    a->pat_term = alloc_array(npat, 4, &a->nbytes);
    if (!a->pat_next || !a->pat_len || !a->pat_term) {
        goto done;
    }

    /* The trie from the sorted literals: each adds the nodes past its common prefix with
     * the one before. Sorted, so every earlier literal through path[lcp] either ended
     * there or went on through the last literal's path[lcp + 1], with a smaller or equal
     * byte: that node is path[lcp]'s last child, and the new one comes after it. */
    qsort(lits, npat, sizeof(Lit), lit_cmp);
    uint32_t nnodes = 1;
    t_first[0] = t_next[0] = NONE;
    path[0] = 0;
    size_t prev_len = 0;
    const uint8_t *prev = NULL;
    for (uint32_t k = 0; k < npat; k++) {
        const Lit *lit = &lits[k];
        size_t lcp = 0;
        if (prev != NULL) {
            size_t limit = prev_len < lit->len ? prev_len : lit->len;
            while (lcp < limit && prev[lcp] == lit->p[lcp]) {
                lcp++;
            }
        }
        uint32_t last = lcp < prev_len ? path[lcp + 1] : NONE;
        for (size_t d = lcp; d < lit->len; d++) {
            uint32_t parent = path[d], node = nnodes++;
            t_label[node] = lit->p[d];
            t_first[node] = t_next[node] = NONE;
            if (last == NONE) {
                t_first[parent] = node;
            }
            else {
                t_next[last] = node;
            }
            last = NONE; /* the nodes below are new: no children yet */
            path[d + 1] = node;
        }
        pat_end[lit->id] = path[lit->len];
        a->pat_len[lit->id] = (uint32_t)lit->len;
        prev = lit->p;
        prev_len = lit->len;
    }
    a->nnodes = nnodes;

    /* Byte classes. */
    uint8_t present[256] = {0};
    for (uint32_t node = 1; node < nnodes; node++) {
        present[t_label[node]] = 1;
    }
    uint8_t cls_byte[256];
    a->ncls = 1;
    for (unsigned b = 0; b < 256; b++) {
        if (present[b]) {
            cls_byte[a->ncls] = (uint8_t)b;
            a->cls[b] = (uint8_t)a->ncls++;
        }
        else {
            a->cls[b] = 0;
        }
    }
    /* ncls is at most 256, so 512 rows at least fit: every node near the root. */
    a->ndense = DENSE_MAX_BYTES / (a->ncls * (uint32_t)sizeof(State));
    if (a->ndense > nnodes) {
        a->ndense = nnodes;
    }

    /* Breadth-first renumbering: a node's children are consecutive, and every node comes
     * after the shallower ones (its failure link among them). */
    a->label = alloc_array(nnodes, 1, &a->nbytes);
    a->child_lo = alloc_array((size_t)nnodes + 1, 4, &a->nbytes);
    a->fail = alloc_array(nnodes, 4, &a->nbytes);
    a->hit = alloc_array(nnodes, 4, &a->nbytes);
    a->dense = alloc_array((size_t)a->ndense * a->ncls, sizeof(State), &a->nbytes);
    if (!a->label || !a->child_lo || !a->fail || !a->hit || !a->dense) {
        goto done;
    }
    uint32_t tail = 1;
    order[0] = 0;
    for (uint32_t k = 0; k < nnodes; k++) {
        uint32_t u = order[k];
        a->child_lo[k] = tail;
        for (uint32_t c = t_first[u]; c != NONE; c = t_next[c]) {
            order[tail++] = c;
        }
        t_first[u] = k;
    }
    a->child_lo[nnodes] = nnodes;
    for (uint32_t k = 0; k < nnodes; k++) {
        a->label[k] = t_label[order[k]];
        a->hit[k] = NONE;
    }

    /* Terminals, numbered breadth-first; literals ending at one node listed by id. */
    const uint32_t mark = NONE - 1;
    for (uint32_t q = 0; q < npat; q++) {
        a->hit[t_first[pat_end[q]]] = mark;
    }
    a->nterm = 0;
    for (uint32_t k = 0; k < nnodes; k++) {
        if (a->hit[k] == mark) {
            a->hit[k] = a->nterm++;
        }
    }
    a->term_next = alloc_array(a->nterm, 4, &a->nbytes);
    a->term_pat = alloc_array(a->nterm, 4, &a->nbytes);
    if (!a->term_next || !a->term_pat) {
        goto done;
    }
    for (uint32_t t = 0; t < a->nterm; t++) {
        a->term_pat[t] = NONE;
    }
    for (uint32_t q = 0; q < npat; q++) {
        uint32_t t = a->hit[t_first[pat_end[q]]];
        a->pat_term[q] = t;
        a->pat_next[q] = NONE;
        if (a->term_pat[t] == NONE) {
            a->term_pat[t] = q;
        }
        else { /* the same literal twice: rare, so walked */
            uint32_t r = a->term_pat[t];
            while (a->pat_next[r] != NONE) {
                r = a->pat_next[r];
            }
            a->pat_next[r] = q;
        }
    }

    /* Failure links, suffix chains and dense rows, breadth-first. A child's link is the
     * transition from its parent's link on its byte, taken from a shallower node whose
     * row (or whose children and own link) is done; a terminal's hit is its own id from
     * the start, anyone else's is its link's. */
    a->fail[0] = 0;
    for (uint32_t k = 0; k < nnodes; k++) {
        uint32_t lo = a->child_lo[k], hi = a->child_lo[k + 1];
        for (uint32_t c = lo; c < hi; c++) {
            uint32_t f = k == 0 ? 0 : node_of(a, step_sparse(a, a->fail[k], a->label[c]));
            a->fail[c] = f;
            if (a->hit[c] != NONE) {
                a->term_next[a->hit[c]] = a->hit[f];
            }
            else {
                a->hit[c] = a->hit[f];
            }
        }
        if (k < a->ndense) {
            State *row = a->dense + (size_t)k * a->ncls;
            const State *fallback = k == 0 ? NULL : a->dense + (size_t)a->fail[k] * a->ncls;
            uint32_t c = lo;
            row[0] = k == 0 ? enc_node(a, 0) : fallback[0];
            for (uint32_t cl = 1; cl < a->ncls; cl++) {
                uint8_t b = cls_byte[cl];
                while (c < hi && a->label[c] < b) {
                    c++;
                }
                if (c < hi && a->label[c] == b) {
                    row[cl] = enc_node(a, c);
                }
                else {
                    row[cl] = k == 0 ? enc_node(a, 0) : fallback[cl];
                }
            }
        }
    }
    a->npat = npat;
    a->nbytes += sizeof(Automaton);
    ok = 0;

done:
    PyMem_Free(t_label);
    PyMem_Free(t_first);
    PyMem_Free(t_next);
    PyMem_Free(order);
    PyMem_Free(path);
    PyMem_Free(pat_end);
    if (ok < 0) {
        Automaton_free_tables(a);
        PyErr_NoMemory();
    }
    return ok;
}

static PyObject *
Automaton_new(PyTypeObject *type, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = {"literals", NULL};
    PyObject *arg;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "O:Automaton", kwlist, &arg)) {
        return NULL;
    }
    PyObject *seq = PySequence_Fast(arg, "the literals are a sequence of bytes");
    if (seq == NULL) {
        return NULL;
    }
    Py_ssize_t count = PySequence_Fast_GET_SIZE(seq);
    if ((size_t)count >= MAX_NODES) {
        Py_DECREF(seq);
        PyErr_SetString(PyExc_ValueError, "too many literals");
        return NULL;
    }
    Lit *lits = PyMem_Malloc(sizeof(Lit) * (size_t)(count ? count : 1));
    if (lits == NULL) {
        Py_DECREF(seq);
        return PyErr_NoMemory();
    }
    size_t total = 0, longest = 0;
    for (Py_ssize_t k = 0; k < count; k++) {
        PyObject *item = PySequence_Fast_GET_ITEM(seq, k);
        if (!PyBytes_Check(item)) {
            PyErr_Format(PyExc_TypeError, "literal %zd is %.100s, not bytes", k,
                         Py_TYPE(item)->tp_name);
            goto fail;
        }
        Py_ssize_t len = PyBytes_GET_SIZE(item);
        if (len == 0) {
            PyErr_SetString(PyExc_ValueError, "a literal to look for is at least one byte");
            goto fail;
        }
        total += (size_t)len;
        longest = (size_t)len > longest ? (size_t)len : longest;
        if (total >= MAX_NODES) {
            PyErr_SetString(PyExc_ValueError, "the literals are too long in all");
            goto fail;
        }
        lits[k].p = (const uint8_t *)PyBytes_AS_STRING(item);
        lits[k].len = (size_t)len;
        lits[k].id = (uint32_t)k;
    }
    Automaton *self = (Automaton *)type->tp_alloc(type, 0);
    if (self == NULL) {
        goto fail;
    }
    /* The literals stay alive in `seq` (a list or tuple holding them) while building. */
    if (Automaton_build(self, lits, (uint32_t)count, (uint32_t)total, longest) < 0) {
        Py_DECREF(self);
        goto fail;
    }
    PyMem_Free(lits);
    Py_DECREF(seq);
    return (PyObject *)self;

fail:
    PyMem_Free(lits);
    Py_DECREF(seq);
    return NULL;
}

static Py_ssize_t
Automaton_len(Automaton *self)
{
    return (Py_ssize_t)self->npat;
}

static PyObject *
Automaton_get_nbytes(Automaton *self, void *Py_UNUSED(closure))
{
    return PyLong_FromSize_t(self->nbytes);
}

static PyObject *
Automaton_get_nodes(Automaton *self, void *Py_UNUSED(closure))
{
    return PyLong_FromUnsignedLong(self->nnodes);
}

static PyObject *
Automaton_get_dense_nodes(Automaton *self, void *Py_UNUSED(closure))
{
    return PyLong_FromUnsignedLong(self->ndense);
}

static PyObject *
Automaton_sizeof(Automaton *self, PyObject *Py_UNUSED(ignored))
{
    return PyLong_FromSize_t(self->nbytes);
}

static PyGetSetDef Automaton_getset[] = {
    {"nbytes", (getter)Automaton_get_nbytes, NULL, "Bytes held by the automaton.", NULL},
    {"nodes", (getter)Automaton_get_nodes, NULL, "Trie nodes, the root included.", NULL},
    {"dense_nodes", (getter)Automaton_get_dense_nodes, NULL,
     "Nodes with a dense transition row.", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyMethodDef Automaton_methods[] = {
    {"__sizeof__", (PyCFunction)Automaton_sizeof, METH_NOARGS, NULL},
    {NULL, NULL, 0, NULL},
};

static PySequenceMethods Automaton_as_sequence = {
    .sq_length = (lenfunc)Automaton_len,
};

static PyTypeObject AutomatonType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "glove.evaluate._cscan.Automaton",
    .tp_basicsize = sizeof(Automaton),
    .tp_dealloc = (destructor)Automaton_dealloc,
    .tp_as_sequence = &Automaton_as_sequence,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "Automaton(literals): Aho-Corasick over the literals (non-empty bytes), "
              "immutable, shared by the matchers of one fixture.",
    .tp_new = Automaton_new,
    .tp_getset = Automaton_getset,
    .tp_methods = Automaton_methods,
};

/* ------------------------------------------------------------------------------------ */
/* Cursors: one stream's position in an automaton                                       */
/* ------------------------------------------------------------------------------------ */

typedef struct {
    const Automaton *a;
    State v;            /* the state after the last byte, its S_HIT cleared once reported */
    uint32_t remaining; /* wanted literals not found yet */
    long long seen;     /* bytes fed */
    long long *found;   /* per literal: the first offset, or -1 */
    uint8_t *wanted;    /* per literal */
    uint32_t *live;     /* per terminal: wanted literals ending there, not found yet */
    uint32_t *jump;     /* per terminal: it, or a later terminal on its chain with every
                           terminal from it up to that one dead */
} Cursor;

static void
cursor_free(Cursor *c)
{
    PyMem_Free(c->found);
    PyMem_Free(c->wanted);
    PyMem_Free(c->live);
    PyMem_Free(c->jump);
    c->found = NULL;
    c->wanted = NULL;
    c->live = c->jump = NULL;
}

/* Set up `c` over `a` looking for the literals of `wanted` (a sequence of indices).
 * 0, or -1 with an exception set. */
static int
cursor_init(Cursor *c, const Automaton *a, PyObject *wanted, size_t *nbytes)
{
    c->a = a;
    c->v = (State)a->dense; /* the root: no literal is empty, so no S_HIT */
    c->seen = 0;
    c->remaining = 0;
    c->found = alloc_array(a->npat, sizeof(long long), nbytes);
    c->wanted = alloc_array(a->npat, 1, nbytes);
    c->live = alloc_array(a->nterm, 4, nbytes);
    c->jump = alloc_array(a->nterm, 4, nbytes);
    if (!c->found || !c->wanted || !c->live || !c->jump) {
        PyErr_NoMemory();
        return -1;
    }
    for (uint32_t q = 0; q < a->npat; q++) {
        c->found[q] = -1;
        c->wanted[q] = 0;
    }
    for (uint32_t t = 0; t < a->nterm; t++) {
        c->live[t] = 0;
        c->jump[t] = t;
    }
    PyObject *seq = PySequence_Fast(wanted, "wanted is a sequence of literal indices");
    if (seq == NULL) {
        return -1;
    }
    Py_ssize_t count = PySequence_Fast_GET_SIZE(seq);
    for (Py_ssize_t k = 0; k < count; k++) {
        Py_ssize_t q = PyNumber_AsSsize_t(PySequence_Fast_GET_ITEM(seq, k), PyExc_IndexError);
        if (q == -1 && PyErr_Occurred()) {
            Py_DECREF(seq);
            return -1;
        }
        if (q < 0 || (size_t)q >= a->npat) {
            PyErr_Format(PyExc_IndexError, "literal index %zd out of range", q);
            Py_DECREF(seq);
            return -1;
        }
        if (!c->wanted[q]) {
            c->wanted[q] = 1;
            c->live[a->pat_term[q]]++;
            c->remaining++;
        }
    }
    Py_DECREF(seq);
    return 0;
}

/* The first live terminal on the suffix chain from terminal t (t included), or NONE;
 * the dead ones passed are skipped from now on. */
static uint32_t
first_live(Cursor *c, uint32_t t)
{
    const uint32_t *next = c->a->term_next;
    uint32_t x = t;
    while (x != NONE) {
        uint32_t y = c->jump[x];
        if (y != x) {
            x = y;
        }
        else if (c->live[x]) {
            break;
        }
        else {
            x = next[x];
        }
    }
    for (uint32_t z = t; z != x;) {
        uint32_t y = c->jump[z];
        c->jump[z] = x;
        z = y != z ? y : next[z];
    }
    return x;
}

/* Literals end at stream offset `end` in state v: record the wanted ones not found. */
static void
report(Cursor *c, State v, long long end)
{
    const Automaton *a = c->a;
    uint32_t node = node_of(a, v);
    for (uint32_t t = first_live(c, a->hit[node]); t != NONE; t = first_live(c, a->term_next[t])) {
        for (uint32_t q = a->term_pat[t]; q != NONE; q = a->pat_next[q]) {
            if (c->wanted[q] && c->found[q] < 0) {
                c->found[q] = end + 1 - (long long)a->pat_len[q];
                c->remaining--;
            }
        }
        c->live[t] = 0;
    }
}

/* One byte: the next state. The dense case, the common one, is a single load whose
 * address is the previous state. */
#define STEP(a, v, b) \
    (((v) & S_SPARSE) ? step_sparse((a), (uint32_t)((v) >> 2), (b)) : ((const State *)(v))[(a)->cls[(b)]])

/* Feed p[i:n] to c (p[0] is at stream offset c->seen; c->seen is not advanced). */
static void
cursor_scan(Cursor *c, const uint8_t *p, Py_ssize_t i, Py_ssize_t n)
{
    const Automaton *a = c->a;
    State v = c->v;
    if (c->remaining == 0) {
        return;
    }
    for (; i < n; i++) {
        v = STEP(a, v, p[i]);
        if (v & S_HIT) {
            report(c, v, c->seen + i);
            v &= ~S_HIT;
            if (c->remaining == 0) {
                break;
            }
        }
    }
    c->v = v;
}

/* Feed p[0:n] to c1 and q[0:m] to c2 in one loop: the two walks are independent, so
 * the processor overlaps them. Advances both `seen`. */
static void
cursor_scan2(Cursor *c1, const uint8_t *p, Py_ssize_t n, Cursor *c2, const uint8_t *q,
             Py_ssize_t m)
{
    Py_ssize_t i = 0, both = n < m ? n : m;
    if (c1->remaining != 0 && c2->remaining != 0) {
        const Automaton *a1 = c1->a, *a2 = c2->a;
        State v1 = c1->v, v2 = c2->v;
        for (; i < both; i++) {
            v1 = STEP(a1, v1, p[i]);
            v2 = STEP(a2, v2, q[i]);
            if ((v1 | v2) & S_HIT) {
                if (v1 & S_HIT) {
                    report(c1, v1, c1->seen + i);
                    v1 &= ~S_HIT;
                }
                if (v2 & S_HIT) {
                    report(c2, v2, c2->seen + i);
                    v2 &= ~S_HIT;
                }
                if (c1->remaining == 0 || c2->remaining == 0) {
                    i++;
                    break;
                }
            }
        }
        c1->v = v1;
        c2->v = v2;
    }
    cursor_scan(c1, p, i, n);
    cursor_scan(c2, q, i, m);
    c1->seen += n;
    c2->seen += m;
}

static PyObject *
cursor_offsets(const Cursor *c)
{
    PyObject *out = PyTuple_New((Py_ssize_t)c->a->npat);
    if (out == NULL) {
        return NULL;
    }
    for (uint32_t q = 0; q < c->a->npat; q++) {
        PyObject *item;
        if (c->found[q] < 0) {
            item = Py_NewRef(Py_None);
        }
        else if ((item = PyLong_FromLongLong(c->found[q])) == NULL) {
            Py_DECREF(out);
            return NULL;
        }
        PyTuple_SET_ITEM(out, (Py_ssize_t)q, item);
    }
    return out;
}

/* ------------------------------------------------------------------------------------ */
/* Matcher: one cursor, for tests and for callers that scan one stream                  */
/* ------------------------------------------------------------------------------------ */

typedef struct {
    PyObject_HEAD
    PyObject *automaton;
    Cursor c;
    size_t nbytes;
    int busy;
} Matcher;

static void
Matcher_dealloc(Matcher *self)
{
    cursor_free(&self->c);
    Py_XDECREF(self->automaton);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyObject *
Matcher_new(PyTypeObject *type, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = {"automaton", "wanted", NULL};
    PyObject *a, *wanted;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "O!O:Matcher", kwlist, &AutomatonType, &a,
                                     &wanted)) {
        return NULL;
    }
    Matcher *self = (Matcher *)type->tp_alloc(type, 0);
    if (self == NULL) {
        return NULL;
    }
    self->automaton = Py_NewRef(a);
    self->nbytes = sizeof(Matcher);
    if (cursor_init(&self->c, (const Automaton *)a, wanted, &self->nbytes) < 0) {
        Py_DECREF(self);
        return NULL;
    }
    return (PyObject *)self;
}

static PyObject *
Matcher_feed(Matcher *self, PyObject *arg)
{
    Py_buffer view;
    if (PyObject_GetBuffer(arg, &view, PyBUF_SIMPLE) < 0) {
        return NULL;
    }
    if (enter(&self->busy, "Matcher") < 0) {
        PyBuffer_Release(&view);
        return NULL;
    }
    const uint8_t *src = (const uint8_t *)view.buf;
    Py_ssize_t len = view.len;
    if (len >= SCAN_NOGIL_BYTES && self->c.remaining != 0) {
        Py_BEGIN_ALLOW_THREADS
        cursor_scan(&self->c, src, 0, len);
        Py_END_ALLOW_THREADS
    }
    else {
        cursor_scan(&self->c, src, 0, len);
    }
    self->c.seen += len;
    self->busy = 0;
    PyBuffer_Release(&view);
    Py_RETURN_NONE;
}

static PyObject *
Matcher_get_offsets(Matcher *self, void *Py_UNUSED(closure))
{
    return cursor_offsets(&self->c);
}

static PyObject *
Matcher_get_pending(Matcher *self, void *Py_UNUSED(closure))
{
    return PyBool_FromLong(self->c.remaining != 0);
}

static PyObject *
Matcher_get_nbytes(Matcher *self, void *Py_UNUSED(closure))
{
    return PyLong_FromSize_t(self->nbytes);
}

static PyObject *
Matcher_sizeof(Matcher *self, PyObject *Py_UNUSED(ignored))
{
    return PyLong_FromSize_t(self->nbytes);
}

static PyGetSetDef Matcher_getset[] = {
    {"offsets", (getter)Matcher_get_offsets, NULL,
     "Per literal of the automaton, its first offset so far; None where it has not appeared "
     "or is not wanted.", NULL},
    {"pending", (getter)Matcher_get_pending, NULL, "Whether a wanted literal is not found yet.",
     NULL},
    {"nbytes", (getter)Matcher_get_nbytes, NULL, "Bytes held by the matcher.", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyMethodDef Matcher_methods[] = {
    {"feed", (PyCFunction)Matcher_feed, METH_O,
     "feed(chunk): look for the wanted literals not found yet in chunk and across its start."},
    {"__sizeof__", (PyCFunction)Matcher_sizeof, METH_NOARGS, NULL},
    {NULL, NULL, 0, NULL},
};

static PyTypeObject MatcherType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "glove.evaluate._cscan.Matcher",
    .tp_basicsize = sizeof(Matcher),
    .tp_dealloc = (destructor)Matcher_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "Matcher(automaton, wanted): the first offsets of the literals `wanted` (indices "
              "into the automaton's literals) in one stream, fed chunk by chunk.",
    .tp_new = Matcher_new,
    .tp_getset = Matcher_getset,
    .tp_methods = Matcher_methods,
};

/* ------------------------------------------------------------------------------------ */
/* Scanner: the evaluator's stream, raw and normalized, in one call per chunk           */
/* ------------------------------------------------------------------------------------ */

/* The raw bytes are normalized and scanned in slices of at most this many bytes, so the
 * text buffer never holds more than SLICE_BYTES + 1. */
#define SLICE_BYTES 65536

typedef struct {
    PyObject_HEAD
    PyObject *automaton;
    NormState ns;
    Utf8State utf8;
    Cursor raw;         /* over the raw bytes */
    Cursor text;        /* over the normalized text */
    uint8_t *buf;       /* SLICE_BYTES + 1: one slice's text */
    size_t nbytes;
    int busy;
} Scanner;

static void
Scanner_dealloc(Scanner *self)
{
    cursor_free(&self->raw);
    cursor_free(&self->text);
    PyMem_Free(self->buf);
    Py_XDECREF(self->automaton);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyObject *
Scanner_new(PyTypeObject *type, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = {"automaton", "raw", "text", NULL};
    PyObject *a, *raw, *text;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "O!OO:Scanner", kwlist, &AutomatonType, &a,
                                     &raw, &text)) {
        return NULL;
    }
    Scanner *self = (Scanner *)type->tp_alloc(type, 0);
    if (self == NULL) {
        return NULL;
    }
    self->automaton = Py_NewRef(a);
    self->ns.state = N_GROUND;
    self->ns.pending_c2 = 0;
    utf8_init(&self->utf8);
    self->nbytes = sizeof(Scanner);
    if (cursor_init(&self->raw, (const Automaton *)a, raw, &self->nbytes) < 0 ||
        cursor_init(&self->text, (const Automaton *)a, text, &self->nbytes) < 0) {
        Py_DECREF(self);
        return NULL;
    }
    self->buf = alloc_array(SLICE_BYTES + 1, 1, &self->nbytes);
    if (self->buf == NULL) {
        Py_DECREF(self);
        return PyErr_NoMemory();
    }
    return (PyObject *)self;
}

static void
scanner_run(Scanner *self, const uint8_t *p, Py_ssize_t n)
{
    for (Py_ssize_t at = 0; at < n; at += SLICE_BYTES) {
        Py_ssize_t len = n - at < SLICE_BYTES ? n - at : SLICE_BYTES;
        utf8_run(&self->utf8, p + at, len);
        Py_ssize_t text = norm_run(&self->ns, p + at, len, self->buf);
        cursor_scan2(&self->raw, p + at, len, &self->text, self->buf, text);
    }
}

static PyObject *
Scanner_feed(Scanner *self, PyObject *arg)
{
    Py_buffer view;
    if (PyObject_GetBuffer(arg, &view, PyBUF_SIMPLE) < 0) {
        return NULL;
    }
    if (enter(&self->busy, "Scanner") < 0) {
        PyBuffer_Release(&view);
        return NULL;
    }
    const uint8_t *src = (const uint8_t *)view.buf;
    if (view.len >= SCAN_NOGIL_BYTES) {
        Py_BEGIN_ALLOW_THREADS
        scanner_run(self, src, view.len);
        Py_END_ALLOW_THREADS
    }
    else {
        scanner_run(self, src, view.len);
    }
    self->busy = 0;
    PyBuffer_Release(&view);
    Py_RETURN_NONE;
}

static PyObject *
Scanner_finish(Scanner *self, PyObject *Py_UNUSED(ignored))
{
    if (enter(&self->busy, "Scanner") < 0) {
        return NULL;
    }
    Py_ssize_t text = norm_finish(&self->ns, self->buf);
    cursor_scan(&self->text, self->buf, 0, text);
    self->text.seen += text;
    self->busy = 0;
    Py_RETURN_NONE;
}

static PyObject *
Scanner_get_raw_offsets(Scanner *self, void *Py_UNUSED(closure))
{
    return cursor_offsets(&self->raw);
}

static PyObject *
Scanner_get_text_offsets(Scanner *self, void *Py_UNUSED(closure))
{
    return cursor_offsets(&self->text);
}

static PyObject *
Scanner_get_raw_bytes(Scanner *self, void *Py_UNUSED(closure))
{
    return PyLong_FromLongLong(self->raw.seen);
}

static PyObject *
Scanner_get_text_bytes(Scanner *self, void *Py_UNUSED(closure))
{
    return PyLong_FromLongLong(self->text.seen);
}

static PyObject *
Scanner_get_utf8(Scanner *self, void *Py_UNUSED(closure))
{
    const Utf8State *u = &self->utf8;
    if (u->error >= 0) {
        return Py_BuildValue("(sL)", "invalid", u->error);
    }
    if (u->need != 0) {
        return Py_BuildValue("(sL)", "truncated", u->start);
    }
    return Py_BuildValue("(sO)", "valid", Py_None);
}

static PyObject *
Scanner_get_nbytes(Scanner *self, void *Py_UNUSED(closure))
{
    return PyLong_FromSize_t(self->nbytes);
}

static PyObject *
Scanner_sizeof(Scanner *self, PyObject *Py_UNUSED(ignored))
{
    return PyLong_FromSize_t(self->nbytes);
}

static PyGetSetDef Scanner_getset[] = {
    {"raw_offsets", (getter)Scanner_get_raw_offsets, NULL,
     "Per literal, its first offset in the raw bytes (None: not yet, or not wanted raw).",
     NULL},
    {"text_offsets", (getter)Scanner_get_text_offsets, NULL,
     "Per literal, its first offset in the normalized text (None: not yet, or not wanted).",
     NULL},
    {"raw_bytes", (getter)Scanner_get_raw_bytes, NULL, "Raw bytes fed.", NULL},
    {"text_bytes", (getter)Scanner_get_text_bytes, NULL, "Bytes of normalized text so far.",
     NULL},
    {"utf8", (getter)Scanner_get_utf8, NULL,
     "(\"valid\", None), (\"invalid\", offset) or (\"truncated\", offset) for the raw "
     "bytes so far, taken as the whole stream.", NULL},
    {"nbytes", (getter)Scanner_get_nbytes, NULL, "Bytes held by the scanner.", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyMethodDef Scanner_methods[] = {
    {"feed", (PyCFunction)Scanner_feed, METH_O,
     "feed(chunk): normalize the raw chunk and look for the literals in both streams."},
    {"finish", (PyCFunction)Scanner_finish, METH_NOARGS,
     "finish(): end the stream (a held-back C2 byte becomes text); call once."},
    {"__sizeof__", (PyCFunction)Scanner_sizeof, METH_NOARGS, NULL},
    {NULL, NULL, 0, NULL},
};

static PyTypeObject ScannerType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "glove.evaluate._cscan.Scanner",
    .tp_basicsize = sizeof(Scanner),
    .tp_dealloc = (destructor)Scanner_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "Scanner(automaton, raw, text): one stream through glove-text-v1, with the "
              "first offsets of the literals `raw` in its raw bytes and of `text` in its "
              "normalized text.",
    .tp_new = Scanner_new,
    .tp_getset = Scanner_getset,
    .tp_methods = Scanner_methods,
};

/* ------------------------------------------------------------------------------------ */
/* The module                                                                           */
/* ------------------------------------------------------------------------------------ */

static struct PyModuleDef cscan_module = {
    PyModuleDef_HEAD_INIT,
    .m_name = "glove.evaluate._cscan",
    .m_doc = "The evaluator's normalizer and literal scanner in C (see _cscan.c).",
    .m_size = -1,
};

PyMODINIT_FUNC
PyInit__cscan(void)
{
    norm_init_tables();
    if (PyType_Ready(&NormalizerType) < 0 || PyType_Ready(&AutomatonType) < 0 ||
        PyType_Ready(&MatcherType) < 0 || PyType_Ready(&ScannerType) < 0) {
        return NULL;
    }
    PyObject *m = PyModule_Create(&cscan_module);
    if (m == NULL) {
        return NULL;
    }
    if (PyModule_AddIntConstant(m, "ABI_VERSION", ABI_VERSION) < 0 ||
        PyModule_AddStringConstant(m, "NORMALIZER_VERSION", NORMALIZER_VERSION) < 0 ||
        PyModule_AddIntConstant(m, "DENSE_MAX_BYTES", DENSE_MAX_BYTES) < 0 ||
        PyModule_AddObjectRef(m, "Normalizer", (PyObject *)&NormalizerType) < 0 ||
        PyModule_AddObjectRef(m, "Automaton", (PyObject *)&AutomatonType) < 0 ||
        PyModule_AddObjectRef(m, "Matcher", (PyObject *)&MatcherType) < 0 ||
        PyModule_AddObjectRef(m, "Scanner", (PyObject *)&ScannerType) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
