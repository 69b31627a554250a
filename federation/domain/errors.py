"""Validation errors that name the field path and the rule broken.

Every edge (gRPC request, YAML file, snapshot, scenario) converts bad input into an
``InvalidInput``; the service maps it to INVALID_ARGUMENT and the CLIs to exit code 2,
so users always learn *which* field broke *which* rule.
"""

from __future__ import annotations


class InvalidInput(ValueError):
    """A user- or cluster-supplied value broke a rule.

    ``path`` is a dotted/indexed field path such as ``spec.tasks[1].replicas``.
    """

    def __init__(self, path: str, rule: str) -> None:
        self.path = path
        self.rule = rule
        super().__init__(f"{path}: {rule}" if path else rule)

    def under(self, prefix: str) -> InvalidInput:
        """The same error re-rooted below ``prefix`` (for nested validation)."""
        if not prefix:
            return self
        joined = f"{prefix}.{self.path}" if self.path and not self.path.startswith("[") else prefix + self.path
        return InvalidInput(joined, self.rule)


def require(condition: bool, path: str, rule: str) -> None:
    """Raise ``InvalidInput(path, rule)`` unless ``condition`` holds."""
    if not condition:
        raise InvalidInput(path, rule)
