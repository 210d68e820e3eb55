"""tools/torch_export.py's program file: names and types of the program's
values, its statements' ids, the tensors a body reads from the model, and
program.txt and the inputs' .npy files written."""

import os

import numpy as np
import torch
import torch.nn as nn

from torch_export_errors import ExportError


def _join(prefix, name):
    return prefix + "." + name if prefix and name else prefix or name


def _quote(s):
    return '"' + s.replace("\\", "\\\\").replace('"', '\\"') + '"'


_INTEGER = (torch.int32, torch.int64, torch.int16, torch.int8, torch.uint8, torch.bool)


def _type(shape, dtype=torch.float32):
    """f32[...], or i32[...] for an integer tensor (ids, targets)."""
    return "%s[%s]" % ("i32" if dtype in _INTEGER else "f32", ",".join(str(d) for d in shape))


def _ident(name):
    return "".join(c if c.isalnum() or c in "_." else "_" for c in name)


class _Writer:
    def __init__(self):
        self.count = 0

    def fresh(self):
        self.count += 1
        return "v%d" % self.count


# The child name under which export(loss=callable) wraps the model: paths in
# the wrapper start with it, and the program names them without it.
_WRAPPED = "model"
_UNWRAP = [False]


def _unwrapped(path):
    if _UNWRAP[0]:
        if path == _WRAPPED:
            return ""
        if path.startswith(_WRAPPED + "."):
            return path[len(_WRAPPED) + 1:]
    return path


def _tensor_names(root):
    """id(tensor) -> its full path in `root`, for every parameter and buffer.

    A tensor reachable by two paths (a tied weight) has one name, the first
    that named_parameters() or named_buffers() gives, so that it is one
    input of the program and its gradient is the sum over its uses."""
    names = {}
    for n, t in list(root.named_parameters()) + list(root.named_buffers()):
        names.setdefault(id(t), _unwrapped(n))
    return names


class _Params:
    """The tensors a program body reads from the model (parameters, buffers,
    tensor attributes), keyed by the tensor's identity and whether it is read
    transposed; each is one input of the body, named by its full path."""

    def __init__(self):
        self.by_key = {}  # (id(tensor), transposed) -> (ident, path, source tensor, transposed)

    def get(self, path, tensor, transposed):
        key = (id(tensor), transposed)
        if key not in self.by_key:
            name = path + (".T" if transposed else "")
            self.by_key[key] = (_ident(name), name, tensor, transposed)
        return self.by_key[key][0]

    def data_ids(self):
        """The inputs that are not trained parameters (buffers, folded
        constants, the dropout seed): `data` in the program."""
        return {pid for pid, _, t, _ in self.by_key.values() if not isinstance(t, nn.Parameter)}

    def items(self):
        return list(self.by_key.values())


def _write_program(out_dir, name, lines, out, params, input_ids, placeholders, example_inputs, reshaped):
    """Writes out_dir/program.txt, the program `name` whose statements are
    `lines` and whose value is %`out`, and one .npy per input: the tensors
    `params` holds, then forward's inputs (`reshaped`: program id -> the
    shape an integer input is declared with). Returns the program's text."""
    exported = [(pid, (t.detach().t() if tr else t.detach())) for pid, _, t, tr in params.items()]
    # Two tensors under one name would be one input of the program: refuse
    # rather than merge them (a parameter path equal to an argument's name,
    # or two paths that differ only in characters _ident replaces).
    owners = {}
    for (pid, path, _, _), kind in [(p, "parameter or buffer") for p in params.items()] + \
            [((i, n.target, None, False), "argument of forward") for i, n in zip(input_ids, placeholders)]:
        if pid in owners:
            raise ExportError("two inputs of the program would both be named %r: %s %r and %s %r; rename one"
                              % (pid, owners[pid][0], owners[pid][1], kind, path))
        owners[pid] = (kind, path)
    # Parameters are differentiated by default (remat run without --wrt);
    # buffers, folded constants and forward's inputs (images, ids, targets)
    # are data.
    data = params.data_ids() | set(input_ids)
    decls = ["%s: %s%s" % (pid, _type(t.shape, t.dtype), " data" if pid in data else "") for pid, t in exported]
    example_inputs = [x.reshape(reshaped[i]) if i in reshaped else x for i, x in zip(input_ids, example_inputs)]
    decls += ["%s: %s data" % (i, _type(x.shape, x.dtype)) for i, x in zip(input_ids, example_inputs)]
    text = "# exported from PyTorch %s by tools/torch_export.py\n" % torch.__version__
    text += "program %s(%s) {\n" % (_ident(name), ", ".join(decls))
    text += "\n".join(lines) + "\n  return %%%s\n}\n" % out
    os.makedirs(out_dir, exist_ok=True)
    with open(os.path.join(out_dir, "program.txt"), "w") as f:
        f.write(text)
    for pid, t in exported:
        kind = np.int32 if t.dtype in _INTEGER else np.float32
        np.save(os.path.join(out_dir, pid + ".npy"), t.contiguous().numpy().astype(kind))
    for i, x in zip(input_ids, example_inputs):
        kind = np.int32 if x.dtype in _INTEGER else np.float32
        np.save(os.path.join(out_dir, i + ".npy"), x.detach().numpy().astype(kind))
    return text
