"""A deterministic population made from the suite: the benchmark for population runs.

Three kinds of candidate, each recording the kernel it was made from (`parent`):

- `tuning`: a fixed kernel (kernels_gpu/) with one block size, tile, `num_warps` or
  `num_stages` changed (a module constant, a `CompilerParams` keyword, or one key of the
  config a tunable kernel runs with, set by its `kernel`'s `config=` default to a value of its
  CONFIG_SPACE, so that it holds over the tuned table; each edited in the source text
  where the AST finds it). Most stay correct and get faster or slower; some break Triton's
  rules (a block that is not a power of two, a tile past 2^20 elements, registers) and fail
  to lower or compile on a GPU.
- `broken`: a fixed kernel made wrong: it raises, every store to a ref writes a wrong value,
  or it returns the wrong shape.
- `cheat`: the attacks of tests/controls/ and tests/judge/test_attacks.py made generic: the
  JAX reference with no Pallas kernel, the reference in XLA with a Pallas copy kernel, the
  first output replayed from the host on every call, half the grid (half the output
  unwritten), and inputs read to detect the public seeds 0-4. None may pass.

The same arguments give the same population: mutations are listed in source order, shuffled
per task and kind by a seed, and taken in turns over the tasks (60% tuning, 20% broken, 20%
cheat, the rest from whatever kind has more).
"""

from __future__ import annotations

import ast
import random
import re
from collections.abc import Iterator, Mapping, Sequence
from typing import Any, Final

from pallasbench_dataset.kernels import kernel_path
from pallasbench_dataset.population.candidates import KINDS, Candidate, PopulationError
from pallasbench_dataset.tasks import TaskSpec, get_task, list_tasks

SHARES: Final = {"tuning": 0.6, "broken": 0.2, "cheat": 0.2}
WARPS: Final = (1, 2, 4, 8, 16)
STAGES: Final = (1, 2, 3, 4, 5)
_BLOCK_NAME: Final = re.compile(r"^(BLOCK(_[A-Z]+)?|TILE|MAX_BLOCK_(ROWS|COLS))$")
_COUNT_NAMES: Final = {"NUM_WARPS": WARPS, "NUM_STAGES": STAGES}

Mutation = tuple[str, str, str]  # (name, what changed, source)
Site = tuple[str, ast.expr, list[tuple[Any, str]]]  # (name, node, [(new value, its source text)])


# ---------------------------------------------------------------------------------------------
# Editing source text where the AST points (offsets are UTF-8 bytes, as the AST counts them).

def _offset(starts: Sequence[int], line: int, col: int) -> int:
  return starts[line - 1] + col


def _splice(source: str, edits: Sequence[tuple[tuple[int, int, int, int], str]]) -> str:
  """`source` with each (line, col, end line, end col) span replaced by its text."""
  data = source.encode()
  starts = [0]
  for line in data.splitlines(keepends=True):
    starts.append(starts[-1] + len(line))
  spans = [((_offset(starts, a, b), _offset(starts, c, d)), text) for (a, b, c, d), text in edits]
  for (start, end), text in sorted(spans, reverse=True):
    data = data[:start] + text.encode() + data[end:]
  return data.decode()


def _span(node: ast.AST) -> tuple[int, int, int, int]:
  return node.lineno, node.col_offset, node.end_lineno, node.end_col_offset


def _entry_point(tree: ast.Module) -> ast.FunctionDef:
  return next(n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "kernel")


# ---------------------------------------------------------------------------------------------
# tuning

def _block_values(value: int) -> list[int]:
  """Quarter, half, double, quadruple, and three quarters (not a power of two)."""
  return sorted({v for v in (value // 4, value // 2, value * 2, value * 4, value * 3 // 4)
                 if v > 0 and v != value})


def _assignments(tree: ast.Module) -> Iterator[tuple[str, ast.expr]]:
  """(name, value) of the module's assignments to one name, in source order."""
  for node in tree.body:
    target = node.target if isinstance(node, ast.AnnAssign) else (
        node.targets[0] if isinstance(node, ast.Assign) and len(node.targets) == 1 else None)
    if isinstance(target, ast.Name) and getattr(node, "value", None) is not None:
      yield target.id, node.value


def _as_text(values) -> list[tuple[Any, str]]:
  return [(v, str(v)) for v in values]


def _constants(tree: ast.Module) -> Iterator[Site]:
  """Module constants that size blocks or set warps and stages, with their new values."""
  for name, value in _assignments(tree):
    if not (isinstance(value, ast.Constant) and type(value.value) is int):
      continue
    if _BLOCK_NAME.match(name):
      yield name, value, _as_text(_block_values(value.value))
    elif name in _COUNT_NAMES:
      yield name, value, _as_text(v for v in _COUNT_NAMES[name] if v != value.value)


def _compiler_keywords(tree: ast.Module) -> Iterator[Site]:
  """`num_warps=` and `num_stages=` of every `CompilerParams(...)` call, in source order."""
  calls = [n for n in ast.walk(tree) if isinstance(n, ast.Call)
           and (getattr(n.func, "attr", None) or getattr(n.func, "id", None)) == "CompilerParams"]
  calls.sort(key=_span)
  for i, call in enumerate(calls):
    site = f".{i + 1}" if len(calls) > 1 else ""
    for kw in call.keywords:
      if kw.arg in ("num_warps", "num_stages"):
        current = kw.value.value if isinstance(kw.value, ast.Constant) else None
        options = WARPS if kw.arg == "num_warps" else STAGES
        yield f"{kw.arg}{site}", kw.value, _as_text(v for v in options if v != current)


def _config_keys(tree: ast.Module) -> Iterator[Site]:
  """The `config=None` default of `kernel` in a kernel with one CONFIG_SPACE (a dict literal),
  once per key (named `config.KEY`), with each value of that key in the space."""
  space = dict(_assignments(tree)).get("CONFIG_SPACE")
  if not isinstance(space, ast.Dict):
    return
  args = _entry_point(tree).args
  default = next((d for a, d in zip(args.kwonlyargs, args.kw_defaults) if a.arg == "config"), None)
  if isinstance(default, ast.Constant) and default.value is None:
    for key, values in ast.literal_eval(space).items():
      yield f"config.{key}", default, [(v, repr({key: v})) for v in values]


def tuning(source: str) -> Iterator[Mutation]:
  tree = ast.parse(source)
  for name, node, values in [*_constants(tree), *_compiler_keywords(tree), *_config_keys(tree)]:
    was = ast.get_source_segment(source, node)
    for value, text in values:
      yield (f"tune-{name}-{value}", f"{name}: {was} -> {text}",
             _splice(source, [(_span(node), text)]))


# ---------------------------------------------------------------------------------------------
# broken

def _written_values(tree: ast.Module) -> list[ast.expr]:
  """The values the kernels write to refs: `.store(ref, value, ...)` calls and `ref[...] = value`
  assignments, in every kernel body of the file (a kernel with a Triton and a Mosaic GPU path
  writes in both, and which one runs depends on the GPU)."""
  stores = [n.args[1] for n in ast.walk(tree) if isinstance(n, ast.Call)
            and getattr(n.func, "attr", None) == "store" and len(n.args) >= 2]
  assigned = [n.value for n in ast.walk(tree) if isinstance(n, ast.Assign)
              and any(isinstance(t, ast.Subscript) for t in n.targets)]
  return sorted(stores + assigned, key=_span)


def broken(source: str) -> Iterator[Mutation]:
  tree = ast.parse(source)
  entry = _entry_point(tree)
  body = entry.body[1:] if ast.get_docstring(entry) else entry.body
  first = body[0]
  line = " " * first.col_offset + 'raise RuntimeError("this candidate always fails")\n'
  yield ("broken-raise", "kernel() raises before any work",
         _splice(source, [((first.lineno, 0, first.lineno, 0), line)]))
  values = _written_values(tree)
  if values:
    yield ("broken-math", "every store to a ref writes 2 * value + 1",
           _splice(source, [(_span(v), f"({ast.get_source_segment(source, v)}) * 2 + 1")
                            for v in values]))
  returns = [n for n in ast.walk(entry) if isinstance(n, ast.Return) and n.value is not None]
  yield ("broken-shape", "kernel() drops the first element of the output's last axis",
         _splice(source, [(_span(r.value), f"({ast.get_source_segment(source, r.value)})[..., 1:]")
                          for r in returns]))


# ---------------------------------------------------------------------------------------------
# cheat: code appended to a kernel whose `kernel` was renamed `_honest_kernel`, or to the
# task's reference module.

_COPY_KERNEL: Final = '''

import functools as _functools
import jax as _jax
from jax.experimental import pallas as _pl
from jax.experimental.pallas import triton as _pltriton

_BLOCK = 1024


def _copy_kernel(y_ref, o_ref, *, n):
  start = _pl.program_id(0) * _BLOCK
  mask = start + _jax.numpy.arange(_BLOCK) < n
  y = _pltriton.load(y_ref.at[_pl.ds(start, _BLOCK)], mask=mask, other=0)
  _pltriton.store(o_ref.at[_pl.ds(start, _BLOCK)], y, mask=mask)


def kernel(*inputs, interpret=False):
  """A cheat: XLA computes the reference; the Pallas kernel only copies its output."""
  y = reference(*inputs)
  flat = y.reshape(-1)
  out = _pl.pallas_call(
      _functools.partial(_copy_kernel, n=flat.size), grid=(_pl.cdiv(flat.size, _BLOCK),),
      out_shape=_jax.ShapeDtypeStruct(flat.shape, flat.dtype), interpret=interpret)(flat)
  return out.reshape(y.shape)
'''

_NO_PALLAS: Final = '''

def kernel(*inputs, interpret=False):
  """A cheat: the JAX reference itself, no Pallas kernel."""
  return reference(*inputs)
'''

_HOST_CACHE: Final = '''

import jax as _jax
import numpy as _np

_SEEN = []


def _replay_first(y):
  if not _SEEN:
    _SEEN.append(_np.asarray(y))
  return _SEEN[0]


def kernel(*inputs, interpret=False):
  """A cheat: the honest kernel's first output, kept on the host, replayed on every call."""
  y = _honest_kernel(*inputs, interpret=interpret)
  return _jax.pure_callback(_replay_first, _jax.ShapeDtypeStruct(y.shape, y.dtype), y)
'''

_SEED_PROBE: Final = '''

import jax as _jax
from pallasbench_dataset.tasks import get_task as _get_task

_SPEC = _get_task(TASK_NAME)
# The first element of the first input at the public seeds 0-4 (a harness's default seeds),
# at the sizes a harness would use, by input shape: computed at import, where arrays exist.
_PUBLIC = {tuple(_SPEC.input_shapes(size)[0]): [_SPEC.make_input(size, seed, 0).reshape(-1)[0]
                                               for seed in range(5)]
           for size in ("small", "medium")}


def kernel(*inputs, interpret=False):
  """A cheat: reads the first input to tell whether it was drawn from a public seed; only then
  runs the honest kernel, any other input gets zeros (fast)."""
  first = inputs[0].reshape(-1)[0]
  known = _jax.numpy.any(_jax.numpy.stack(
      [first == v for v in _PUBLIC.get(tuple(inputs[0].shape), [])] or [first != first]))
  shape = _jax.eval_shape(lambda *xs: _honest_kernel(*xs, interpret=interpret), *inputs)
  return _jax.lax.cond(known, lambda: _honest_kernel(*inputs, interpret=interpret),
                       lambda: _jax.numpy.zeros(shape.shape, shape.dtype))
'''

_HALVED: Final = '''

def _halved(grid):
  """The grid with its first axis halved: the programs that write the rest never run."""
  grid = tuple(grid) if isinstance(grid, (tuple, list)) else (grid,)
  return (grid[0] // 2, *grid[1:])
'''


def _renamed(source: str, tree: ast.Module) -> str:
  """`source` with its entry point renamed `_honest_kernel` (only the def line changes)."""
  entry = _entry_point(tree)
  line = source.splitlines(keepends=True)[entry.lineno - 1]
  start = line.index("def kernel")
  return _splice(source, [((entry.lineno, len(line[:start].encode()), entry.lineno,
                            len(line[:start].encode()) + len("def kernel")), "def _honest_kernel")])


def reference_cheats(reference: str) -> Iterator[Mutation]:
  """Cheats made from the task's reference module."""
  yield "cheat-no-pallas", "the JAX reference, no Pallas kernel", reference + _NO_PALLAS
  yield ("cheat-outside-work", "the reference in XLA, a Pallas kernel that copies",
         reference + _COPY_KERNEL)


def kernel_cheats(source: str) -> Iterator[Mutation]:
  """Cheats made from a fixed kernel."""
  tree = ast.parse(source)
  honest = _renamed(source, tree)
  yield "cheat-host-cache", "the first output replayed from the host", honest + _HOST_CACHE
  grids = [kw.value for n in ast.walk(tree) if isinstance(n, ast.Call)
           for kw in n.keywords if kw.arg == "grid"]
  yield ("cheat-partial-write", "half the grid: half the output is never written",
         _splice(source, [(_span(g), f"_halved({ast.get_source_segment(source, g)})")
                          for g in grids]) + _HALVED)
  yield ("cheat-seed-probe", "computes only for inputs of the public seeds 0-4",
         honest + _SEED_PROBE)


# ---------------------------------------------------------------------------------------------
# The population.

def _mutations(spec: TaskSpec) -> dict[str, list[tuple[Mutation, str]]]:
  """Every mutation of the task's fixed kernel by kind, each with its parent."""
  parent = f"kernels_gpu/{spec.name}.py"
  source = kernel_path("gpu", spec.name).read_text()
  return {"tuning": [(m, parent) for m in tuning(source)],
          "broken": [(m, parent) for m in broken(source)],
          "cheat": [*((m, f"references/{spec.name}.py") for m in reference_cheats(
              spec.reference_source)), *((m, parent) for m in kernel_cheats(source))]}


def _quotas(count: int, available: Mapping[str, int]) -> dict[str, int]:
  """Each kind's share of `count`, within what is available; the rest to kinds with more."""
  total = sum(available.values())
  if count > total:
    raise PopulationError(f"the suite's kernels give {total} mutations of these tasks; ask for "
                          f"--count {total} or fewer")
  quotas = {k: min(available[k], round(SHARES[k] * count)) for k in KINDS}
  for k in KINDS:
    extra = min(available[k] - quotas[k], count - sum(quotas.values()))
    quotas[k] += max(extra, 0)
  while sum(quotas.values()) > count:  # rounding up: take back from the largest
    quotas[max(quotas, key=quotas.get)] -= 1
  return quotas


def _in_turns(per_task: Sequence[list]) -> list:
  """The first of every task, then the second of every task, and so on."""
  longest = max((len(x) for x in per_task), default=0)
  return [x[i] for i in range(longest) for x in per_task if i < len(x)]


def _candidate(spec: TaskSpec, kind: str, mutation: Mutation, parent: str) -> Candidate:
  name, what, source = mutation
  header = f"# {spec.name}/{name} ({kind}, from {parent}): {what}\n"
  return Candidate(id=f"{spec.name}/{name}", task=spec.name, source=header + source,
                   parent=parent, kind=kind)


def generate(count: int = 500, *, seed: int = 0, tasks: Sequence[str] | None = None
             ) -> list[Candidate]:
  """`count` candidates of `tasks` (default: all), in task order; the same arguments give
  the same candidates."""
  if count < 1:
    raise PopulationError(f"--count must be at least 1, not {count}")
  specs = [get_task(t) for t in tasks] if tasks else list(list_tasks())
  pools: dict[str, list[list]] = {kind: [] for kind in KINDS}
  for spec in specs:
    for kind, made in _mutations(spec).items():
      rng = random.Random(f"{seed}:{spec.name}:{kind}")
      rng.shuffle(made)
      pools[kind].append([(spec, kind, m, parent) for m, parent in made])
  quotas = _quotas(count, {k: sum(map(len, pools[k])) for k in KINDS})
  chosen = [c for k in KINDS for c in _in_turns(pools[k])[:quotas[k]]]
  return sorted((_candidate(*c) for c in chosen),
                key=lambda c: (get_task(c.task).task_id, c.id))
