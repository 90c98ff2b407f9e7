#!/usr/bin/env python3
"""The size rules of docs/design.md ("Rules for code"), over strata's own sources (src, io,
kernels, app, bench): no file over 500 lines and no function over 100. Prints every function over
60 lines (each needs a reason in a comment: docs/design.md lists them) and every breach;
exits 1 on a breach.

A function is a brace block at namespace or class level whose head (the text since the
previous ';', '{' or '}') has a parenthesis; its lines run from the head's first line to the
closing brace, comments and strings blanked first. Lambdas and blocks inside a function
count with it.
Usage: check_sizes.py REPO_DIR
"""
import os
import re
import sys

FOLDERS = ["src", "io", "kernels", "app", "bench"]
MOST_FILE_LINES = 500
MOST_FUNCTION_LINES = 100
WORTH_A_REASON = 60


def blanked(text):
    """Comments, strings and character literals blanked (newlines kept)."""
    def blank(m):
        return re.sub(r"[^\n]", " ", m.group(0))
    pattern = r'//[^\n]*|/\*.*?\*/|"(?:\\.|[^"\\\n])*"|\'(?:\\.|[^\'\\\n])*\''
    return re.sub(pattern, blank, text, flags=re.S)


def functions(text):
    """(first line, last line) of each function in the text."""
    t = blanked(text)
    t = re.sub(r"^[ \t]*#[^\n]*", lambda m: " " * len(m.group(0)), t, flags=re.M)  # preprocessor lines
    scopes, head_start, out = [], 0, []
    for i, c in enumerate(t):
        if c == "{":
            head = t[head_start:i]
            if any(kind == "function" for kind, _ in scopes):
                kind = "block"
            elif re.search(r"\b(namespace|class|struct|union|enum)\b[^()]*$", head) or re.fullmatch(r'\s*extern\s*', head):
                kind = "scope"
            elif "(" in head and not re.search(r"=\s*$", head):
                kind = "function"
            else:
                kind = "block"
            first = head_start + len(head) - len(head.lstrip())
            scopes.append((kind, first))
            head_start = i + 1
        elif c == "}":
            if scopes:
                kind, first = scopes.pop()
                if kind == "function":
                    out.append((t.count("\n", 0, first) + 1, t.count("\n", 0, i) + 1))
            head_start = i + 1
        elif c == ";":
            head_start = i + 1
    return out


def main(repo):
    os.chdir(repo)
    bad, long_ones = [], []
    for folder in FOLDERS:
        for root, _, names in os.walk(folder):
            for name in sorted(names):
                if not name.endswith((".cpp", ".hpp", ".h", ".c")):
                    continue
                path = os.path.join(root, name)
                text = open(path, encoding="utf-8", errors="replace").read()
                lines = text.count("\n")
                if lines > MOST_FILE_LINES:
                    bad.append(f"{path}: {lines} lines (at most {MOST_FILE_LINES})")
                for first, last in functions(text):
                    n = last - first + 1
                    where = f"{path}:{first}: a function of {n} lines"
                    if n > MOST_FUNCTION_LINES:
                        bad.append(f"{where} (at most {MOST_FUNCTION_LINES})")
                    elif n > WORTH_A_REASON:
                        long_ones.append((n, where))
    for n, where in sorted(long_ones, reverse=True):
        print(f"note: {where} (over {WORTH_A_REASON}: docs/design.md gives its reason)")
    for b in bad:
        print(b)
    if not bad:
        print(f"check_sizes: no file over {MOST_FILE_LINES} lines, no function over {MOST_FUNCTION_LINES}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
