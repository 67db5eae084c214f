#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""The house rules of the source tree (docs/architecture.md, "Rules"), checked on what the
build really does: every #include of every compiled file is resolved as the compiler resolves
it (the file's own folder, then its -iquote/-I/-isystem directories from compile_commands.json
of the host build and of the firmware sub-build), and every target's sources and include
directories are read from the manifests CMake writes (npu_targets.json).

Rules:
  R1 firmware/, runtime/, models/ and noc_driver/ never include emulator/ headers.
  R2 emulator/ never includes firmware/, runtime/ or noc_driver/ headers.
  R3 hal/ includes nothing above it: only hal/ and the generated register headers.
  R4 an include that crosses top-level folders goes through a library's exported include
     directory (not a relative path, not a folder added by hand).
  R5 a target compiles only sources under its own folder (the folder of its CMakeLists.txt).
  R6 a target's own include directories, private and exported, are under its own folder
     (another folder's headers come from linking the library that exports them).
  R7 every quoted include resolves.
  R8 a project source the cores run (the firmware sub-build's compile_commands.json) passes no
     C99 size modifier to printf (%zu, %jd, %td): newlib-nano's printf prints them as text
     ("zu"). Cast to unsigned long and use %lu.

Exit 0 when the tree keeps every rule, 1 with one line per violation otherwise, 2 on bad
input. --plant FILE:HEADER adds a line `#include "HEADER"` to FILE for this check only (the
test that shows a violation is caught); --plant-printf FILE adds a %zu printf line (R8).
"""
import argparse
import json
import os
import re
import shlex
import sys

INCLUDE_RE = re.compile(r'^\s*#\s*include\s*([<"])([^">]+)[">]')
RULE_FOLDERS = {"hal", "noc_driver", "models", "runtime", "emulator", "firmware",
                "host_tools", "tests"}


class Tree:
    def __init__(self, src, gen_dirs):
        self.src = os.path.realpath(src)
        self.gen_dirs = [os.path.realpath(g) for g in gen_dirs]

    def folder(self, path):
        """Top-level folder of a path in the tree, 'generated' for the register headers,
        None outside (system, newlib, QEMU)."""
        path = os.path.realpath(path)
        for g in self.gen_dirs:
            if path.startswith(g + os.sep):
                return "generated"
        if not path.startswith(self.src + os.sep):
            return None
        top = os.path.relpath(path, self.src).split(os.sep)[0]
        return top if top in RULE_FOLDERS else None

    def rel(self, path):
        path = os.path.realpath(path)
        return os.path.relpath(path, self.src) if path.startswith(self.src + os.sep) else path

    def under(self, path, folder):
        path, folder = os.path.realpath(path), os.path.realpath(folder)
        return path == folder or path.startswith(folder + os.sep)

    def in_build(self, path):
        """In a build tree or outside the source tree: generated or external, not a folder
        of the project's."""
        return self.folder(path) in (None, "generated")


def compile_entries(db_paths):
    """(file, quote dirs, angle dirs) for every compiled C or assembler file."""
    out = []
    for db in db_paths:
        with open(db) as f:
            entries = json.load(f)
        for e in entries:
            args = e.get("arguments") or shlex.split(e["command"])
            cwd = e.get("directory", ".")
            quote, angle = [], []
            i = 0
            while i < len(args):
                a = args[i]
                for flag, lists in (("-iquote", (quote,)), ("-isystem", (angle,)),
                                    ("-I", (quote, angle))):
                    if a.startswith(flag):
                        d = a[len(flag):] or (args[i + 1] if i + 1 < len(args) else "")
                        if not a[len(flag):]:
                            i += 1
                        d = os.path.normpath(os.path.join(cwd, d))
                        for lst in lists:
                            lst.append(d)
                        break
                i += 1
            # -I directories come before -isystem ones for quoted includes too
            quote = quote + [d for d in angle if d not in quote]
            out.append((os.path.normpath(os.path.join(cwd, e["file"])), quote, angle))
    return out


def qemu_entries(tree, gen_dirs):
    """The QEMU glue is compiled by QEMU's meson (emulator/qemu/meson.build) from a staged
    copy: its include directories there are the glue, the chip model and the portable
    libraries it links; the same resolution in the tree."""
    qdir = os.path.join(tree.src, "emulator", "qemu")
    dirs = [qdir, os.path.join(tree.src, "emulator")] + [
        os.path.join(tree.src, "models", lib, "include") for lib in ("kvconf", "numeric",
                                                                      "chipdesc", "routing")] + gen_dirs
    return [(os.path.join(qdir, f), dirs, dirs) for f in sorted(os.listdir(qdir))
            if f.endswith(".c")]


def read_includes(path, planted):
    lines = []
    try:
        with open(path, errors="replace") as f:
            text = f.readlines()
    except OSError:
        return lines
    for n, line in enumerate(text, 1):
        m = INCLUDE_RE.match(line)
        if m:
            lines.append((n, m.group(1) == '"', m.group(2)))
    for header in planted.get(os.path.realpath(path), []):
        lines.append(("planted", True, header))
    return lines


def resolve(includer, quoted, name, quote_dirs, angle_dirs):
    """(path, the directory that resolved it: None for the includer's own folder)."""
    if quoted:
        cand = os.path.normpath(os.path.join(os.path.dirname(includer), name))
        if os.path.isfile(cand):
            return cand, None
    for d in quote_dirs if quoted else angle_dirs:
        cand = os.path.normpath(os.path.join(d, name))
        if os.path.isfile(cand):
            return cand, d
    return None, None


def check_edge(tree, exported, src, line, name, dst, via):
    """The rules R1-R4 on one resolved include; a list of messages."""
    a, b = tree.folder(src), tree.folder(dst)
    where = f"{tree.rel(src)}:{line}: #include \"{name}\" -> {tree.rel(dst)}"
    msgs = []
    if b is None or b == "generated" or a is None:
        return msgs
    if a in ("firmware", "runtime", "models", "noc_driver") and b == "emulator":
        msgs.append(f"{where}: R1 {a}/ includes an emulator header")
    if a == "emulator" and b in ("firmware", "runtime", "noc_driver"):
        msgs.append(f"{where}: R2 the emulator includes a {b}/ header")
    if a == "hal" and b != "hal":
        msgs.append(f"{where}: R3 hal/ includes a {b}/ header")
    if a != b:
        if via is None:
            msgs.append(f"{where}: R4 crosses from {a}/ to {b}/ by a relative path")
        elif os.path.realpath(via) not in exported:
            msgs.append(f"{where}: R4 crosses from {a}/ to {b}/ through {tree.rel(via)}, "
                        "which no library exports")
    return msgs


def check_includes(tree, exported, entries, planted):
    msgs, seen, edges = [], set(), 0
    for file, quote, angle in entries:
        stack = [file]
        while stack:
            cur = stack.pop()
            key = (cur, tuple(quote), tuple(angle))
            if key in seen:
                continue
            seen.add(key)
            for line, quoted, name in read_includes(cur, planted):
                dst, via = resolve(cur, quoted, name, quote, angle)
                if dst is None:
                    if quoted and tree.folder(cur) not in (None, "generated") and \
                            not tree.rel(cur).startswith("emulator/qemu"):
                        msgs.append(f"{tree.rel(cur)}:{line}: #include \"{name}\": R7 does "
                                    "not resolve")
                    continue
                edges += 1
                msgs.extend(check_edge(tree, exported, cur, line, name, dst, via))
                if tree.folder(dst) not in (None, "generated"):
                    stack.append(dst)
    return msgs, edges


def check_targets(tree, targets):
    msgs = []
    for t in targets:
        tdir = t["dir"]
        for s in t["SOURCES"]:
            path = s if os.path.isabs(s) else os.path.join(tdir, s)
            if not tree.in_build(path) and not tree.under(path, tdir):
                msgs.append(f"{tree.rel(tdir)}/CMakeLists.txt: target {t['name']}: R5 compiles "
                            f"{tree.rel(path)}, outside its folder")
        for prop in ("INCLUDE_DIRECTORIES", "INTERFACE_INCLUDE_DIRECTORIES"):
            for d in t[prop]:
                if "$<" in d or tree.in_build(d) or tree.under(d, tdir):
                    continue
                msgs.append(f"{tree.rel(tdir)}/CMakeLists.txt: target {t['name']}: R6 "
                            f"{prop.lower()} names {tree.rel(d)}, another folder's")
    return msgs


SIZE_MOD_RE = re.compile(r'"[^"\n]*%[-+ #0]*[0-9*]*(?:\.[0-9*]+)?[zjt][a-zA-Z][^"\n]*"')


def check_printf(tree, db_paths, planted=()):
    """R8 over the project's C files that the firmware sub-build compiles (headers are not
    read: formats live in .c files here). `planted` files get one %zu line more."""
    msgs = []
    for file, _, _ in compile_entries([d for d in db_paths if os.sep + "firmware" + os.sep in
                                       os.path.realpath(d)]):
        if tree.in_build(file) or not file.endswith(".c"):
            continue
        with open(file, errors="replace") as f:
            lines = f.readlines()
        if os.path.realpath(file) in planted:
            lines.append('    printf("%zu\\n", sizeof(int));\n')
        for n, line in enumerate(lines, 1):
            if SIZE_MOD_RE.search(line.replace("%%", "")):
                msgs.append(f"{tree.rel(file)}:{n}: R8 a %z/%j/%t printf conversion in code "
                            f"the cores run (newlib-nano prints it as text)")
    return msgs


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--source-dir", required=True)
    ap.add_argument("--gen-dir", action="append", default=[])
    ap.add_argument("--manifest", action="append", default=[])
    ap.add_argument("--compile-db", action="append", default=[])
    ap.add_argument("--plant", action="append", default=[], metavar="FILE:HEADER")
    ap.add_argument("--plant-printf", action="append", default=[], metavar="FILE",
                    help="add a %%zu printf line to FILE for this check only (R8)")
    args = ap.parse_args()
    tree = Tree(args.source_dir, args.gen_dir)
    planted = {}
    for p in args.plant:
        f, _, h = p.partition(":")
        planted.setdefault(os.path.realpath(os.path.join(tree.src, f)), []).append(h)
    try:
        targets = [t for m in args.manifest for t in json.load(open(m))]
        entries = compile_entries(args.compile_db) + qemu_entries(tree, args.gen_dir)
    except (OSError, ValueError, KeyError) as e:
        print(f"include_rules: cannot read the build's manifests: {e}", file=sys.stderr)
        return 2
    exported = {os.path.realpath(d) for t in targets for d in t["INTERFACE_INCLUDE_DIRECTORIES"]
                if "$<" not in d}
    msgs = check_targets(tree, targets)
    inc_msgs, edges = check_includes(tree, exported, entries, planted)
    planted_printf = {os.path.realpath(os.path.join(tree.src, f)) for f in args.plant_printf}
    msgs = sorted(set(msgs + inc_msgs + check_printf(tree, args.compile_db, planted_printf)))
    for m in msgs:
        print(m)
    print(f"include_rules: {len(targets)} targets, {len(entries)} compiled files, {edges} "
          f"includes resolved; {len(msgs)} violation(s)")
    return 1 if msgs else 0


if __name__ == "__main__":
    sys.exit(main())
