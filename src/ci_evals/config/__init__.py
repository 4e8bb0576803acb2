"""Strict input: the spec base models, YAML with line numbers, datasets, templating."""
