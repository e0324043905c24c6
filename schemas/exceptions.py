"""Errors raised at contract boundaries."""

from __future__ import annotations

from streamtts.errors import RecordError


class ContractError(RecordError, ValueError):
    """A payload does not satisfy its contract. The message names the field and the problem.

    Attributes:
        contract: contract name ("request", "segment", ...).
        field: dotted path of the first offending field, or "" for whole-payload problems.
        reason: short machine-friendly reason ("invalid_json", "missing", "extra_forbidden", ...).
    """

    def __init__(self, contract: str, field: str, reason: str, message: str) -> None:
        self.contract = contract
        self.field = field
        self.reason = reason
        where = f"field '{field}'" if field else "payload"
        super().__init__(f"invalid {contract}: {where}: {message}")
