"""The import graph: no circle among the package's modules nor among the scripts, every
script imports, the benchmark's subcommands parse, and what a Spark worker imports to
score linkage blocks loads none of the driver's modules. (The package's layers are
import-linter's contracts in pyproject.toml, which scripts/test runs.)"""

from __future__ import annotations

import ast
import json
import subprocess
import sys

import grimp

from tests.support.paths import ROOT

SCRIPTS = ROOT / "scripts"


def cycles(imports: dict[str, set[str]]) -> list[list[str]]:
    """The import circles of a graph (module -> the modules it imports): its strongly
    connected components of more than one module, or of one that imports itself."""
    order: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found = []

    def visit(module: str) -> None:  # Tarjan's algorithm; the graphs here are shallow
        order[module] = low[module] = len(order)
        stack.append(module)
        for imported in imports[module]:
            if imported not in order:
                visit(imported)
                low[module] = min(low[module], low[imported])
            elif imported in stack:
                low[module] = min(low[module], order[imported])
        if low[module] == order[module]:
            component = []
            while not component or component[-1] != module:
                component.append(stack.pop())
            if len(component) > 1 or module in imports[module]:
                found.append(sorted(component))

    for module in sorted(imports):
        if module not in order:
            visit(module)
    return found


def test_cycles_finds_a_circle_and_only_circles():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert cycles({"a": {"a"}, "b": set()}) == [["a"]]
    assert cycles({"a": {"b"}, "b": set(), "c": {"a", "b"}}) == []


def test_no_import_circle_in_the_package():
    """Every import statement counts, those inside functions and under TYPE_CHECKING too."""
    graph = grimp.build_graph("privacy_eval", cache_dir=None)
    imports = {module: set(graph.find_modules_directly_imported_by(module)) for module in graph.modules}
    assert len(imports) > 50
    assert cycles(imports) == []


def script_imports() -> dict[str, set[str]]:
    """Each script module -> the script modules it imports (every import statement)."""
    names = {path.stem for path in SCRIPTS.glob("*.py")}
    imports = {}
    for path in SCRIPTS.glob("*.py"):
        found = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                found |= {alias.name for alias in node.names}
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                found.add(node.module)
        imports[path.stem] = {name.split(".")[0] for name in found} & names
    return imports


def test_no_import_circle_among_the_scripts():
    imports = script_imports()
    assert {"bench", "measure", "bench_processes"} <= set(imports)
    assert "bench_small" in imports["bench"]  # the subcommands are imported as they are written
    assert cycles(imports) == []


CHECK = """
import json, sys
sys.path[:0] = [sys.argv[1], sys.argv[2]]
modules = json.loads(sys.argv[3])
for name in modules:
    __import__(name)
import bench

parser = bench.argument_parser()
parsed = {mode: vars(parser.parse_args([mode, *extra]))
          for mode, extra in [("exact", []), ("linkage", []), ("distance", ["--cell-records", "5", "--cells-only"]),
                              ("disclosure", []), ("small", ["--jobs"]), ("processes", []),
                              ("wide", ["--columns", "4"])]}
try:
    parser.parse_args(["--small", "--linkage"])
except SystemExit as exc:
    parsed["mode flags"] = exc.code
try:
    bench.main(["distance", "--cells-only"])
except SystemExit as exc:
    parsed["cells only alone"] = exc.code
print(json.dumps(parsed))
"""


def test_every_script_imports_and_the_benchmark_takes_subcommands():
    modules = sorted(path.stem for path in SCRIPTS.glob("*.py"))
    done = subprocess.run(
        [sys.executable, "-c", CHECK, str(SCRIPTS), str(ROOT), json.dumps(modules)],
        capture_output=True, text=True, timeout=120, cwd=ROOT,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    parsed = json.loads(done.stdout.splitlines()[-1])
    assert parsed.pop("mode flags") == 2  # the old mode flags are refused, not run as one of them
    assert parsed.pop("cells only alone") == 2  # refused, not run with the default cells
    assert {mode: args["mode"] for mode, args in parsed.items()} == {mode: mode for mode in parsed}
    assert parsed["distance"]["cell_records"] == 5 and parsed["distance"]["runs"] == 3 and parsed["distance"]["cells_only"]
    assert parsed["small"]["jobs"] is True and "rows" not in parsed["small"]
    assert parsed["wide"]["columns"] == 4 and parsed["exact"]["rows"] == 1_000_000
    assert parsed["exact"]["driver_memory"] == "12g" and "skip_pandas" not in parsed["linkage"]


def test_the_linkage_workers_load_none_of_the_driver_modules():
    """What the scoring workers unpickle imports the block stream, the block scoring and
    the kernel: importing those (and the packages above them) loads no other module of
    the package, nor Spark's DataFrame API."""
    code = (
        "import sys, json\n"
        "import privacy_eval.linkage.block_scoring, privacy_eval.linkage.block_stream\n"
        "print(json.dumps(sorted(m for m in sys.modules if m.startswith(('privacy_eval', 'pyspark')))))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert done.returncode == 0, done.stderr[-3000:]
    loaded = json.loads(done.stdout)
    assert "privacy_eval.linkage.block_scoring" in loaded
    allowed = ("privacy_eval.linkage.kernel", "privacy_eval.linkage.block_", "privacy_eval.linkage.names")
    assert [m for m in loaded if not m.startswith(allowed)] == ["privacy_eval", "privacy_eval.columns", "privacy_eval.linkage"]
