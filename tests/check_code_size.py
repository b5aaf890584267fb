#!/usr/bin/env python3
"""Fails when a source file or function of the library and tools grows past the project's limits.

    tests/check_code_size.py REPO_ROOT

Limits: no .cpp file longer than 500 lines and no function longer than 150 lines in compiler/,
templates/, runtime/, autotune/ and tools/ (small files, few concepts: a kernel template reads as
its algorithm in named steps). A function is a brace block at namespace or class scope whose
header is not a namespace, class, struct, union, enum or initializer; lambdas and blocks nested
in it count as part of it. Its length runs from the first line of its header to its closing brace.
"""
import os
import re
import sys

FOLDERS = ["compiler", "templates", "runtime", "autotune", "tools"]
MAX_FILE_LINES = 500
MAX_FUNCTION_LINES = 150


def strip(text):
    """Comments and string/char literals blanked (newlines kept), so braces in them do not count."""
    out = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            out.append(" " * (j - i))
            i = j
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
        elif c == 'R' and text.startswith('R"', i):
            m = re.match(r'R"([^(]*)\(', text[i:])
            end = text.find(")" + m.group(1) + '"', i) if m else -1
            j = n if end < 0 else end + len(m.group(1)) + 2
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
        elif c in "\"'":
            j = i + 1
            while j < n and text[j] != c:
                j += 2 if text[j] == "\\" else 1
            out.append(" " * (min(j + 1, n) - i))
            i = j + 1
        else:
            out.append(c)
            i += 1
    return "".join(out)


def classify(header, in_function):
    if in_function:
        return "nested"
    h = header.strip()
    if re.match(r"^(template\s*<.*>\s*)?(namespace|class|struct|union|enum)\b", h, re.S) or h in ("extern", ""):
        return "scope"
    if h.endswith("=") or "(" not in h:
        return "other"  # an initializer, or a brace-initialised member or variable
    return "func"


def functions(text):
    """(length in lines, first line) of every function body at namespace or class scope."""
    code = strip(text)
    found = []
    stack = []  # (kind, first line) per open brace
    header_start = 0  # just after the last ';', '{' or '}' outside function bodies
    for i, c in enumerate(code):
        in_function = any(k in ("func", "nested") for k, _ in stack)
        if c == "{":
            header = code[header_start:i]
            kind = classify(header, in_function)
            lead = len(header) - len(header.lstrip())
            stack.append((kind, code.count("\n", 0, header_start + lead) + 1))
            header_start = i + 1
        elif c == "}":
            if stack:
                kind, first_line = stack.pop()
                if kind == "func":
                    found.append((code.count("\n", 0, i) + 1 - first_line + 1, first_line))
            header_start = i + 1
        elif c == ";" and not in_function:
            header_start = i + 1
    return found


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else "."
    problems = []
    for folder in FOLDERS:
        for dirpath, _, files in os.walk(os.path.join(root, folder)):
            for name in sorted(files):
                if not name.endswith((".cpp", ".hpp")):
                    continue
                path = os.path.join(dirpath, name)
                rel = os.path.relpath(path, root)
                with open(path, encoding="utf-8") as f:
                    text = f.read()
                lines = text.count("\n")
                if name.endswith(".cpp") and lines > MAX_FILE_LINES:
                    problems.append(f"{rel}: {lines} lines (a .cpp may have at most {MAX_FILE_LINES})")
                for length, first in functions(text):
                    if length > MAX_FUNCTION_LINES:
                        problems.append(f"{rel}:{first}: a function of {length} lines (at most {MAX_FUNCTION_LINES})")
    for p in problems:
        print(p)
    print(f"check_code_size: {len(problems)} problem(s)")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
