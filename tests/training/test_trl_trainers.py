"""The dataset's formats and the reward inside TRL's own trainers (the `rl` extra; skipped where
TRL is not installed): GRPOTrainer with KernelReward as its reward function, SFTTrainer on the
`sft` config, DPOTrainer on `preference`, each for two steps on the CPU.

The model is a tiny causal LM built here from a config (random weights: nothing is
downloaded), with a tokenizer built here too: a word-level one whose vocabulary also holds, as
single tokens, the two fenced kernels of the chosen test-split rows (their `completion`). Any
sequence the random model samples is then an answer the judge can score: one of the kernels
(which passes for its own task and fails for the other), several, or none. The judge is real:
its verdicts, the evaluations it measured and the verdict cache's hits are what the trainer
logged.

    .venv/bin/python -m pip install -c constraints.txt -e ".[rl]"
    .venv/bin/python -m pytest tests/training/test_trl_trainers.py -s     # -s prints the figures
"""

from __future__ import annotations

import math
import pathlib
import time

import pytest

trl = pytest.importorskip("trl", reason="TRL is not installed (pip install -e .[rl])")
torch = pytest.importorskip("torch")
datasets = pytest.importorskip("datasets")
tokenizers = pytest.importorskip("tokenizers")
transformers = pytest.importorskip("transformers")

from pallasbench_dataset import reward as rw  # pylint: disable=wrong-import-position
from pallasbench_dataset.evaluation.judge.core import EvalOptions  # pylint: disable=wrong-import-position
from tests.paths import REPO  # pylint: disable=wrong-import-position

DATA = REPO / "data"
TASKS = ("gelu", "tanh")  # test-split tasks with quick kernels
OPTIONS = EvalOptions(num_seeds=2, check_edge=False, timing_iterations=2, timing_rounds=1, warmup=1)
CHAT_TEMPLATE = ("{% for m in messages %}{{ m['role'] }}: {{ m['content'] }}\n{% endfor %}"
                 "{% if add_generation_prompt %}assistant: {% endif %}")


def _rows(config: str, split: str = "test"):
  return datasets.load_dataset(str(DATA), config, split=split)


def _tokenizer(extra_tokens: tuple[str, ...] = ()):
  """A word-level tokenizer of a few words (the others are unknown: a small vocabulary makes a
  random model sample the `extra_tokens`, each held whole as one token, often)."""
  vocab = {w: i for i, w in enumerate(["[UNK]", "[PAD]", "[EOS]", "Write", "kernel"])}
  model = tokenizers.Tokenizer(tokenizers.models.WordLevel(vocab, unk_token="[UNK]"))
  model.pre_tokenizer = tokenizers.pre_tokenizers.WhitespaceSplit()
  tokenizer = transformers.PreTrainedTokenizerFast(
      tokenizer_object=model, unk_token="[UNK]", pad_token="[PAD]", eos_token="[EOS]")
  tokenizer.add_tokens([tokenizers.AddedToken(t, normalized=False) for t in extra_tokens])
  tokenizer.chat_template = CHAT_TEMPLATE
  return tokenizer


def _model(tokenizer):
  torch.manual_seed(0)
  config = transformers.Qwen2Config(
      vocab_size=len(tokenizer), hidden_size=32, intermediate_size=64, num_hidden_layers=1,
      num_attention_heads=2, num_key_value_heads=1, max_position_embeddings=4096,
      pad_token_id=tokenizer.pad_token_id, eos_token_id=tokenizer.eos_token_id)
  return transformers.Qwen2ForCausalLM(config)


def _common(tmp_path: pathlib.Path) -> dict:
  return dict(output_dir=str(tmp_path / "out"), max_steps=2, logging_steps=1, report_to=[],
              save_strategy="no", use_cpu=True, seed=0, disable_tqdm=True)


def _figures(name: str, trainer, wall_s: float, **more) -> None:
  steps = [h for h in trainer.state.log_history if "loss" in h or "train_loss" in h]
  print(f"\n{name}: {trainer.state.global_step} steps in {wall_s:.1f} s "
        f"({wall_s / max(trainer.state.global_step, 1):.1f} s/step); "
        + " ".join(f"{k}={v}" for k, v in more.items()) + f"; logs {steps}")


def test_grpo_trains_with_kernel_reward_and_logs_its_rewards(tmp_path):
  prompts = _rows("sft").filter(lambda r: r["task"] in TASKS and r["prompt_kind"] == "write")
  assert sorted(prompts["task"]) == sorted(TASKS)
  kernels = tuple(row["completion"][0]["content"] + "\n" for row in prompts)  # a line of its own
  tokenizer = _tokenizer(kernels)
  args = trl.GRPOConfig(**_common(tmp_path), per_device_train_batch_size=4, num_generations=4,
                        max_completion_length=2, learning_rate=1e-3, temperature=1.0,
                        log_completions=False)
  with rw.KernelReward(device="cpu", options=OPTIONS, cpu_workers=1,
                       cache_dir=tmp_path / "cache") as reward:
    trainer = trl.GRPOTrainer(model=_model(tokenizer), reward_funcs=reward, args=args,
                              train_dataset=prompts, processing_class=tokenizer)
    start = time.monotonic()
    trainer.train()
    wall_s = time.monotonic() - start
    feedback, evaluations = reward.last_feedback, reward.evaluations
  key = f"rewards/{reward.__name__}/mean"  # TRL names a reward's logs by its __name__
  logged = [h for h in trainer.state.log_history if key in h]
  assert trainer.state.global_step == 2 and len(logged) == 2
  means = [h[key] for h in logged]
  assert all(0.0 <= m <= rw.PASS_FLOOR for m in means)  # CPU passes score the floor
  assert len(feedback) == 4 and {f.status for f in feedback} <= {
      "pass", "incorrect", "error", "rejected", rw.NO_KERNEL}
  assert evaluations >= 1  # the sampled kernels were judged, not just found missing
  # the trainer logs float32 means
  assert math.isclose(means[-1], sum(f.reward for f in feedback) / len(feedback), rel_tol=1e-6)
  assert math.isclose(logged[-1]["judge/pass_rate"],
                      sum(f.status == "pass" for f in feedback) / len(feedback), rel_tol=1e-6)
  _figures("GRPO", trainer, wall_s, evaluations=evaluations,
           cache_hits_last_batch=sum(f.cached for f in feedback), rewards=means,
           statuses=[f.status for f in feedback],
           errors=[(f.error or "")[:300] for f in feedback if f.error])


def _two_steps(name: str, trainer_cls, config_cls, rows, tmp_path: pathlib.Path, *,
               reference: bool = False) -> list[dict]:
  """Trains the tiny model for two steps on `rows` as TRL's trainer takes them (with a frozen
  twin of it as the reference model, which a trainer would otherwise load by name); its logs."""
  tokenizer = _tokenizer()
  args = config_cls(**_common(tmp_path), per_device_train_batch_size=2, max_length=2048,
                    learning_rate=1e-3)
  twin = {"ref_model": _model(tokenizer)} if reference else {}
  trainer = trainer_cls(model=_model(tokenizer), args=args, train_dataset=rows,
                        processing_class=tokenizer, **twin)
  start = time.monotonic()
  trainer.train()
  _figures(name, trainer, time.monotonic() - start)
  losses = [h["loss"] for h in trainer.state.log_history if "loss" in h]
  assert trainer.state.global_step == 2 and len(losses) == 2
  assert all(math.isfinite(x) for x in losses)
  return trainer.state.log_history


def test_sft_trains_on_the_sft_config(tmp_path):
  """The `sft` rows as they are (conversational prompt and completion, and their columns)."""
  logs = _two_steps("SFT", trl.SFTTrainer, trl.SFTConfig, _rows("sft", "train").select(range(4)),
                    tmp_path)
  assert all(h["loss"] > 0 for h in logs if "loss" in h)


def test_dpo_trains_on_the_preference_config(tmp_path):
  """The `preference` rows as they are (prompt, chosen, rejected, and their columns)."""
  logs = _two_steps("DPO", trl.DPOTrainer, trl.DPOConfig,
                    _rows("preference", "train").select(range(4)), tmp_path, reference=True)
  assert any(k.startswith("rewards/") for h in logs for k in h)
