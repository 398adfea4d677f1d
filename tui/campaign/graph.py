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


def longest_chain_hours(durations: dict[str, float], deps: dict[str, list[str]]) -> float:
    """Length of the longest dependency chain (ignores resources): a lower bound."""
    memo: dict[str, float] = {}

    def finish(node: str) -> float:
        if node not in memo:
            # deps are acyclic (validated), depth is bounded by the plan size
            memo[node] = durations[node] + max((finish(d) for d in deps.get(node, ())),
                                               default=0.0)
        return memo[node]

    return max((finish(n) for n in durations), default=0.0)
