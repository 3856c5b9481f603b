# Everyday entry points; each target calls the same scripts a fresh clone uses.
#   make test        the whole suite on the real OpenCode server (scripts/test)
#   make test-fast   unit + core end-to-end (scripts/test --fast)
#   make lint        ruff (lint + format check), mypy --strict and the import layers (scripts/lint)
#   make bench       every benchmark figure (bench/run.py all): JSON to stdout and
#                    bench/results/latest.json; under 10 minutes on 2 cores
.PHONY: setup test test-fast lint bench

PY := .venv/bin/python

setup:
	bash scripts/setup

test:
	scripts/test

test-fast:
	scripts/test --fast

lint:
	scripts/lint

bench: setup
	$(PY) -m bench.run all
