"""The suite YAML (and every letta-evals dialect of it) into runnable parts: targets, graders, gates."""
