"""The reference pages of the docs site are generated from the code: every `golem` verb and every golem.toml key
appears there, and a page that no longer matches what the code generates fails (run `python -m cli.reference`)."""

from __future__ import annotations

import re

from cli import reference
from cli.main import build_parser


def _all_verbs(parser, prefix="golem"):
    out = []
    for action in parser._actions:
        if action.__class__.__name__ == "_SubParsersAction":
            for name, sub in action.choices.items():
                out.append(f"{prefix} {name}")
                out += _all_verbs(sub, f"{prefix} {name}")
    return out


def test_every_cli_verb_is_in_the_reference():
    page = reference.CLI_PAGE.read_text(encoding="utf-8")
    verbs = _all_verbs(build_parser())
    assert len(verbs) > 30  # the walk found the command groups, sub-verbs included
    assert "golem gating show" in verbs and "golem config apply" in verbs
    missing = [v for v in verbs if f"`{v}`" not in page]
    assert not missing, f"not in docs/reference/cli.md: {missing} — run `python -m cli.reference`"


def test_every_golem_toml_key_is_in_the_reference():
    from golem.models.config import GolemConfig

    def keys(model, prefix=""):
        for name, field in model.model_fields.items():
            ann = field.annotation
            if isinstance(ann, type) and hasattr(ann, "model_fields"):
                yield from keys(ann, f"{prefix}{name}.")
            else:
                yield prefix, name

    page = reference.CONFIG_PAGE.read_text(encoding="utf-8")
    sections = dict(re.findall(r"## `\[([a-z_.]+)\]`\n\n\| key .*?\n\|---.*?\n((?:\|.*\n)+)", page))
    found = list(keys(GolemConfig))
    assert ("policy.", "max_trade_size_usd") in found
    missing = [f"{p}{n}" for p, n in found if f"| `{n}` |" not in sections.get(p.rstrip("."), "")]
    assert not missing, f"not in docs/reference/config.md: {missing} — run `python -m cli.reference`"


def test_the_generated_pages_are_current():
    assert reference.main(["--check"]) == 0, "run `python -m cli.reference` and commit docs/reference/"


def test_a_new_key_makes_the_page_stale(monkeypatch):
    from pydantic import BaseModel

    from golem.models import config

    class Extra(BaseModel):
        brand_new_key: int = 3

    fields = dict(config.GolemConfig.model_fields)
    monkeypatch.setattr(config.GolemConfig, "model_fields", {**fields, "extra_section": type(
        "F", (), {"annotation": Extra})()})
    assert "brand_new_key" in reference.render_config()
    assert reference.main(["--check"]) == 1
