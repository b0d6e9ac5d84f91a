"""A stand-in for TRL where it is not installed (it pulls torch): `GRPOTrainer(...).train()`
calls each reward function as TRL 1.16's `GRPOTrainer._calculate_rewards` does, on the first
row of the training set with that row's own completion, and prints the rewards. It lets the
README's GRPO example run verbatim in the default suite; tests/training/test_trl_trainers.py runs
the real trainer where TRL is installed."""

from __future__ import annotations


class GRPOTrainer:
  def __init__(self, model, reward_funcs, train_dataset, args=None, **kwargs):
    del model, args, kwargs
    self.reward_funcs = reward_funcs if isinstance(reward_funcs, list) else [reward_funcs]
    self.train_dataset = train_dataset

  def train(self) -> None:
    row = self.train_dataset[0]
    columns = {k: [v] for k, v in row.items() if k not in ("prompt", "completion")}
    for reward in self.reward_funcs:
      rewards = reward(prompts=[row["prompt"]], completions=[row["completion"]],
                       completion_ids=[[0]], trainer_state=None,
                       log_extra=lambda column, values: None,
                       log_metric=lambda name, value: None, **columns)
      print("rewards", rewards, flush=True)
