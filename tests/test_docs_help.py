"""The options the commands take and the options their docs name are the same set: every option
in `iotrace-analyze --help` is in docs/analyzer.md, every option in `iotrace run --help` in
docs/configuration.md (and in run's own usage line, written by hand), and every option those
pages give the commands is one the command has."""
from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest

DOCS = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "docs")
OPTION = re.compile(r"(?<![\w-])(--?[A-Za-z][\w-]*)")


def help_options(*command: str) -> tuple[list[tuple[str, ...]], str]:
    """The options of a command's --help, one tuple of spellings per option (-h left out), and
    the help's text."""
    text = subprocess.run([sys.executable, *command, "--help"], capture_output=True, text=True,
                          check=True, timeout=60).stdout
    options = []
    for line in text.splitlines():
        if re.match(r" {2}-", line):  # an option's own line; its wrapped help is indented further
            spelled = re.split(r"\s{2,}", line.strip())[0]
            names = tuple(part.split()[0] for part in spelled.split(", "))
            if names[0] not in ("-h", "--help"):
                options.append(names)
    assert options, text
    return options, text


def named_in(text: str, option: str) -> bool:
    return re.search(rf"(?<![\w-]){re.escape(option)}(?![\w-])", text) is not None


def read(name: str) -> str:
    with open(os.path.join(DOCS, name), encoding="utf-8") as f:
        return f.read()


def test_analyze_help_and_docs_name_the_same_options():
    options, _ = help_options("-m", "iotrace_analyzer")
    doc = read("analyzer.md")
    missing = [o for names in options for o in names if not named_in(doc, o)]
    assert not missing, f"docs/analyzer.md does not name {missing}"
    # the synopsis and the options table: nothing the command lacks
    synopsis = "\n".join(ln for ln in doc.splitlines() if ln.startswith("    iotrace-analyze")
                         or ln.startswith("                    ["))
    table = "\n".join(ln.split("|")[1] for ln in doc.splitlines() if ln.startswith("| `-"))
    known = {o for names in options for o in names} | {"-h", "--help"}
    unknown = sorted(set(OPTION.findall(synopsis + "\n" + table)) - known)
    assert not unknown, f"docs/analyzer.md names options iotrace-analyze does not have: {unknown}"


def test_run_help_and_docs_name_the_same_options():
    options, text = help_options("-m", "iotrace", "run")
    doc = read("configuration.md")
    missing = [o for names in options for o in names if not named_in(doc, o)]
    assert not missing, f"docs/configuration.md does not name {missing}"
    usage = text.split("\n\n")[0]  # run's usage line is written by hand: it must list each
    assert usage.startswith("usage: iotrace run")
    not_in_usage = [names for names in options if not any(named_in(usage, o) for o in names)]
    assert not not_in_usage, f"the usage of iotrace run lacks {not_in_usage}"
    # the table's "iotrace run option" column: nothing `iotrace run` lacks
    column = "\n".join(ln.split("|")[2] for ln in doc.splitlines() if ln.startswith("| `IOTRACE_"))
    known = {o for names in options for o in names}
    unknown = sorted(set(OPTION.findall(column)) - known)
    assert not unknown, f"docs/configuration.md gives iotrace run options it does not have: {unknown}"


@pytest.mark.parametrize("option,truth", [("--engine", "forked worker processes"),
                                          ("--workers", "worker processes")])
def test_engine_and_workers_say_processes(option, truth):
    """The analyzer's local engine runs forked processes (engine.Forked): help and docs say so."""
    _, text = help_options("-m", "iotrace_analyzer")
    block = text[text.index(f"  {option}"):]
    block = re.sub(r"\s+", " ", block[:block.index("\n  -", 3)])
    assert truth in block and "threads for small" not in block
    row = next(ln for ln in read("analyzer.md").splitlines() if ln.startswith(f"| `{option}"))
    assert truth in row
