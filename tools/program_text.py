"""A reader of remat's program files (engines/api/program_text.h's format).

The outside engines (tools/torch_engine.py, tools/jax_engine.py) share it:

    program = parse_program(open("program.txt").read())

returns the top-level Body: `params`, a list of (id, name, shape) with
shape a tuple of ints (() for f32[]); `ops`, Ops in order; `result`, the id
of the returned value; and `name`, the program's name. Each Op has `out` (the
id of its result), `kind` ("matmul", "checkpoint", ...), `inputs` (value
ids), `attrs` (every attribute as written: "site", "scope", "name", "policy",
"schedule", "scalar" as text, "ints" as a list of ints), `type` (the declared
shape, a tuple, or None when the statement declares none) and `body` (a Body
for checkpoint, scan and chain; None otherwise).

It reads what PrintProgram writes; it does not check types or which values
a body reads (remat's ParseProgram does, and the engines check what they
use). Text it cannot read raises ParseError naming the line.
"""

import re


class ParseError(Exception):
    """Text that is not a program file: the message names the line."""


# ---------------------------------------------------------------- the parser

_TOKEN = re.compile(r'\s*(?:(?P<str>"(?:[^"\\]|\\.)*")|(?P<word>[A-Za-z0-9_.%+\-]+)|(?P<punct>[@=\[\],{()]))')


def _unescape(s):
    body = s[1:-1]
    out, i = [], 0
    while i < len(body):
        c = body[i]
        if c == "\\":
            n = body[i + 1]
            if n == "x":
                out.append(chr(int(body[i + 2:i + 4], 16)))
                i += 4
                continue
            out.append({"n": "\n", "t": "\t"}.get(n, n))
            i += 2
            continue
        out.append(c)
        i += 1
    return "".join(out)


def _tokens(text, where):
    pos, out = 0, []
    text = text.rstrip()
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if not m or m.end() == pos:
            raise ParseError("%s: cannot read %r" % (where, text[pos:pos + 20]))
        if m.group("str") is not None:
            out.append(("str", _unescape(m.group("str"))))
        elif m.group("word") is not None:
            out.append(("word", m.group("word")))
        else:
            out.append(("punct", m.group("punct")))
        pos = m.end()
    return out


def _strip_comment(line):
    out, in_str, i = [], False, 0
    while i < len(line):
        c = line[i]
        if in_str:
            out.append(c)
            if c == "\\":
                out.append(line[i + 1])
                i += 1
            elif c == '"':
                in_str = False
        elif c == '"':
            in_str = True
            out.append(c)
        elif c == "#":
            break
        else:
            out.append(c)
        i += 1
    return "".join(out).strip()


def _shape(type_text):
    m = re.fullmatch(r"[fi]32\[([0-9,]*)\]", type_text)
    if not m:
        raise ParseError("type %r is not f32[...] or i32[...]" % type_text)
    return tuple(int(d) for d in m.group(1).split(",") if d)


def _params(text):
    """'a: f32[2,3], b: f32[] name=""' -> [(id, name, shape)], and the ids
    of the integer (i32) ones."""
    out, ints = [], set()
    for m in re.finditer(r'([A-Za-z0-9_.]+)\s*:\s*([fi]32\[[0-9,]*\])(?:\s*name\s*=\s*("(?:[^"\\]|\\.)*"))?', text):
        pid = m.group(1)
        name = _unescape(m.group(3)) if m.group(3) else pid
        out.append((pid, name, _shape(m.group(2))))
        if m.group(2).startswith("i32"):
            ints.add(pid)
    return out, ints



def schedule_count(schedule, name):
    """K of a schedule spelled "NAME:K" (engines/schedule's names:
    "checkpoint_every:4", "segments:2"), K a count >= 1 as engines/api reads
    it; None when `schedule` is another schedule; ValueError when it is
    NAME's with no such K."""
    prefix = name + ":"
    if not schedule.startswith(prefix):
        return None
    k = schedule[len(prefix):]
    if not (k.isdigit() and k.isascii() and len(k) <= 9 and int(k) >= 1):
        raise ValueError("schedule %r: %s takes a count >= 1" % (schedule, name))
    return int(k)

class Body:
    def __init__(self, params_and_ints):
        self.params, self.int_params = params_and_ints  # [(id, name, shape)]; ids of i32 ones
        self.ops = []
        self.result = None


class Op:
    def __init__(self):
        self.out = None
        self.kind = None
        self.inputs = []
        self.attrs = {}
        self.type = None  # the declared shape, or None
        self.body = None


def parse_program(text):
    lines = [(_strip_comment(l), n + 1) for n, l in enumerate(text.split("\n"))]
    lines = [(l, n) for l, n in lines if l]
    i = 0

    def header(prefix):
        nonlocal i
        start = i
        joined = lines[i][0]
        while ")" not in joined.rsplit('"', 1)[-1] and i + 1 < len(lines):
            i += 1
            joined += " " + lines[i][0]
        i += 1
        if not joined.startswith(prefix):
            raise ParseError("line %d: expected %r" % (lines[start][1], prefix))
        inner = joined[joined.index("(") + 1:joined.rindex(")")]
        return joined, _params(inner)

    def statements(body):
        nonlocal i
        while i < len(lines):
            line, n = lines[i]
            if line.startswith("return"):
                body.result = line.split("%", 1)[1].strip()
                i += 1
                return body
            m = re.match(r"%([A-Za-z0-9_.]+)\s*(?::\s*(f32\[[0-9,]*\]))?\s*=\s*([a-z_][a-z0-9_]*)\s*\(([^)]*)\)(.*)$", line)
            if not m:
                raise ParseError("line %d: cannot read the statement %r" % (n, line))
            op = Op()
            op.out, op.kind = m.group(1), m.group(3)
            op.type = _shape(m.group(2)) if m.group(2) else None
            op.inputs = [v.strip()[1:] for v in m.group(4).split(",") if v.strip()]
            toks = _tokens(m.group(5), "line %d" % n)
            opens = bool(toks) and toks[-1] == ("punct", "{")
            if opens:
                toks = toks[:-1]
            k = 0
            while k < len(toks):
                t = toks[k]
                if t == ("punct", "@"):
                    op.attrs["site"] = toks[k + 1][1]
                    k += 2
                elif t[0] == "word" and k + 2 < len(toks) + 1 and toks[k + 1] == ("punct", "="):
                    key = t[1]
                    if toks[k + 2] == ("punct", "["):
                        end = toks.index(("punct", "]"), k + 2)
                        op.attrs[key] = [int(x[1]) for x in toks[k + 3:end] if x[0] == "word"]
                        k = end + 1
                    else:
                        op.attrs[key] = toks[k + 2][1]
                        k += 3
                else:
                    raise ParseError("line %d: cannot read the attribute at %r" % (n, t[1]))
            i += 1
            if opens:
                _, params = header("body")
                op.body = statements(Body(params))
                if i >= len(lines) or lines[i][0] != "}":
                    raise ParseError("line %d: expected '}' after the body" % lines[min(i, len(lines) - 1)][1])
                i += 1
            body.ops.append(op)
        raise ParseError("the program ends without a return")

    first, params = header("program")
    name = first.split()[1].split("(")[0]
    program = statements(Body(params))
    program.name = name
    return program


def load_case(d, np):
    """A case directory as remat conform writes it (tools/conform.h): the
    parsed DIR/program.txt, the names to differentiate (DIR/case.json's
    "wrt"; without it every float input) and each input's array from
    DIR/<name>.npy, in the program's order. A file of another shape than the
    program's is a ParseError naming it."""
    import json
    import os
    with open(os.path.join(d, "program.txt")) as f:
        program = parse_program(f.read())
    wrt = [name for pid, name, _ in program.params if pid not in program.int_params]
    if os.path.exists(os.path.join(d, "case.json")):
        with open(os.path.join(d, "case.json")) as f:
            wrt = json.load(f).get("wrt", wrt)
    arrays = []
    for _, name, shape in program.params:
        a = np.load(os.path.join(d, name + ".npy"))
        if tuple(a.shape) != tuple(shape):
            raise ParseError("%s.npy is %s, the program says %s" % (name, tuple(a.shape), tuple(shape)))
        arrays.append(a)
    return program, wrt, arrays
