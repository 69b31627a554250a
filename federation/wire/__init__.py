"""Proto <-> domain conversion (``federation.v1`` <-> ``federation.domain``).

Shared by the servicers, the agents' transport and the CLI, so the proto shapes never leak
into the planner and every input is validated once, at the edge, with its field path.
"""
