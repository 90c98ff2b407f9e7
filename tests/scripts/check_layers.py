#!/usr/bin/env python3
"""The layer rules of docs/design.md, checked over the source text and the CMake files.

 1. A level includes only itself and the levels below it (LEVELS, the order of
    docs/design.md's table).
 2. CMake's link graph is the include graph: each level's libraries link (directly) the
    libraries of exactly the levels its files include (directly), no more and no fewer.
 3. MPI's communication (collectives, point to point, waits, communicator splits) is
    called in src/comm only, in src, app and bench alike, also where a call
    is split over lines; elsewhere a rank may ask for its rank and size and the time,
    app/main.cpp and the benchmarks' mains start and end MPI, and the checkpoint file
    sets MPI-IO's error handler.

 4. <mpi.h> is included in src/comm, app and bench only (the others reach MPI's handles
    through comm/mpi_handle.hpp, and its calls through Comm, Grid and comm/control.hpp),
    and MPI_Request, which Comm::Request wraps, appears in src/comm only.
 5. No circle of includes between units, inside a level too: a unit is a header and its
    source (x.hpp and x.cpp), and unit x depends on unit y when either file of x includes
    y.hpp. (A header cannot include itself round a circle, but a source can close one:
    gpt.cpp including gpt_layer_steps.hpp, which includes gpt.hpp, was such a circle.)

Prints every violation as file:line: what; exits 1 if there is any.
Usage: check_layers.py REPO_DIR
"""
import os
import re
import sys

# bottom to top: (folder, the include prefix that names it, its CMake targets)
LEVELS = [
    ("src/core", "core", ["strata_core"]),
    ("io", "io", ["strata_io"]),
    ("kernels", "kernels", ["strata_kernels", "strata_gemm_probe", "strata_bf16"]),
    ("src/comm", "comm", ["strata_comm"]),
    ("src/parallel", "parallel", ["strata_parallel"]),
    ("src/state", "state", ["strata_state"]),
    ("src/report", "report", ["strata_report"]),
    ("src/model", "model", ["strata_model"]),
    ("src/data", "data", ["strata_data"]),
    ("src/optim", "optim", ["strata_optim"]),
    ("src/engine", "engine", ["strata_engine"]),
    ("src/checkpoint", "checkpoint", ["strata_checkpoint"]),
    ("src/plan", "plan", ["strata_plan"]),
    ("src/train", "train", ["strata_train"]),
    ("src/cli", "cli", ["strata_cli"]),
    ("app", None, ["strata"]),
]
CMAKE_FILES = ["src/CMakeLists.txt", "io/CMakeLists.txt", "kernels/CMakeLists.txt", "app/CMakeLists.txt"]
SOURCES = (".hpp", ".cpp", ".h", ".c")
MPI_EVERYWHERE = {"MPI_Comm_rank", "MPI_Comm_size", "MPI_Wtime"}
MPI_MAINS = {"MPI_Init", "MPI_Init_thread", "MPI_Finalize", "MPI_Abort"}
MPI_CHECKPOINT = {"MPI_Error_string", "MPI_File_create_errhandler", "MPI_File_set_errhandler", "MPI_Errhandler_free"}

bad = []


def files_under(folder):
    for root, _, names in os.walk(folder):
        for n in sorted(names):
            if n.endswith(SOURCES):
                yield os.path.join(root, n)


def line_of(text, pos):
    return text.count("\n", 0, pos) + 1


def strip_comments(text):
    """The text with // and /* */ comments blanked (newlines kept, so lines still count)."""
    def blank(m):
        return re.sub(r"[^\n]", " ", m.group(0))
    return re.sub(r'//[^\n]*|/\*.*?\*/|"(?:\\.|[^"\\\n])*"', lambda m: m.group(0) if m.group(0).startswith('"') else blank(m), text, flags=re.S)


def include_circles():
    """Every circle of units (rule 5), one line each, found as the strongly connected
    components of the unit graph."""
    files = {}
    for folder, prefix, _ in LEVELS:
        if prefix is None:
            continue
        for path in files_under(folder):
            files[prefix + path[len(folder):]] = path  # the name an include gives it
    unit = lambda name: name.rsplit(".", 1)[0]
    graph = {}
    for name, path in files.items():
        text = open(path, encoding="utf-8", errors="replace").read()
        for inc in re.findall(r'^[ \t]*#[ \t]*include[ \t]*"([^"]+)"', text, re.M):
            if inc in files and unit(inc) != unit(name):
                graph.setdefault(unit(name), set()).add(unit(inc))
    index, low, stack, on, circles = {}, {}, [], set(), []

    def visit(v):  # Tarjan's algorithm, iteratively deep enough for this tree
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                circles.append("include circle: " + " <-> ".join(sorted(component)))

    sys.setrecursionlimit(10000)
    for v in sorted(graph):
        if v not in index:
            visit(v)
    return circles


def main(repo):
    os.chdir(repo)
    index = {prefix: i for i, (_, prefix, _) in enumerate(LEVELS) if prefix}
    target_level = {t: i for i, (_, _, ts) in enumerate(LEVELS) for t in ts}
    includes = [set() for _ in LEVELS]
    for i, (folder, _, _) in enumerate(LEVELS):
        if not os.path.isdir(folder):
            bad.append(f"check_layers: no folder {folder} (update the table)")
            continue
        for path in files_under(folder):
            text = open(path, encoding="utf-8", errors="replace").read()
            for m in re.finditer(r'^[ \t]*#[ \t]*include[ \t]*"([^"/]+)/', text, re.M):
                level = index.get(m.group(1))
                if level is None:
                    continue
                if level > i:
                    bad.append(f"{path}:{line_of(text, m.start())}: includes {m.group(1)}/ (level {LEVELS[level][0]}) "
                               f"from level {folder}, which is below it")
                elif level != i:
                    includes[i].add(level)
            for m in re.finditer(r"^[ \t]*#[ \t]*include[ \t]*<mpi\.h>", text, re.M):
                if folder not in ("src/comm", "app"):
                    bad.append(f"{path}:{line_of(text, m.start())}: includes <mpi.h> outside src/comm and app "
                               "(comm/mpi_handle.hpp has the handles)")
            if folder != "src/comm":
                for m in re.finditer(r"\bMPI_Request\b", strip_comments(text)):
                    bad.append(f"{path}:{line_of(text, m.start())}: MPI_Request outside src/comm (use Comm::Request)")

    # the link graph: every target_link_libraries of a strata target, over however many lines
    links = [set() for _ in LEVELS]
    for cmake in CMAKE_FILES:
        text = re.sub(r"#[^\n]*", "", open(cmake).read())
        for m in re.finditer(r"target_link_libraries\s*\(\s*([A-Za-z0-9_]+)([^)]*)\)", text):
            if m.group(1) not in target_level:
                continue
            i = target_level[m.group(1)]
            for dep in m.group(2).split():
                if dep in target_level and target_level[dep] != i:
                    links[i].add(target_level[dep])
    for i, (folder, _, _) in enumerate(LEVELS):
        name = lambda levels: ", ".join(LEVELS[j][0] for j in sorted(levels)) or "none"
        if links[i] - includes[i]:
            bad.append(f"{folder}: its libraries link {name(links[i] - includes[i])}, which no file of it includes")
        if includes[i] - links[i]:
            bad.append(f"{folder}: its files include {name(includes[i] - links[i])}, which its libraries do not link")

    # MPI calls, on the text without comments, a call's name and parenthesis on any lines
    for top in ("src", "io", "kernels", "app", "bench"):
        for path in files_under(top):
            if path.startswith("src/comm/"):
                continue
            text = strip_comments(open(path, encoding="utf-8", errors="replace").read())
            for m in re.finditer(r"\b(MPI_[A-Z][A-Za-z_]*)\s*\(", text):
                call = m.group(1)
                if call in MPI_EVERYWHERE:
                    continue
                if (path == "app/main.cpp" or path.startswith("bench/")) and call in MPI_MAINS:
                    continue
                if path == "src/checkpoint/checkpoint_file.cpp" and call in MPI_CHECKPOINT:
                    continue
                bad.append(f"{path}:{line_of(text, m.start())}: {call} outside src/comm "
                           "(comm/control.hpp has the run's control collectives)")

    bad.extend(include_circles())

    for b in bad:
        print(b)
    if not bad:
        print(f"check_layers: {len(LEVELS)} levels, includes only downward, CMake's links equal to the includes, "
              "MPI communication in src/comm only, <mpi.h> in comm and app only, no circle of includes")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
