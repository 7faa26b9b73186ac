"""The result-filter: what a read or speculation returned, made fit for the model's context — numbers rounded, a
secret-looking key withheld, long lists cut, the whole bounded in size, and every cut said in the result itself
(docs/design/inference.md#the-tool-loop). Pure."""

from __future__ import annotations

import json
import math
import re
from typing import Any

MAX_RESULT_CHARS = 2_000  # one tool result in the model's context
MAX_LIST_ITEMS = 20
MAX_STRING_CHARS = 300
SIGNIFICANT_DIGITS = 8
_SECRET = re.compile(r"(private|secret|mnemonic|api_?key|seed_?phrase|password)", re.IGNORECASE)


def _number(v: float) -> float | str:
    if not math.isfinite(v):
        return str(v)
    return float(f"{v:.{SIGNIFICANT_DIGITS}g}")


def _clean(v: Any, cuts: list[str], path: str) -> Any:
    if isinstance(v, bool) or v is None or isinstance(v, int):
        return v
    if isinstance(v, float):
        return _number(v)
    if isinstance(v, str):
        if len(v) > MAX_STRING_CHARS:
            cuts.append(f"{path or 'text'} cut to {MAX_STRING_CHARS} characters")
            return v[:MAX_STRING_CHARS] + "…"
        return v
    if isinstance(v, dict):
        out = {}
        for k, x in v.items():
            if _SECRET.search(str(k)):
                cuts.append(f"{path}.{k} withheld" if path else f"{k} withheld")
                continue
            out[str(k)] = _clean(x, cuts, f"{path}.{k}" if path else str(k))
        return out
    if isinstance(v, (list, tuple)):
        items = list(v)
        if len(items) > MAX_LIST_ITEMS:
            cuts.append(f"{path or 'list'}: first {MAX_LIST_ITEMS} of {len(items)} items")
            items = items[:MAX_LIST_ITEMS]
        return [_clean(x, cuts, path) for x in items]
    return str(v)


def filter_result(result: Any) -> tuple[str, list[str]]:
    """(the JSON text the model gets, what was cut or withheld)."""
    cuts: list[str] = []
    clean = _clean(result, cuts, "")
    if cuts and isinstance(clean, dict):
        clean = {**clean, "filtered": cuts}
    text = json.dumps(clean, separators=(",", ":"), default=str)
    if len(text) > MAX_RESULT_CHARS:
        cuts.append(f"result cut to {MAX_RESULT_CHARS} characters")
        text = text[:MAX_RESULT_CHARS] + f"… [cut: the result was {len(text)} characters]"
    return text, cuts
