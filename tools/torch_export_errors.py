"""tools/torch_export.py's errors: ExportError, and the uses of the model
remat cannot take, collected so that one export names every one of them."""


class ExportError(Exception):
    pass


class _Unsupported(ExportError):
    """One node remat cannot take: recorded in _ERRORS, the export goes on."""


_ERRORS = []  # what the model uses that remat cannot take, one message a node
_UNSUPPORTED = " is not supported by remat's op set (tools/torch_export.py lists what is)"


def _raise_collected():
    """The ExportError naming every use _ERRORS recorded (one line each), if any."""
    if len(_ERRORS) == 1:
        raise ExportError(_ERRORS[0])
    if _ERRORS:
        raise ExportError("%d uses in the model are not supported by remat's op set "
                          "(tools/torch_export.py lists what is):\n%s"
                          % (len(_ERRORS), "\n".join("  " + e.replace(_UNSUPPORTED, "") for e in _ERRORS)))
