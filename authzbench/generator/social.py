"""The social graph generator: users, follows, blocks, content, interactions, Pareto-shaped.

Proportions follow the reference's relationship table; a few users (Pareto weights, 80/20) own
most content and receive most follows, and popular content draws most interactions.
"""

from __future__ import annotations

import numpy as np

from authzbench.generator.profiles import SocialParams
from authzbench.generator.rebac import Emit, _pareto
from authzbench.schema.closure import sorted_unique

_W, _VIS, _FOLLOW, _BLOCK, _CONTENT, _INTERACT = range(6)


def _rng(p: SocialParams, stream: int, chunk: int = 0) -> np.random.Generator:
    return np.random.default_rng([p.seed, 100 + stream, chunk])


def counts(p: SocialParams) -> dict[str, int]:
    r = p.relationships
    return {"user": max(2, round(r * p.users_per_rel)), "content": max(1, round(r * p.content_per_rel)),
            "interaction": max(1, round(r * p.interactions_per_rel)), "follows": round(r * p.follows_per_rel)}


def entities(p: SocialParams) -> dict[str, int]:
    c = counts(p)
    return {"user": c["user"], "content": c["content"], "interaction": c["interaction"]}


def _weighted(rng: np.random.Generator, cum: np.ndarray, n: int) -> np.ndarray:
    return np.minimum(np.searchsorted(cum, rng.random(n) * cum[-1], side="right"), len(cum) - 1).astype(
        np.int32)


def _edges(rng: np.random.Generator, cum: np.ndarray, n_users: int, n: int) -> tuple[np.ndarray, np.ndarray]:
    """n edges popular-user -> uniform user, no self edges, deduplicated, sorted."""
    obj = _weighted(rng, cum, n).astype(np.int64)
    sub = rng.integers(0, n_users, n)
    keep = obj != sub
    key = sorted_unique(obj[keep] * n_users + sub[keep])
    return (key // n_users).astype(np.int32), (key % n_users).astype(np.int32)


def generate(p: SocialParams, emit: Emit) -> None:
    c = counts(p)
    U, C, n_int = c["user"], c["content"], c["interaction"]
    w = _pareto(_rng(p, _W), p.pareto_alpha, U)
    cum = np.cumsum(w)
    users = np.arange(U, dtype=np.int32)
    emit("user_self", users, users)
    public = _rng(p, _VIS).random(U) < p.public_user_share
    emit("user_public", users[public], np.zeros(int(public.sum()), np.int32))
    emit("user_followers_visible", users[~public], users[~public])
    emit("user_follower", *_edges(_rng(p, _FOLLOW), cum, U, c["follows"]))
    emit("user_blocked", *_edges(_rng(p, _BLOCK), cum, U, round(c["follows"] * p.blocked_per_follow)))

    # Content in chunks: owner by activity; visibility public or followers-of-owner.
    owners_all = np.empty(C, np.int32)
    for k, lo in enumerate(range(0, C, p.chunk_rows)):
        hi = min(C, lo + p.chunk_rows)
        rng = _rng(p, _CONTENT, k)
        ids = np.arange(lo, hi, dtype=np.int32)
        owners = _weighted(rng, cum, hi - lo)
        owners_all[lo:hi] = owners
        pub = rng.random(hi - lo) < p.public_content_share
        emit("content_owner", ids, owners)
        emit("content_public", ids[pub], np.zeros(int(pub.sum()), np.int32))
        emit("content_followers_visible", ids[~pub], owners[~pub])
    # Interactions: popular owners' content draws the comments; creators are active users.
    content_cum = np.cumsum(w[owners_all])
    for k, lo in enumerate(range(0, n_int, p.chunk_rows)):
        hi = min(n_int, lo + p.chunk_rows)
        rng = _rng(p, _INTERACT, k)
        ids = np.arange(lo, hi, dtype=np.int32)
        emit("interaction_creator", ids, _weighted(rng, cum, hi - lo))
        emit("interaction_parent", ids, _weighted(rng, content_cum, hi - lo))
