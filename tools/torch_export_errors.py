"""tools/torch_export.py's errors: ExportError, the one exception a user sees,
and _Unsupported, one use of the model remat cannot take (the lowering records
it with the module path and ATen op, and goes on, so that one ExportError
names every such use)."""


class ExportError(Exception):
    pass


class _Unsupported(ExportError):
    """What one op does that remat cannot take."""

    def __init__(self, what):
        super().__init__(what)
        self.what = what


def _message(lines):
    """The ExportError text for the unsupported uses `lines` (one line each)."""
    lines = list(dict.fromkeys(lines))  # each once, in the order met
    return ("%d use%s in the model %s not supported by remat's op set (tools/torch_export_ops.py lists what "
            "is):\n%s" % (len(lines), "" if len(lines) == 1 else "s", "is" if len(lines) == 1 else "are",
                          "\n".join("  " + e for e in lines)))
