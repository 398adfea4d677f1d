"""Dependency-graph helpers shared by the loader and the calendar."""

from __future__ import annotations


def find_cycle(graph: dict[str, list[str]]) -> list[str] | None:
    """Return one cycle as a list of ids (first id repeated at the end), or None.

    `graph` maps an id to the ids it comes after. Iterative DFS so a long
    chain cannot hit the recursion limit.
    """
    WHITE, GREY, BLACK = 0, 1, 2
    colour = {node: WHITE for node in graph}
    for root in graph:
        if colour[root] != WHITE:
            continue
        stack = [(root, iter(graph[root]))]
        path = [root]
        colour[root] = GREY
        while stack:
            node, children = stack[-1]
            child = next(children, None)
            if child is None:
                colour[node] = BLACK
                stack.pop()
                path.pop()
                continue
            if child not in colour:
                continue
            if colour[child] == GREY:
                return path[path.index(child):] + [child]
            if colour[child] == WHITE:
                colour[child] = GREY
                stack.append((child, iter(graph[child])))
                path.append(child)
    return None


def steps_after_variants(steps, variant_ids: set[str]) -> set[str]:
    """Ids of steps that run after the variants: kind "wrapup", or waiting (even
    through other steps) for a variant. One rule for the loader and the plan."""
    post = {s.id for s in steps if s.kind == "wrapup"}
    changed = True
    while changed:
        changed = False
        for s in steps:
            if s.id not in post and set(s.after) & (variant_ids | post):
                post.add(s.id)
                changed = True
    return post


def longest_chain_hours(durations: dict[str, float], deps: dict[str, list[str]]) -> float:
    """Length of the longest dependency chain (ignores resources): a lower bound.

    Kahn's order, no recursion, so a plan of any length is safe; nodes left in
    a cycle (which the loader already refuses) are simply not counted.
    """
    users: dict[str, list[str]] = {n: [] for n in durations}
    waiting = {n: 0 for n in durations}
    for node, before in deps.items():
        for d in before:
            if d in users and node in waiting:
                users[d].append(node)
                waiting[node] += 1
    ready = [n for n, k in waiting.items() if k == 0]
    finish: dict[str, float] = {}
    while ready:
        node = ready.pop()
        start = max((finish[d] for d in deps.get(node, ()) if d in finish), default=0.0)
        finish[node] = start + durations[node]
        for u in users[node]:
            waiting[u] -= 1
            if waiting[u] == 0:
                ready.append(u)
    return max(finish.values(), default=0.0)
