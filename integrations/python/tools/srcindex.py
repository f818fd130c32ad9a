# Copyright The inferprof Authors
# SPDX-License-Identifier: Apache-2.0
"""A package's classes read from its source with ast, without importing it:
what hook_compat.py checks the patch table (inferprof_hook.points) against.

For each class: its fields (annotations and assignments in the class body,
with the outer shape of each annotation), its methods with their
positional parameter names, its properties, and the instance attributes its
methods assign (self.x = ...). Bases are followed through the module's
imports within the same source tree.
"""

import ast
import os


class ClassInfo:
    def __init__(self, index, module, node):
        self.index = index
        self.module = module
        self.name = node.name
        self.fields = {}  # name -> shape of the annotation ("" if none)
        self.methods = {}  # name -> positional parameter names after self
        self.attrs = set()
        self.bases = [b for b in node.bases]
        for st in node.body:
            if isinstance(st, ast.AnnAssign) and isinstance(st.target, ast.Name):
                self.fields[st.target.id] = shape(st.annotation)
            elif isinstance(st, ast.Assign):
                for t in st.targets:
                    if isinstance(t, ast.Name):
                        self.fields.setdefault(t.id, "")
            elif isinstance(st, (ast.FunctionDef, ast.AsyncFunctionDef)):
                if any(_decorator(d) in ("property", "cached_property") for d in st.decorator_list):
                    self.attrs.add(st.name)
                    self.fields.setdefault(st.name, "")
                else:
                    a = st.args
                    names = [x.arg for x in a.posonlyargs + a.args]
                    static = any(_decorator(d) == "staticmethod" for d in st.decorator_list)
                    self.methods[st.name] = tuple(names if static else names[1:])
                for sub in ast.walk(st):
                    targets = ()
                    if isinstance(sub, ast.Assign):
                        targets = sub.targets
                    elif isinstance(sub, (ast.AnnAssign, ast.AugAssign)):
                        targets = (sub.target,)
                    for t in targets:
                        for e in (t.elts if isinstance(t, ast.Tuple) else (t,)):
                            if (isinstance(e, ast.Attribute) and isinstance(e.value, ast.Name)
                                    and e.value.id == "self"):
                                self.attrs.add(e.attr)

    def mro(self, depth=0):
        """This class, then its bases found in the tree, depth first."""
        yield self
        if depth > 12:
            return
        for b in self.bases:
            base = self.index.resolve(self.module, b)
            if base is not None:
                yield from base.mro(depth + 1)

    def field(self, name):
        """(found, shape) over the class and its bases."""
        for c in self.mro():
            if name in c.fields:
                return True, c.fields[name]
        return False, ""

    def method(self, name):
        for c in self.mro():
            if name in c.methods:
                return c.methods[name]
        return None

    def attr(self, name):
        return any(name in c.attrs or name in c.fields or name in c.methods for c in self.mro())


def _decorator(d):
    if isinstance(d, ast.Call):
        d = d.func
    if isinstance(d, ast.Attribute):
        return d.attr
    return d.id if isinstance(d, ast.Name) else ""


def shape(ann):
    """The outer type of an annotation, generics and None dropped:
    list[X] -> "list", X | None -> "X", "X" (a string) -> "X"."""
    if ann is None:
        return ""
    if isinstance(ann, ast.Constant) and isinstance(ann.value, str):
        try:
            return shape(ast.parse(ann.value, mode="eval").body)
        except SyntaxError:
            return ann.value
    if isinstance(ann, ast.BinOp) and isinstance(ann.op, ast.BitOr):
        left, right = shape(ann.left), shape(ann.right)
        return left if left != "None" else right
    if isinstance(ann, ast.Subscript):
        outer = shape(ann.value)
        if outer == "Optional":
            return shape(ann.slice)
        if outer == "Union" and isinstance(ann.slice, ast.Tuple):
            parts = [shape(e) for e in ann.slice.elts]
            return next((p for p in parts if p != "None"), "None")
        return {"List": "list", "Dict": "dict", "Set": "set", "Tuple": "tuple"}.get(outer, outer)
    if isinstance(ann, ast.Attribute):
        return ann.attr
    if isinstance(ann, ast.Name):
        return ann.id
    if isinstance(ann, ast.Constant) and ann.value is None:
        return "None"
    return ast.unparse(ann)


class Index:
    """The classes of one source tree (a release's files, or the fakes),
    parsed on demand, one module at a time."""

    def __init__(self, root):
        self.root = root
        self._mods = {}

    def path(self, module):
        base = os.path.join(self.root, *module.split("."))
        for p in (base + ".py", os.path.join(base, "__init__.py")):
            if os.path.isfile(p):
                return p
        return None

    def module(self, module):
        """(classes by name, imports: local name -> (module, name), module
        functions) or None."""
        if module in self._mods:
            return self._mods[module]
        p = self.path(module)
        got = None
        if p is not None:
            with open(p, "rb") as f:
                tree = ast.parse(f.read(), p)
            classes, imports, funcs = {}, {}, set()
            pkg = module if p.endswith("__init__.py") else module.rpartition(".")[0]
            for st in tree.body:
                if isinstance(st, ast.ClassDef):
                    classes[st.name] = ClassInfo(self, module, st)
                elif isinstance(st, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    funcs.add(st.name)
                elif isinstance(st, ast.ImportFrom):
                    src = st.module or ""
                    if st.level:
                        parts = pkg.split(".")
                        up = parts[:len(parts) - (st.level - 1)] if st.level > 1 else parts
                        src = ".".join(up + ([src] if src else []))
                    for a in st.names:
                        imports[a.asname or a.name] = (src, a.name)
            got = (classes, imports, funcs)
        self._mods[module] = got
        return got

    def cls(self, module, name, depth=0):
        """ClassInfo of name as module defines or imports it; None if absent."""
        m = self.module(module)
        if m is None or depth > 8:
            return None
        classes, imports, _ = m
        if name in classes:
            return classes[name]
        if name in imports:
            src, orig = imports[name]
            return self.cls(src, orig, depth + 1)
        return None

    def func(self, module, name, depth=0):
        """Whether module defines (or imports) a function called name."""
        m = self.module(module)
        if m is None or depth > 8:
            return False
        if name in m[2]:
            return True
        if name in m[1]:
            src, orig = m[1][name]
            # Imported from outside the tree (the standard library): there.
            return self.module(src) is None or self.func(src, orig, depth + 1) or \
                self.cls(src, orig) is not None
        return False

    def resolve(self, module, base):
        if isinstance(base, ast.Name):
            return self.cls(module, base.id)
        if isinstance(base, ast.Subscript):  # Generic[T] and the like
            return self.resolve(module, base.value)
        return None

    def find(self, name):
        """Every (module, ClassInfo) that defines a class called name."""
        out = []
        for d, _, files in os.walk(self.root):
            for fn in sorted(files):
                if not fn.endswith(".py"):
                    continue
                rel = os.path.relpath(os.path.join(d, fn), self.root)[:-3].replace(os.sep, ".")
                mod = rel[:-len(".__init__")] if rel.endswith(".__init__") else rel
                m = self.module(mod)
                if m and name in m[0]:
                    out.append((mod, m[0][name]))
        return out
