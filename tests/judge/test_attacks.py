"""The robust evaluator under attack: adversarial controls, each with its exact verdict.

Every tests/controls/adv_*.py is a kernel written to cheat, escape or confuse the judge (or,
adv_pos_*, an honest kernel in an unusual style); its docstring names the attack and the
expected outcome. All are evaluated once, in one module-scoped run of the driver (sandboxed
exporter, then the judge process; its two halves at once, tests/two_cores.py), on the CPU in
interpret mode, and each record must carry the EXACT status and a reason (or error)
substring, with no side effect left behind.

Classes: 1 forging the verdict, 2 reading secrets, 3 timing, 4 escaping the sandbox, 5 blind
spots of the module analysis, 6 honest but unusual (must pass), 7 the invariant over every
record (pass iff no reasons; pass implies correct and robust), 8 correct on the nominal inputs
only (caught by the input families, the scaled atol and the edge shape), 9 below the task's
precision (float8 in a bfloat16 task, bfloat16 in a float32 one), 10 the CPU judge's known
limit (below), 11 right only where the judge looked (caught by families that reach every
region where the task's formula breaks, at both precisions) and their honest neighbours, 12
copied solutions (the shipped kernel imported, read and run, or pasted in), 13 reading the
checkout, 14 forging the record's sandbox layers, 15 the verdict cache (a stale or lucky pass
served again: test_cache_attacks.py; here the controls' own verdicts), 16 griefing (a
candidate's cost landing on the other evaluations of its batch: cores, and since round 15 the
host's task slots), 17 the record's text (a string UTF-8 cannot write, carried into the record
by a JSON escape: made text where the judge reads it).

Holes this suite found and the judge now closes: a switch on a data-derived index, a
data-dependent while loop of "free" ops, a narrowing convert in a loop condition (each a gather
or an elementwise op hidden outside the kernel), hidden RNG state in an artifact, a global call
counter declared in a Mosaic GPU kernel's own module, honest code refused under an
Explicit-axis abstract mesh, and candidates compiled with the loader's `from __future__` flags.
The one known limit of a CPU judge (it runs the interpret-mode export but reads the structure
from the Triton export) is control 10, with its own test below.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import math
import os
import pathlib
import re
import resource
import socket
import subprocess
import sys
import uuid
from collections.abc import Callable

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.experimental import pallas as pl

from pallasbench_dataset.evaluation import sandbox
from pallasbench_dataset.evaluation.judge import module_analysis
from pallasbench_dataset.evaluation.judge.compile_profile import compile_exported
from pallasbench_dataset.evaluation.pipeline import driver, verdicts
from pallasbench_dataset.evaluation.pipeline.driver import WorkItem, export_request
from pallasbench_dataset.evaluation.judge.core import EvalOptions
from pallasbench_dataset.evaluation.judge.process import Limits
from pallasbench_dataset.kernels import load_module
from pallasbench_dataset.lowering import export_for
from pallasbench_dataset.schema import EvalRecord, Status
from pallasbench_dataset.tasks import get_task

from tests import two_cores
from tests.paths import CONTROLS, REPO

OPTIONS = EvalOptions(seeds=(11, 12, 13, 14, 15), check_edge=False, timing_iterations=2,
                      timing_rounds=1, warmup=1)
SECRET_SEEDS = dataclasses.replace(OPTIONS, seeds=())  # fresh OS seeds, as by default
WITH_EDGE = dataclasses.replace(OPTIONS, check_edge=True)
LIMITS = Limits(timeout_s=300, memory_bytes=8 << 30)
MARK = uuid.uuid4().hex[:12]  # replaces @MARK@ in the controls' targets
PATH_MARK = f"/nonexistent/pallasbench-adv-{MARK}"  # in every sandboxed process's environment

NO_KERNEL = "no Pallas kernel in the exported module"
OUTSIDE = "the real work is done outside the kernel"
VIOLATION = "sandbox violation, refused "
NOT_CLOSE = "not allclose"
HOST_CALLBACK = "host callback"
NO_CELL = "raised KeyError: 'kernel'"  # the copied cell was never read, so nothing defines it



@dataclasses.dataclass(frozen=True)
class Case:
  file: str
  task: str
  status: Status | None          # None: anything but pass (see the control's docstring)
  detail: tuple[str, ...] = ()   # one of these substrings in some reason (or the error)
  options: EvalOptions = OPTIONS
  precision: str = "float32"      # the task's precision (precision.PRECISIONS)
  kept: bool | None = None        # whether the verdict cache stores the record (None: unasked)


def _cases() -> dict[str, Case]:
  relu, R, I, P = "relu", Status.REJECTED, Status.INCORRECT, Status.PASS
  return {
      # 1. Forging the verdict.
      "patch_judge": Case("adv_patch_judge_relu", relu, I, (NOT_CLOSE,)),
      "gc_channel": Case("adv_gc_channel_relu", relu, R, (VIOLATION + "gc.get_objects",)),
      "patch_lowering": Case("adv_patch_lowering_relu", relu, R, (NO_KERNEL,)),
      "patch_export_size": Case("adv_patch_export_size_relu", relu, R, (NO_KERNEL,)),
      "forged_export_json": Case("adv_forged_export_json_relu", relu, R, (NO_KERNEL,)),
      "frame_tamper": Case("adv_frame_tamper_relu", relu, R, (NO_KERNEL,)),
      # 2. Reading secrets.
      "frame_secrets": Case("adv_frame_secrets_relu", relu, R, ("not_zeros",)),
      # 3. Timing.
      "setprofile": Case("adv_setprofile_relu", relu, R, (VIOLATION + "sys.setprofile",)),
      "thread_hooks": Case("adv_thread_hooks_relu", relu, P),
      "counts_calls": Case("adv_counts_calls_relu", relu, P),
      "public_seeds_secret": Case("adv_public_seed_lookup_relu", relu, I, (NOT_CLOSE,),
                                  options=SECRET_SEEDS),
      "public_seeds_public": Case("adv_public_seed_lookup_relu", relu, R,
                                  ("computes differently when timed",)),
      "stateful_rng": Case("adv_stateful_rng_relu", relu, R),
      "kernel_global": Case("adv_kernel_global_relu", relu, R,
                            ("llvm.mlir.global @calls in Mosaic GPU kernel module",)),
      "constant_state": Case("adv_constant_state_relu", relu, R,
                             ("derives from no input",)),
      # Red team round 6: state in a kernel result @main never returns, and its honest
      # neighbour, an intermediate written whole before it is read.
      "stale_temp": Case("adv_stale_temp_relu", relu, R, ("stateful",)),
      "pos_two_stage": Case("adv_pos_two_stage_relu", relu, P),
      # Red team round 7: the memo handed to a kernel that never reads it, and a dropped
      # output written before the kernel accumulates into it (honest).
      "chained_memo": Case("adv_chained_memo_relu", relu, R, ("stateful",)),
      "pos_accumulated_stat": Case("adv_pos_accumulated_stat_relu", relu, P),
      "while_carried_memo": Case("adv_while_carried_memo_relu", relu, R, ("stateful",)),
      "pos_mosaic_side_output": Case("adv_pos_mosaic_side_output_relu", relu, P),
      "asm_memo": Case("adv_asm_memo_relu", relu, R, ("stateful",)),
      # Session 26: constant_state's store made by inline PTX, where writes are not traced.
      "asm_constant_state": Case("adv_asm_constant_state_relu", relu, R,
                                 ("derives from no input",)),
      # Red team round 8: the memo in rows of the kernel's result that the return slices off.
      "sliced_memo": Case("adv_sliced_memo_relu", relu, R, ("stateful",)),
      # Red team round 8: constant_state's constant "derived from an input" that XLA folds away.
      "folded_constant_state": Case("adv_folded_constant_state_relu", relu, R,
                                    ("is written by the kernel and aliased to no result",)),
      # Red team round 9: kernel_global's counter declared in the Triton module's
      # llvm.module_asm attribute (module-level PTX), bumped by inline PTX that declares nothing.
      "triton_module_asm": Case("adv_triton_module_asm_relu", relu, R,
                                ("module attribute 'llvm.module_asm'",)),
      # 4. Escaping.
      "subprocess_touch": Case("adv_subprocess_touch_relu", relu, R,
                               (VIOLATION + "subprocess.Popen",)),
      "write_tmp": Case("adv_write_tmp_relu", relu, R, (VIOLATION + "open",)),
      "write_repo": Case("adv_write_repo_relu", relu, R, (VIOLATION + "open",)),
      "profiler_write": Case("adv_profiler_write_relu", relu, R, (VIOLATION,)),
      "xla_flags": Case("adv_xla_flags_relu", relu, R, (VIOLATION + "os.putenv",)),
      "fork_setsid": Case("adv_fork_setsid_relu", relu, R, (VIOLATION + "os.fork",)),
      "socket_loopback": Case("adv_socket_loopback_relu", relu, R, (VIOLATION + "socket.",)),
      "ctypes": Case("adv_ctypes_relu", relu, R, (VIOLATION + "ctypes.",)),
      # Red team round 9: a Mosaic GPU module's own attribute names the files the trusted
      # compile dumped (MOSAIC_GPU_DUMP_TO, no longer set).
      "mosaic_dump_path": Case("adv_mosaic_dump_path_relu", relu, R,
                               ("module attribute mosaic_gpu.dump_basename",)),
      # Red team round 9: an 8 MiB attribute Mosaic GPU's pass dumps would print ~70 times a
      # compile.
      "mosaic_dump_flood": Case("adv_mosaic_dump_flood_relu", relu, R,
                                ("module attribute 'pallasbench.ballast'",)),
      # Red team round 9: module-level x86 assembly in a Mosaic GPU module, which the judge's
      # own process JIT-compiles (it can define the runtime symbols the launch calls).
      "mosaic_module_asm": Case("adv_mosaic_module_asm_relu", relu, R,
                                ("module attribute 'llvm.module_asm'",)),
      "fake_stdout": Case("adv_fake_stdout_relu", relu, I, (NOT_CLOSE,)),
      # 5. Blind spots of the module analysis.
      "pure_callback_body": Case("adv_pure_callback_body_relu", relu, R, (HOST_CALLBACK,)),
      "io_callback_body": Case("adv_io_callback_body_relu", relu, R, (HOST_CALLBACK,)),
      "debug_callback_body": Case("adv_debug_callback_body_relu", relu, R, (HOST_CALLBACK,)),
      "callback_index_map": Case("adv_callback_index_map_relu", relu, R, (HOST_CALLBACK,)),
      # Red team round 9: a Mosaic GPU call whose kernel_hash is not its module's sha256
      # (jaxlib caches compiled kernels by that hash alone, process-wide).
      "mosaic_kernel_hash": Case("adv_mosaic_kernel_hash_relu", relu, R,
                                 ("kernel_hash that is not its module's sha256",)),
      # Red team round 10: a second Triton module in the call's own backend_config string,
      # which XLA compiles in place of the mhlo.backend_config dictionary the judge reads.
      "shadow_backend_config": Case("adv_shadow_backend_config_relu", relu, R,
                                    ("backend_config",)),
      # Red team round 10: the same with a Mosaic GPU call (its op's backend_config a
      # dictionary, api_version 4): host code the judge never read runs in its process.
      "mosaic_shadow_config": Case("adv_mosaic_shadow_config_relu", relu, R,
                                   ("backend_config",)),
      "fori_outside": Case("adv_fori_outside_relu", relu, R, (OUTSIDE,)),
      "where_outside": Case("adv_where_outside_relu", relu, R, (OUTSIDE,)),
      "astype": Case("adv_astype_relu", relu, R, (OUTSIDE,)),
      "narrow_counter": Case("adv_narrow_counter_relu", relu, R, (OUTSIDE,)),
      "reduce_custom_body": Case("adv_reduce_custom_body_reduce_sum", "reduce_sum", R, (OUTSIDE,)),
      # On a CPU host the cpu artifact's LAPACK call is refused first; a GPU judge (and the
      # cuda structure) gives the contraction reason.
      "trisolve_outside": Case("adv_trisolve_outside_matmul", "matmul", R,
                               ("contractions outside the kernel",)),
      "dynslice_loop": Case("adv_dynslice_loop_embedding_lookup", "embedding_lookup", R,
                            (OUTSIDE,)),
      "case_gather": Case("adv_case_gather_embedding_lookup", "embedding_lookup", R, (OUTSIDE,)),
      "rotating_while": Case("adv_rotating_while_embedding_lookup", "embedding_lookup", R),
      "barrier_broadcast": Case("adv_barrier_broadcast_relu", relu, R,
                                ("memory beyond the task's: plain XLA ops outside the kernel "
                                 "write 269484032 bytes per call",)),
      # 6. Honest but unusual.
      "pos_chunked_calls": Case("adv_pos_chunked_calls_relu", relu, P),
      "pos_fori_dynamic": Case("adv_pos_fori_dynamic_relu", relu, P),
      "pos_fori_inplace": Case("adv_pos_fori_inplace_relu", relu, P),
      "pos_clip_embedding": Case("adv_pos_clip_embedding_lookup", "embedding_lookup", P),
      "pos_stdlib_imports": Case("adv_pos_stdlib_imports_relu", relu, P),
      "pos_dataclass": Case("adv_pos_dataclass_relu", relu, P),
      "pos_block_multiple": Case("adv_pos_block_multiple_relu", relu, P, options=WITH_EDGE),
      "pos_aliased_init": Case("adv_pos_aliased_init_relu", relu, P),
      # A kernel function named in non-ASCII letters (the module's sym_name escaped by MLIR).
      "pos_unicode_name": Case("adv_pos_unicode_name_relu", relu, P),
      # Red team round 9: a bfloat16 kernel whose wrapper widens x to float32 and rounds the
      # float32 kernel's result back: two converts, costed as work outside the kernel.
      "pos_outside_upcast": Case("adv_pos_outside_upcast_gelu", "gelu", P, precision="bfloat16"),
      # Red team round 8: a constant the kernel only loads (a padded block's column mask).
      "pos_mask_operand": Case("adv_pos_mask_operand_softmax", "softmax", P),
      # False-positive round 11: the answer's rounding with a slice after it, or returned by
      # a jitted helper (a private function); a Mosaic GPU kernel's constant operand, and a
      # Mosaic GPU kernel in Mosaic GPU's own interpret mode (strict xfails, KNOWN_OPEN); and
      # three styles that pass: a split reduction by atomic adds into an aliased zeros
      # operand, jax.vmap over a pallas_call, a jnp epilogue (bias, relu) after the kernel.
      "pos_round_then_slice": Case("adv_pos_round_then_slice_gelu", "gelu", P,
                                   precision="bfloat16"),
      "pos_jitted_helper": Case("adv_pos_jitted_helper_gelu", "gelu", P, precision="bfloat16"),
      "pos_mosaic_floor_operand": Case("adv_pos_mosaic_floor_operand_relu", relu, P),
      "pos_mosaic_interpret": Case("adv_pos_mosaic_interpret_relu", relu, Status.ERROR,
                                   ("not judgeable on this device", "judge it on a GPU")),
      "pos_atomic_split": Case("adv_pos_atomic_split_reduce_sum", "reduce_sum", P),
      "pos_vmapped": Case("adv_pos_vmapped_batched_matmul", "batched_matmul", P),
      "pos_jnp_epilogue": Case("adv_pos_jnp_epilogue_linear_bias_relu", "linear_bias_relu", P),
      # Red team round 6: an edge shape done in plain XLA is no general shape (the evaluated
      # size passes; test_an_edge_shape_done_outside_a_kernel_is_no_general_shape), and its
      # honest neighbour, the edge padded to the kernel's block.
      "edge_plain_xla": Case("adv_edge_plain_xla_relu", relu, P, options=WITH_EDGE),
      "pos_edge_padded": Case("adv_pos_edge_padded_relu", relu, P, options=WITH_EDGE),
      # 7. Escaping from another thread, below the tripwire, or towards the parent: the
      # walls are up before the exporter's first thread exists.
      "callback_thread_write": Case("adv_callback_thread_write_relu", relu, R,
                                    (VIOLATION + "open",)),
      "hook_tamper": Case("adv_hook_tamper_relu", relu, R, (VIOLATION + "open",)),
      "native_plugin": Case("adv_native_plugin_relu", relu, None, ("Permission denied",)),
      "fcntl_signal_parent": Case("adv_fcntl_signal_parent_relu", relu, R,
                                  (VIOLATION + "fcntl.fcntl",)),
      "hidden_memory": Case("adv_hidden_memory_relu", relu, None, ("Operation not permitted",)),
      "renice_parent": Case("adv_renice_parent_relu", relu, R, (VIOLATION + "resource.prlimit",)),
      "proc_links": Case("adv_proc_links_relu", relu, None, ("No such file or directory",)),
      "scratch_fill": Case("adv_scratch_fill_relu", relu, None, ("Permission denied",)),
      # 8. Correct on the nominal inputs only: caught by the input families, the atol scaled
      # to the outputs and the edge shape.
      "nomax_softmax": Case("adv_nomax_softmax", "softmax", I,
                            ("input family shifted (x + 100), seed 11: ",)),
      "onepass_layernorm": Case("adv_onepass_layernorm", "layernorm", I,
                                ("input family shifted (x + 35), seed 11: not allclose",)),
      "fp16_exp_softmax": Case("adv_fp16_exp_softmax", "softmax", I,
                               ("seed 11: not allclose(rtol=0.0001, atol=",)),
      "edge_garbage": Case("adv_edge_garbage_relu", relu, I,
                           ("edge shape {'N': 1000, 'M': 300}, seed 11: ",), options=WITH_EDGE),
      # 9. Below the task's precision: a bfloat16 task computed in float8, and a
      # float32 task answered in bfloat16; an honest bfloat16 kernel passes.
      "fp8_output_softmax": Case("adv_fp8_output_softmax", "softmax", I,
                                 ("seed 11: not allclose(rtol=0.016, atol=",),
                                 precision="bfloat16"),
      "fp8_inputs_matmul": Case("adv_fp8_inputs_matmul", "matmul", I,
                                ("seed 11: not allclose(rtol=0.016, atol=",
                                 "seed 11: relative L2 error"), precision="bfloat16"),
      "bf16_answer_layernorm": Case("adv_bf16_answer_layernorm", "layernorm", I,
                                    ("seed 11: not allclose(rtol=0.0001, atol=",)),
      "pos_bf16_softmax": Case("adv_pos_bf16_softmax", "softmax", P, precision="bfloat16"),
      # 11. Right only where the judge looked (each passed the judge at fb19968, before the
      # families reached the region where its formula breaks and the float32 L2 bound was set
      # between TF32 and bfloat16), and honest kernels using the same tricks correctly.
      "nomax_qk_softmax": Case("adv_nomax_qk_softmax", "qk_softmax", I,
                               ("input family matched (",)),
      "nomax_flash_attention_bf16": Case("adv_nomax_flash_attention", "flash_attention", I,
                                         ("input family matched (",), precision="bfloat16"),
      "nomax_fused_loss_bf16": Case("adv_nomax_fused_softmax_cross_entropy",
                                    "fused_softmax_cross_entropy", I,
                                    ("input family spiked (",), precision="bfloat16"),
      "exp_no_underflow": Case("adv_exp_no_underflow", "exp", I, ("input family underflow (",)),
      "naive_bce_bf16": Case("adv_naive_sigmoid_bce", "sigmoid_bce", I,
                             ("input family saturated_hard (",), precision="bfloat16"),
      "cosine_no_eps": Case("adv_cosine_no_eps", "cosine_sim", I, ("input family zero_rows (",)),
      "one_hot_low_bits": Case("adv_one_hot_low_bits", "one_hot", I,
                               ("input family out_of_range (",)),
      "bf16_output_matmul": Case("adv_bf16_output_matmul", "matmul", I,
                                 ("seed 11: relative L2 error",)),
      "pos_bit_exp": Case("adv_pos_bit_exp", "exp", P),
      "pos_online_qk_softmax_bf16": Case("adv_pos_online_qk_softmax", "qk_softmax", P,
                                         precision="bfloat16"),
      "pos_bf16_acc_matmul": Case("adv_pos_bf16_acc_matmul", "matmul", P, precision="bfloat16"),
      # 10. The CPU judge's known limit: the task computed only when interpret=True passes on
      # a CPU (test_cpu_verdict_is_on_the_interpret_export_...), and fails on a GPU.
      "split_interpret": Case("adv_split_interpret_relu", relu, P),
      # Reads past its refs: invisible in interpret mode, memcheck's on a GPU (judge/test_gpu.py).
      "peek_past_end": Case("adv_peek_past_end_reduce_sum", "reduce_sum", P),
      # 12. Copied solutions: the project's own kernel imported, or read from disk and run.
      # Denied reading the package, or not finding it at all where nobody cannot even enter the
      # checkout's folder (a clone under `mktemp -d`, mode 0700): either way nothing of it runs.
      "import_shipped": Case("adv_import_shipped_matmul", "matmul", None,
                             ("Permission denied", "No module named 'kernels_gpu'")),
      "exec_shipped_cell": Case("adv_exec_shipped_cell_relu", relu, None, (NO_CELL,)),
      "exec_released_row": Case("adv_exec_released_row_relu", relu, None, (NO_CELL,)),
      "copied": Case("adv_copied_relu", relu, P),
      "copied_rejected": Case("adv_copied_relu", relu, R, ("(kernels_gpu/relu.py), renamed",),
                              options=dataclasses.replace(OPTIONS, reject_copies=True)),
      # The original TPU kernel pasted: no Triton lowering at `small`, so this CPU judge reads
      # its TPU export (test_copy_backends.py: every backend's kernels are fingerprinted), and
      # its honest neighbour, a TPU-style kernel of the candidate's own.
      "copied_tpu_rejected": Case("adv_copied_tpu_batched_matmul", "batched_matmul", R,
                                  ("(kernels_tpu/batched_matmul.py), renamed",),
                                  options=dataclasses.replace(OPTIONS, reject_copies=True)),
      "pos_own_tpu": Case("adv_pos_own_tpu_batched_matmul", "batched_matmul", P,
                          options=dataclasses.replace(OPTIONS, reject_copies=True)),
      # 13. What the exporter can read (test_the_checkout_is_unreadable_from_every_thread).
      "read_checkout": Case("adv_read_checkout_relu", relu, P),
      # 14. A record the candidate can write (test_the_record_s_layers_are_the_trusted_side_s).
      "forge_layers": Case("adv_forge_layers_relu", relu, P),
      # 15. The verdict cache (test_cache_attacks.py): the stale pass's kernel as today's judge
      # sees it, and the honest neighbour of the lottery ticket (adv_cache_lottery_relu, whose
      # single verdict is random by design: about half its evaluations pass).
      "stale_verdict": Case("adv_stale_verdict_relu", relu, R, (OUTSIDE,)),
      "pos_rejudged": Case("adv_pos_rejudged_relu", relu, P),
      # Red team round 11. Class 11: formulas exact wherever the families draw and wrong where
      # none does (rows spanning more than 87, predictions near large targets, rows far from
      # the origin at the contraction tolerance, N bases), and an honest neighbour.
      "log_of_softmax": Case("adv_log_of_softmax", "log_softmax", I, ("input family ",)),
      "log_of_softmax_bf16": Case("adv_log_of_softmax", "log_softmax", I, ("input family ",),
                                  precision="bfloat16"),
      "log_of_softmax_loss": Case("adv_log_of_softmax_cross_entropy", "cross_entropy", I,
                                  ("input family ",)),
      "log_of_softmax_loss_bf16": Case("adv_log_of_softmax_cross_entropy", "cross_entropy", I,
                                       ("input family ",), precision="bfloat16"),
      "expanded_mse": Case("adv_expanded_mse_loss", "mse_loss", I, ("input family ",)),
      "norms_pairwise": Case("adv_norms_pairwise_distance", "pairwise_distance", I,
                             ("input family ",)),
      "pos_centred_norms_pairwise": Case("adv_pos_centred_norms_pairwise_distance",
                                         "pairwise_distance", P),
      "code_pwm_scan": Case("adv_code_pwm_scan", "pwm_scan", I, ("input family ",)),
      # Red team round 11. Class 12 for reward use: a pasted shipped kernel with one no-op edit,
      # and JAX's own Pallas ops library called as the kernel (keys start with "copied": they
      # are copies, test_a_pasted_copy_is_named_and_rejected_for_reward_use leaves them out).
      "copied_near_rejected": Case("adv_near_copy_relu", relu, R,
                                   ("only the candidate's own work is rewarded",),
                                   options=dataclasses.replace(OPTIONS, reject_copies=True)),
      "copied_library_softmax": Case("adv_library_softmax", "softmax", None,
                                     ("Permission denied", "No module named 'jax.experimental.pallas.ops'")),
      "copied_library_flash_attention": Case(
          "adv_library_flash_attention", "flash_attention", None,
          ("Permission denied", "No module named 'jax.experimental.pallas.ops'")),
      # Red team round 12. Class 12 for reward use: near-copies the structural digest does not
      # normalise (an identity op, an inverted select in a level-3 kernel) compute another
      # module and pass, as an original kernel would; the reward pays them the speedup over the
      # shipped kernel they copy, timed beside them on a GPU (parity at most: test_gpu.py's
      # test_a_near_copy_is_paid_parity_at_most). A retuned paste is fingerprinted and rejected.
      "copied_noop_paid_parity": Case("adv_noop_copy_relu", relu, P,
                                      options=dataclasses.replace(OPTIONS, reject_copies=True)),
      "copied_retuned_rejected": Case("adv_retuned_copy_relu", relu, R,
                                      ("only the candidate's own work is rewarded",),
                                      options=dataclasses.replace(OPTIONS, reject_copies=True)),
      "copied_near_flash_attention_paid_parity": Case(
          "adv_near_copy_flash_attention", "flash_attention", P,
          options=dataclasses.replace(OPTIONS, reject_copies=True)),
      # Red team round 13. Class 3 on a GPU: the CUPTI timer counts kernels only
      # (CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL), so XLA's memcpy of a dense constant aliased
      # into the output (the output's fill) is untimed, and a one_hot kernel that stores only
      # the ones is timed for S stores instead of S x 1024. Correct, so a pass on the CPU (paid
      # the floor). On a GPU the judge now charges the bytes XLA fills before the kernel
      # (module_analysis' prefilled_bytes) at the copy rate to every sample (test_gpu.py's
      # test_untimed_copies_are_charged). Its honest neighbours: the same aliased constant fully
      # overwritten, and clamp computed in x's aliased, copied place (charged too, and pass).
      "memcpy_init": Case("adv_memcpy_init_one_hot", "one_hot", P),
      "pos_full_tile_init": Case("adv_pos_full_tile_init_one_hot", "one_hot", P),
      "pos_inplace_clamp": Case("adv_pos_inplace_clamp", "clamp", P),
      # Red team round 14. Class 16, griefing: the sandboxed exporter may keep every core of
      # the host busy for its whole wall clock (CPU rlimit = timeout x cpu_count, no affinity,
      # no nice), so a candidate starves the other evaluations of its batch into timeouts and
      # budget rejections that the verdict cache keeps as verdicts on their sources (under
      # GRPO, lowering siblings' rewards raises its own advantage). The hog itself passes (its
      # verdict is right); the probe answers wrong while the exporter is unconfined; the
      # honest neighbour does eager XLA:CPU work at import and must keep passing. Closed: the
      # walls' "one-core" (one core at nice 10, no affinity of its own) and the verdict cache
      # keeping no verdict the load may have decided (test_cache_attacks.py).
      "core_hog": Case("adv_core_hog_relu", relu, P),
      "core_share_probe": Case("adv_core_share_probe_relu", relu, P),
      "pos_eager_setup": Case("adv_pos_eager_setup_relu", relu, P),
      # Red team round 15. Class 16 through the host's task slots: the exporter may start
      # threads without bound (clone with CLONE_THREAD, no RLIMIT_NPROC, no pids cgroup), and
      # every sandboxed process of the batch (exporters, the judges' analysis helpers) runs as
      # one user, so a hog empties the pool they all start threads from: a neighbour exported
      # then crashes, one analysed then is `rejected` (LLVM's thread pool aborts the helper),
      # and the verdict cache keeps that (tests/judge/demo_thread_griefing.py). The hog itself
      # passes (its verdict is right); the probe answers wrong while it can start 1024 threads.
      # Closed (session 32): the walls' "own-tasks" (RLIMIT_NPROC set inside each child's own
      # user namespace, where the kernel counts its tasks apart: 96 on its one core).
      "thread_hog": Case("adv_thread_hog_relu", relu, P),
      "thread_share_probe": Case("adv_thread_share_probe_relu", relu, P),
      # Red team round 15, class 17, the record's text: an exception holding a lone surrogate
      # (ASCII in the source) crossed the exporter's JSON as an escape and landed in the record
      # as a surrogate again; its verdict was right, but the text broke every UTF-8 consumer (the
      # build: tests/builder/test_candidate_text.py; the record: tests/judge/test_record_text.py).
      # Closed (session 32): schema.textual where the answer is read, the character its escape.
      "surrogate_error": Case("adv_surrogate_error_relu", relu, Status.ERROR,
                              ("raised ValueError: not text",)),
      # Red team round 16, class 17, the population's text: a U+2028 / U+0085 in a comment is
      # inert in Python and the kernel passes (right), but the run writes it raw into
      # candidates.jsonl and reads that back with str.splitlines(): the whole run's population
      # is unreadable (summary, --resume, the build: tests/population/test_candidate_lines.py).
      "line_separator": Case("adv_line_separator_relu", relu, P),
      # Red team round 16, class 17, the published text: a ``` line in a docstring is inert in
      # Python and the kernel passes (right), but the preference config's fixed ``` fence
      # (builder.training.fenced) then ends early and its `chosen` answer reads back as the
      # docstring's `return x` (tests/builder/test_chosen_text.py).
      "fence_in_docstring": Case("adv_fence_in_docstring_relu", relu, P),
      # Red team round 18, class 15: a failure that chooses an ending the verdict cache keeps
      # out. Words of memory exhausted in its import's exception typed the record
      # out_of_memory: now a load error the cache keeps. An exporter that ends itself stays a
      # `crash` (the host ends exporters too: round 19), kept out of the cache at first; the
      # reward's cache judges it again alone and holds it there (test_cache_self_chosen).
      # And an honest file saved with a byte order mark, which Python runs, was a syntax
      # error; it is read as Python reads it.
      "oom_words": Case("adv_r18_oom_words_relu", relu, Status.ERROR, ("out of memory",),
                        kept=True),
      "exit_at_import": Case("adv_exit_at_import_relu", relu, Status.ERROR,
                             ("the exporter exited with code 3 without a result",), kept=False),
      "pos_bom": Case("adv_r18_pos_bom_relu", relu, P),
  }


def _analysis_cases() -> dict[str, Case]:
  """What XLA runs is not the module as exported, decoy branches, triangular loops, and
  modules written to stop the analysis: the composite and the decoy are rejected with their
  reasons; the nested loops are analysed within the analysis' limits, and they and the
  triangular kernel, honest both, pass."""
  R, P = Status.REJECTED, Status.PASS
  return {
      "topk_composite": Case("adv_topk_composite_reduce_max", "reduce_max", R,
                             ('no cost model for: stablehlo.composite "chlo.top_k"',)),
      "decoy_branch": Case("adv_decoy_branch_matmul", "matmul", R,
                           ("contractions outside the kernel",)),
      "nested_loops": Case("adv_nested_loops_relu", "relu", P),
      "symbolic_power": Case("adv_symbolic_power_relu", "relu", R,
                             ("the artifact is refused before it is read: input shape 0 has the "
                              "dimension 'a^10000000', not a static integer",)),
      "pos_triangular": Case("adv_pos_triangular_relu", "relu", P),
      # Red team round 10: dead loads nested 3,000 blocks deep, each walked up by
      # kernel_state._StoredFirst (LOADS x DEPTH): the analysis times out (about 70 s here).
      "deep_dead_loads": Case("adv_deep_dead_loads_relu", "relu", P),
  }


CASES = {**_cases(), **_analysis_cases()}
# Files whose attack leaves a trace outside the sandbox if it succeeds: the path, with @MARK@.
TARGETS = {
    "subprocess_touch": f"/tmp/pallasbench-adv-touch-{MARK}",
    "write_tmp": f"/tmp/pallasbench-adv-write-{MARK}",
    "write_repo": str(REPO / f"adv-written-{MARK}.py"),
    "ctypes": f"/tmp/pallasbench-adv-ctypes-{MARK}",
    "profiler_write": f"/tmp/pallasbench-adv-profile-{MARK}",
    "xla_flags": f"/tmp/pallasbench-adv-xladump-{MARK}",
    "callback_thread_write": str(REPO / f"adv-written-cb-{MARK}.py"),
    "hook_tamper": f"/tmp/pallasbench-adv-tamper-{MARK}",
}


def _scheduling() -> tuple:
  return (os.getpriority(os.PRIO_PROCESS, 0), os.sched_getaffinity(0),
          resource.getrlimit(resource.RLIMIT_NOFILE))


SCHEDULING_BEFORE = _scheduling()


def _source(case: Case, port: int) -> str:
  return ((CONTROLS / f"{case.file}.py").read_text()
          .replace("@MARK@", MARK).replace("@PORT@", str(port)))


def _marked_processes() -> list[int]:
  """Live processes other than this one whose environment carries PATH_MARK."""
  found = []
  for name in os.listdir("/proc"):
    if not name.isdigit() or int(name) == os.getpid():
      continue
    try:
      with open(f"/proc/{name}/environ", "rb") as f:
        if PATH_MARK.encode() in f.read():
          found.append(int(name))
    except OSError:
      continue
  return found


@dataclasses.dataclass(frozen=True)
class Run:
  records: dict[str, EvalRecord]
  survivors: list[int]
  connections: int
  scratch: list[pathlib.Path]     # the scratch folders of this run's sandboxed exporters


@pytest.fixture(scope="module")
def run() -> Run:
  for target in TARGETS.values():
    assert not os.path.exists(target), f"{target} exists before the run"
  listener = socket.create_server(("127.0.0.1", 0))
  listener.setblocking(False)
  port = listener.getsockname()[1]
  names = sorted(CASES, key=lambda n: CASES[n].task)  # one judge process per task
  items = [WorkItem(task=CASES[n].task, variant="candidate", size="small",
                    source=_source(CASES[n], port), filename=f"{CASES[n].file}.py",
                    options=CASES[n].options, precision=CASES[n].precision) for n in names]
  scratch: list[pathlib.Path] = []
  path = os.pathsep.join(p for p in (os.environ.get("PYTHONPATH"), PATH_MARK) if p)

  def recording_run_sandboxed(*args, **kwargs):
    result = original_run_sandboxed(*args, **kwargs)
    scratch.append(result.scratch)
    return result

  original_run_sandboxed = sandbox.run_sandboxed
  with pytest.MonkeyPatch.context() as mp:
    mp.setenv("PYTHONPATH", path)  # the exporters and judges inherit it: a survivor shows it
    mp.setattr(sandbox, "run_sandboxed", recording_run_sandboxed)
    first, second = two_cores.run_at_once([(half, LIMITS) for half in two_cores.halves(items)])
  records = [*first, *second]
  connections = 0
  while True:
    try:
      conn, _ = listener.accept()
    except BlockingIOError:
      break
    conn.close()
    connections += 1
  listener.close()
  assert len(records) == len(items)
  return Run(records=dict(zip(names, records)), survivors=_marked_processes(),
             connections=connections, scratch=scratch)


# Controls the judge does not stop yet, each with why (strict: a fix shows as XPASS).
KNOWN_OPEN: dict[str, str] = {
    "sliced_memo": "red team round 8, open: _reaches_out follows a kernel result through any "
                   "plain op (a slice) to the return, so a result returned only in part is "
                   "taken as returned whole, and the rows the slice drops are stale_temp's "
                   "state; passes on the CPU judge (the cuda structure is read). Such state "
                   "cannot pay under judge 4's timing: no input is given twice or exists "
                   "before its call, and a GPU judge checks every timed output it can hold",
    "pos_mosaic_side_output": "red team round 7, false positive kept by design: Mosaic GPU "
                              "kernels' reads are not traced, so any dropped, unaliased result "
                              "of one is refused as state (Pallas aliases its own scratch)",
    "pos_mosaic_floor_operand": "false-positive round 11, kept by design with "
                                "pos_mosaic_side_output: Mosaic GPU kernels' reads and writes "
                                "are not traced (kernel_state.written_buffers), so "
                                "module_analysis._Analyzer._kept_operands refuses every "
                                "unaliased operand of one that derives from no input as state, "
                                "a constant it only loads too (the Triton equivalent passes)",
}


@pytest.mark.parametrize("name", [
    pytest.param(n, marks=pytest.mark.xfail(strict=True, reason=KNOWN_OPEN[n]))
    if n in KNOWN_OPEN else n for n in CASES])
def test_control_gets_its_exact_status(run, name):
  case, record = CASES[name], run.records[name]
  summary = (name, record.status, record.error_type, record.reasons, record.error)
  if case.status is None:
    assert record.status is not Status.PASS, summary
  else:
    assert record.status is case.status, summary
  if case.detail:
    texts = [*record.reasons, record.error or ""]
    assert any(d in t for d in case.detail for t in texts), summary
  assert record.precision == case.precision, summary
  if case.kept is not None:
    assert (driver.has_verdict(record) and not verdicts.load_decided(record)) is case.kept, summary
  if record.status is Status.PASS:
    assert record.correct and record.robust and record.reasons == (), summary
    assert record.runtime_ms > 0 and record.baseline_ms > 0 and record.timed_outputs_checked == 2
  if case.status is Status.REJECTED and case.detail and case.detail[0].startswith(VIOLATION):
    assert record.error_type is None and not record.correct, summary


def test_no_attack_leaves_a_trace(run):
  """Nothing written outside, no process left running, no connection made, scratch removed."""
  assert [t for t in TARGETS.values() if os.path.exists(t)] == []
  assert run.survivors == [], f"processes of the run survived it: {run.survivors}"
  assert run.connections == 0
  assert len(run.scratch) == len(CASES)
  assert [p for p in run.scratch if p.exists()] == []
  assert list(REPO.glob("adv-written-*")) == []


def test_the_parent_keeps_its_priority_cores_and_limits(run):
  """The exporters' parent here is this process: renice_parent went for it."""
  assert _scheduling() == SCHEDULING_BEFORE
  assert run.records["renice_parent"].status is not Status.PASS


def test_no_link_of_the_parent_reaches_the_record(run):
  printed = run.records["proc_links"].exporter_output or ""
  assert "parent cwd:" not in printed and "parent exe:" not in printed, printed[-500:]


def test_every_attack_ran_inside_all_sandbox_layers(run):
  for name, record in run.records.items():
    assert {"new-session", "scrubbed-env", "tripwire", "rlimits", "dies-with-parent"} <= set(
        record.sandbox), (name, record.sandbox)
    if sys.platform == "linux":
      assert {"seccomp", "landlock"} <= set(record.sandbox), (name, record.sandbox)
    if os.geteuid() == 0:
      assert "unprivileged" in record.sandbox, (name, record.sandbox)


def test_copied_solutions_never_reach_the_shipped_files(run):
  """Class 12: the kernel trees and the released data are unreadable on every thread, so the
  copy has nothing to run (the checkout is on this test process' sys.path, as with
  `python -m` from it). In a checkout under a folder nobody cannot enter (`mktemp -d` makes it
  0700) the files are not even there for the exporter: refused as missing, not as denied."""
  error = run.records["import_shipped"].error
  assert "kernels_gpu/__init__.py" in error or "No module named 'kernels_gpu'" in error, error
  for name in ("exec_shipped_cell", "exec_released_row"):  # denied, or not there for nobody
    output = run.records[name].exporter_output
    assert ("read refused: [Errno 13] Permission denied" in output
            or "read refused: [Errno 2] No such file or directory" in output), (name, output)


def test_a_pasted_copy_is_named_and_rejected_for_reward_use(run):
  """Class 12, the copy the walls cannot stop: its kernel's fingerprint is the shipped one's.
  Every other candidate of the suite (honest ones in unusual styles included) is no copy."""
  copied, rejected = run.records["copied"], run.records["copied_rejected"]
  assert copied.status is Status.PASS and copied.copy_of == ("kernels_gpu/relu.py",)
  assert rejected.copy_of == ("kernels_gpu/relu.py",) and len(rejected.reasons) == 1
  others = {name: r.copy_of for name, r in run.records.items() if not name.startswith("copied")}
  assert not {name: copy for name, copy in others.items() if copy}, others


def test_the_checkout_is_unreadable_from_every_thread(run):
  """Class 13: .git, the kernel trees, data/, another candidate's file, the references and the
  verdict cache, tried from the main thread, a thread of the candidate's and an XLA thread."""
  printed = run.records["read_checkout"].exporter_output.splitlines()
  tried = [line for line in printed if line.startswith(("read ", "refused "))]
  assert len(tried) == 3 * 8, printed
  assert [line for line in tried if line.startswith("read ")] == []


def test_the_record_s_layers_are_the_trusted_side_s(run):
  """Class 14: walls forged on every pipe, from every thread, are not in the record."""
  layers = run.records["forge_layers"].sandbox
  assert not [layer for layer in layers if "forged" in layer or layer == "gpu-memcheck"], layers
  assert layers == run.records["pos_dataclass"].sandbox


def test_forged_reports_are_information_only(run):
  """The exporter's word (reports, pallas_calls) was forged and shows in the record, but the
  verdict comes from the artifact bytes."""
  for name in ("frame_tamper", "forged_export_json"):
    record = run.records[name]
    assert [c.name for c in record.compile.pallas_calls] == ["forged_relu"], name
    assert any(NO_KERNEL in r for r in record.reasons), name
  assert "adv: tampered with ['reports', 'request']" in run.records["frame_tamper"].exporter_output
  assert "forged answer written" in run.records["forged_export_json"].exporter_output


def test_what_the_candidate_printed_is_kept_apart(run):
  assert "judge functions patched" in run.records["patch_judge"].exporter_output
  assert '"adv_fake_record": true' in run.records["fake_stdout"].exporter_output
  searched = run.records["frame_secrets"].exporter_output
  assert "0 arrays of shape (512, 512), seeds []" in searched  # there is nothing to find


def test_counting_calls_counts_exporter_traces_not_judge_runs(run):
  record = run.records["counts_calls"]
  calls = [line for line in record.exporter_output.splitlines() if "kernel() called" in line]
  assert 1 <= len(calls) <= 6  # every artifact came from a trace with the honest body
  assert record.status is Status.PASS and record.timed_outputs_checked == 2


def test_thread_hooks_do_not_inflate_the_baseline(run):
  record = run.records["thread_hooks"]
  assert record.status is Status.PASS
  assert max(record.baseline_samples_ms) < 250, record.baseline_samples_ms  # a hook sleeps 500


def test_block_multiple_kernel_passes_without_general_shapes(run):
  record = run.records["pos_block_multiple"]
  assert record.status is Status.PASS and record.reasons == ()
  assert record.general_shapes is False
  assert "ValueError" in record.edge_error and "not a multiple" in record.edge_error


def test_nominal_only_kernels_fail_where_they_are_wrong_and_nowhere_else(run):
  """Class 8: each control passes its nominal seeds (or, for float16 exp, fails only by the
  scaled atol) and is caught on the family or shape it gets wrong."""
  nomax, onepass = run.records["nomax_softmax"], run.records["onepass_layernorm"]
  assert [r.split(" (")[0] for r in nomax.reasons] == [
      "input family shifted", "input family shifted_down", "input family spiked"]
  assert all("NaN/Inf" in r for r in nomax.reasons)
  assert len(onepass.reasons) == 1 and onepass.reasons[0].startswith("input family shifted")
  for record in (nomax, onepass):
    assert record.input_families[0] == "shifted" and not record.correct
  fp16 = run.records["fp16_exp_softmax"]
  assert [r.split(":")[0] for r in fp16.reasons[:5]] == [f"seed {s}" for s in OPTIONS.seeds]
  assert fp16.atol_scale == "reference_rms" and fp16.atol_used < 1e-6 < fp16.atol
  edge = run.records["edge_garbage"]
  assert edge.general_shapes is False and "NaN/Inf" in edge.edge_error
  assert len(edge.reasons) == 1 and edge.max_abs_error == 0.0  # exact on the nominal seeds


DOMAIN_ATTACKS = ("nomax_qk_softmax", "nomax_flash_attention_bf16", "nomax_fused_loss_bf16",
                  "exp_no_underflow", "naive_bce_bf16", "cosine_no_eps", "one_hot_low_bits",
                  "log_of_softmax", "log_of_softmax_bf16", "log_of_softmax_loss",
                  "log_of_softmax_loss_bf16", "expanded_mse", "norms_pairwise", "code_pwm_scan")


def test_domain_attacks_fail_only_where_their_formula_breaks(run):
  """Class 11: each attack is exact enough on every nominal seed and fails on a family only;
  the bfloat16-rounded matmul fails every seed (and every family) by the L2 bound alone, at
  the L2 error a bfloat16 output carries (tolerance.py: 1.61e-3 to 1.70e-3)."""
  for name in DOMAIN_ATTACKS:
    record = run.records[name]
    assert record.reasons and all(r.startswith("input family ") for r in record.reasons), (
        name, record.reasons)
  matmul = run.records["bf16_output_matmul"]
  assert [r.split(":")[0] for r in matmul.reasons[:5]] == [f"seed {s}" for s in OPTIONS.seeds]
  assert all("relative L2 error" in r for r in matmul.reasons), matmul.reasons
  assert 1e-3 < matmul.rel_l2_error < 2e-3


def test_public_seed_lookup_is_right_only_on_the_public_seeds(run):
  public, secret = run.records["public_seeds_public"], run.records["public_seeds_secret"]
  assert public.correct and public.seeds == OPTIONS.seeds  # every checked seed matched
  assert not secret.correct and len(secret.seeds) == 5 and set(secret.seeds) != set(OPTIONS.seeds)


def test_invariant_over_every_record(run):
  for name, record in run.records.items():
    assert (record.status is Status.PASS) == (record.reasons == ()), (name, record.status, record.reasons)
    if record.status is Status.PASS:
      assert record.correct and record.robust and record.error is None, name
    if record.error_type is not None:
      assert record.status in (Status.ERROR, Status.TIMEOUT) and record.error, name


def test_structure_reasons_survive_a_later_refusal(run):
  """The LAPACK call is refused when the cpu artifact is compiled; the contraction found in
  the cuda structure before that stays in the record."""
  reasons = run.records["trisolve_outside"].reasons
  assert any("custom calls other than Pallas kernels" in r for r in reasons), reasons
  assert any("contractions outside the kernel" in r for r in reasons), reasons


def test_an_edge_shape_done_outside_a_kernel_is_no_general_shape(run):
  """adv_edge_plain_xla_relu returns jnp.maximum at the edge shape: the edge artifact is held
  to the structure rules, so it is never run and general_shapes is False with the reason; the
  honest neighbour pads the edge to its block and keeps general_shapes True."""
  plain, padded = run.records["edge_plain_xla"], run.records["pos_edge_padded"]
  assert plain.general_shapes is False and padded.general_shapes is True, padded.edge_error
  assert f"the edge shape's export fails the structure rules: {NO_KERNEL}" in plain.edge_error


def test_cpu_verdict_is_on_the_interpret_export_gpu_verdict_on_the_analysed_one(run):
  """The known limit of a CPU judge: it runs the interpret-mode export and reads the structure
  from the cuda export, two programs the candidate produces. A kernel computing the task only
  when interpret=True passes on a CPU; the records say so (interpret, timings not comparable).
  On a GPU the one cuda artifact is both analysed and run, so the same kernel is caught there
  (tests/judge/test_gpu.py). Its record is the module run's."""
  record = run.records["split_interpret"]
  assert record.status is Status.PASS and record.interpret and not record.timing_comparable
  source = (CONTROLS / "adv_split_interpret_relu.py").read_text()
  item = WorkItem(task="relu", variant="candidate", size="small", source=source, filename="x.py")
  assert export_request(item, "gpu").exports == (("small", ("cuda",)), ("edge", ("cuda",)))


def test_a_search_score_credits_no_speed_the_judge_did_not_measure(run):
  """The search frameworks' score (OpenEvolve and ShinkaEvolve rank programs by
  `combined_score`) must not pay a speedup measured in interpret mode, as the reward does not
  (reward.py: a CPU pass gets the floor). On a CPU judge, the interpret-mode speedup of an
  honest Pallas kernel is a few hundredths, while a candidate whose cpu artifact is plain XLA
  (adv_split_interpret_relu: a wrong Triton kernel, `jnp.maximum` in interpret mode) scores
  near 1: a search on a CPU climbs towards the one kernel the CPU judge cannot catch."""
  from pallasbench_dataset.evolve import scoring  # pylint: disable=import-outside-toplevel
  split, honest = run.records["split_interpret"], run.records["pos_dataclass"]
  assert split.status is Status.PASS and honest.status is Status.PASS
  assert not split.timing_comparable and not honest.timing_comparable
  assert scoring.combined_score(split) == scoring.combined_score(honest), (
      split.speedup, honest.speedup)


def test_an_answer_nested_too_deep_is_malformed_not_a_crash():
  """adv_deep_json_relu writes 200000 nested arrays to the result pipe: the export must come
  back as a `malformed` outcome (a rejection of the candidate), not an exception that takes the
  evaluation (the CLI, `evaluate()`, a population's driver) down or, on a cluster, becomes a
  harness error that blames the machine."""
  from pallasbench_dataset.evaluation.pipeline import driver  # pylint: disable=import-outside-toplevel
  item = WorkItem(task="relu", variant="candidate", size="small",
                  source=(CONTROLS / "adv_deep_json_relu.py").read_text(),
                  filename="adv_deep_json_relu.py", options=OPTIONS)
  outcome = driver.export(item, "cpu", LIMITS)
  assert outcome.report is None and outcome.failure == "malformed", outcome


def test_the_answer_s_parse_costs_the_parent_a_bounded_multiple_of_its_size():
  """The exporter's answer is parsed in the driver (or a cluster's worker), the trusted side,
  whose memory no sandbox limit guards. 4 MiB of `{},` in pallas_calls (a list the protocol
  accepts, of objects it accepts) must be refused, or parsed within 8 times its size."""
  _assert_decoded_within_8x(b'{"load_error": null, "exports": [], "pallas_calls": ['
                            + b"{}," * ((4 << 20) // 3) + b"{}]}")


def _assert_decoded_within_8x(raw: bytes) -> None:
  """protocol.decode of `raw`, refused or not, peaks below 8 times its size."""
  import tracemalloc  # pylint: disable=import-outside-toplevel
  from pallasbench_dataset.evaluation import protocol  # pylint: disable=import-outside-toplevel
  request = export_request(WorkItem(task="relu", variant="candidate", size="small",
                                    source="", filename="x.py"), "cpu")
  tracemalloc.start()
  try:
    protocol.decode(raw, request)
  except protocol.ProtocolError:
    pass
  finally:
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
  assert peak < 8 * len(raw), f"{peak / len(raw):.1f}x the answer's {len(raw)} bytes"


_REQUEST_CODE = ("from pallasbench_dataset.evaluation import protocol\n"
                 "from pallasbench_dataset.evaluation.pipeline.driver import WorkItem, "
                 "export_request\n"
                 "request = export_request(WorkItem(task='relu', variant='candidate', "
                 "size='small', source='', filename='x.py'), 'cpu')\n")


def test_the_answer_s_pre_scan_takes_time_linear_in_its_size():
  """adv_backtrack_json_relu's answer, cut to 200 KB: `"` then escaped quotes, never closed.
  The scan runs on the trusted side under no time limit; linear, it takes milliseconds; at
  the regex's quadratic cost, minutes (and days at the control's 8 MiB)."""
  code = _REQUEST_CODE + (
      "raw = b'\"' + b'\\\\\"' * 100000\n"
      "try:\n  protocol.decode(raw, request)\nexcept protocol.ProtocolError:\n  pass\n")
  try:
    subprocess.run([sys.executable, "-c", code], cwd=REPO, timeout=20, check=True)
  except subprocess.TimeoutExpired:
    pytest.fail("decoding a 200 KB answer took longer than 20 s")


def test_the_answer_s_pre_scan_costs_a_bounded_multiple_of_its_size():
  """adv_escape_stack_json_relu's answer, cut to 4 MiB: a well-formed answer whose load_error is
  one string of `\\n` escapes. Its decode (the pre-scan included) must stay within 8 times the
  answer's size, the bound of the test above for `{},`."""
  _assert_decoded_within_8x(b'{"load_error": "' + b"\\n" * (2 << 20)
                            + b'", "exports": [], "pallas_calls": []}')


def test_cli_stdout_is_one_record_whatever_the_kernel_prints(tmp_path):
  """The kernel prints a fake passing record: the CLI's stdout is still exactly one JSON
  record, the real one, and the fake text is only in its exporter_output. The evaluation
  leaves nothing in its private TMPDIR (neither the exporter's scratch nor the helper's)."""
  private = tmp_path / "private-tmp"
  private.mkdir(mode=0o700)
  proc = subprocess.run(
      [sys.executable, "-m", "pallasbench_dataset.evaluate", "--task", "relu", "--kernel",
       str(CONTROLS / "adv_fake_stdout_relu.py"), "--device", "cpu", "--json",
       "--seeds", "1", "2", "3", "4", "5"],
      cwd=REPO, capture_output=True, text=True, timeout=900, check=False,
      env={**os.environ, "TMPDIR": str(private)})
  assert list(private.iterdir()) == []
  assert proc.returncode == 1, proc.stderr[-2000:]
  record = json.loads(proc.stdout)  # one JSON document, nothing else
  assert record["status"] == "incorrect" and record["seeds"] == [1, 2, 3, 4, 5]
  assert "adv_fake_record" in record["exporter_output"]
  rest = json.dumps({k: v for k, v in record.items() if k != "exporter_output"})
  assert "adv_fake_record" not in rest and "adv_fake_record" not in proc.stderr
  assert (record["status"] == "pass") == (record["reasons"] == [])


# ---------------------------------------------------------------------------------------------
# The closed holes, one level down: the module analysis of the controls' cuda exports, in this
# process (these controls are not hostile to the analysis), so a regression shows in seconds.

def _cuda_module(file: str, task: str) -> tuple[str, dict]:
  spec = get_task(task)
  dims = spec.dims("small")
  structs = [jax.ShapeDtypeStruct(i.concrete_shape(dims), i.dtype) for i in spec.inputs]
  module = load_module((CONTROLS / f"{file}.py").read_text(), f"{file}.py")
  text = export_for("cuda", functools.partial(module.kernel, interpret=False), *structs).mlir_module()
  return text, dict(task_flops=spec.flops(dims), output_elements=math.prod(spec.output(dims)),
                    task_bytes=spec.io_bytes(dims))


@pytest.mark.parametrize("name", ["case_gather", "rotating_while", "narrow_counter",
                                  "stateful_rng", "topk_composite", "decoy_branch",
                                  "barrier_broadcast", "kernel_global", "constant_state",
                                  "stale_temp", "chained_memo", "while_carried_memo", "asm_memo"])
def test_module_analysis_sees_the_hidden_work(name):
  case = CASES[name]
  text, sizes = _cuda_module(case.file, case.task)
  report = module_analysis.analyze_module(text)
  assert module_analysis.module_reasons(report, **sizes) != [], report


def test_a_kernel_result_nothing_returns_is_state():
  """adv_stale_temp_relu's memo: a second output of the Triton call that @main drops and the
  kernel reads before it writes. Its cuda module must not be admitted as it stands."""
  text, sizes = _cuda_module("adv_stale_temp_relu", "relu")
  report = module_analysis.analyze_module(text)
  assert module_analysis.module_reasons(report, **sizes) != [], report


def _memo_kernel(x_ref, o_ref, memo_ref):
  o_ref[...] = jnp.maximum(x_ref[...], 0.0)
  memo_ref[...] = memo_ref[...] + 1.0


def _stats_kernel(x_ref, o_ref, stats_ref):  # stores a statistic it never reads
  o_ref[...] = jnp.maximum(x_ref[...], 0.0)
  stats_ref[...] = jnp.full((8, 128), jnp.max(x_ref[...]))


def _memo_operand_kernel(x_ref, memo_in_ref, o_ref, memo_ref):  # the memo read through its
  o_ref[...] = jnp.maximum(x_ref[...], 0.0)                     # operand, written through its
  memo_ref[...] = memo_in_ref[...] + 1.0                        # result: one buffer, aliased


def _with_memo(x, memo=None, body=_memo_kernel):
  """relu and a (8, 128) memo result; given `memo`, the memo result is aliased to it."""
  spec = pl.BlockSpec((8, x.shape[1]), lambda i: (i, 0))
  memo_spec = pl.BlockSpec((8, 128), lambda i: (0, 0))
  operands, aliases, in_specs = (x,), {}, [spec]
  if memo is not None:
    operands, aliases, in_specs = (x, memo), {1: 1}, [spec, memo_spec]
  kernel = body
  if memo is not None and body is not _memo_operand_kernel:
    kernel = functools.wraps(body)(lambda x_ref, _, o_ref, memo_ref: body(x_ref, o_ref, memo_ref))
  return pl.pallas_call(
      kernel, grid=(x.shape[0] // 8,), in_specs=in_specs, out_specs=[spec, memo_spec],
      out_shape=[jax.ShapeDtypeStruct(x.shape, x.dtype),
                 jax.ShapeDtypeStruct((8, 128), jnp.float32)],
      input_output_aliases=aliases)(*operands)


def _scratch_form(x):  # Pallas' own form of GMEM scratch: a zeros operand aliased, dropped
  return _with_memo(x, jnp.zeros((8, 128), jnp.float32))[0]


def _from_input(x):  # aliased to an operand XLA computes from the input: fresh every call
  return _with_memo(x, x[:8, :128] * 0.0)[0]


def _unwritten(x, body=_memo_kernel):
  """round 6's sibling: kernel A leaves its result unwritten, the memo kernel reads it as its
  aliased memo: the buffer is A's, in the temporary allocation, whatever XLA calls it."""
  nothing = pl.pallas_call(lambda x_ref, o_ref: None, grid=(1,),
                           in_specs=[pl.BlockSpec((8, 128), lambda i: (0, 0))],
                           out_specs=pl.BlockSpec((8, 128), lambda i: (0, 0)),
                           out_shape=jax.ShapeDtypeStruct((8, 128), jnp.float32))(x)
  return _with_memo(x, nothing, body)[0]


def _unwritten_across_a_call(x):
  """_unwritten with the memo kernel in a function of its own: the memo is aliased to that
  function's argument, which is kernel A's unwritten result."""
  nothing = pl.pallas_call(lambda x_ref, o_ref: None, grid=(1,),
                           in_specs=[pl.BlockSpec((8, 128), lambda i: (0, 0))],
                           out_specs=pl.BlockSpec((8, 128), lambda i: (0, 0)),
                           out_shape=jax.ShapeDtypeStruct((8, 128), jnp.float32))(x)
  return jax.jit(lambda x, memo: _with_memo(x, memo)[0])(x, nothing)


def _nothing(x):  # kernel A: its result left unwritten
  return pl.pallas_call(lambda x_ref, o_ref: None, grid=(1,),
                        in_specs=[pl.BlockSpec((8, 128), lambda i: (0, 0))],
                        out_specs=pl.BlockSpec((8, 128), lambda i: (0, 0)),
                        out_shape=jax.ShapeDtypeStruct((8, 128), jnp.float32))(x)


def _unwritten_beside_an_input(x):  # derives from the input, and from A's result two ops away
  return _with_memo(x, -(-_nothing(x)) + x[:8, :128])[0]


def _unwritten_from_a_call(x):  # A's result returned by a function of its own
  return _with_memo(x, jax.jit(_nothing)(x))[0]


def _doubled_from_input(x):  # from the input through 48 ops that each read the one before twice
  memo = x[:8, :128] * 0.0
  for _ in range(48):
    memo = memo + memo
  return _with_memo(x, memo)[0]


def _carried(x):
  """The memo aliased to a loop's carry (zeros, then what the last trip wrote), a value of the
  loop's body, not of a function: no crash. The loop drops the carry's slot, and the kernel
  reads the memo before it stores to it: refused (a dropped output it zeroes first, then
  accumulates into, passes: pos_accumulated_stat)."""
  def trip(_, carry):
    return _with_memo(*carry)
  return jax.lax.fori_loop(0, 2, trip, (x, jnp.zeros((8, 128), jnp.float32)))[0]


def _accumulated(x):
  """One result, aliased to zeros XLA computes each call, which the kernel reads as it adds."""
  spec = pl.BlockSpec((8, 128), lambda i: (i, 0))

  def _accumulate_kernel(x_ref, _, o_ref):
    o_ref[...] = o_ref[...] + jnp.maximum(x_ref[...], 0.0)
  return pl.pallas_call(_accumulate_kernel, grid=(8,), in_specs=[spec, spec], out_specs=spec,
                        out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
                        input_output_aliases={1: 0})(x, jnp.zeros_like(x))


def _through_cond(x):
  """The memo returned through jax's cond, whose branches use it from the function around
  them (`stablehlo.return %0#1` inside a case region): it reaches @main's return."""
  out, memo = _with_memo(x)
  return out, jax.lax.cond(x[0, 0] > 0, lambda: memo, lambda: memo * 2.0)


def _while_untouched(x):  # the memo rides in a slot of its own, the body never reads it
  out, memo = _with_memo(x)
  return jax.lax.while_loop(lambda c: c[0][0, 0] > 2.0, lambda c: (c[0] * 0.5, c[1]),
                            (out, memo))[0]


def _while_mixed(x):  # the body adds the memo into the output's slot
  out, memo = _with_memo(x)
  return jax.lax.while_loop(lambda c: c[0][0, 0] > 2.0, lambda c: (c[0] + jnp.sum(c[1]), c[1]),
                            (out, memo))[0]


def _cond_mixed(x):  # one branch's result holds the memo
  out, memo = _with_memo(x)
  return jax.lax.cond(out[0, 0] > 0.0, lambda: out + jnp.sum(memo), lambda: out)


def _while_decides(x):  # the memo rides in a slot of its own and decides the trip count only
  out, memo = _with_memo(x)
  return jax.lax.while_loop(lambda c: jnp.sum(c[1]) > 2.0, lambda c: (c[0] * 0.5, c[1]),
                            (out, memo))[0]


def _passed_through(x):  # a kernel that never reads the memo hands its buffer back (aliased)
  out, memo = _with_memo(x)
  anywhere = pl.BlockSpec(memory_space=pl.ANY)
  kept = pl.pallas_call(lambda m_ref, k_ref: None, in_specs=[anywhere], out_specs=anywhere,
                        out_shape=jax.ShapeDtypeStruct(memo.shape, memo.dtype),
                        input_output_aliases={0: 0})(memo)
  return out + jnp.sum(kept)


def _read_by_a_kernel(x):  # a second kernel reads the memo into the returned output
  out, memo = _with_memo(x)

  def add(o_ref, m_ref, r_ref):
    r_ref[...] = o_ref[...] + jnp.sum(m_ref[...])
  return pl.pallas_call(add, out_shape=jax.ShapeDtypeStruct(out.shape, out.dtype))(out, memo)


_X, _O, _M = "tensor<64x128xf32>", "tensor<64x128xf32>", "tensor<8x128xf32>"
# jax drops unused values before it lowers, but an artifact is whatever text the exporter sends:
# the direct form's module, rewritten so the memo is dropped further away.
_RETURN = f"return %0#0 : {_O}"
_VIEWS = (f"%1 = stablehlo.reshape %0#1 : ({_M}) -> tensor<128x8xf32>\n"
          f"    %2 = stablehlo.transpose %1, dims = [1, 0] : (tensor<128x8xf32>) -> {_M}\n"
          f"    {_RETURN}")
_USED = (f"%1 = stablehlo.slice %0#1 [0:1, 0:1] : ({_M}) -> tensor<1x1xf32>\n"
         f"    %2 = stablehlo.reshape %1 : (tensor<1x1xf32>) -> tensor<f32>\n"
         f"    %3 = stablehlo.broadcast_in_dim %2, dims = [] : (tensor<f32>) -> {_O}\n"
         f"    %4 = stablehlo.add %0#0, %3 : {_O}\n    return %4 : {_O}")

# The memo given to what drops it: a plumbing custom call whose result nothing reads, and @sink,
# a function that returns zeros whatever it is given.
_SHARDED = (f'%1 = stablehlo.custom_call @Sharding(%0#1) {{mhlo.sharding = "{{replicated}}"}} '
            f": ({_M}) -> {_M}\n    {_RETURN}")
_SINK = (f"  func.func private @sink(%arg0: {_M}) -> {_M} {{\n"
         f"    %0 = stablehlo.constant dense<0.0> : {_M}\n    return %0 : {_M}\n  }}\n")

# The memo dropped after 48 ops that each read the one before twice: 2**48 paths, 96 uses.
_DOUBLED = "".join(f"%d{k + 1} = stablehlo.add %{'0#1' if k == 0 else f'd{k}'}, "
                   f"%{'0#1' if k == 0 else f'd{k}'} : {_M}\n    " for k in range(48)) + _RETURN


def _into_sink(text: str) -> str:
  text = text.replace(_RETURN, f"%1 = call @sink(%0#1) : ({_M}) -> {_M}\n    {_RETURN}")
  return text.replace("} loc(#loc)\n} loc(#loc)", "} loc(#loc)\n" + _SINK + "} loc(#loc)")


def _inner(main_body: str) -> Callable[[str], str]:
  """The kernel in a private @inner returning both results; @main calls it, then `main_body`."""
  def rewrite(text: str) -> str:
    head = re.search(r"  func\.func public @main\(.*\{\n", text).group(0)
    text = text.replace(head, f"  func.func private @inner(%arg0: {_X}) -> ({_O}, {_M}) {{\n")
    text = text.replace(_RETURN, f"return %0#0, %0#1 : {_O}, {_M}")
    return text.replace("} loc(#loc)\n} loc(#loc)", (
        "} loc(#loc)\n" + head + f"    %0:2 = call @inner(%arg0) : ({_X}) -> ({_O}, {_M})\n"
        f"    {main_body}\n  }}\n}} loc(#loc)"))
  return rewrite


def _sink(text: str, sink_body: str) -> str:
  """@main hands both results to a private @sink(%arg0: out, %arg1: memo) of `sink_body`, and
  returns what it returns."""
  text = text.replace(_RETURN, f"%1 = call @sink(%0#0, %0#1) : ({_O}, {_M}) -> {_O}\n"
                               f"    return %1 : {_O}")
  return text.replace("} loc(#loc)\n} loc(#loc)", (
      f"}} loc(#loc)\n  func.func private @sink(%arg0: {_O}, %arg1: {_M}) -> {_O} {{\n"
      f"    {sink_body}\n  }}\n}} loc(#loc)"))


def _as_exported(text: str) -> str:
  return text


@pytest.mark.parametrize(("fn", "rewrite", "state"), [
    (_with_memo, _as_exported, True),
    (_with_memo, lambda t: t.replace(_RETURN, _VIEWS), True),
    (_with_memo, _inner(_RETURN), True),
    (_with_memo, _inner(_VIEWS), True),
    (_with_memo, lambda t: t.replace(_RETURN, _USED), False),
    (_with_memo, _inner(_USED), False),
    (_scratch_form, _as_exported, False),
    (_from_input, _as_exported, False),
    (_unwritten, _as_exported, True),
    (functools.partial(_with_memo, body=_stats_kernel), _as_exported, False),
    (_while_untouched, _as_exported, True),
    (_while_mixed, _as_exported, False),
    (_cond_mixed, _as_exported, False),
    (_read_by_a_kernel, _as_exported, False),
    (_while_decides, _as_exported, True),
    (_passed_through, _as_exported, False),
    (_with_memo, lambda t: _sink(t, f"return %arg0 : {_O}"), True),
    (_with_memo, lambda t: _sink(t, _USED.replace("%0#0", "%arg0").replace("%0#1", "%arg1")),
     False),
    (_through_cond, _as_exported, False),
    (functools.partial(_unwritten, body=_memo_operand_kernel), _as_exported, True),
    (_accumulated, lambda t: t.replace(f"return %1 : {_X}", f"return %arg0 : {_X}"), False),
    (_with_memo, lambda t: t.replace(_RETURN, _SHARDED), True),
    (_with_memo, _into_sink, True),
    (_unwritten_across_a_call, _as_exported, True),
    (_with_memo, lambda t: t.replace(_RETURN, _DOUBLED), True),
    (_carried, _as_exported, True),
    (_unwritten_beside_an_input, _as_exported, True),
    (_unwritten_from_a_call, _as_exported, True),
    (_doubled_from_input, _as_exported, False),
], ids=["direct", "views", "inner", "inner_views", "used", "inner_used", "scratch", "from_input",
        "unwritten", "stats", "while_untouched", "while_mixed", "cond_mixed", "read_by_a_kernel",
        "while_decides", "passed_through", "sink_unused", "sink_used",
        "through_cond", "unwritten_read_through_the_operand",
        "only_result_aliased_to_zeros", "into_a_dropped_custom_call", "into_a_call_that_drops_it",
        "unwritten_across_a_call", "read_twice_48_times", "carried_by_a_loop",
        "unwritten_beside_an_input", "unwritten_from_a_call", "doubled_from_input"])
def test_a_dropped_kernel_result_is_state_wherever_it_is_dropped(fn, rewrite, state):
  """stale_temp's class: a kernel result that reaches nothing @main returns (dropped by ops
  whose results nothing reads, a custom call's included, by a function whose call's result
  nothing reads, or by one that ignores it; each value followed once, however many paths
  reach it) and that the kernel reads is state, through its result or the operand aliased to
  it (one buffer);
  one aliased to an operand XLA computes each call (the call's only result too), reaching the
  return, or only stored to (flash_attention's row statistics at one split) is not."""
  kernel = fn.keywords["body"].__name__ if isinstance(fn, functools.partial) else "_memo_kernel"
  whole = getattr(fn, "func", fn) in (
      _scratch_form, _from_input, _unwritten, _while_untouched, _while_mixed, _cond_mixed,
      _read_by_a_kernel, _while_decides, _passed_through, _through_cond, _accumulated,
      _unwritten_across_a_call, _carried, _unwritten_beside_an_input, _unwritten_from_a_call,
      _doubled_from_input)  # these return the relu alone

  def first(x):
    return fn(x) if whole else fn(x)[0]
  text = export_for("cuda", first, jax.ShapeDtypeStruct((64, 128), jnp.float32)).mlir_module()
  if not whole:  # jax drops the memo's use: the module has the direct form
    assert re.search(r"%0:2 = stablehlo\.custom_call", text) and _RETURN in text
  assert rewrite is _as_exported or rewrite(text) != text  # each rewrite applies
  report = module_analysis.analyze_module(rewrite(text))
  dropped = [s for s in report.stateful_ops if "reaches nothing the call returns" in s]
  assert dropped == ([f"result 1 of kernel {kernel} ({_M}) reaches nothing the call returns "
                      "and the kernel reads it (a buffer XLA never initialises: what the last "
                      "call left there)"] if state else []), report.stateful_ops


def test_an_intermediate_between_two_kernels_is_no_state():
  """The honest neighbour of stale_temp: an intermediate a kernel writes whole and the next
  kernel reads, within one call."""
  text, sizes = _cuda_module("adv_pos_two_stage_relu", "relu")
  report = module_analysis.analyze_module(text)
  assert report.stateful_ops == () and module_analysis.module_reasons(report, **sizes) == []


def test_an_aliased_constant_operand_is_no_state():
  """The honest neighbour of constant_state: a zeros operand aliased to the result (XLA copies
  it into the result's buffer on every call) is no buffer kept across calls."""
  text, sizes = _cuda_module("adv_pos_aliased_init_relu", "relu")
  report = module_analysis.analyze_module(text)
  assert report.stateful_ops == () and module_analysis.module_reasons(report, **sizes) == []


def test_exported_artifacts_can_carry_hidden_state():
  """Why stateful ops are rejected: through the judge's own compile path, one input, two calls,
  two outputs."""
  spec = get_task("relu")
  dims = spec.dims("small")
  structs = [jax.ShapeDtypeStruct(i.concrete_shape(dims), i.dtype) for i in spec.inputs]
  module = load_module((CONTROLS / "adv_stateful_rng_relu.py").read_text())
  exported = jax.export.deserialize(bytearray(export_for(
      "cpu", functools.partial(module.kernel, interpret=True), *structs).serialize()))
  compiled = compile_exported(exported, structs, None).executable
  inputs = spec.make_inputs(dims, 0)
  first, second = np.asarray(compiled(*inputs)), np.asarray(compiled(*inputs))
  assert not np.array_equal(first, second)  # same artifact, same input: different outputs
