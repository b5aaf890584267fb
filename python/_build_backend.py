"""A PEP 517 build backend for the flashjit package with no dependencies, so that
`pip install ./python` needs no network (setuptools would be downloaded into pip's isolated build
environment). It writes a pure-Python wheel (PEP 427) of flashjit/ with the metadata of
pyproject.toml's [project] table (name, version, description, requires-python)."""
import base64
import hashlib
import os
import re
import zipfile

HERE = os.path.dirname(os.path.abspath(__file__))
TAG = "py3-none-any"


def _project():
    text = open(os.path.join(HERE, "pyproject.toml"), encoding="utf-8").read()
    table = text.split("[project]", 1)[1].split("\n[", 1)[0]
    return dict(re.findall(r'^(\w[\w-]*) = "([^"]*)"', table, re.M))


def _metadata():
    p = _project()
    return (f"Metadata-Version: 2.1\nName: {p['name']}\nVersion: {p['version']}\nSummary: {p['description']}\n"
            f"Requires-Python: {p['requires-python']}\n")


def _dist_info():
    p = _project()
    return f"{p['name']}-{p['version']}.dist-info"


def _record_line(name, data):
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{name},sha256={digest},{len(data)}"


def get_requires_for_build_wheel(config_settings=None):
    return []


def prepare_metadata_for_build_wheel(metadata_directory, config_settings=None):
    info = os.path.join(metadata_directory, _dist_info())
    os.makedirs(info, exist_ok=True)
    with open(os.path.join(info, "METADATA"), "w", encoding="utf-8") as f:
        f.write(_metadata())
    return _dist_info()


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    p = _project()
    wheel_name = f"{p['name']}-{p['version']}-{TAG}.whl"
    files = []
    for root, dirs, names in os.walk(os.path.join(HERE, "flashjit")):
        dirs[:] = sorted(d for d in dirs if d != "__pycache__")
        for n in sorted(names):
            if n.endswith(".py") or n.startswith("libflashjit.so"):
                path = os.path.join(root, n)
                files.append((os.path.relpath(path, HERE), open(path, "rb").read()))
    info = _dist_info()
    files.append((f"{info}/METADATA", _metadata().encode()))
    files.append((f"{info}/WHEEL", f"Wheel-Version: 1.0\nGenerator: flashjit _build_backend\nRoot-Is-Purelib: "
                                   f"true\nTag: {TAG}\n".encode()))
    record = [_record_line(n, d) for n, d in files] + [f"{info}/RECORD,,"]
    files.append((f"{info}/RECORD", ("\n".join(record) + "\n").encode()))
    with zipfile.ZipFile(os.path.join(wheel_directory, wheel_name), "w", zipfile.ZIP_DEFLATED) as z:
        for name, data in files:
            z.writestr(name, data)
    return wheel_name
