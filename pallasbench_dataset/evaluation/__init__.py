"""The robust evaluator: isolation, correctness, anti-gaming filters, compile profile, timing."""
