"""Choosing each fixed kernel's config by measurement.

    python -m pallasbench_dataset.autotune --tasks matmul swiglu --sizes medium large \
        --results kernels_gpu/tuning/h200.jsonl          # on the GPU: measure
        [--precisions float32 bfloat16]                   # each task at each precision
    python -m pallasbench_dataset.autotune --write-tables kernels_gpu/tuning/h200.jsonl

A tunable kernel in kernels_gpu/ declares CONFIG_SPACE (the values each parameter may take; or a
tuple of such spaces, e.g. one per backend, each with its `backend` key, or one per kernel
structure, each searched with an even share of the room), `config_ok(config)`
(whether a config can compile: shared memory, registers), `config_for(*inputs)` (the config it
runs with: TUNED_CONFIGS for the GPU and shape class, else a default by shape),
`shape_class(*inputs)`, and accepts `kernel(..., config=...)`.

For each (task, size, precision): the task posed at that precision (`TaskSpec.at_precision`:
its floating inputs in that dtype, so `shape_class` names the dtype and the tables hold configs
per precision), the space (or the spaces of --backends), pruned by `config_ok` and
thinned to --max-configs (the default config always in); every config compiled by a process of
its own, as many at once as --workers, into a persistent compilation cache this process then
loads them from (a compile past --compile-budget is killed and recorded, so one config cannot
hold up the search); each compiled config checked on a fresh seed against the task's reference
with the judge's comparison (a failing config is recorded and never kept); then timed with the
judge's timing (device time by CUPTI on a GPU, inputs drawn for each call, the L2 flushed): a
short screen of every passing config, then the fastest few and the default interleaved with the jitted XLA
baseline under the judge's protocol. One JSON line per (task, size) is appended to --results as
it finishes; a rerun skips what is there, so a run resumes. `--write-tables` writes the fastest
config of each line into its kernel's TUNED_CONFIGS, GPU lines only. On a host without a GPU
the timings are interpret mode's and say nothing about a GPU: tuning there is refused unless
--allow-cpu asks for it (to try the tuner), and its lines never reach a table. Trusted code
only: it imports the project's own kernels.
"""

from __future__ import annotations

import argparse
import ast
import concurrent.futures
import datetime
import functools
import itertools
import json
import multiprocessing
import os
import pathlib
import secrets
import sys
import tempfile
import textwrap
import time
import warnings
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Final

import jax

from pallasbench_dataset import jsonlines
from pallasbench_dataset.arguments import ListOption
from pallasbench_dataset.evaluation.judge import budgets, checks, compile_profile, environment, timing
from pallasbench_dataset.evaluation.errors import short_error
from pallasbench_dataset.evaluation.judge.core import timing_sets
from pallasbench_dataset.kernels import load_kernel, load_module, tree_dir
from pallasbench_dataset.precision import DEFAULT_PRECISION, PRECISIONS, check_precision
from pallasbench_dataset.tasks import Size, get_task, list_tasks
from pallasbench_dataset.tolerance import compare

DEFAULT_COMPILE_BUDGET_S: Final = budgets.budget_s("gpu", budgets.COMPILE)  # the pipeline's
FINALISTS: Final = 3
SCREEN_ITERATIONS: Final = 10
TABLE_NAME: Final = "TUNED_CONFIGS"


class TuningError(Exception):
  """A kernel that cannot be tuned, or a results file that cannot be read."""


def is_tunable(module) -> bool:
  return all(hasattr(module, name) for name in
             ("CONFIG_SPACE", "config_ok", "config_for", "shape_class", TABLE_NAME))


def spaces(module) -> tuple[Mapping[str, Sequence[Any]], ...]:
  """The kernel's config spaces: CONFIG_SPACE itself, or each of its spaces (one per backend,
  each naming its `backend`, or one per kernel structure)."""
  space = module.CONFIG_SPACE
  return (space,) if isinstance(space, Mapping) else tuple(space)


def candidates(module, default: Mapping[str, Any], max_configs: int,
               backends: Sequence[str] | None = None) -> list[dict[str, Any]]:
  """The configs to try: the default first, then the compilable configs of each space (of the
  `backends` asked for, default all), the room shared evenly between the spaces (what a small
  space leaves goes to the larger ones) and each space thinned evenly (deterministic, evenly
  spaced picks), in the spaces' order."""
  chosen = [s for s in spaces(module)
            if backends is None or set(s.get("backend", ())) & set(backends)]
  pools = []
  for space in chosen:
    every = [dict(zip(space, values)) for values in itertools.product(*space.values())]
    pools.append([c for c in every if module.config_ok(c) and c != dict(default)])
  room, shares = max(0, max_configs - 1), [0] * len(pools)
  for left, n in enumerate(sorted(range(len(pools)), key=lambda n: len(pools[n]))):
    spaces_left = len(pools) - left
    shares[n] = min(len(pools[n]), room // spaces_left + (room % spaces_left > 0))
    room -= shares[n]
  out = [dict(default)]
  for pool, share in zip(pools, shares):
    out += [pool[i * len(pool) // share] for i in range(share)]
  return out


def _compile(module, config: Mapping[str, Any], structs, interpret: bool):
  """(executable, None), or (None, the error) for a config that does not compile."""
  try:
    fn = functools.partial(module.kernel, interpret=interpret, config=dict(config))
    return jax.jit(fn).lower(*structs).compile(), None
  except Exception as e:  # pylint: disable=broad-except  (a config that does not compile)
    return None, short_error(e)


def _compile_one(path: str, config: Mapping[str, Any], structs, interpret: bool,
                 cache_dir: str, conn) -> None:
  """In a child process: compiles one config of the kernel at `path` into the persistent
  compilation cache at `cache_dir`, and sends back None or the error."""
  os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")  # many children, one GPU
  compile_profile.use_persistent_cache(pathlib.Path(cache_dir))
  module = load_module(pathlib.Path(path).read_text(), path)
  conn.send(_compile(module, config, structs, interpret)[1])


def _compile_in_children(path: str, configs: Sequence[Mapping[str, Any]], structs, *,
                         interpret: bool, workers: int, budget_s: float,
                         cache_dir: pathlib.Path) -> list[str | None]:
  """Each config compiled by a child process of its own, `workers` at a time, into the cache;
  a child past `budget_s` is killed. None or the error per config."""
  ctx = multiprocessing.get_context("spawn")
  results: list[str | None] = [None] * len(configs)
  pending = list(enumerate(configs))
  running: dict[int, tuple[Any, Any, float]] = {}
  while pending or running:
    while pending and len(running) < workers:
      i, config = pending.pop(0)
      parent, child = ctx.Pipe(duplex=False)
      proc = ctx.Process(target=_compile_one, daemon=True,
                         args=(path, dict(config), structs, interpret, str(cache_dir), child))
      proc.start()
      child.close()
      running[i] = (proc, parent, time.monotonic() + budget_s)
    for i, (proc, conn, deadline) in list(running.items()):
      if conn.poll():
        try:
          results[i] = conn.recv()
        except EOFError:
          results[i] = f"the compiler process died (exit code {proc.exitcode})"
      elif not proc.is_alive():
        results[i] = f"the compiler process died (exit code {proc.exitcode})"
      elif time.monotonic() > deadline:
        proc.kill()
        results[i] = f"compile_timeout: the compile ran past its {budget_s:g} s budget"
      else:
        continue
      proc.join()
      conn.close()
      del running[i]
    time.sleep(0.05)
  return results


def _compile_all(module, configs: Sequence[Mapping[str, Any]], structs, *, interpret: bool,
                 workers: int, budget_s: float | None = None,
                 cache_dir: pathlib.Path | None = None) -> list[tuple[Any, str | None]]:
  """(executable, None) or (None, error) per config. With a `budget_s`, each config first
  compiles in a child process of its own into the persistent cache at `cache_dir` (which this
  process must use), and a compile past the budget is killed and recorded; the configs that
  compiled are then loaded here from the cache. Without, they compile here in threads."""
  errors: list[str | None] = [None] * len(configs)
  if budget_s is not None:
    errors = _compile_in_children(module.__file__, configs, structs, interpret=interpret,
                                  workers=workers, budget_s=budget_s, cache_dir=cache_dir)

  def one(pair):
    config, error = pair
    return (None, error) if error is not None else _compile(module, config, structs, interpret)
  with concurrent.futures.ThreadPoolExecutor(workers) as pool:
    return list(pool.map(one, zip(configs, errors)))


def tune(task: str, size: str, *, max_configs: int, workers: int,
         backends: Sequence[str] | None = None, compile_budget_s: float | None = None,
         cache_dir: pathlib.Path | None = None, precision: str = DEFAULT_PRECISION,
         progress: Callable[[str], None] = lambda _: None) -> dict[str, Any]:
  """Measures `task`'s configs at `size` and `precision` on the default device; returns the
  results line."""
  module = load_kernel("gpu", task)
  if not is_tunable(module):
    raise TuningError(f"kernels_gpu/{task}.py declares no tunable config (CONFIG_SPACE, "
                      f"config_ok, config_for, shape_class, {TABLE_NAME})")
  spec = get_task(task).at_precision(precision)
  dims = spec.dims(size)
  structs = spec.input_structs(dims)
  env = environment.capture(None)
  on_gpu = env.platform == "gpu"
  default = module.config_for(*structs)
  configs = candidates(module, default, max_configs, backends)
  start = time.perf_counter()
  compiled = _compile_all(module, configs, structs, interpret=not on_gpu, workers=workers,
                          budget_s=compile_budget_s, cache_dir=cache_dir)
  compile_s = time.perf_counter() - start
  label = f"{task} {size}" + ("" if precision == DEFAULT_PRECISION else f" {precision}")
  progress(f"{label}: {len(configs)} configs compiled in {compile_s:.1f} s")
  inputs = spec.make_inputs(dims, secrets.randbelow(2**31))
  reference = checks.expected(spec, inputs)
  rows, passing = [], []
  for config, (executable, error) in zip(configs, compiled):
    row = {"config": config, "status": "compile_error" if error else "ok", "error": error}
    if executable is not None:
      try:
        result = compare(jax.block_until_ready(executable(*inputs)), reference, spec.tolerance)
      except Exception as e:  # pylint: disable=broad-except  (a config that fails at run time)
        row.update(status="runtime_error", error=f"{type(e).__name__}: {e}"[:500])
      else:
        if not result.passed:
          row.update(status="incorrect", error=result.reason)
        else:
          passing.append((len(rows), executable))
    rows.append(row)
  del reference
  if not passing:
    raise TuningError(f"{label}: no config compiled and passed: "
                      f"{rows[0]['status']}: {rows[0]['error']}")
  method = timing.available_method()
  l2_bytes = environment.l2_bytes(env)
  flush = timing.L2Flush(l2_bytes) if on_gpu else None

  def feeds(n: int) -> list[timing.Feed]:  # each function its own inputs, as the judge times
    return [timing_sets(spec, dims, l2_bytes, flush=flush) for _ in range(n)]
  screen = timing.time_interleaved([e for _, e in passing], feeds(len(passing)),
                                   iterations=SCREEN_ITERATIONS, rounds=1, warmup=1, method=method)
  for (i, _), t in zip(passing, screen):
    rows[i]["screen_ms"] = t.samples.median_ms
  ranked = sorted(passing, key=lambda p: rows[p[0]]["screen_ms"])[:FINALISTS]
  if rows[0]["status"] == "ok" and all(i != 0 for i, _ in ranked):
    ranked.append(passing[0])
  baseline = jax.jit(spec.reference)
  final = timing.time_interleaved([baseline, *(e for _, e in ranked)], feeds(len(ranked) + 1),
                                  iterations=50, rounds=2, warmup=3, method=method)
  for (i, _), t in zip(ranked, final[1:]):
    rows[i].update(runtime_ms=t.samples.median_ms, runtime_iqr_ms=t.samples.iqr_ms)
  best = min((i for i, _ in ranked), key=lambda i: rows[i]["runtime_ms"])
  line = {
      "task": task, "size": size, "precision": precision, "platform": env.platform,
      "device_kind": jax.devices()[0].device_kind,
      "shape_class": module.shape_class(*structs), "timing_method": method.value,
      "baseline_ms": final[0].samples.median_ms, "default": default,
      "default_ms": rows[0].get("runtime_ms"), "best": rows[best]["config"],
      "best_ms": rows[best]["runtime_ms"], "compile_s": round(compile_s, 2),
      "configs": rows, "jax": jax.__version__, "measured_at": _now()}
  progress(f"{label}: best {line['best_ms']:.4g} ms (default "
           f"{_ms(line['default_ms'])}, XLA {line['baseline_ms']:.4g} ms) of {len(passing)} "
           f"passing / {len(rows)} configs")
  return line


def line_key(line: Mapping[str, Any]) -> tuple[str, str, str]:
  """(task, size, precision) of a results line; a line that names no precision is
  float32's."""
  return line["task"], line["size"], line.get("precision", DEFAULT_PRECISION)


def _ms(value: float | None) -> str:
  return "-" if value is None else f"{value:.4g} ms"


def _now() -> str:
  return datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")


def read_results(path: pathlib.Path) -> list[dict[str, Any]]:
  """The results lines; a torn last line (a killed run) is ignored."""
  if not path.exists():
    return []
  lines = jsonlines.lines(path.read_text())
  out = []
  for number, text in enumerate(lines, 1):
    try:
      out.append(json.loads(text))
    except json.JSONDecodeError as e:
      if number == len(lines):
        break
      raise TuningError(f"{path}:{number}: not a JSON line ({e})") from e
  return out


def table_text(table: Mapping[str, Mapping[str, Mapping[str, Any]]]) -> str:
  """The TUNED_CONFIGS assignment for `table`, one `dict(...)` per GPU and shape class."""
  if not table:
    return f"{TABLE_NAME}: Final = {{}}\n"
  lines = [f"{TABLE_NAME}: Final = {{"]
  for device, classes in sorted(table.items()):
    lines.append(f"    {json.dumps(device)}: {{")
    for shape, config in sorted(classes.items()):
      args = ", ".join(f"{k}={v!r}" for k, v in config.items()) + "),"
      lines.append(f"        {json.dumps(shape)}: dict(")
      lines += textwrap.wrap(args, 96, initial_indent=" " * 12, subsequent_indent=" " * 12)
    lines.append("    },")
  return "\n".join(lines) + "\n}\n"


def replace_table(source: str, table: Mapping[str, Mapping[str, Mapping[str, Any]]]) -> str:
  """`source` with its TUNED_CONFIGS assignment replaced by `table` (the rest byte-identical)."""
  for node in ast.parse(source).body:
    target = node.target if isinstance(node, ast.AnnAssign) else (
        node.targets[0] if isinstance(node, ast.Assign) else None)
    if isinstance(target, ast.Name) and target.id == TABLE_NAME:
      lines = source.splitlines(keepends=True)
      return "".join(lines[:node.lineno - 1]) + table_text(table) + "".join(lines[node.end_lineno:])
  raise TuningError(f"no {TABLE_NAME} assignment to replace")


def measured_on_gpu(line: Mapping[str, Any]) -> bool:
  """Whether a results line timed a GPU: its `platform` (lines before it had one were GPU
  lines unless their device was the CPU)."""
  return line.get("platform", "cpu" if line.get("device_kind") == "cpu" else "gpu") == "gpu"


def write_tables(results: Sequence[Mapping[str, Any]], tree: pathlib.Path) -> list[str]:
  """Writes each GPU results line's best config into its kernel's table (a later line for the
  same task, GPU and shape class wins); returns the files changed. Lines measured elsewhere
  (CPU interpret mode), and lines of another precision than float32 whose shape class does not
  name it (a kernel of integer inputs: one_hot), are refused: TuningError naming them, nothing
  written."""
  elsewhere = [f"{line['task']} {line.get('size')} ({line.get('device_kind')})"
               for line in results if not measured_on_gpu(line)]
  if elsewhere:
    raise TuningError(f"{len(elsewhere)} line(s) were not measured on a GPU ("
                      f"{', '.join(elsewhere[:3])}{', ...' if len(elsewhere) > 3 else ''}): their "
                      "timings say nothing about a GPU, so no table is written. Tune on the GPU, "
                      "or remove those lines")
  unnamed = [f"{line['task']} {line.get('size')} ({line['shape_class']})" for line in results
             if line.get("precision", DEFAULT_PRECISION) != DEFAULT_PRECISION
             and not line["shape_class"].endswith(f":{line['precision']}")]
  if unnamed:
    raise TuningError(f"{len(unnamed)} line(s) tuned at another precision than float32 have a "
                      f"shape class that does not name it ({', '.join(unnamed[:3])}"
                      f"{', ...' if len(unnamed) > 3 else ''}): their kernels see integer inputs "
                      "only, so the config would replace the float32 one of the same class. "
                      "Remove those lines (such a kernel runs its float32 config at every "
                      "precision)")
  by_task: dict[str, list[Mapping[str, Any]]] = {}
  for line in results:
    by_task.setdefault(line["task"], []).append(line)
  changed = []
  for task, lines in sorted(by_task.items()):
    path = tree / f"{task}.py"
    source = path.read_text()
    table = {k: dict(v) for k, v in getattr(load_module(source, str(path)), TABLE_NAME).items()}
    for line in lines:
      table.setdefault(line["device_kind"], {})[line["shape_class"]] = dict(line["best"])
    new = replace_table(source, table)
    if new != source:
      path.write_text(new)
      changed.append(str(path))
  return changed


def main(argv: Sequence[str] | None = None) -> int:
  p = argparse.ArgumentParser(prog="python -m pallasbench_dataset.autotune",
                              description=__doc__.split("\n\n")[0])
  p.add_argument("--tasks", action=ListOption,
                 help="tasks to tune, separated by spaces or commas (default: every tunable kernel)")
  p.add_argument("--sizes", action=ListOption, choices=[s.value for s in Size],
                 default=["medium", "large"], help="sizes to tune at (default: medium large)")
  p.add_argument("--precisions", action=ListOption, default=[DEFAULT_PRECISION],
                 help=f"precisions to tune at ({', '.join(PRECISIONS)}; default "
                      f"{DEFAULT_PRECISION}): configs per precision, as the shape class names it")
  p.add_argument("--results", type=pathlib.Path, help="JSON Lines file to append to (resumes)")
  p.add_argument("--max-configs", type=int, default=24,
                 help="configs tried per task and size, the default included (default 24)")
  p.add_argument("--backends", nargs="+", metavar="BACKEND",
                 help="try only these backends' spaces, e.g. mosaic_gpu (default: all); the "
                      "default config is always tried")
  p.add_argument("--compile-budget", type=float, default=DEFAULT_COMPILE_BUDGET_S,
                 metavar="SECONDS",
                 help="seconds per config's compile, each in a process of its own that is killed "
                      f"past it (default {DEFAULT_COMPILE_BUDGET_S:g}; 0: compile in threads, "
                      "no budget)")
  p.add_argument("--workers", type=int, default=os.cpu_count() or 1,
                 help="compile threads (default: the CPU cores)")
  p.add_argument("--write-tables", type=pathlib.Path, metavar="RESULTS",
                 help="write the best configs of a results file into kernels_gpu/ and exit "
                      "(GPU lines only)")
  p.add_argument("--allow-cpu", action="store_true",
                 help="tune even without a GPU, in interpret mode: to try the tuner; the "
                      "timings are not comparable and --write-tables refuses their lines")
  args = p.parse_args(argv)
  warnings.filterwarnings("ignore", message="The Pallas Triton backend is deprecated")
  try:
    if args.write_tables:
      if not args.write_tables.is_file():
        raise TuningError(f"{args.write_tables} does not exist")
      for path in write_tables(read_results(args.write_tables), tree_dir("gpu")):
        print(f"wrote {path}")
      return 0
    if args.results is None:
      p.error("--results is required to measure")
    known = [s.name for s in list_tasks()]
    unknown = sorted(set(args.tasks or ()) - set(known))
    if unknown:
      raise TuningError(f"unknown task(s) {unknown}; the tasks are {', '.join(known)}")
    if jax.default_backend() != "gpu" and not args.allow_cpu:
      raise TuningError(f"no GPU here (jax runs on {jax.default_backend()}): interpret-mode "
                        "timings are not comparable to a GPU's, so tuning would choose configs "
                        "by noise. Tune on the GPU, or pass --allow-cpu to try the tuner anyway")
    for precision in args.precisions:
      try:
        check_precision(precision)
      except ValueError as e:
        raise TuningError(str(e)) from None
    tasks = args.tasks or [t for t in known if is_tunable(load_kernel("gpu", t))]
    done = {line_key(r) for r in read_results(args.results)}
  except TuningError as e:
    print(f"error: {e}", file=sys.stderr)
    return 2
  todo = [(t, s, p) for p in args.precisions for s in args.sizes for t in tasks
          if (t, s, p) not in done]
  print(f"{len(todo)} to tune, {len(done)} already in {args.results}", flush=True)
  budget = args.compile_budget or None
  with tempfile.TemporaryDirectory(prefix="pallasbench-autotune-") as cache:
    if budget is not None:
      compile_profile.use_persistent_cache(pathlib.Path(cache))
    return _tune_all(todo, args, budget, pathlib.Path(cache))


def _tune_all(todo, args: argparse.Namespace, budget: float | None, cache: pathlib.Path) -> int:
  failed = 0
  for n, (task, size, precision) in enumerate(todo, 1):
    try:
      line = tune(task, size, max_configs=args.max_configs, workers=args.workers,
                  backends=args.backends, compile_budget_s=budget, cache_dir=cache,
                  precision=precision,
                  progress=lambda m, n=n: print(f"[{n}/{len(todo)}] {m}", flush=True))
    except Exception as e:  # pylint: disable=broad-except  (one kernel's failure; the others go on)
      print(f"[{n}/{len(todo)}] {task} {size} {precision}: error: {type(e).__name__}: {e}",
            flush=True)
      failed += 1
      continue
    with args.results.open("a") as f:
      f.write(json.dumps(line) + "\n")
  return 1 if failed else 0


if __name__ == "__main__":
  sys.exit(main())
