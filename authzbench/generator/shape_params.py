"""The shape sweep's parameters (`bench --shape`, run/shape.py) as the generator's overrides, read by the run
layer (which sweeps them) and the report (which names them): below both."""

# parameter -> (the generator's key, its default values: each spans the reference dataset's own value,
# depth 1 (its 14 nestings are at most 2 deep), 4.1 groups a user, 11 viewers a resource, by ~8-10x)
PARAMS: dict[str, tuple[str, list[float]]] = {
    "depth": ("group_depth", [1, 2, 4, 8]),
    "fanout": ("groups_per_user", [2, 4, 8]),
    "acl": ("viewer_users_per_res", [3, 11, 33]),
}
