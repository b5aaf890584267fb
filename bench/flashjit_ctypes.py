"""The bench's view of flashjit's Python package (python/flashjit): its ctypes layer over the C ABI,
imported from this checkout so that the bench needs no `pip install`."""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "python"))

from flashjit._capi import *  # noqa: E402,F401,F403
from flashjit._capi import attention, library_path, lib, compile_ptx, version  # noqa: E402,F401
