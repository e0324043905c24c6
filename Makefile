# The two commands of the README. Both work on a fresh machine.
.PHONY: demo test bootstrap lint infra-up infra-down clean

demo:  ## set up, start local Kafka + MinIO + workers, run sample requests, write audio
	@scripts/bootstrap.sh
	@.venv/bin/streamtts demo

test:  ## set up, then run the whole test suite against real Kafka, real MinIO, the real model
	@scripts/bootstrap.sh test,dev
	@.venv/bin/python -m pytest

bootstrap:
	@scripts/bootstrap.sh test,dev

lint:
	@.venv/bin/ruff check .
	@.venv/bin/ruff format --check .
	@.venv/bin/mypy streamtts

infra-up:
	@.venv/bin/streamtts infra up

infra-down:
	@.venv/bin/streamtts infra down
