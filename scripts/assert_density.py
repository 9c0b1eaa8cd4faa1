#!/usr/bin/python3
# Counts always-on asserts per function in dagsim's protocol folders (issue 52, item 4).
#
# The rule, a heuristic on text rather than a parse:
#   - Files: every .cc and .h under the folder (recursively; the top-level "net" row takes only the
#     files directly in net/), minus tests: names ending _test.cc / _test.h / _test_util.h /
#     _test_cluster.h, fuzz harnesses (*_fuzz.cc) and anything under a fuzz/ or test/ folder.
#   - Comments, string and character literals and preprocessor lines are blanked first.
#   - A function definition is a `{` met at namespace or class scope (never inside another body)
#     whose header, the text since the last `;`, `{` or `}` at that scope, ends with `)` and
#     optional qualifiers (const, noexcept, override, final, mutable, a trailing `-> type`) or has a
#     constructor's initialiser list (`) : member_(x) {`). Lambdas are not counted: their braces sit
#     inside a body, and a lambda at namespace scope (`= [..](..) {`) is excluded by its `](`.
#     Declarations without a body, `= default` and `= delete` are not definitions.
#   - An assert is any use of a macro named DAGSIM_ASSERT... (DAGSIM_ASSERT, _MSG, _EQ, ...).
#     DAGSIM_UNREACHABLE is printed in its own column and not counted as an assert.
import argparse
import os
import re
import sys

FOLDERS = [
    "core/rpc", "core/dist_autograd", "core/rendezvous", "core/elastic", "core/store",
    "core/optim", "net/etcd", "net/rdzv", "net/tcpstore", "net", "launch", "scenarios/run",
]
TOP_LEVEL_ONLY = {"net"}

QUALIFIERS = re.compile(
    r"\)\s*(?:(?:const|noexcept(?:\s*\([^)]*\))?|override|final|mutable|volatile|&&|&)\s*)*"
    r"(?:->\s*[\w:<>,\s\*&]+)?\s*$")
INIT_LIST = re.compile(r"\)\s*(?:(?:const|noexcept|override|final)\s*)*:\s*[^:]")
ASSERT = re.compile(r"\bDAGSIM_ASSERT\w*\s*\(")
UNREACHABLE = re.compile(r"\bDAGSIM_UNREACHABLE\s*\(")


def is_test_file(path):
    name = os.path.basename(path)
    parts = path.split(os.sep)
    if "fuzz" in parts or "test" in parts or "tests" in parts:
        return True
    return (name.endswith(("_test.cc", "_test.h", "_test_util.h", "_test_cluster.h"))
            or name.endswith("_fuzz.cc"))


def strip(text):
    """Blanks comments, literals and preprocessor lines, keeping newlines."""
    out = []
    i, n = 0, len(text)
    line_start = True
    while i < n:
        c = text[i]
        if line_start and c == "#":
            # A preprocessor line, with its continuations.
            while i < n and text[i] != "\n":
                if text[i] == "\\" and i + 1 < n and text[i + 1] == "\n":
                    i += 2
                    continue
                i += 1
            continue
        if c == "/" and text.startswith("//", i):
            while i < n and text[i] != "\n":
                i += 1
            continue
        if c == "/" and text.startswith("/*", i):
            end = text.find("*/", i + 2)
            end = n if end < 0 else end + 2
            out.append("\n" * text.count("\n", i, end))
            i = end
            continue
        if c == "R" and text.startswith('R"', i) and (i == 0 or not text[i - 1].isalnum()):
            m = re.match(r'R"([^(]*)\(', text[i:])
            if m:
                close = ")" + m.group(1) + '"'
                end = text.find(close, i + m.end())
                end = n if end < 0 else end + len(close)
                out.append('""' + "\n" * text.count("\n", i, end))
                i = end
                continue
        if c in "\"'":
            # A digit separator (1'000) is not a literal.
            if c == "'" and i > 0 and text[i - 1].isalnum() and i + 1 < n and text[i + 1].isalnum():
                i += 1
                continue
            j = i + 1
            while j < n and text[j] != c:
                j += 2 if text[j] == "\\" else 1
            out.append(c + c)
            i = j + 1
            continue
        out.append(c)
        line_start = c == "\n" or (line_start and c in " \t")
        i += 1
    return "".join(out)


def skip_block(text, i):
    """text[i] == '{'; returns the index just past its matching '}'."""
    depth = 0
    n = len(text)
    while i < n:
        if text[i] == "{":
            depth += 1
        elif text[i] == "}":
            depth -= 1
            if depth == 0:
                return i + 1
        i += 1
    return n


def count_functions(text):
    """Counts function definitions at namespace and class scope (see the rule above)."""
    count = 0
    i, n = 0, len(text)
    header_start = 0
    while i < n:
        c = text[i]
        if c in ";}":
            header_start = i + 1
            i += 1
            continue
        if c != "{":
            i += 1
            continue
        header = " ".join(text[header_start:i].split())
        before = text[header_start:i].rstrip()
        # A member's brace initialiser inside a constructor's initialiser list.
        if INIT_LIST.search(header) and before and (before[-1].isalnum() or before[-1] in "_>"):
            i = skip_block(text, i)
            continue
        if re.match(r"^(?:inline\s+)?namespace\b", header) or header.startswith('extern ""'):
            header_start = i + 1
            i += 1
            continue
        if re.match(r"^(?:template\s*<.*>\s*)?(?:class|struct|union)\b", header) and "(" not in header.split(":")[0]:
            header_start = i + 1  # Class scope: its members are at the same level for us.
            i += 1
            continue
        is_lambda = "](" in header.replace(" ", "") or re.search(r"=\s*\[", header)
        if not is_lambda and "(" in header and (QUALIFIERS.search(header) or INIT_LIST.search(header)):
            if not re.match(r"^(?:if|for|while|switch|catch|do)\b", header):
                count += 1
        i = skip_block(text, i)
        header_start = i
    return count


def files_of(root, folder):
    base = os.path.join(root, folder)
    if folder in TOP_LEVEL_ONLY:
        names = sorted(os.listdir(base))
        return [os.path.join(base, f) for f in names
                if f.endswith((".cc", ".h")) and os.path.isfile(os.path.join(base, f))]
    found = []
    for dirpath, dirnames, filenames in os.walk(base):
        dirnames.sort()
        for f in sorted(filenames):
            if f.endswith((".cc", ".h")):
                found.append(os.path.join(dirpath, f))
    return found


def main():
    parser = argparse.ArgumentParser(description="Asserts per function in the protocol folders.")
    parser.add_argument("root", nargs="?", default=os.path.join(os.path.dirname(__file__), ".."),
                        help="the repository root (default: this script's repository)")
    parser.add_argument("--files", action="store_true", help="also list each file's counts")
    args = parser.parse_args()
    root = os.path.abspath(args.root)
    rows = []
    for folder in FOLDERS:
        if not os.path.isdir(os.path.join(root, folder)):
            continue
        functions = asserts = unreachable = 0
        for path in files_of(root, folder):
            if is_test_file(os.path.relpath(path, root)):
                continue
            with open(path, encoding="utf-8", errors="replace") as f:
                text = strip(f.read())
            fn = count_functions(text)
            a = len(ASSERT.findall(text))
            u = len(UNREACHABLE.findall(text))
            if args.files:
                print(f"  {os.path.relpath(path, root)}: {fn} functions, {a} asserts", file=sys.stderr)
            functions += fn
            asserts += a
            unreachable += u
        rows.append((folder, functions, asserts, unreachable))
    print(f"{'folder':<20} {'functions':>9} {'asserts':>8} {'per fn':>7} {'unreachable':>11}")
    for folder, fn, a, u in rows:
        print(f"{folder:<20} {fn:>9} {a:>8} {a / fn if fn else 0:>7.2f} {u:>11}")
    total_fn = sum(r[1] for r in rows)
    total_a = sum(r[2] for r in rows)
    total_u = sum(r[3] for r in rows)
    print(f"{'total':<20} {total_fn:>9} {total_a:>8} {total_a / total_fn if total_fn else 0:>7.2f} {total_u:>11}")


if __name__ == "__main__":
    main()
